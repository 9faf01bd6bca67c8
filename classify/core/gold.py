"""Gold sets: coded issue records validated against a taxonomy."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from classify.core.records import CORE_FIELDS, ID_FROM, Record, RecordsError, _short, read_records
from classify.core.taxonomy import Taxonomy

log = logging.getLogger("classify")


class GoldError(RecordsError):
    """A gold file does not fit its taxonomy (unknown or missing labels); lists the offending ids."""


LABEL_COLUMN_OPTION = "--label-column"
# Fields that records carry besides labels (fetched metadata, review notes): never label columns.
NOT_LABELS = {"state", "state_reason", "source", "author", "labels", "closed_at", "updated_at", "requested_url"}
NOT_LABELS |= {"adjudication_note", "coded_by", "notes", "note", ID_FROM}
_LABEL_LIKE = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")  # how category ids are spelled


def parse_label_columns(specs: list[str] | None) -> dict[str, str]:
    """["issue_type=label"] (or "a=x,b=y") -> {"issue_type": "label"}: DIMENSION=COLUMN pairs."""
    out: dict[str, str] = {}
    for spec in specs or []:
        for part in spec.split(","):
            dim, eq, col = (x.strip() for x in part.partition("="))
            if not part.strip():
                continue
            if not (eq and dim and col):
                raise GoldError(f"{LABEL_COLUMN_OPTION} {part!r}: use DIMENSION=COLUMN, e.g. issue_type=label")
            if out.get(dim, col) != col:
                raise GoldError(f"{LABEL_COLUMN_OPTION}: dimension {dim!r} given twice ({out[dim]!r} and {col!r})")
            out[dim] = col
    return out


class GoldFile(type(Path())):  # type: ignore[misc]
    """A gold (or --test) file, with which of its columns hold which dimension's labels.

    A path like any other wherever gold paths travel (run_eval, label_file, metadata); load_gold
    reads the columns given here as the dimensions they name (`issue_type` from column `label`).
    Path itself cannot be subclassed before Python 3.12, hence the concrete class as the base.
    """

    label_columns: dict[str, str]

    def __new__(cls, path: str | Path, label_columns: dict[str, str] | None = None):  # noqa: D102
        self = super().__new__(cls, path)
        self.label_columns = dict(label_columns or {})
        return self


def label_columns_of(path: Any) -> dict[str, str]:
    return dict(getattr(path, "label_columns", None) or {})


def _columns(records: list[Record]) -> list[str]:
    """The columns the file had: record fields with a value somewhere, and every extra field."""
    core = [k for k in CORE_FIELDS if any(getattr(r, k) not in (None, "") for r in records)]
    return core + [k for k in dict.fromkeys(k for r in records for k in r.fields) if k != ID_FROM]


def apply_label_columns(
    records: list[Record], mapping: dict[str, str], taxonomy: Taxonomy, source: str | Path
) -> list[Record]:
    """Read column `mapping[dim]` as the labels of `dim`, in place (the column itself is dropped)."""
    if not mapping:
        return records
    columns = _columns(records)
    for dim, col in mapping.items():
        if dim not in taxonomy.dimensions:
            raise GoldError(
                f"{LABEL_COLUMN_OPTION} {dim}={col}: {dim!r} is not a dimension of {taxonomy.label} "
                f"(dimensions: {', '.join(taxonomy.dimension_ids)})"
            )
        if col not in columns:
            raise GoldError(
                f"{source}: {LABEL_COLUMN_OPTION} {dim}={col}: no column {col!r}; columns are: {', '.join(columns)}"
            )
        clash = [r.id for r in records if dim in r.fields and col in r.fields and r.fields[dim] != r.fields[col]]
        if clash and col != dim:
            raise GoldError(
                f"{source}: both {dim!r} and {col!r} hold {dim} labels, and they differ for {len(clash)} records: "
                f"{_short(clash)}"
            )
    for r in records:
        for dim, col in mapping.items():
            if col in r.fields:
                r.fields[dim] = r.fields.pop(col) if col != dim else r.fields[col]
    return records


def stray_label_fields(records: list[Record], taxonomy: Taxonomy) -> list[str]:
    """Fields that look like labels of a dimension the taxonomy does not have: a key of the coder
    passes, or a column whose values are all short category-like ids (at most half of them distinct)."""
    dims = set(taxonomy.dimension_ids)
    found = {
        k
        for r in records
        for ck, v in r.fields.items()
        if ck.startswith("coder_") and isinstance(v, dict)
        for k in v
        if k not in dims
    }
    for k in {k for r in records for k in r.fields} - dims - NOT_LABELS - set(CORE_FIELDS):
        if k.startswith("coder_") or any(k.startswith(f"{d}_") for d in dims):
            continue
        values = [r.fields.get(k) for r in records if r.fields.get(k) is not None]
        if (
            values
            and all(isinstance(v, str) and len(v) <= 40 and _LABEL_LIKE.match(v) for v in values)
            and len(set(values)) <= max(2, len(values) // 2)
        ):
            found.add(k)
    return sorted(found)


@dataclass
class GoldSet:
    records: list[Record]
    taxonomy: Taxonomy
    # dimension -> one label per record (None: the coders found no label, e.g. cause not shown)
    labels: dict[str, list[str | None]]
    # coder name -> dimension -> labels, when the file holds independent passes (coder_a, coder_b)
    coders: dict[str, dict[str, list[str | None]]] = field(default_factory=dict)
    path: Path | None = None
    hash: str = ""

    def __len__(self) -> int:
        return len(self.records)

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.records]

    def labeled(self, dim: str) -> tuple[list[int], list[str]]:
        """Indices and labels of the records that have a label for `dim` (null is not a class)."""
        pairs = [(i, y) for i, y in enumerate(self.labels[dim]) if y is not None]
        return [i for i, _ in pairs], [y for _, y in pairs]

    def n_missing(self, dim: str) -> int:
        return sum(1 for y in self.labels[dim] if y is None)


def content_hash(records: list[Record], labels: dict[str, list]) -> str:
    """Hash of ids, texts and labels: identical gold content gives the same hash in any format."""
    h = hashlib.sha256()
    for i, r in enumerate(records):
        row = [r.id, r.title, r.body, r.discussion] + [labels[d][i] for d in sorted(labels)]
        h.update(json.dumps(row, ensure_ascii=False).encode())
    return h.hexdigest()[:12]


def gold_from_records(records: list[Record], taxonomy: Taxonomy, source: str | Path = "<gold>") -> GoldSet:
    problems: list[str] = []
    labels: dict[str, list] = {}
    for dim in taxonomy.dimension_ids:
        missing = [r.id for r in records if dim not in r.fields]
        if missing:
            others = [c for c in _columns(records) if c not in taxonomy.dimensions and c not in CORE_FIELDS]
            problems.append(
                f"missing {dim!r} label for {len(missing)} records: {_short(missing)} (the other columns are: "
                f"{', '.join(others) or 'none'}; a label column of another name: {LABEL_COLUMN_OPTION} {dim}=COLUMN)"
            )
        unknown = defaultdict(list)
        for r in records:
            y = r.fields.get(dim)
            if y is not None and taxonomy.validate_label(dim, y):
                unknown[str(y)].append(r.id)
        for y, ids in sorted(unknown.items()):
            problems.append(
                f"unknown {dim} label {y!r} (not in {taxonomy.label}) for {len(ids)} records: {_short(ids)}"
            )
        labels[dim] = [r.fields.get(dim) for r in records]

    coders: dict[str, dict[str, list]] = {}
    coder_keys = sorted(
        {k for r in records for k, v in r.fields.items() if k.startswith("coder_") and isinstance(v, dict)}
    )
    for ck in coder_keys:
        name = ck[len("coder_") :]
        coders[name] = {}
        for dim in taxonomy.dimension_ids:
            vals = []
            bad = []
            for r in records:
                c = r.fields.get(ck)
                y = c.get(dim) if isinstance(c, dict) else None
                if y is not None and taxonomy.validate_label(dim, y):
                    bad.append(r.id)
                vals.append(y)
            if bad:
                problems.append(f"unknown {dim} label in {ck} for {len(bad)} records: {_short(bad)}")
            coders[name][dim] = vals
    if problems:
        raise GoldError(f"{source}: " + "; ".join(problems))
    return GoldSet(
        records=records,
        taxonomy=taxonomy,
        labels=labels,
        coders=coders,
        path=Path(source) if not str(source).startswith("<") else None,
        hash=content_hash(records, labels),
    )


def load_gold(path: str | Path, taxonomy: Taxonomy) -> GoldSet:
    """Read a gold file (JSONL/CSV/Parquet/Arrow or a Hugging Face dataset folder); refuse duplicate
    ids, unknown or missing labels. A GoldFile's label columns are read as the dimensions they name;
    fields that look like labels of a dimension the taxonomy lacks get a warning (they are not used)."""
    records = apply_label_columns(read_records(path), label_columns_of(path), taxonomy, path)
    stray = stray_label_fields(records, taxonomy)
    if stray:
        log.warning(
            "%s: %s look%s like labels, but %s has no such dimension (it has: %s); %s not used",
            path,
            ", ".join(repr(s) for s in stray),
            "s" if len(stray) == 1 else "",
            taxonomy.label,
            ", ".join(taxonomy.dimension_ids),
            "it is" if len(stray) == 1 else "they are",
        )
    return gold_from_records(records, taxonomy, path)
