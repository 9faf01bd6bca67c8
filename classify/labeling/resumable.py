"""Label a file of records: train on gold, predict in chunks, checkpoint, write atomically.

A run writes finished rows to `<out>.partial.jsonl` as it goes (one fsync per chunk). Started again
with the same arguments it skips the ids already there, so a killed run (SIGINT or SIGKILL) loses
at most the chunk in flight and never labels a record twice. The final file is written atomically
and the partial file removed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import chain
from pathlib import Path
from typing import Any

from classify.classifiers.base import Classifier, Prediction
from classify.core import labelrow
from classify.core.errors import ClassifyError
from classify.core.gold import GoldSet
from classify.core.jsonlines import JsonLineReader, line_problems
from classify.core.records import Record, RecordStream
from classify.core.writer import atomic_write_lines, output_format, write_rows
from classify.labeling.block import DEFAULT_KEEP, FieldsFn, FittedRun, default_fields, label_block
from classify.labeling.block import label_fields as label_fields  # re-exported: callers import it from here


class RunError(ClassifyError, RuntimeError):
    pass


@dataclass
class RunSummary:
    out: Path
    total: int
    labeled: int = 0
    resumed: int = 0
    invalid: dict[str, int] = field(default_factory=dict)
    screened_out: int = 0
    seconds: float = 0.0
    model_stats: Any = None  # the classifier's request stats (LLMs), None for trained models
    # routed runs (--target-kappa): dimension -> {"auto": n, "review": n, "none_shown": n}
    routing: dict[str, dict[str, int]] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)


@contextmanager
def output_lock(out: Path) -> Iterator[None]:
    """Hold `<out>.lock` for the run: a second run on the same output is refused at once, not left to
    tear the checkpoint. The lock is the kernel's (flock), so a killed run never leaves a stale one."""
    lock = out.with_name(out.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    f = lock.open("a+")
    try:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            who = f.read().strip() or "another process"
            raise RunError(
                f"{out}: another classify run is writing it ({who}); wait for it or pick another --out"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}")
        f.flush()
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)
    finally:
        f.close()


def partial_path(out: Path) -> Path:
    return out.with_name(out.name + ".partial.jsonl")


def kept_rows(out: Path) -> int:
    """How many finished rows an interrupted run's checkpoint holds (its whole lines but the header),
    counted a block of bytes at a time."""
    part = partial_path(out)
    if not part.exists():
        return 0
    with part.open("rb") as f:
        return max(0, sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b"")) - 1)


