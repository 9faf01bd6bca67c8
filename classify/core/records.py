"""Issue records: read JSONL / CSV / Parquet / Arrow / Hugging Face dataset folders, validate ids
and text, write atomically."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import logging
import math
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from classify.core import tablecells
from classify.core.errors import ClassifyError
from classify.core.hashing import text_hash
from classify.core.jsontext import loads
from classify.core.textio import BOM, decode_utf8, utf8_problem

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


class JsonLine(NamedTuple):
    number: int  # 1-based line number in the file
    value: Any
    text: str  # the line as written, without its "\n"


@dataclass
class JsonLines:
    lines: list[JsonLine]
    problems: list[tuple[int, str]]  # (line number, what is wrong) for lines not UTF-8 or not JSON
    torn: bool = False  # a torn last line was dropped (only with drop_torn_tail)


def read_json_lines(path: str | Path, *, drop_torn_tail: bool = False) -> JsonLines:
    """Every JSON value of a JSON-lines file with its line number; bad lines are listed, not raised.

    Lines are split at "\n" only (U+2028 inside a JSON string is not a line end). A last line with
    no newline after it that is not valid UTF-8 or JSON is a write cut short by a kill: with
    `drop_torn_tail` (checkpoints, the review session's decisions) it is dropped and `torn` set;
    otherwise it is a problem like any other.
    """
    data = Path(path).read_bytes()
    if data.startswith(BOM):
        data = data[len(BOM) :]
    raw_lines = data.split(b"\n")
    out = JsonLines([], [])
    offset = 0
    for n, raw in enumerate(raw_lines, 1):
        start, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        last = n == len(raw_lines)  # no newline after it
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            if last and drop_torn_tail:
                out.torn = True
                continue
            out.problems.append(utf8_problem(data, start + e.start))
            continue
        try:
            value = loads(text)
        except json.JSONDecodeError as e:
            if last and drop_torn_tail:
                out.torn = True
                continue
            out.problems.append((n, f"not JSON ({e.msg})"))
            continue
        out.lines.append(JsonLine(n, value, text))
    return out


def line_problems(problems: list[tuple[int, str]], n: int = 10) -> str:
    """`line 3: not JSON (...); line 7: ...`, in line order, the first `n` of them."""
    problems = sorted(problems)
    text = "; ".join(f"line {ln}: {what}" for ln, what in problems[:n])
    return text + (f"; ... (+{len(problems) - n} more)" if len(problems) > n else "")


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Raw rows of a JSONL, CSV, Parquet or Arrow file or a Hugging Face dataset folder.

    Malformed JSON lines and invalid UTF-8 are an error naming the file and the lines.
    """
    path = Path(path)
    if not path.exists():
        raise RecordsError(f"{path}: file not found")
    fmt = format_of(path)
    if fmt == "jsonl":
        got = read_json_lines(path)
        problems = got.problems + [
            (ln.number, "not a JSON object") for ln in got.lines if not isinstance(ln.value, dict)
        ]
        if problems:
            raise RecordsError(f"{path}: malformed JSONL ({len(problems)} lines): " + line_problems(problems))
        return [ln.value for ln in got.lines]
    if fmt in (DATASET, "arrow"):
        from classify.core import hfdataset  # imports pyarrow (and datasets for folders) only when needed

        return hfdataset.read_dataset(path) if fmt == DATASET else hfdataset.read_arrow(path)
    if fmt == "parquet":
        return _read_parquet(path)
    import pandas as pd

    text = decode_utf8(path.read_bytes(), path, RecordsError)
    try:
        df = pd.read_csv(io.StringIO(text), dtype=object, keep_default_na=False, na_values=[""])
    except Exception as e:  # pandas raises many types for broken files
        raise RecordsError(f"{path}: cannot read {fmt}: {e}") from e
    rows = []
    for raw in df.to_dict(orient="records"):
        row = {}
        for k, v in raw.items():
            v = _clean(v)
            row[str(k)] = tablecells.csv_value(k, unescape_formula(v) if isinstance(v, str) else v)
        rows.append(row)
    return rows


def _plain(v: Any) -> Any:
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    """Rows of a Parquet file with the column types it declares.

    Read through pyarrow, not pandas: pandas turns an integer column with a gap into floats (id 1
    becomes 1.0) and hides wrong types in object columns; here a list or bytes stays what it is and
    check_rows refuses it by name.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise RecordsError(f"{path}: cannot read parquet: {e}") from None
    # A DataFrame written with its index keeps it as a column named like this; it is not data.
    keep = [c for c in table.column_names if not re.fullmatch(r"__index_level_\d+__", c)]
    cols = tablecells.json_columns_of(table.schema)
    return [parquet_row(raw, cols) for raw in table.select(keep).to_pylist()]


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
    problems = []
    no_id = [i + 1 for i, r in enumerate(records) if not r.id]
    if no_id:
        problems.append(f"{len(no_id)} records without id (rows {_short(no_id)})")
    dup = sorted(k for k, c in Counter(r.id for r in records if r.id).items() if c > 1)
    if dup:
        problems.append(f"{len(dup)} duplicated ids: {_short(dup)}")
    empty = [r.id or f"row {i + 1}" for i, r in enumerate(records) if not (r.title.strip() or r.body.strip())]
    if empty:
        problems.append(f"{len(empty)} records with empty title and body: {_short(empty)}")
    if problems:
        raise RecordsError(f"{source}: " + "; ".join(problems))


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
    seen: Counter[str] = Counter()
    out = []
    for r in rows:
        h = content_id(r)
        seen[h] += 1
        out.append({"id": h if seen[h] == 1 else f"{h}-{seen[h]}", **r, ID_FROM: CONTENT_HASH})
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
    return out


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
    rows = list(rows)
    fmt = DATASET if dataset else output_format(path)
    if fmt in (DATASET, "arrow"):
        from classify.core import hfdataset

        if fmt == DATASET:
            hfdataset.write_dataset(path, rows)
        else:
            hfdataset.write_arrow(path, rows)
        return
    if fmt == "jsonl":
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
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
