"""JSON-lines files (inputs, checkpoints, decisions, gold), read line by line with every bad line named.

Lines are split at "\n" only (U+2028 inside a JSON string is not a line end). A last line with no
newline after it that is not valid UTF-8 or JSON is a write cut short by a kill: with
`drop_torn_tail` (checkpoints, the review session's decisions) it is dropped and `torn` set;
otherwise it is a problem like any other. A UTF-8 character never holds the byte "\n", so decoding
line by line finds exactly the bytes decoding the whole file would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from classify.core.jsontext import loads
from classify.core.textio import BOM, utf8_problem


class JsonLine(NamedTuple):
    number: int  # 1-based line number in the file
    value: Any
    text: str  # the line as written, without its "\n"


@dataclass
class JsonLines:
    lines: list[JsonLine]
    problems: list[tuple[int, str]]  # (line number, what is wrong) for lines not UTF-8 or not JSON
    torn: bool = False  # a torn last line was dropped (only with drop_torn_tail)


class JsonLineReader:
    """The lines of a JSON-lines file, one at a time (`for line in reader`): memory holds one line.

    Bad lines are not raised: once the iteration is over, `problems` lists them and `torn` says
    whether a torn last line was dropped.
    """

    def __init__(self, path: str | Path, *, drop_torn_tail: bool = False):
        self.path = Path(path)
        self.drop_torn_tail = drop_torn_tail
        self.problems: list[tuple[int, str]] = []
        self.torn = False

    def __iter__(self) -> Iterator[JsonLine]:
        self.problems, self.torn = [], False
        with self.path.open("rb") as f:
            for n, raw in enumerate(f, 1):
                last = not raw.endswith(b"\n")  # only the file's last line has no newline after it
                raw = raw if last else raw[:-1]
                if n == 1 and raw.startswith(BOM):
                    raw = raw[len(BOM) :]
                if not raw.strip():
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    if last and self.drop_torn_tail:
                        self.torn = True
                        continue
                    self.problems.append((n, utf8_problem(raw, e.start)[1]))
                    continue
                try:
                    value = loads(text)
                except json.JSONDecodeError as e:
                    if last and self.drop_torn_tail:
                        self.torn = True
                        continue
                    self.problems.append((n, f"not JSON ({e.msg})"))
                    continue
                yield JsonLine(n, value, text)


def read_json_lines(path: str | Path, *, drop_torn_tail: bool = False) -> JsonLines:
    """Every JSON value of a JSON-lines file with its line number; bad lines are listed, not raised."""
    reader = JsonLineReader(path, drop_torn_tail=drop_torn_tail)
    lines = list(reader)
    return JsonLines(lines, reader.problems, reader.torn)


def line_problems(problems: list[tuple[int, str]], n: int = 10) -> str:
    """`line 3: not JSON (...); line 7: ...`, in line order, the first `n` of them."""
    problems = sorted(problems)
    text = "; ".join(f"line {ln}: {what}" for ln, what in problems[:n])
    return text + (f"; ... (+{len(problems) - n} more)" if len(problems) > n else "")
