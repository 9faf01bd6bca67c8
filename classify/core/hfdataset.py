"""Hugging Face `datasets` as inputs and outputs, so labels move into that ecosystem without glue.

Read: a folder written by `Dataset.save_to_disk` (a `DatasetDict` folder with one split, or one
split's own folder), and a single `.arrow` file (IPC stream, as `datasets` writes it, or IPC file).
`ClassLabel` columns come back as their names, dates as ISO strings. Write: a dataset folder, or an
`.arrow` stream file. classify.core.records decides which path is which and calls in here.

`datasets` takes seconds to import, so it is imported only here and only when a folder is involved;
`.arrow` files need pyarrow alone.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from classify.core.records import RecordsError

_SPLITS_FILE = "dataset_dict.json"
_DATASET_FILES = ("state.json", "dataset_info.json")


def is_dataset_folder(path: Path) -> bool:
    """A folder `save_to_disk` wrote: one Dataset, or a DatasetDict of splits."""
    return path.is_dir() and ((path / _SPLITS_FILE).is_file() or all((path / f).is_file() for f in _DATASET_FILES))


@contextmanager
def _datasets() -> Iterator[Any]:
    """The `datasets` module with its progress bars off (they would interleave with ours)."""
    import datasets

    was_off = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield datasets
    finally:
        if not was_off:
            datasets.enable_progress_bars()


def _plain(v: Any) -> Any:
    """A value as JSON would hold it: dates as ISO strings, nested values converted too."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    return v


def _rows(rows: list[dict[str, Any]], features: Any) -> list[dict[str, Any]]:
    """Rows with ClassLabel ids turned into their names (-1, "no label", into None)."""
    from datasets import ClassLabel

    labels = {k: f for k, f in (features or {}).items() if isinstance(f, ClassLabel)}
    out = []
    for r in rows:
        r = {k: _plain(v) for k, v in r.items()}
        for k, f in labels.items():
            v = r.get(k)
            r[k] = f.int2str(v) if isinstance(v, int) and v >= 0 else None
        out.append(r)
    return out


def _split_folder(path: Path) -> Path:
    """The folder of the one split to read; a DatasetDict with several splits must be narrowed."""
    if not (path / _SPLITS_FILE).is_file():
        return path
    try:
        splits = json.loads((path / _SPLITS_FILE).read_text(encoding="utf-8"))["splits"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RecordsError(f"{path}: damaged {_SPLITS_FILE}: {e}") from None
    if len(splits) != 1:
        raise RecordsError(
            f"{path}: a DatasetDict with splits {', '.join(map(str, splits))}; give the folder of one split, "
            f"e.g. {path / str(splits[0])}"
            if splits
            else f"{path}: a DatasetDict with no splits"
        )
    return path / str(splits[0])


def read_dataset(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a dataset folder written by `Dataset.save_to_disk` (or `DatasetDict.save_to_disk`)."""
    return [row for chunk in iter_dataset(path) for row in chunk]


def iter_dataset(path: str | Path, chunk_size: int = 1024) -> Iterator[list[dict[str, Any]]]:
    """read_dataset's rows, `chunk_size` at a time (the folder's Arrow files are memory-mapped)."""
    path = Path(path)
    if not is_dataset_folder(path):
        raise RecordsError(
            f"{path}: a folder, but not a Hugging Face dataset (no {' / '.join(_DATASET_FILES)}); "
            f"give a file, or a folder written by Dataset.save_to_disk"
        )
    folder = _split_folder(path)
    with _datasets() as datasets:
        try:
            ds = datasets.load_from_disk(str(folder))
        except Exception as e:  # datasets and pyarrow raise many types for a damaged folder
            raise RecordsError(f"{path}: cannot read the dataset: {e}") from e
    return (_rows(t.to_pylist(), ds.features) for t in ds.with_format("arrow").iter(batch_size=chunk_size))


def read_arrow(path: str | Path) -> list[dict[str, Any]]:
    """Rows of one Arrow IPC file: the stream format `datasets` writes, or the random-access file format."""
    return [row for chunk in iter_arrow(path) for row in chunk]


def iter_arrow(path: str | Path, chunk_size: int = 1024) -> Iterator[list[dict[str, Any]]]:
    """read_arrow's rows, `chunk_size` at a time (the file is memory-mapped)."""
    import pyarrow as pa

    path = Path(path)
    try:
        src = pa.memory_map(str(path))
        try:
            table = pa.ipc.open_stream(src).read_all()
        except pa.ArrowInvalid:
            src.seek(0)
            table = pa.ipc.open_file(src).read_all()
    except (pa.ArrowException, OSError) as e:
        raise RecordsError(f"{path}: not an Arrow IPC file: {e}") from None
    features = None
    if b"huggingface" in (table.schema.metadata or {}):  # written by datasets: it may hold ClassLabels
        with _datasets() as datasets:
            features = datasets.Features.from_arrow_schema(table.schema)

    def rows(batch: Any) -> list[dict[str, Any]]:
        got = batch.to_pylist()
        return _rows(got, features) if features is not None else [{k: _plain(v) for k, v in r.items()} for r in got]

    return (rows(b) for b in table.to_batches(max_chunksize=chunk_size))


def _table(path: Path, rows: list[dict[str, Any]]) -> Any:
    """An Arrow table of `rows`: one column per key of any row (first-seen order), missing cells null.

    Arrow's own inference looks at the first row's keys only, and would drop a key that first
    appears later; a column whose values have mixed types is refused naming the column.
    """
    import pyarrow as pa

    names = list(dict.fromkeys(k for r in rows for k in r))
    columns = {}
    for name in names:
        try:
            columns[name] = pa.array([r.get(name) for r in rows])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise RecordsError(
                f"{path}: column {name!r} cannot be a dataset column: {e} (its values have mixed types; "
                f"write .jsonl instead)"
            ) from None
    return pa.table(columns)


def _temp_sibling(path: Path, what: str) -> Path:
    return path.with_name(f".{path.name}.{what}-{uuid.uuid4().hex[:8]}")


def write_dataset(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Write `rows` as a dataset folder (`Dataset.save_to_disk`), replacing only an earlier dataset.

    Written next to its place and renamed in, so readers never see half a dataset; an existing
    folder that is not a dataset (a typo'd --out, a home folder) is refused, never replaced.
    """
    path = Path(path)
    if path.exists() and not is_dataset_folder(path):
        raise RecordsError(f"{path}: exists and is not a Hugging Face dataset folder; refusing to replace it")
    table = _table(path, rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_sibling(path, "tmp")
    with _datasets() as datasets:
        from datasets.table import InMemoryTable

        try:
            datasets.Dataset(InMemoryTable(table)).save_to_disk(str(tmp))
            if path.exists():
                old = _temp_sibling(path, "old")
                os.replace(path, old)
                os.replace(tmp, path)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def write_arrow(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Write `rows` as one Arrow IPC stream file (atomically: temp file + rename)."""
    import pyarrow as pa

    path = Path(path)
    table = _table(path, rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_sibling(path, "tmp")
    try:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
