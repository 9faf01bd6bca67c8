"""`classify run --engine ray`: label on Ray Data workers, resumable by Parquet part.

The driver (classify.labeling.pipeline) trains the model(s) as for a local run and hands over a
`FittedRun` (classify.labeling.block). Here it goes to the object store once (`ray.put`); each worker
of an actor pool loads it once (its encoder loads on first use) and labels batches with `label_block`,
the function the local loop calls, so rows are the same. Each batch is written by its worker as one
Parquet part (classify.core.labelparts) the moment it is done: a killed worker loses its batch only
(Ray retries it), a killed driver loses nothing written, and a re-run with the same arguments skips
every id a finished part holds. At the end the parts become the same output file a local run writes
(input order), or stay as the output with `--out DIR/`.

Input: a Parquet file is read by Ray itself (`ray.data.read_parquet`, column types as declared). Other
formats are read and checked by the driver (as for a local run: ids, duplicates, types) and handed to
Ray as JSON texts in Parquet files (`_todo/` in the parts folder, written a chunk at a time): Ray's text
reader splits lines at Unicode line separators (U+2028 and the like, which issue text holds) and its
JSON reader insists on one type per field, so neither reads every file the local engine reads. The
driver holds the input's ids for the whole run, never all its records or rows.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from classify.classifiers.base import Classifier
from classify.core import labelparts, tablecells
from classify.core.records import Record, RecordsError, RecordStream, format_of, parquet_row, read_rows, to_record
from classify.core.writer import write_rows
from classify.labeling.block import FittedRun, label_block
from classify.labeling.resumable import RowCounter, RunError, RunSummary, strip_label_fields

INSTALL = "pip install 'classify[ray]'"
SPILL = "_todo"  # in the parts folder: the records handed to the workers (not a Parquet input)


def require_ray() -> None:
    try:
        import ray.data  # noqa: F401
    except ImportError:
        raise RunError(f"--engine ray needs Ray, which is not installed: {INSTALL}") from None


def parts_folder(out: Path, partitioned: bool) -> Path:
    """Where the parts go: the output itself (`--out DIR/`), else a folder beside the output file."""
    return out if partitioned else out.with_name(out.name + ".parts")


def label_with_ray(
    run: FittedRun,
    input: Path,
    records: list[Record] | RecordStream,
    out: Path,
    signature: str,
    signature_parts: dict[str, str],
    *,
    chunk_size: int = 256,
    progress: Callable[[int], None] | None = None,
    address: str | None = None,
    models: list[Classifier | None] | None = None,
    partitioned: bool = False,
    force: bool = False,
    say: Callable[[str], None] | None = None,
    strip: list[str] | None = None,
) -> RunSummary:
    """Label `records` (read from `input`) with `run` on Ray; resumable part by part. `strip`: the
    taxonomy's dimensions, whose labels in the input are dropped before prediction (as a local run does).

    With a RecordStream (classify.core.records.scan_records) the driver holds the input's ids, not its
    records: they go to the workers through Parquet files written a chunk at a time, and the output is
    merged from the parts in input order a few parts at a time."""
    source = records if isinstance(records, RecordStream) else RecordStream.of(records)
    strip = strip if strip is not None else run.clf.taxonomy.dimension_ids
    folder = parts_folder(out, partitioned)
    if force and labelparts.is_parts_folder(folder):  # never a folder this toolkit did not write
        shutil.rmtree(folder)
    if labelparts.is_parts_folder(folder):
        _check_same_run(folder, signature, signature_parts)
    elif folder.exists() and any(folder.iterdir()):
        raise RunError(f"{folder}: a folder that holds no classify run; give an empty or new folder")
    labelparts.write_run(folder, signature, signature_parts, complete=False)
    position = {rid: i for i, rid in enumerate(source.ids)}  # where each input id's row goes
    done = _finished_ids(folder, position)
    summary = RunSummary(out=out, total=len(source), resumed=len(done))
    if progress and done:
        progress(len(done))
    if len(done) < len(source):
        for m in models or []:
            if m is not None:
                m.close()  # loaded encoders and open caches stay here: each worker opens its own
        try:
            _run_on_ray(run, input, source, folder, done, 4 * chunk_size, progress, address, say, strip)
        finally:
            shutil.rmtree(folder / SPILL, ignore_errors=True)
    finished = _finished_ids(folder, position)  # no part holds a foreign or a doubled id
    if len(finished) < len(source):
        first = next(rid for rid in source.ids if rid not in finished)
        raise RunError(
            f"{folder}: {len(source) - len(finished)} records have no row after the run (e.g. {first}); run again"
        )
    del finished, done
    counter = RowCounter(run)

    def counted(rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            counter.add(row)
            yield row

    if partitioned:
        for _ in counted(row for p in labelparts.parts(folder) for row in read_rows(p)):  # counts: any order
            pass
        labelparts.write_run(folder, signature, signature_parts, complete=True)
    else:
        write_rows(out, counted(_in_input_order(folder, position)))
        shutil.rmtree(folder)
    return counter.fill(summary)


def _check_same_run(folder: Path, signature: str, signature_parts: dict[str, str]) -> None:
    try:
        then = labelparts.read_run(folder)
    except RecordsError as e:
        raise RunError(str(e)) from None
    if then.get("signature") == signature:
        return
    old = then.get("parts")
    old = old if isinstance(old, dict) else {}
    changed = sorted(k for k in set(old) | set(signature_parts) if old.get(k) != signature_parts.get(k))
    raise RunError(
        f"{folder}: parts from a run with different arguments exist ({', '.join(changed) or 'the arguments'} "
        "changed); rerun with the same arguments to resume, or pass --force to discard them and start over"
    )


def _finished_ids(folder: Path, wanted: dict[str, int]) -> set[str]:
    done: set[str] = set()
    for p in labelparts.parts(folder):
        try:
            ids = labelparts.part_ids(p)
        except RecordsError as e:
            raise RunError(str(e)) from None
        if any(i not in wanted for i in ids):
            raise RunError(f"{p}: holds ids the input does not have; remove the folder or pass --force")
        if not done.isdisjoint(ids):
            raise RunError(f"{p}: holds ids another part holds too; remove the folder or pass --force")
        done.update(ids)
    return done


def _in_input_order(folder: Path, position: dict[str, int]) -> Iterator[dict[str, Any]]:
    """Every row of the parts, in input order. A part holds one batch, rows in input order, so parts are
    opened in the order of their first row and merged: only the parts whose rows interleave (a retried
    or resumed batch) are in memory at once."""
    firsts = sorted((min(position[i] for i in labelparts.part_ids(p)), p) for p in labelparts.parts(folder))
    # (a part is never empty: a worker writes one only for a batch with rows)
    heap: list[tuple[int, int, dict[str, Any], Iterator[dict[str, Any]]]] = []
    for k, (first, part) in enumerate(firsts):
        while heap and heap[0][0] < first:  # every row before this part's first row
            yield _pop(heap, position)
        rows = iter(sorted(read_rows(part), key=lambda r: position[str(r["id"])]))
        row = next(rows, None)
        if row is not None:
            heapq.heappush(heap, (position[str(row["id"])], k, row, rows))
    while heap:
        yield _pop(heap, position)


def _pop(heap: list, position: dict[str, int]) -> dict[str, Any]:
    _, k, row, rows = heapq.heappop(heap)
    nxt = next(rows, None)
    if nxt is not None:
        heapq.heappush(heap, (position[str(nxt["id"])], k, nxt, rows))
    return row


def _init_ray(address: str | None) -> bool:
    """Start (or join) Ray quietly; True when this call started it (and must shut it down)."""
    import ray

    if ray.is_initialized():
        return False
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # no "starting execution" lines on the terminal
    try:
        if address:
            ray.init(address=address, **kw)
        else:
            ray.init(num_cpus=os.cpu_count() or 1, **kw)
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        raise RunError(f"--engine ray: cannot start {where}: {str(e).splitlines()[0] if str(e) else e}") from None
    return True


def _run_on_ray(
    run: FittedRun,
    input: Path,
    source: RecordStream,
    folder: Path,
    done: set[str],
    batch_size: int,
    progress: Callable[[int], None] | None,
    address: str | None,
    say: Callable[[str], None] | None,
    strip: list[str],
) -> None:
    import pyarrow.parquet as pq
    import ray
    import ray.data

    started = _init_ray(address)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False  # the CLI draws its own bar from the finished parts
        ctx.execution_options.verbose_progress = False
        try:
            run_ref = ray.put(run)
        except Exception as e:  # cloudpickle raises many types for what it cannot ship
            raise RunError(f"--engine ray: model {run.clf.spec} cannot be shipped to Ray workers ({e})") from None
        parquet = format_of(input) == "parquet"
        done_ref = ray.put(done if parquet else set())  # other inputs are handed over without them
        # a Parquet input's JSON columns, as the driver's read of it decoded them (core.tablecells)
        json_cols = tablecells.json_columns_of(pq.read_schema(input)) if parquet else None
        workers = max(1, int(ray.available_resources().get("CPU", 1)))
        if say:
            say(f"labeling on Ray: up to {workers} workers, batches of {batch_size}, parts in {folder}")
        with warnings.catch_warnings():  # Ray's deprecation and tuning notes are not the user's business
            warnings.simplefilter("ignore")
            ds = _dataset(input, source, done, folder, batch_size, workers)
            # Ray Data restarts a dead actor and retries its batch (a retried batch replaces its own part).
            labeled = ds.map_batches(
                _Labeler,
                # refs inside a list: each worker fetches the run itself, once (not re-sent with every restart)
                fn_constructor_args=([run_ref, done_ref], str(folder.resolve()), parquet, strip, json_cols),
                batch_size=batch_size if parquet else 1,  # else one spill file (of batch_size records) a batch
                batch_format="pyarrow",
                compute=ray.data.ActorPoolStrategy(min_size=1, max_size=workers),
                num_cpus=1,
            )
            for batch in labeled.iter_batches(batch_size=None, batch_format="pyarrow"):
                if progress:
                    progress(sum(batch.column("n").to_pylist()))
    finally:
        if started:
            ray.shutdown()


def _dataset(input: Path, source: RecordStream, done: set[str], folder: Path, batch_size: int, workers: int):
    import ray.data

    if format_of(input) == "parquet":
        return ray.data.read_parquet(str(input.resolve()))
    files = [str(f.resolve()) for f in _spill(source, done, folder / SPILL, batch_size)]
    return ray.data.from_items([{"spill": f} for f in files], override_num_blocks=min(200, max(workers, len(files))))


def _spill(source: RecordStream, done: set[str], spill: Path, per_file: int) -> list[Path]:
    """The records not labeled yet as JSON texts in Parquet files (a `text` column) of `per_file` records,
    written a chunk at a time: each file one batch for a worker, a run of input rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.rmtree(spill, ignore_errors=True)
    spill.mkdir(parents=True)
    files: list[Path] = []
    writer, n = None, 0
    for chunk in source.chunks(per_file):
        texts = [json.dumps(r.to_dict(), ensure_ascii=False) for r in chunk if r.id not in done]
        while texts:
            if writer is None:
                files.append(spill / f"{len(files):05d}.parquet")
                writer, n = pq.ParquetWriter(files[-1], pa.schema([("text", pa.string())])), 0
            take, texts = texts[: per_file - n], texts[per_file - n :]
            writer.write_table(pa.table({"text": take}))
            n += len(take)
            if n >= per_file:
                writer.close()
                writer = None
    if writer is not None:
        writer.close()
    return files


class _Labeler:
    """One Ray actor: the fitted run loaded once, then batch after batch labeled and written as a part."""

    def __init__(self, refs: list, folder: str, parquet: bool, strip: list[str], json_cols: frozenset[str] | None):
        import ray

        self.run: FittedRun = ray.get(refs[0])
        self.done: set[str] = ray.get(refs[1])
        self.folder = Path(folder)
        self.parquet = parquet  # rows as Ray read them from the file, else spill files of the driver's records
        self.strip = strip  # the label fields an input may carry, never used for prediction
        self.json_cols = json_cols

    def __call__(self, batch) -> dict[str, list]:
        if self.parquet:
            raw = [parquet_row(r, self.json_cols) for r in batch.to_pylist()]
        else:
            import pyarrow.parquet as pq

            texts = [t for f in batch.column("spill").to_pylist() for t in pq.read_table(f).column("text").to_pylist()]
            raw = [json.loads(t) for t in texts]
        records = [to_record(r) for r in raw]
        records = strip_label_fields([r for r in records if r.id not in self.done], self.strip)
        if not records:
            return {"n": [0], "part": [""]}
        rows = label_block(self.run, records)
        return {"n": [len(rows)], "part": [labelparts.write_part(self.folder, rows)]}
