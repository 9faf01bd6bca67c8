"""Import issues without the API: `gh` CLI JSON exports, and tables (CSV/JSONL/Parquet) with a
column mapping. Also reads URL lists (plain text, or a table with a URL column) for fetching."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from classify.core.jsontext import MAX_JSON_DEPTH, too_deep_at
from classify.core.records import (
    CORE_FIELDS,
    FORMATS,
    ID_FROM,
    RecordsError,
    read_rows,
    row_problems,
    with_content_ids,
)
from classify.core.textio import read_text
from classify.ingest.normalize import (
    RefError,
    gh_cli_issue_to_row,
    issue_id,
    parse_issue_ref,
    parse_repo,
    rest_issue_to_row,
)

log = logging.getLogger("classify.fetch")


def _json_values(text: str, source: str) -> list[Any]:
    """All JSON values in a file: one array/object, JSON lines, or arrays back to back
    (`gh api --paginate` prints one array per page)."""
    dec = json.JSONDecoder()
    values: list[Any] = []
    i, n = 0, len(text)
    deep = too_deep_at(text)
    if deep is not None:
        line = text.count("\n", 0, deep) + 1
        raise RecordsError(f"{source}: invalid JSON at line {line}: nested deeper than {MAX_JSON_DEPTH} levels")
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return values
        try:
            value, i = dec.raw_decode(text, i)
        except json.JSONDecodeError as e:
            line = text.count("\n", 0, e.pos) + 1
            raise RecordsError(f"{source}: invalid JSON at line {line}: {e.msg}") from None
        values.append(value)


def import_gh_json(path: str | Path, repo: str | None = None, skip_bot_comments: bool = False) -> list[dict[str, Any]]:
    """Rows from `gh issue list --json number,title,body,url,createdAt,comments,...` output.

    Also takes `gh issue view --json` (one object) and REST API JSON (`gh api --paginate
    repos/O/N/issues`), where pull requests are skipped and comments are absent.
    """
    path = Path(path)
    if not path.exists():
        raise RecordsError(f"{path}: file not found")
    items: list[Any] = []
    for v in _json_values(read_text(path, RecordsError), str(path)):
        items.extend(v if isinstance(v, list) else [v])
    rows, bad, prs, no_comments = [], [], 0, 0
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict):
            bad.append(f"item {n}: not a JSON object")
            continue
        try:
            if "html_url" in item:  # REST shape
                if "pull_request" in item:
                    prs += 1
                    continue
                no_comments += bool(item.get("comments"))
                rows.append(rest_issue_to_row(item, [], skip_bot_comments))
            else:
                if "isPullRequest" in item and item["isPullRequest"]:
                    prs += 1
                    continue
                rows.append(gh_cli_issue_to_row(item, repo, skip_bot_comments))
        except (RefError, KeyError, TypeError, ValueError) as e:
            bad.append(f"item {n}: {e}")
    if bad:
        raise RecordsError(f"{path}: {len(bad)} unusable items: " + "; ".join(bad[:10]))
    if prs:
        log.warning("%s: skipped %d pull requests", path, prs)
    if no_comments:
        log.warning(
            "%s: %d issues have comments that REST list exports do not include; use `classify fetch urls` to get them",
            path,
            no_comments,
        )
    return rows


def parse_mapping(specs: list[str]) -> dict[str, str]:
    """["title=Title,body=Description", "url=Link"] -> {"title": "Title", "body": "Description", "url": "Link"}."""
    mapping: dict[str, str] = {}
    for spec in specs:
        for part in spec.split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise ValueError(f"bad mapping {part!r}: use FIELD=COLUMN, e.g. title=Title")
            target, source = (s.strip() for s in part.split("=", 1))
            if not target or not source:
                raise ValueError(f"bad mapping {part!r}: use FIELD=COLUMN, e.g. title=Title")
            if target in mapping and mapping[target] != source:
                raise ValueError(f"field {target!r} mapped twice ({mapping[target]!r} and {source!r})")
            mapping[target] = source
    return mapping


def import_table(
    path: str | Path,
    mapping: dict[str, str] | None = None,
    repo: str | None = None,
    keep_unmapped: bool = True,
) -> list[dict[str, Any]]:
    """Rows from a CSV/JSONL/Parquet table whose columns are renamed by `mapping` (field -> column).

    Missing ids are derived from `url` (`https://github.com/O/N/issues/7` -> `n-7`) or from repo
    and number (`repo` column, or the `repo` argument for the whole table). Unmapped columns are
    kept as extra fields (labels, notes) unless keep_unmapped is False.
    """
    path = Path(path)
    mapping = dict(mapping or {})
    raw = read_rows(path)
    columns: list[str] = []
    for r in raw:
        columns.extend(k for k in r if k not in columns)
    missing = sorted(set(mapping.values()) - set(columns))
    if missing:
        raise RecordsError(f"{path}: mapped columns not found: {missing}; columns are: {columns}")
    sources = set(mapping.values())
    default_owner_name = parse_repo(repo) if repo else None
    id_column = mapping.get("id", "id") in columns
    rows, bad = [], []
    no_identity: list[dict[str, Any]] = []  # rows with no id column, url or repo+number: ids from content
    for n, r in enumerate(raw, 1):
        row: dict[str, Any] = {}
        for k, v in r.items():
            # A mapped column moves to its field; an unmapped column named like a mapped field is shadowed.
            if k in sources or k in mapping or (not keep_unmapped and k not in CORE_FIELDS):
                continue
            row[k] = v
        for target, source in mapping.items():
            row[target] = r.get(source)
        wrong = row_problems(row)  # a list title or a boolean id is refused, not stringified below
        if wrong:
            bad.append(f"row {n}: {'; '.join(wrong)}")
            continue
        try:
            identified = _fill_identity(row, default_owner_name)
        except (RefError, ValueError) as e:
            bad.append(f"row {n}: {e}")
            continue
        if not identified and (id_column or row.get("number") not in (None, "")):
            # an id column with a gap, or a number without its repository: a mistake, not a file without ids
            hint = " (a number needs its repository: a repo column or --repo)" if not id_column else ""
            bad.append(f"row {n}: no id column value, and no url or repo+number to derive one from{hint}")
            continue
        for k in ("title", "body", "discussion"):
            row[k] = "" if row.get(k) is None else str(row[k])
        row.setdefault("source", "table")
        rows.append(row)
        if not identified:
            no_identity.append(row)
    if bad:
        raise RecordsError(f"{path}: {len(bad)} unusable rows: " + "; ".join(bad[:10]))
    for row, derived in zip(
        no_identity, with_content_ids([{k: v for k, v in r.items() if k != "id"} for r in no_identity], path)
    ):
        row["id"], row[ID_FROM] = derived["id"], derived[ID_FROM]
    return [{**{k: row.get(k) for k in CORE_FIELDS}, **row} for row in rows]


def _fill_identity(row: dict[str, Any], default_repo: tuple[str, str] | None) -> bool:
    """Give `row` its id (as given, else from url or repo + number); False when nothing names it."""
    url = row.get("url")
    if url:
        owner, name, number, _ = parse_issue_ref(str(url))
        if row.get("repo") in (None, ""):
            row["repo"] = f"{owner}/{name}"
        if row.get("number") in (None, ""):
            row["number"] = number
    if row.get("repo") in (None, "") and default_repo:
        row["repo"] = "/".join(default_repo)
    if row.get("number") not in (None, ""):
        row["number"] = _issue_number(row["number"])
    if row.get("id") in (None, ""):
        if not row.get("repo") or row.get("number") is None:
            return False
        row["id"] = issue_id(parse_repo(str(row["repo"]))[1], row["number"])
    row["id"] = str(row["id"])
    return True


def _issue_number(v: Any) -> int:
    """An issue number from a cell: an integer, or text/float holding one exactly (`7`, `7.0`);
    `True` or `7.5` are refused rather than read as 1 or 7."""
    if isinstance(v, bool):
        raise ValueError(f"number {v!r} is not an integer")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            v = float(v.strip())  # a spreadsheet may have written 13 as "13.0"
        except ValueError:
            raise ValueError(f"number {v!r} is not an integer") from None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    raise ValueError(f"number {v!r} is not an integer")


def read_issue_refs(path: str | Path, url_column: str = "url") -> list[tuple[str, dict[str, Any]]]:
    """Issue references to fetch, with the other columns of their row as extra fields.

    A `.txt` file (or any non-table) holds one URL / `owner/name#N` per line (# comments allowed);
    a table (CSV/JSONL/Parquet/Arrow or a dataset folder) needs a `url_column`, and its other columns
    (labels) travel along.
    """
    path = Path(path)
    if not path.exists():
        raise RecordsError(f"{path}: file not found")
    if path.suffix.lower() not in FORMATS and not path.is_dir():  # a folder: a Hugging Face dataset
        refs: list[tuple[str, dict[str, Any]]] = []
        for line in read_text(path, RecordsError).splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                refs.append((line, {}))
        return refs
    rows = read_rows(path)
    if rows and not any(url_column in r for r in rows):
        raise RecordsError(
            f"{path}: no column {url_column!r}; columns are: {sorted({k for r in rows for k in r})} (use --url-column)"
        )
    out, blank = [], []
    for n, r in enumerate(rows, 1):
        ref = r.get(url_column)
        if ref in (None, ""):
            blank.append(n)
            continue
        out.append((str(ref).strip(), {k: v for k, v in r.items() if k != url_column}))
    if blank:
        raise RecordsError(f"{path}: {len(blank)} rows with an empty {url_column!r}: rows {blank[:20]}")
    return out
