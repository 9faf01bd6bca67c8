"""The gold file for a taxonomy: read it as labels, write a new version in the file's own encoding.

Two encodings exist. Label-valued gold (gold/reports.jsonl: `symptom: crash`, coder passes as
dicts) is read by classify.core.gold. The screening file (gold/screening.jsonl: `failure_report:
true/false`, coder passes as bare booleans) is read by classify.core.screening as the one-dimension
taxonomy `screening`. Which one a file holds follows from its taxonomy: a taxonomy with the
`screening` dimension is a screening taxonomy. Later review commands only know the queue's
taxonomy and gold paths, so the taxonomy is the one thing every command can decide by; the review
code loads and writes gold only through this module and never asks which kind it holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, get_args

from classify.core import paths, screening
from classify.core.errors import UsageError
from classify.core.gold import GoldSet, gold_from_records, load_gold
from classify.core.hfdataset import is_dataset_folder
from classify.core.jsonlines import line_problems, read_json_lines
from classify.core.records import FORMATS, RecordsError, read_rows, to_record
from classify.core.taxonomy import Taxonomy, load_taxonomy
from classify.core.writer import atomic_write_text, output_format, write_rows

# `labels` (symptom / root cause) or `screening` (failure or not); the command line offers these.
Task = Literal["labels", "screening"]
TASKS: tuple[str, ...] = get_args(Task)


def is_screening(tax: Taxonomy) -> bool:
    return screening.is_screening_taxonomy(tax)


def default_gold(tax: Taxonomy) -> Path:
    """The default gold for a taxonomy: gold/screening.jsonl for screening, else gold/reports.jsonl, of
    the project folder when it has one, else the shipped file (classify.core.paths)."""
    return paths.default_screening_gold() if is_screening(tax) else paths.default_gold()


def load_gold_for(path: str | Path | None, tax: Taxonomy) -> GoldSet:
    """The gold set of `path` (default: the taxonomy's default gold, default_gold) as labels of `tax`."""
    path = (path if isinstance(path, Path) else Path(path)) if path else default_gold(tax)  # a GoldFile stays one
    if is_screening(tax):
        return screening.load_screening_gold(path, tax)
    return load_gold(path, tax)


def load_task(
    task: str, taxonomy: str | Path | None = None, gold: str | Path | None = None
) -> tuple[Taxonomy, GoldSet]:
    """Taxonomy and gold set of a task: `labels` (symptom / root cause) or `screening` (failure
    report or not), each defaulting to the project folder's codebook and gold, else the shipped ones."""
    if task not in TASKS:
        raise UsageError(f"task must be one of {', '.join(TASKS)}, not {task!r}")
    tax = screening.screening_taxonomy(taxonomy) if task == "screening" else load_taxonomy(taxonomy)
    return tax, load_gold_for(gold, tax)


def gold_from_rows(rows: list[dict], tax: Taxonomy, source: str = "<new gold>") -> GoldSet:
    """Rows in a file's encoding, read the way load_gold_for would read them from disk."""
    records = [to_record(dict(r)) for r in json.loads(json.dumps(rows))]  # a copy: decoding edits fields
    if is_screening(tax):
        screening.decode_records(records)
    return gold_from_records(records, tax, source)


def file_rows(rows: list[dict], gold: GoldSet) -> list[dict]:
    """Label-valued rows (as the review computed them) in the encoding of `gold`'s file.

    Label-valued gold is written as it is. Screening rows go back to `failure_report` booleans row
    by row, following each row's original (classify.core.screening.file_row); ValueError lists every
    row whose label the file's encoding cannot hold.
    """
    if not is_screening(gold.taxonomy):
        return rows
    raw = {str(r.get("id")): r for r in read_rows(gold.path)} if gold.path else {}
    # new rows (added from unlabeled data) follow the file: booleans unless it holds `screening` labels
    boolean_file = not raw or any(screening.FIELD in r and screening.DIM not in r for r in raw.values())
    out, bad = [], []
    for r in rows:
        try:
            out.append(screening.file_row(r, raw.get(str(r["id"])), boolean_file))
        except ValueError as e:
            bad.append(f"{r['id']} ({e})")
    if bad:
        raise ValueError(
            f"{gold.path} codes screening as `{screening.FIELD}: true/false`, which holds only "
            f"{screening.PASS} and {screening.OTHER}; {len(bad)} rows have another label: {', '.join(bad[:10])}"
        )
    return out


def write_gold(path: Path, rows: list[dict], source: Path | None) -> None:
    """Write a new gold version; a row unchanged since `source` keeps its line byte for byte.

    So a diff between versions shows only the reviewed rows, whatever escaping the source used.
    A source that is a dataset folder gets a dataset folder as its next version (whatever the new
    path's spelling, e.g. `gold.v2` next to `gold/`), like write_rows does for a `.hf` path.
    """
    path = Path(path)
    if source is not None and is_dataset_folder(Path(source)) and Path(path).suffix.lower() not in FORMATS:
        write_rows(path, rows, dataset=True)
        return
    jsonl = output_format(path) == "jsonl"
    if not (jsonl and source and Path(source).is_file() and FORMATS.get(Path(source).suffix.lower()) == "jsonl"):
        write_rows(path, rows)
        return
    lines: dict[str, tuple[dict, str]] = {}
    got = read_json_lines(source)
    if got.problems:  # the source was read as gold before, so this is a file changed since
        raise RecordsError(f"{source}: malformed JSONL: {line_problems(got.problems)}")
    for ln in got.lines:
        if isinstance(ln.value, dict):
            lines[str(ln.value.get("id"))] = (ln.value, ln.text)
    text = []
    for r in rows:
        old = lines.get(str(r.get("id")))
        text.append(old[1] if old and old[0] == r else json.dumps(r, ensure_ascii=False))
    atomic_write_text(path, "".join(t + "\n" for t in text))
