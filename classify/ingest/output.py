"""Write fetched rows: validated, merged by id into an existing file, written atomically."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from classify.core.records import CORE_FIELDS, check_rows, read_rows, to_record, validate_records
from classify.core.writer import write_rows


@dataclass
class WriteSummary:
    path: Path
    total: int
    new: int
    updated: int
    unchanged: int
    kept: int  # rows of the existing file that this fetch did not return

    def __str__(self) -> str:
        s = f"wrote {self.total} records to {self.path} ({self.new} new, {self.updated} updated, {self.unchanged} unchanged"
        return s + (f", {self.kept} kept from the existing file)" if self.kept else ")")


def _ordered(row: dict[str, Any]) -> dict[str, Any]:
    return {**{k: row.get(k) for k in CORE_FIELDS}, **{k: v for k, v in row.items() if k not in CORE_FIELDS}}


def _same_row(a: dict[str, Any], b: dict[str, Any]) -> bool:
    # CSV gives cells back as strings and empty cells as None: 12 == "12", "" == None.
    def norm(v: Any) -> str:
        return "" if v is None else str(v)

    return a.keys() == b.keys() and all(a[k] == b[k] or norm(a[k]) == norm(b[k]) for k in a)


def write_fetched(path: str | Path, rows: list[dict[str, Any]], overwrite: bool = False) -> WriteSummary:
    """Write rows to `path` (.jsonl/.csv/.parquet).

    By default an existing file is merged by id: fetched fields replace the stored ones, fields
    only the stored row has (labels added later, notes) are kept, rows not fetched this time stay,
    new rows are appended. `overwrite` replaces the file with exactly `rows`.
    """
    path = Path(path)
    check_rows(rows, "fetched rows")
    validate_records([to_record(r) for r in rows], "fetched rows")
    rows = [_ordered(r) for r in rows]
    if overwrite or not path.exists():
        write_rows(path, rows)
        return WriteSummary(path, len(rows), len(rows), 0, 0, 0)
    existing = read_rows(path)
    check_rows(existing, path)
    validate_records([to_record(r) for r in existing], path)
    index = {str(r["id"]): i for i, r in enumerate(existing)}
    merged = list(existing)
    new = updated = unchanged = 0
    for row in rows:
        i = index.get(row["id"])
        if i is None:
            merged.append(row)
            new += 1
            continue
        combined = {**merged[i], **row}
        if _same_row(combined, merged[i]):
            unchanged += 1
        else:
            updated += 1
        merged[i] = combined
    write_rows(path, merged)
    return WriteSummary(path, len(merged), new, updated, unchanged, len(existing) - updated - unchanged)
