"""Progress: the one display every long loop uses (a tqdm bar on a terminal, plain lines elsewhere),
and `Progress`, the callbacks `run_eval` and `label_file` alike take from their caller.

Redirected to a file or a CI log, a tqdm bar's carriage returns and cursor moves (`\\x1b[A` when
two bars share the screen) become garbled, duplicated lines; and a library's bar that is simply
switched off there leaves minutes without a word (a cold `classify eval` encoding gold). Off a
terminal, `progress_bar` therefore writes a plain line at most every `INTERVAL` seconds
(`CLASSIFY_PROGRESS_SECONDS` sets another):

    encoding: 256/576 texts (44%), 41 s

and a closing line when it wrote any, so a short loop stays silent.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

# Seconds between two plain lines off a terminal; CLASSIFY_PROGRESS_SECONDS sets another (0: every update).
INTERVAL = 10.0


class PlainProgress:
    """A progress display for logs: one plain line (no escape codes) at most every `interval` s."""

    def __init__(self, desc: str, unit: str, total: int | None, file: IO[str], interval: float):
        self.desc, self.unit, self.total, self.file, self.interval = desc, unit, total, file, interval
        self.n = 0
        self.start = self.last = time.monotonic()
        self.lines = 0
        self.shown = 0  # the count the last line showed
        self.closed = False

    def _line(self) -> str:
        done = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        share = f" ({self.n / self.total:.0%})" if self.total else ""
        return f"{self.desc}: {done} {self.unit}{share}, {time.monotonic() - self.start:.0f} s"

    def _emit(self) -> None:
        self.file.write(self._line() + "\n")
        self.file.flush()
        self.lines += 1
        self.shown = self.n
        self.last = time.monotonic()

    def update(self, n: float = 1) -> None:
        self.n += int(n)
        if time.monotonic() - self.last >= self.interval:
            self._emit()

    def write(self, s: str, file: IO[str] | None = None) -> None:
        out = file or self.file
        out.write(s + "\n")
        out.flush()

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        # A closing line only after earlier ones: a loop that ended within `interval` says nothing.
        if self.lines and self.n != self.shown:
            self._emit()

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(desc: str, unit: str = "rec", total: int | None = None, file: IO[str] | None = None) -> Any:
    """A bar named `desc` counting `unit`s (set `.total` once known; `.update(n)`, `.write(line)`,
    `.close()`, or use it as a context manager): tqdm on a terminal, PlainProgress elsewhere."""
    out = file if file is not None else sys.stderr
    if out.isatty():
        from tqdm import tqdm

        # delay: no empty bar above the messages that precede the first update
        return tqdm(total=total, desc=desc, unit=unit, file=out, delay=1)
    try:
        every = float(os.environ.get("CLASSIFY_PROGRESS_SECONDS", INTERVAL))
    except ValueError:
        every = INTERVAL
    return PlainProgress(desc, unit, total, out, every)


@dataclass
class Progress:
    """Callbacks a caller may pass to watch a run (all optional)."""

    log: Callable[[str], None] | None = None  # one line of news: "training ...", "fold 2/5 done"
    encoded: Callable[[int], None] | None = None  # n more records encoded up front
    labeled: Callable[[int], None] | None = None  # n more records labeled by the model (or resumed)
    total: Callable[[int], None] | None = None  # how many records the run will label, once known

    def say(self, message: str) -> None:
        if self.log is not None:
            self.log(message)
