"""Gold sets: coded issue records validated against a taxonomy."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from classify.core.records import Record, RecordsError, _short, read_records
from classify.core.taxonomy import Taxonomy


class GoldError(RecordsError):
    """A gold file does not fit its taxonomy (unknown or missing labels); lists the offending ids."""


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
            problems.append(f"missing {dim!r} label for {len(missing)} records: {_short(missing)}")
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
    ids, unknown or missing labels."""
    records = read_records(path)
    return gold_from_records(records, taxonomy, path)
