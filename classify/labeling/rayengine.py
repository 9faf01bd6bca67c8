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
Ray as JSON texts: Ray's text reader splits lines at Unicode line separators (U+2028 and the like, which
issue text holds) and its JSON reader insists on one type per field, so neither reads every file the
local engine reads.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from classify.classifiers.base import Classifier
from classify.core import labelparts
from classify.core.records import Record, RecordsError, format_of, parquet_row, to_record, write_rows
from classify.labeling.block import FittedRun, label_block
from classify.labeling.resumable import RunError, RunSummary, count_rows, strip_label_fields

INSTALL = "pip install 'classify[ray]'"


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
    records: list[Record],
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
    taxonomy's dimensions, whose labels in the input are dropped before prediction (as a local run does)."""
    strip = strip if strip is not None else run.clf.taxonomy.dimension_ids
    folder = parts_folder(out, partitioned)
    if force and labelparts.is_parts_folder(folder):  # never a folder this toolkit did not write
        shutil.rmtree(folder)
    if labelparts.is_parts_folder(folder):
        _check_same_run(folder, signature, signature_parts)
    elif folder.exists() and any(folder.iterdir()):
        raise RunError(f"{folder}: a folder that holds no classify run; give an empty or new folder")
    labelparts.write_run(folder, signature, signature_parts, complete=False)
    wanted = {r.id for r in records}
    done = _finished_ids(folder, wanted)
    summary = RunSummary(out=out, total=len(records), resumed=len(done))
    if progress and done:
        progress(len(done))
    if len(done) < len(records):
        for m in models or []:
            if m is not None:
                m.close()  # loaded encoders and open caches stay here: each worker opens its own
        _run_on_ray(run, input, records, folder, done, 4 * chunk_size, progress, address, say, strip)
    rows_by_id = _read_back(folder, wanted)
    missing = [r.id for r in records if r.id not in rows_by_id]
    if missing:
        raise RunError(f"{folder}: {len(missing)} records have no row after the run (e.g. {missing[0]}); run again")
    ordered = [rows_by_id[r.id] for r in records]
    if partitioned:
        labelparts.write_run(folder, signature, signature_parts, complete=True)
    else:
        write_rows(out, ordered)
        shutil.rmtree(folder)
    return count_rows(summary, ordered, run)


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


def _finished_ids(folder: Path, wanted: set[str]) -> set[str]:
    done: set[str] = set()
    for p in labelparts.parts(folder):
        try:
            ids = labelparts.part_ids(p)
        except RecordsError as e:
            raise RunError(str(e)) from None
        if not set(ids) <= wanted:
            raise RunError(f"{p}: holds ids the input does not have; remove the folder or pass --force")
        if done & set(ids):
            raise RunError(f"{p}: holds ids another part holds too; remove the folder or pass --force")
        done.update(ids)
    return done


def _read_back(folder: Path, wanted: set[str]) -> dict[str, dict[str, Any]]:
    _finished_ids(folder, wanted)  # no part holds a foreign or a doubled id
    from classify.core.records import read_rows

    return {str(row["id"]): row for p in labelparts.parts(folder) for row in read_rows(p)}


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
    records: list[Record],
    folder: Path,
    done: set[str],
    batch_size: int,
    progress: Callable[[int], None] | None,
    address: str | None,
    say: Callable[[str], None] | None,
    strip: list[str],
) -> None:
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
        done_ref = ray.put(done)
        workers = max(1, int(ray.available_resources().get("CPU", 1)))
        if say:
            say(f"labeling on Ray: up to {workers} workers, batches of {batch_size}, parts in {folder}")
        with warnings.catch_warnings():  # Ray's deprecation and tuning notes are not the user's business
            warnings.simplefilter("ignore")
            ds = _dataset(input, records, done, batch_size, workers)
            # Ray Data restarts a dead actor and retries its batch (a retried batch replaces its own part).
            labeled = ds.map_batches(
                _Labeler,
                # refs inside a list: each worker fetches the run itself, once (not re-sent with every restart)
                fn_constructor_args=([run_ref, done_ref], str(folder.resolve()), format_of(input) == "parquet", strip),
                batch_size=batch_size,
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


def _dataset(input: Path, records: list[Record], done: set[str], batch_size: int, workers: int):
    import ray.data

    if format_of(input) == "parquet":
        return ray.data.read_parquet(str(input.resolve()))
    todo = [{"text": json.dumps(r.to_dict(), ensure_ascii=False)} for r in records if r.id not in done]
    return ray.data.from_items(todo, override_num_blocks=min(200, max(workers, -(-len(todo) // batch_size))))


class _Labeler:
    """One Ray actor: the fitted run loaded once, then batch after batch labeled and written as a part."""

    def __init__(self, refs: list, folder: str, parquet: bool, strip: list[str]):
        import ray

        self.run: FittedRun = ray.get(refs[0])
        self.done: set[str] = ray.get(refs[1])
        self.folder = Path(folder)
        self.parquet = parquet  # rows as Ray read them from the file, else the driver's records as JSON texts
        self.strip = strip  # the label fields an input may carry, never used for prediction

    def __call__(self, batch) -> dict[str, list]:
        if self.parquet:
            raw = [parquet_row(r) for r in batch.to_pylist()]
        else:
            raw = [json.loads(t) for t in batch.column("text").to_pylist()]
        records = [to_record(r) for r in raw]
        records = strip_label_fields([r for r in records if r.id not in self.done], self.strip)
        if not records:
            return {"n": [0], "part": [""]}
        rows = label_block(self.run, records)
        return {"n": [len(rows)], "part": [labelparts.write_part(self.folder, rows)]}
