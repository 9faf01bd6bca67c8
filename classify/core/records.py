"""Issue records: read JSONL / CSV / Parquet / Arrow / Hugging Face dataset folders, validate ids
and text, write atomically."""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from classify.core import tablecells
from classify.core.errors import ClassifyError
from classify.core.hashing import text_hash
from classify.core.jsonlines import JsonLineReader, line_problems
from classify.core.textio import BOM, utf8_problem

CORE_FIELDS = ("id", "repo", "number", "url", "title", "body", "discussion", "created_at")
FORMATS = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
}
# A folder written by `Dataset.save_to_disk` (classify.core.hfdataset); outputs ending in .hf are written as one.
DATASET = "dataset"
DATASET_SUFFIX = ".hf"


log = logging.getLogger("classify")
# Set on every record of a file without an id column (see with_content_ids).
ID_FROM = "id_from"
CONTENT_HASH = "content-hash"


class RecordsError(ClassifyError, ValueError):
    """Input records are malformed; the message names the file and the offending rows or ids."""


@dataclass
class Record:
    id: str
    title: str = ""
    body: str = ""
    discussion: str = ""
    repo: str | None = None
    number: int | None = None
    url: str | None = None
    created_at: str | None = None
    # Everything else the input carried (labels, coder passes, notes), untouched.
    fields: dict[str, Any] = field(default_factory=dict)

    def text(self, include_discussion: bool = True) -> str:
        parts = [self.title, self.body]
        if include_discussion and self.discussion:
            parts.append(self.discussion)
        return "\n\n".join(p for p in parts if p)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in CORE_FIELDS}
        d.update(self.fields)
        return d


# OWASP's rule for CSV injection: a cell a spreadsheet program would run as a formula starts with one
# of these. Such a cell is written with a leading apostrophe (what spreadsheets themselves use to mean
# "this is text"); a cell that already starts with apostrophes before one of them gets one more, so
# reading back strips exactly one and every string survives the round trip unchanged.
_FORMULA = re.compile(r"^'*[=+\-@\t\r]")
_ESCAPED = re.compile(r"^'+[=+\-@\t\r]")


def escape_formula(text: str) -> str:
    """`text` as a CSV cell no spreadsheet program runs as a formula (undone by unescape_formula)."""
    return "'" + text if _FORMULA.match(text) else text


def unescape_formula(text: str) -> str:
    """The inverse of escape_formula, for CSV files the toolkit wrote (sheets, labels, fetched records)."""
    return text[1:] if _ESCAPED.match(text) else text


def _clean(v: Any) -> Any:
    """CSV/Parquet give NaN for empty cells; treat it as missing."""
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            return v.item()
        except (ValueError, AttributeError):
            return v
    return v


def format_of(path: Path) -> str:
    """The format of an input: by extension, or `dataset` for a folder (or a path ending in .hf)."""
    if path.is_dir() or path.suffix.lower() == DATASET_SUFFIX:
        return DATASET
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise RecordsError(
            f"{path}: unknown file type {path.suffix!r} (use .jsonl, .csv, .parquet, .arrow or a Hugging Face dataset folder)"
        )
    return fmt


