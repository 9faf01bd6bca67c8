"""Files written atomically (temp file in the same folder + rename: readers never see half a file), and
rows written in the format their path asks for (JSONL, CSV, Parquet, Arrow, a dataset folder), the
formats classify.core.records reads back."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from classify.core import tablecells
from classify.core.records import DATASET, DATASET_SUFFIX, FORMATS, escape_formula


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write via a temp file in the same folder + rename: readers never see half a file."""
    atomic_write_lines(path, [text])


def atomic_write_lines(path: str | Path, pieces: Iterable[str]) -> None:
    """atomic_write_text for text made piece by piece: a large file is never one string in memory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a data file gets the usual permissions
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for piece in pieces:
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def output_format(path: Path) -> str:
    """How write_rows writes `path`: a dataset folder for `.hf` or an existing folder, else by extension (JSONL by default)."""
    if path.suffix.lower() == DATASET_SUFFIX or path.is_dir():
        return DATASET
    return FORMATS.get(path.suffix.lower(), "jsonl")


def write_rows(path: str | Path, rows: Iterable[dict[str, Any]], *, dataset: bool | None = None) -> None:
    """Write rows atomically, in the format the path asks for.

    - a Hugging Face dataset folder (`Dataset.save_to_disk`, read back with `datasets.load_from_disk`)
      when the path ends in `.hf` or is an existing folder, or when `dataset=True`. Only a folder
      that already holds a dataset is replaced; any other existing folder is refused. Nested
      values stay nested (struct columns); a key missing from some rows reads back as null there.
    - `.arrow`: one Arrow IPC stream file (what `datasets` writes; `Dataset.from_file` reads it);
    - `.csv`, `.parquet`: a table, nested values as JSON strings, strings that look like JSON kept
      apart (core.tablecells); CSV text cells that a spreadsheet would run as a formula (`=`, `+`,
      `-`, `@`, tab, CR first) get a leading `'`, which read_rows strips;
    - anything else: JSON lines.
    """
    path = Path(path)
    fmt = DATASET if dataset else output_format(path)
    if fmt == "jsonl":  # a line at a time: `rows` may be a stream longer than memory
        atomic_write_lines(path, (json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        return
    rows = list(rows)
    if fmt in (DATASET, "arrow"):
        from classify.core import hfdataset

        if fmt == DATASET:
            hfdataset.write_dataset(path, rows)
        else:
            hfdataset.write_arrow(path, rows)
        return

    def cell(v: Any) -> Any:
        if isinstance(v, (dict, list)):
            return json.dumps(v)
        return tablecells.csv_text(escape_formula(v)) if isinstance(v, str) else v

    if fmt == "csv":
        flat = [{k: cell(v) for k, v in r.items()} for r in rows]
        # The csv module, not pandas: pandas leaves a field holding a lone "\r" unquoted, and
        # reading it back splits the row in two.
        buf = io.StringIO()
        # "\r\n" line ends (RFC 4180): with "\n" alone the csv module would not quote a field holding "\r".
        w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in flat for k in r)), lineterminator="\r\n")
        w.writeheader()
        w.writerows(flat)
        atomic_write_text(path, buf.getvalue())
        return
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Parquet is not opened by spreadsheet programs as text: only CSV cells are neutralised.
    nested = tablecells.json_columns(rows)
    df = pd.DataFrame([tablecells.parquet_cells(r, nested) for r in rows])
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o666 & ~_umask())
    os.close(fd)
    try:
        pq.write_table(tablecells.with_json_columns(pa.Table.from_pandas(df, preserve_index=False), nested), tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
