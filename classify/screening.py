"""Screening: is a thread a concrete failure report? A one-dimension taxonomy like any other."""

from __future__ import annotations

from pathlib import Path

from classify.gold import GoldSet, gold_from_records
from classify.paths import DEFAULT_SCREENING, PROJECT_ROOT
from classify.records import RecordsError, read_records
from classify.taxonomy import Taxonomy, load_taxonomy

SCREENING_TAXONOMY = PROJECT_ROOT / "codebook" / "screening-v1.yaml"
DIM = "screening"
PASS = "failure_report"


def screening_taxonomy(path: str | Path | None = None) -> Taxonomy:
    tax = load_taxonomy(path or SCREENING_TAXONOMY)
    if DIM not in tax.dimensions or PASS not in tax.dimensions[DIM].ids:
        raise RecordsError(f"{tax.path}: a screening taxonomy needs dimension {DIM!r} with category {PASS!r}")
    return tax


def _as_label(v):
    """gold/screening.jsonl codes `failure_report: true/false`; map it to the taxonomy's ids."""
    if isinstance(v, bool):
        return PASS if v else "other"
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return PASS if v.lower() == "true" else "other"
    return v


def load_screening_gold(path: str | Path | None = None, taxonomy: Taxonomy | None = None) -> GoldSet:
    """Read screening gold: rows with `screening` labels, or `failure_report` booleans (and coder passes)."""
    path = Path(path or DEFAULT_SCREENING)
    taxonomy = taxonomy or screening_taxonomy()
    records = read_records(path)
    for r in records:
        f = r.fields
        if DIM not in f and "failure_report" in f:
            f[DIM] = _as_label(f["failure_report"])
        for ck in [k for k in f if k.startswith("coder_")]:
            v = f[ck]
            if isinstance(v, dict):
                if DIM not in v and "failure_report" in v:
                    f[ck] = {**v, DIM: _as_label(v["failure_report"])}
            elif v is not None:
                f[ck] = {DIM: _as_label(v)}
    return gold_from_records(records, taxonomy, path)