CHUNK_ROWS = 1024  # rows per chunk of a streamed read (iter_rows)


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Raw rows of a JSONL, CSV, Parquet or Arrow file or a Hugging Face dataset folder.

    Malformed JSON lines and invalid UTF-8 are an error naming the file and the lines.
    """
    return [row for chunk in iter_rows(path) for row in chunk]


def iter_rows(path: str | Path, chunk_size: int = CHUNK_ROWS) -> Iterator[list[dict[str, Any]]]:
    """read_rows's rows, `chunk_size` at a time: the file is never in memory whole (an Arrow file or a
    dataset folder is memory-mapped by Arrow and converted batch by batch).

    A malformed JSONL file raises read_rows's error, naming every bad line, after its last line, and no
    chunk is handed out past its first bad line: a caller that must not act on part of a bad file reads
    it through once first (scan_records).
    """
    path = Path(path)
    if not path.exists():
        raise RecordsError(f"{path}: file not found")
    fmt = format_of(path)
    if fmt in (DATASET, "arrow"):
        from classify.core import hfdataset  # imports pyarrow (and datasets for folders) only when needed

        return hfdataset.iter_dataset(path, chunk_size) if fmt == DATASET else hfdataset.iter_arrow(path, chunk_size)
    return {"jsonl": _jsonl_chunks, "parquet": _parquet_chunks, "csv": _csv_chunks}[fmt](path, chunk_size)


def _jsonl_chunks(path: Path, size: int) -> Iterator[list[dict[str, Any]]]:
    reader = JsonLineReader(path)
    not_objects: list[tuple[int, str]] = []
    chunk: list[dict[str, Any]] = []
    for ln in reader:
        if not isinstance(ln.value, dict):
            not_objects.append((ln.number, "not a JSON object"))
        elif not (reader.problems or not_objects):  # past a bad line rows are only checked, not kept
            chunk.append(ln.value)
            if len(chunk) >= size:
                yield chunk
                chunk = []
    problems = reader.problems + not_objects
    if problems:
        raise RecordsError(f"{path}: malformed JSONL ({len(problems)} lines): " + line_problems(problems))
    if chunk:
        yield chunk


def _csv_chunks(path: Path, size: int) -> Iterator[list[dict[str, Any]]]:
    import pandas as pd

    # Bad bytes are named by line before any row is read (pandas would name a byte offset, mid-file).
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                (raw[len(BOM) :] if n == 1 and raw.startswith(BOM) else raw).decode("utf-8")
            except UnicodeDecodeError as e:
                what = utf8_problem(raw[len(BOM) :] if n == 1 and raw.startswith(BOM) else raw, e.start)[1]
                raise RecordsError(f"{path}: line {n}: {what}; save the file as UTF-8") from None
    try:
        # newline="": line ends reach the parser as written (a "\r" inside a quoted cell stays one)
        with path.open(encoding="utf-8-sig", newline="") as f:
            for df in pd.read_csv(f, dtype=object, keep_default_na=False, na_values=[""], chunksize=size):
                yield [_csv_row(raw) for raw in df.to_dict(orient="records")]
    except Exception as e:  # pandas raises many types for broken files
        raise RecordsError(f"{path}: cannot read csv: {e}") from e


def _csv_row(raw: dict[Any, Any]) -> dict[str, Any]:
    row = {}
    for k, v in raw.items():
        v = _clean(v)
        row[str(k)] = tablecells.csv_value(k, unescape_formula(v) if isinstance(v, str) else v)
    return row


def _plain(v: Any) -> Any:
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _parquet_chunks(path: Path, size: int) -> Iterator[list[dict[str, Any]]]:
    """Rows of a Parquet file with the column types it declares, a batch at a time.

    Read through pyarrow, not pandas: pandas turns an integer column with a gap into floats (id 1
    becomes 1.0) and hides wrong types in object columns; here a list or bytes stays what it is and
    check_rows refuses it by name.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(path) as f:
            cols = tablecells.json_columns_of(f.schema_arrow)
            for batch in f.iter_batches(batch_size=size):
                yield [parquet_row(raw, cols) for raw in batch.to_pylist()]
    except (pa.ArrowException, OSError) as e:
        raise RecordsError(f"{path}: cannot read parquet: {e}") from None


def parquet_row(raw: dict[str, Any], json_columns: frozenset[str] | None = None) -> dict[str, Any]:
    """One row as pyarrow gives it -> the row read_rows gives (dates as text, nested JSON text parsed).
    `json_columns`: tablecells.json_columns_of(the file's schema); None reads by the old rule."""
    return {
        str(k): tablecells.parquet_value(k, _plain(v), json_columns)
        for k, v in raw.items()
        if not re.fullmatch(r"__index_level_\d+__", str(k))
    }


_TEXT_FIELDS = ("title", "body", "discussion")


def kind_of(v: Any) -> str:
    """'a list', 'an object', ... for messages about a value of the wrong type."""
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, float):
        return "a float"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, (list, tuple)):
        return "a list"
    if isinstance(v, (bytes, bytearray)):
        return "bytes"
    if isinstance(v, int):
        return "a number"
    return f"a {type(v).__name__}"


