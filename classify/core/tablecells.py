"""Nested values (objects, lists) in the cells of a flat table (CSV, Parquet) as JSON text, read back
as they were written: a string stays a string even when it looks like JSON (`{"a": 1}`, `[1]`).

- Parquet: the schema metadata names the columns holding JSON text (`JSON_COLUMNS_KEY`). In such a
  column a string that starts with `{`, `[` or `"` is written JSON-quoted, so every cell starting
  with one of them is JSON; other columns are never decoded.
- CSV (no metadata): a string starting with `{` or `[` gets a leading `'` (a spreadsheet's own
  "this is text", as formula cells get one), which the reader strips instead of decoding.
- Files without these marks (written before them, or by other tools): the old rule, any cell but
  the free-text fields that parses as a JSON object or list is one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from classify.core.jsontext import loads

JSON_COLUMNS_KEY = b"classify.json_columns"
_FREE_TEXT = ("title", "body", "discussion")
_CSV_TEXT = re.compile(r"^'*[{\[]")  # written with one more leading '
_CSV_MARKED = re.compile(r"^'+[{\[]")


def _decoded(v: str) -> Any:
    try:
        return loads(v)
    except json.JSONDecodeError:
        return v


def legacy_value(key: Any, v: Any) -> Any:
    """A cell of a file without the marks: JSON object or list text is read as one."""
    if isinstance(v, str) and v[:1] in "{[" and key not in _FREE_TEXT:
        return _decoded(v)
    return v


# ---------------------------------------------------------------------------------------------
# Parquet


def json_columns(rows: Iterable[dict[str, Any]]) -> list[str]:
    """The columns with an object or list in some row: they are written as JSON text."""
    return list(dict.fromkeys(k for r in rows for k, v in r.items() if isinstance(v, (dict, list))))


def parquet_cells(row: dict[str, Any], columns: Iterable[str]) -> dict[str, Any]:
    """`row` as Parquet cells: in the JSON `columns`, objects, lists and JSON-looking strings as JSON text."""
    cols = set(columns)

    def cell(k: str, v: Any) -> Any:
        if k in cols and (isinstance(v, (dict, list)) or (isinstance(v, str) and v[:1] in '{["')):
            return json.dumps(v, ensure_ascii=False)
        return v

    return {k: cell(k, v) for k, v in row.items()}


def with_json_columns(table: Any, columns: list[str]) -> Any:
    """The pyarrow `table` with its JSON columns named in the schema metadata (an empty list too:
    then no cell of the file is JSON)."""
    return table.replace_schema_metadata({**(table.schema.metadata or {}), JSON_COLUMNS_KEY: json.dumps(columns)})


def json_columns_of(schema: Any) -> frozenset[str] | None:
    """The JSON columns a pyarrow schema names; None for a file without the mark (`legacy_value`)."""
    raw = (schema.metadata or {}).get(JSON_COLUMNS_KEY)
    if raw is None:
        return None
    try:
        cols = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return frozenset(c for c in cols if isinstance(c, str)) if isinstance(cols, list) else None


def parquet_value(key: Any, v: Any, columns: frozenset[str] | None) -> Any:
    """A Parquet cell as written: decoded only in a JSON column (or by the old rule in an unmarked file)."""
    if columns is None:
        return legacy_value(key, v)
    if key in columns and isinstance(v, str) and v[:1] in '{["':
        return _decoded(v)
    return v


# ---------------------------------------------------------------------------------------------
# CSV


def csv_text(text: str) -> str:
    """A string as a CSV cell the reader does not take for JSON (undone by csv_value)."""
    return "'" + text if _CSV_TEXT.match(text) else text


def csv_value(key: Any, v: Any) -> Any:
    """A CSV cell (formula escape already undone) as written: marked text, else JSON or plain."""
    if isinstance(v, str) and _CSV_MARKED.match(v):
        return v[1:]
    return legacy_value(key, v)
