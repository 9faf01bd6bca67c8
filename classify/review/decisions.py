"""The decisions file: read it, append to it, and check it against its queue and taxonomy.

A decisions file is only trusted whole: one malformed row, one id no longer in the queue, one
unknown label, and it is rejected with every problem listed, before anything is written.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from classify.core.errors import ClassifyError
from classify.core.jsonlines import line_problems, read_json_lines
from classify.core.taxonomy import Taxonomy
from classify.core.writer import atomic_write_text
from classify.review.proposals import ProposalError, apply_changes, collect_changes, new_category_ids
from classify.review.schema import Decision, Queue, validation_message


class DecisionsError(ClassifyError, ValueError):
    """A decisions file is malformed, stale (made for another queue or gold) or inconsistent."""


def read_decisions(path: str | Path, drop_torn_tail: bool = False) -> tuple[list[Decision], bool]:
    """All decisions in file order, and whether a torn last line was dropped.

    A line cut short by a kill mid-write (the last line, no newline after it) is dropped only when
    `drop_torn_tail` (the interactive session resuming); everywhere else it is an error.
    """
    path = Path(path)
    if not path.exists():
        return [], False
    got = read_json_lines(path, drop_torn_tail=drop_torn_tail)
    problems = list(got.problems)
    out = []
    for ln in got.lines:
        try:
            out.append(Decision.model_validate(ln.value))
        except ValidationError as e:
            problems.append((ln.number, validation_message(e)))
    if problems:
        raise DecisionsError(f"{path}: {len(problems)} malformed decision rows: " + line_problems(problems))
    return out, got.torn


def write_decisions(path: str | Path, decisions: list[Decision]) -> None:
    atomic_write_text(path, "".join(d.model_dump_json(exclude_none=True) + "\n" for d in decisions))


def append_decision(path: str | Path, d: Decision) -> None:
    """One line, flushed and fsynced: a session killed after this returns loses nothing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as f:
        # a file whose last line has no newline (a hand edit) gets one first: glued onto that line,
        # this decision would make the whole file unreadable
        f.seek(0, os.SEEK_END)
        lead = b""
        if f.tell():
            f.seek(-1, os.SEEK_END)
            lead = b"" if f.read(1) == b"\n" else b"\n"
        f.write(lead + (d.model_dump_json(exclude_none=True) + "\n").encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


def effective(decisions: list[Decision], queue: Queue) -> list[Decision]:
    """The last decision per item, in queue order."""
    last = {d.key: d for d in decisions}
    return [last[it.key] for it in queue.items if it.key in last]


def check_decisions(
    decisions: list[Decision], queue: Queue, taxonomy: Taxonomy, source: str = "decisions"
) -> list[Decision]:
    """Validate against the queue and taxonomy; return the effective decisions or raise listing all problems."""
    index = queue.index()
    problems: list[str] = []
    stale = [d for d in decisions if d.key not in index]
    if stale:
        problems.append(
            f"{len(stale)} decisions are for items not in this queue (stale file, or made for another "
            f"queue): {', '.join(f'{d.id}/{d.dimension}' for d in stale[:10])}"
        )
    new_ids = new_category_ids(decisions)
    for d in decisions:
        it = index.get(d.key)
        if it is None:
            continue
        where = f"{d.id}/{d.dimension}"
        if d.gold != it.gold:
            problems.append(f"{where}: decided when gold said {d.gold!r}, the queue shows {it.gold!r} (stale)")
        if d.dimension not in taxonomy.dimensions:
            problems.append(f"{where}: unknown dimension {d.dimension!r}")
            continue
        if d.label is not None:
            known = set(taxonomy.dimensions[d.dimension].ids) | new_ids.get(d.dimension, set())
            if d.label not in known:
                problems.append(
                    f"{where}: unknown {d.dimension} label {d.label!r} (not in {taxonomy.label} "
                    f"and not created by a proposal)"
                )
        if d.action == "keep" and not it.in_gold:
            problems.append(f"{where}: keep gold on an item that has no gold label (use set or accept)")
        if d.action == "accept" and d.label not in it.model_labels():
            problems.append(
                f"{where}: accepted label {d.label!r} is not one a model gave "
                f"({', '.join(it.model_labels()) or 'none'}); use set for a label of your own"
            )
        for p in d.proposals:
            if p.dimension not in taxonomy.dimensions:
                problems.append(f"{where}: proposal for unknown dimension {p.dimension!r}")
    eff = effective(decisions, queue)
    if not problems:
        try:
            apply_changes(taxonomy, collect_changes(eff))  # dry run: the proposals must fit the codebook
        except ProposalError as e:
            problems.append(str(e))
    if problems:
        raise DecisionsError(
            f"{source}: rejected, nothing changed. {len(problems)} problem(s): "
            + "; ".join(problems[:15])
            + (f"; ... (+{len(problems) - 15} more)" if len(problems) > 15 else "")
        )
    return eff