def row_problems(row: dict[str, Any]) -> list[str]:
    """What is wrong with the types of one row's id and text fields (empty when nothing)."""
    problems = []
    rid = row.get("id")
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, (str, int))):
        problems.append(f"id {rid!r} is {kind_of(rid)} (ids are text or integers)")
    for f in _TEXT_FIELDS:
        v = row.get(f)
        if v is not None and not isinstance(v, str):
            problems.append(f"{f} is {kind_of(v)}, not text")
    return problems


def check_rows(rows: list[dict[str, Any]], source: str | Path) -> None:
    """Refuse ids that are not text or integers and text fields that are not text (all listed at once).

    `str()` would make them look fine: True -> "True", 1.0 -> "1.0" (another record than 1), a list
    title -> "['a']", bytes -> "b'...'".
    """
    problems = [f"row {i}: {p}" for i, row in enumerate(rows, 1) for p in row_problems(row)]
    if problems:
        raise RecordsError(f"{source}: values of the wrong type ({len(problems)}): " + "; ".join(problems[:10]))


def to_record(row: dict[str, Any]) -> Record:
    rid = row.get("id")
    number = _clean(row.get("number"))
    try:
        number = int(number) if number not in (None, "") else None
    except (TypeError, ValueError, OverflowError):  # OverflowError: 1e400 or Infinity in JSON
        number = None
    return Record(
        id=str(rid) if rid not in (None, "") else "",
        title=str(_clean(row.get("title")) or ""),
        body=str(_clean(row.get("body")) or ""),
        discussion=str(_clean(row.get("discussion")) or ""),
        repo=_clean(row.get("repo")),
        number=number,
        url=_clean(row.get("url")),
        created_at=_clean(row.get("created_at")),
        fields={k: v for k, v in row.items() if k not in CORE_FIELDS},
    )


def validate_records(records: list[Record], source: str | Path = "<records>") -> None:
    """Refuse records without id, with empty text, or with duplicated ids (all listed at once)."""
    problems = _id_problems([r.id for r in records], [i for i, r in enumerate(records) if _no_text(r)])
    if problems:
        raise RecordsError(f"{source}: " + "; ".join(problems))


def _no_text(r: Record) -> bool:
    return not (r.title.strip() or r.body.strip())


def _id_problems(ids: list[str], empty: list[int]) -> list[str]:
    """validate_records's findings from the ids in order and the (0-based) rows with no text."""
    problems = []
    no_id = [i + 1 for i, rid in enumerate(ids) if not rid]
    if no_id:
        problems.append(f"{len(no_id)} records without id (rows {_short(no_id)})")
    seen: set[str] = set()
    dup: set[str] = set()
    for rid in ids:
        if rid:
            (dup if rid in seen else seen).add(rid)
    del seen
    if dup:
        problems.append(f"{len(dup)} duplicated ids: {_short(sorted(dup))}")
    if empty:
        names = [ids[i] or f"row {i + 1}" for i in empty]
        problems.append(f"{len(empty)} records with empty title and body: {_short(names)}")
    return problems


def _short(items: list, n: int = 20) -> str:
    s = ", ".join(str(x) for x in items[:n])
    return s + (f", ... (+{len(items) - n} more)" if len(items) > n else "")


_noted: set[str] = set()  # files whose derived ids were announced (once per file and process)


def content_id(row: dict[str, Any]) -> str:
    """`h-` and 12 hex digits of the hash of a row's title and body."""
    return "h-" + text_hash(json.dumps([row.get("title") or "", row.get("body") or ""], ensure_ascii=False))[:12]


def with_content_ids(rows: list[dict[str, Any]], source: str | Path) -> list[dict[str, Any]]:
    """`rows` of a file with no id column, each given an id from its content (content_id).

    A content hash, not the row position: the id of a report stays the same when the file is
    sorted, filtered or appended to, so caches, checkpoints and coded files keep matching it. A
    text that occurs twice gets `-2`, `-3`, ... in file order. Each row records `id_from:
    content-hash`; the first read of a file says so on stderr.
    """
    ids = _numbered([content_id(r) for r in rows])
    _note_content_ids(source)
    return [_with_id(r, rid) for r, rid in zip(rows, ids)]


def _numbered(hashes: list[str]) -> list[str]:
    seen: Counter[str] = Counter()
    out = []
    for h in hashes:
        seen[h] += 1
        out.append(h if seen[h] == 1 else f"{h}-{seen[h]}")
    return out


