"""Issue records: read JSONL / CSV / Parquet, validate ids and text, write atomically."""

from __future__ import annotations

from classify.core.errors import ClassifyError
import json
import math
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

CORE_FIELDS = ("id", "repo", "number", "url", "title", "body", "discussion", "created_at")
FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


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
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise RecordsError(f"{path}: unknown file type {path.suffix!r} (use .jsonl, .csv or .parquet)")
    return fmt


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Read raw rows from JSONL, CSV or Parquet; malformed JSON lines are an error with line numbers."""
    path = Path(path)
    if not path.exists():
        raise RecordsError(f"{path}: file not found")
    fmt = format_of(path)
    if fmt == "jsonl":
        rows, bad = [], []
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    bad.append(f"line {n}: {e.msg}")
                    continue
                if not isinstance(obj, dict):
                    bad.append(f"line {n}: not a JSON object")
                    continue
                rows.append(obj)
        if bad:
            raise RecordsError(f"{path}: malformed JSONL ({len(bad)} lines): " + "; ".join(bad[:10]))
        return rows
    import pandas as pd

    try:
        df = pd.read_csv(path, dtype=object, keep_default_na=False, na_values=[""]) if fmt == "csv" else pd.read_parquet(path)
    except Exception as e:  # pandas raises many types for broken files
        raise RecordsError(f"{path}: cannot read {fmt}: {e}") from e
    rows = []
    for raw in df.to_dict(orient="records"):
        row = {}
        for k, v in raw.items():
            v = _clean(v)
            # Nested values (coder passes) survive a CSV round trip as JSON strings.
            if isinstance(v, str) and v[:1] in "{[" and k not in ("title", "body", "discussion"):
                try:
                    v = json.loads(v)
                except json.JSONDecodeError:
                    pass
            row[str(k)] = v
        rows.append(row)
    return rows


def to_record(row: dict[str, Any]) -> Record:
    rid = row.get("id")
    number = _clean(row.get("number"))
    try:
        number = int(number) if number not in (None, "") else None
    except (TypeError, ValueError):
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


def read_records(path: str | Path, validate: bool = True) -> list[Record]:
    records = [to_record(r) for r in read_rows(path)]
    if validate:
        validate_records(records, path)
    return records


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write via a temp file in the same folder + rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a data file gets the usual permissions
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_rows(path: str | Path, rows: Iterable[dict[str, Any]]) -> None:
    """Write rows atomically in the format given by the extension (JSONL by default)."""
    path = Path(path)
    rows = list(rows)
    fmt = FORMATS.get(path.suffix.lower(), "jsonl")
    if fmt == "jsonl":
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        return
    import pandas as pd

    flat = [{k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in r.items()} for r in rows]
    df = pd.DataFrame(flat)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o666 & ~_umask())
    os.close(fd)
    try:
        if fmt == "csv":
            df.to_csv(tmp, index=False)
        else:
            df.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