def run_signature(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def part_hashes(parts: dict[str, Any]) -> dict[str, str]:
    """One hash per argument group, kept in the checkpoint header to say which one changed."""
    return {k: run_signature({k: v}) for k, v in parts.items()}


def read_checkpoint(path: Path, signature: str, parts: dict[str, str] | None = None) -> list[dict]:
    """Rows already labeled by an interrupted run with the same signature (checked as checkpoint_ids)."""
    checkpoint_ids(path, signature, parts)
    return [ln.value for ln in _checkpoint_lines(path)]


def checkpoint_ids(path: Path, signature: str, parts: dict[str, str] | None = None) -> list[str]:
    """The ids of the rows an interrupted run with the same signature finished, in file order; the file
    is read a line at a time, and only the ids kept.

    A kill mid-write can only tear the last line (the checkpoint is rewritten whole before each
    run appends to it), so a torn last line, even one cut inside a UTF-8 character, is dropped and
    its record labeled again. Damage anywhere else is an error naming the line.
    """
    reader = JsonLineReader(path, drop_torn_tail=True)
    ids: list[str] = []
    bad: list[tuple[int, str]] = []
    header = None
    for ln in reader:
        if header is None:
            header = ln
            _check_header(path, ln, reader.problems, signature, parts)
        elif isinstance(ln.value, dict) and isinstance(ln.value.get("id"), str):
            ids.append(ln.value["id"])
        else:
            bad.append((ln.number, "not a row with an id"))
    if header is None and reader.problems:
        raise RunError(f"{path}: checkpoint header is damaged; remove it or pass --force")
    if reader.problems or bad:
        raise RunError(
            f"{path}: damaged checkpoint ({line_problems(reader.problems + bad)}); remove it or pass --force"
        )
    return ids


def _check_header(path: Path, first: Any, problems: list, signature: str, parts: dict[str, str] | None) -> None:
    if first.number != 1 or problems:
        raise RunError(f"{path}: checkpoint header is damaged; remove it or pass --force")
    if not isinstance(first.value, dict):
        raise RunError(f"{path}: checkpoint header is not a JSON object; remove it or pass --force")
    if first.value.get("signature") != signature:
        then = first.value.get("parts")
        if isinstance(then, dict) and parts:
            changed = sorted(k for k in set(then) | set(parts) if then.get(k) != parts.get(k))
            what = ", ".join(changed) or "the arguments"
        else:
            what = "model, options, targets, taxonomy, gold or input"
        raise RunError(
            f"{path}: a checkpoint from a run with different arguments exists ({what} changed); "
            f"rerun with the same arguments to resume, or pass --force to discard it and start over"
        )


def _checkpoint_lines(path: Path) -> Iterator[Any]:
    """The row lines of a checkpoint checkpoint_ids has checked (its torn tail dropped), one at a time."""
    lines = iter(JsonLineReader(path, drop_torn_tail=True))
    next(lines, None)  # the header
    return lines


def label_records(
    clf: Classifier,
    records: list[Record],
    out: Path,
    provenance: dict[str, Any],
    signature: str,
    chunk_size: int = 256,
    progress: Callable[[int], None] | None = None,
    screen: Callable[[list[Record]], list[Prediction]] | None = None,
    prepare_progress: Callable[[int], None] | None = None,
    screen_prepare: Callable[..., None] | None = None,
    fields: FieldsFn = default_fields,
    screen_fields: Callable[[list[Prediction]], list[dict[str, Any]]] | None = None,
    dims: list[str] | None = None,
    keep: tuple[str, ...] = DEFAULT_KEEP,
    signature_parts: dict[str, str] | None = None,
    routed: bool = False,
) -> RunSummary:
    """Predict `records` chunk by chunk, appending to the checkpoint; finish with an atomic write.

    With `screen`, the block pre-encoding is the screening model's (`screen_prepare`): it reads
    every record, and with the same encoder the labeling model then finds the kept ones cached;
    pre-encoding with the labeling model would also encode records screened out.
    """
    dims = dims or clf.taxonomy.dimension_ids  # the label fields a screened-out row holds empty
    run = FittedRun(clf, provenance, dims, keep, fields, screen, screen_prepare, screen_fields, routed)
    return label_run(run, records, out, signature, chunk_size, progress, prepare_progress, signature_parts)


def label_run(
    run: FittedRun,
    records: list[Record] | RecordStream,
    out: Path,
    signature: str,
    chunk_size: int = 256,
    progress: Callable[[int], None] | None = None,
    prepare_progress: Callable[[int], None] | None = None,
    signature_parts: dict[str, str] | None = None,
    strip: list[str] | None = None,
) -> RunSummary:
    """`label_records` for a run already assembled (classify.labeling.block): the local engine.

    `records` may be a RecordStream (classify.core.records.scan_records): then only the input's ids are
    held for the whole run, the records are read a block at a time. `strip`: the dimensions whose labels
    an input may carry, dropped before prediction (strip_label_fields)."""
    source = records if isinstance(records, RecordStream) else RecordStream.of(records)
    part = partial_path(out)
    done = set(checkpoint_ids(part, signature, signature_parts)) if part.exists() else set()
    summary = RunSummary(out=out, total=len(source), resumed=len(done))
    if progress and done:
        progress(len(done))
    # Rewrite the checkpoint without any torn tail before appending to it (atomically: a kill
    # here must not lose what the checkpoint already holds), a line at a time.
    header = json.dumps({"signature": signature, "parts": signature_parts or {}}) + "\n"
    atomic_write_lines(part, chain([header], (ln.text + "\n" for ln in _checkpoint_lines(part)) if done else []))
    try:
        # Models with a `prepare` step (encoders) get blocks of 4 chunks at once: one length-sorted
        # encoding pass pads little, and checkpoints still follow every few hundred records.
        with part.open("a", encoding="utf-8") as f:
            for todo_block in _todo_blocks(source, done, 4 * chunk_size, strip):
                run.prepare(todo_block, progress=prepare_progress)
                for start in range(0, len(todo_block), chunk_size):
                    chunk = todo_block[start : start + chunk_size]
                    rows = label_block(run, chunk, prepared=True)
                    for row in rows:
                        f.write(json.dumps(row, ensure_ascii=False) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                    if progress:
                        progress(len(chunk))
    except BaseException:
        # A run that dies before its first row (a dead server, a bad key) leaves no checkpoint behind.
        if not done and not checkpoint_ids(part, signature):
            part.unlink(missing_ok=True)
        raise
    if output_format(out) == "jsonl" and _stream_checkpoint(part, source.ids, out):
        # The checkpoint holds the rows in input order (resumed rows are a prefix of it): copied line by
        # line, and counted from the file, the rows are never all in memory at once.
        part.unlink()
        with out.open(encoding="utf-8") as f:
            return count_rows(summary, (json.loads(line) for line in f), run)
    # Another output format (or a checkpoint out of input order): the rows are in memory here.
    all_rows = {r["id"]: r for r in read_checkpoint(part, signature)}
    ordered = [all_rows[i] for i in source.ids]  # input order, exactly one row per record
    write_rows(out, ordered)
    part.unlink()
    return count_rows(summary, ordered, run)


def _todo_blocks(source: RecordStream, done: set[str], size: int, strip: list[str] | None) -> Iterator[list[Record]]:
    """The records not labeled yet, in input order, `size` at a time (the blocks a whole list would give)."""
    todo: list[Record] = []
    for chunk in source.chunks(size):
        todo.extend(r for r in chunk if r.id not in done)
        while len(todo) >= size:
            block, todo = todo[:size], todo[size:]
            yield strip_label_fields(block, strip) if strip else block
    if todo:
        yield strip_label_fields(todo, strip) if strip else todo


def _stream_checkpoint(part: Path, ids: list[str], out: Path) -> bool:
    """Write `out` from the checkpoint's lines when they are exactly one row per record in input order
    (always, for a checkpoint this module wrote); False, and `out` untouched, when they are not."""

    class OutOfOrder(Exception):
        pass

    def lines() -> Iterator[str]:
        want = iter(ids)
        with part.open(encoding="utf-8") as f:
            next(f, None)  # the header
            for line in f:
                rid = next(want, None)
                if rid is None or json.loads(line).get("id") != rid:
                    raise OutOfOrder
                yield line if line.endswith("\n") else line + "\n"
        if next(want, None) is not None:
            raise OutOfOrder

    try:
        atomic_write_lines(out, lines())
    except OutOfOrder:
        return False
    return True


def count_rows(summary: RunSummary, rows: Iterable[dict[str, Any]], run: FittedRun) -> RunSummary:
    """Fill in what a run's rows say (invalid answers, screened out, routing), whichever engine made
    them; in one pass, so `rows` may be a stream."""
    counter = RowCounter(run)
    for r in rows:
        counter.add(r)
    return counter.fill(summary)


class RowCounter:
    """count_rows a row at a time, for a pass that also does something else with each row."""

    def __init__(self, run: FittedRun):
        self.run = run
        self.dims = run.clf.taxonomy.dimension_ids
        self.invalid: Counter[str] = Counter()
        self.statuses: dict[str, Counter] = {d: Counter() for d in [*run.dims, "screening"]}
        self.n = self.screened_out = 0

    def add(self, r: dict[str, Any]) -> None:
        self.n += 1
        self.invalid.update(d for d in self.dims if labelrow.is_invalid(r, d))
        self.screened_out += not labelrow.is_failure_report(r)
        for d, c in self.statuses.items():
            c[labelrow.status(r, d)] += 1

    def fill(self, summary: RunSummary) -> RunSummary:
        summary.screened_out += self.screened_out
        summary.invalid = {d: self.invalid.get(d, 0) for d in self.dims}
        summary.labeled = self.n - summary.resumed
        for d, seen in self.statuses.items():
            if any(seen.get(s) for s in labelrow.ROUTED):
                summary.routing[d] = {s.value: seen.get(s, 0) for s in labelrow.ROUTED}
        summary.provenance = self.run.provenance
        return summary


def provenance_for(clf: Classifier, gold: GoldSet) -> dict[str, Any]:
    p = clf.provenance()
    base: dict[str, Any] = {
        "model": clf.spec,
        "taxonomy": clf.taxonomy.label,
        "gold_hash": gold.hash,
        "run_options": clf.options.run_meta(),  # with `model`, enough to rebuild the model's gold profile
        "labeled_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if "prompt_hash" in p:
        base["prompt_hash"] = p["prompt_hash"]
    base["provenance"] = p
    return base


def input_fingerprint(path: Path) -> str:
    """Hash of the input's bytes; for a dataset folder, of every file's name and bytes."""
    h = hashlib.sha256()
    files = sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            h.update(str(file.relative_to(path)).encode("utf-8") + b"\0")
        with file.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def strip_label_fields(records: list[Record], dims: list[str]) -> list[Record]:
    """Labels present in the input are never used for prediction: drop them up front."""
    for r in records:
        for k in list(r.fields):
            if is_label_field(k, dims):
                r.fields.pop(k)
    return records


def is_label_field(key: str, dims: list[str]) -> bool:
    return key in dims or key.startswith("coder_") or key.endswith("_confidence")