def _with_id(row: dict[str, Any], rid: str) -> dict[str, Any]:
    return {"id": rid, **row, ID_FROM: CONTENT_HASH}


def _note_content_ids(source: str | Path) -> None:
    key = str(Path(source).resolve()) if not str(source).startswith("<") else str(source)
    if key not in _noted:
        _noted.add(key)
        log.warning(
            "note: %s has no id column; each record's id is a hash of its title and body (`h-...`, stable "
            "when rows are reordered or added), recorded as `%s: %s` in the record",
            source,
            ID_FROM,
            CONTENT_HASH,
        )


def read_records(path: str | Path, validate: bool = True) -> list[Record]:
    """Records of a file; a file with no `id` column at all gets ids from its content (with_content_ids)."""
    rows = read_rows(path)
    check_rows(rows, path)
    if rows and not any("id" in r for r in rows):
        rows = with_content_ids(rows, path)
    records = [to_record(r) for r in rows]
    if validate:
        validate_records(records, path)
    return records


@dataclass
class RecordStream:
    """An input's records for a pass over all of them without holding their texts: what the whole file
    says about every record (its id, for duplicates, order and resume; the fields present) is kept,
    the records themselves are read again a chunk at a time (`chunks`). Made by scan_records, or `of`
    records already in memory."""

    path: Path | None
    ids: list[str]  # in input order
    fields: set[str]  # every field of the records beyond CORE_FIELDS
    content_ids: bool = False  # no id column: ids from the content (with_content_ids)
    records: list[Record] | None = None

    @classmethod
    def of(cls, records: list[Record]) -> RecordStream:
        return cls(None, [r.id for r in records], {k for r in records for k in r.fields}, records=records)

    def __len__(self) -> int:
        return len(self.ids)

    def chunks(self, size: int = CHUNK_ROWS) -> Iterator[list[Record]]:
        """read_records's records, `size` at a time; a file changed since its scan is an error."""
        if self.records is not None:
            yield from (self.records[i : i + size] for i in range(0, len(self.records), size))
            return
        assert self.path is not None
        n = 0
        for rows in iter_rows(self.path, size):
            if self.content_ids:
                rows = [_with_id(r, rid) for r, rid in zip(rows, self.ids[n : n + len(rows)])]
            records = [to_record(r) for r in rows]
            if [r.id for r in records] != self.ids[n : n + len(records)]:
                n = len(self.ids) + 1  # not the rows the scan saw
                break
            n += len(records)
            yield records
        if n != len(self.ids):
            raise RecordsError(f"{self.path}: the file changed while it was being read; run again")


def scan_records(path: str | Path, chunk_size: int = CHUNK_ROWS) -> RecordStream:
    """read_records's checks, with the same errors, in one pass over the file a chunk at a time, keeping
    only the ids and the field names: the RecordStream to read the records from."""
    path = Path(path)
    raw_ids: list[str] = []
    hashes: list[str] | None = []  # content ids, while no row has an id
    fields: set[str] = set()
    empty: list[int] = []
    wrong: list[str] = []
    n_wrong = 0
    for rows in iter_rows(path, chunk_size):
        for row in rows:
            problems = row_problems(row)
            n_wrong += len(problems)
            wrong.extend(f"row {len(raw_ids) + 1}: {p}" for p in problems[: max(0, 10 - len(wrong))])
            if hashes is not None:
                if "id" in row:
                    hashes = None
                else:
                    hashes.append(content_id(row))
            r = to_record(row)
            if _no_text(r):
                empty.append(len(raw_ids))
            raw_ids.append(r.id)
            fields.update(k for k in row if k not in CORE_FIELDS)
    if n_wrong:
        raise RecordsError(f"{path}: values of the wrong type ({n_wrong}): " + "; ".join(wrong))
    content = bool(raw_ids) and hashes is not None
    if content:
        assert hashes is not None
        raw_ids = _numbered(hashes)
        fields.add(ID_FROM)
        _note_content_ids(path)
    problems = _id_problems(raw_ids, empty)
    if problems:
        raise RecordsError(f"{path}: " + "; ".join(problems))
    return RecordStream(path, raw_ids, fields, content)
