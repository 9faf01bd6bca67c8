"""Screening: is a thread a concrete failure report? A one-dimension taxonomy like any other.

gold/screening.jsonl codes the call as a boolean, `failure_report: true/false`, and each coder
pass as a bare boolean (`coder_a: true`); the rest of the toolkit sees the taxonomy's labels,
`screening: failure_report | other`. This module owns both directions of that mapping: reading
(load_screening_gold) and writing a row back the way its file had it (file_row, used by
`classify review apply`), so a reviewed screening file keeps its own encoding.
"""

from __future__ import annotations

from pathlib import Path

from classify.core import paths
from classify.core.gold import GoldSet, gold_from_records
from classify.core.paths import PROJECT_ROOT
from classify.core.records import Record, RecordsError, read_records
from classify.core.taxonomy import Taxonomy, load_taxonomy

SCREENING_TAXONOMY = PROJECT_ROOT / "codebook" / "screening-v1.yaml"  # the shipped one
DIM = "screening"
PASS = "failure_report"
OTHER = "other"
FIELD = "failure_report"  # the boolean field of the screening file (named like the category it means)


def is_screening_taxonomy(tax: Taxonomy) -> bool:
    return DIM in tax.dimensions and PASS in tax.dimensions[DIM].ids


def screening_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """The screening codebook at `path`; by default codebook/screening-v1.yaml of the project folder,
    else the shipped one (classify.core.paths)."""
    tax = load_taxonomy(path or paths.default_screening_taxonomy())
    if not is_screening_taxonomy(tax):
        raise RecordsError(f"{tax.path}: a screening taxonomy needs dimension {DIM!r} with category {PASS!r}")
    return tax


def _as_label(v):
    """gold/screening.jsonl codes `failure_report: true/false`; map it to the taxonomy's ids."""
    if isinstance(v, bool):
        return PASS if v else OTHER
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return PASS if v.lower() == "true" else OTHER
    return v


def as_boolean(label: str | None) -> bool | None:
    """The inverse of _as_label; ValueError for a label the boolean cannot hold (a category added in review)."""
    if label is None:
        return None
    if label == PASS:
        return True
    if label == OTHER:
        return False
    raise ValueError(f"{label!r} has no true/false form")


def _is_boolean(v) -> bool:
    return isinstance(v, bool) or (isinstance(v, str) and v.lower() in ("true", "false"))


def decode_records(records: list[Record]) -> list[Record]:
    """Give each record a `screening` label (and each coder pass a {screening: ...} dict), in place."""
    for r in records:
        f = r.fields
        if DIM not in f and FIELD in f:
            f[DIM] = _as_label(f[FIELD])
        for ck in [k for k in f if k.startswith("coder_")]:
            v = f[ck]
            if isinstance(v, dict):
                if DIM not in v and FIELD in v:
                    f[ck] = {**v, DIM: _as_label(v[FIELD])}
            elif v is not None:
                f[ck] = {DIM: _as_label(v)}
    return records


def load_screening_gold(path: str | Path | None = None, taxonomy: Taxonomy | None = None) -> GoldSet:
    """Read screening gold: rows with `screening` labels, or `failure_report` booleans (and coder passes).
    Default: gold/screening.jsonl of the project folder, else the shipped one."""
    path = Path(path or paths.default_screening_gold())
    taxonomy = taxonomy or screening_taxonomy()
    return gold_from_records(decode_records(read_records(path)), taxonomy, path)


def _value(label: str | None, was, boolean: bool):
    """One screening value in the form the file had: unchanged, exactly `was`; changed, a boolean
    where the file had one, else the label."""
    if was is not None and _as_label(was) == label:
        return was
    return as_boolean(label) if boolean else label


def file_row(row: dict, raw: dict | None, boolean_file: bool) -> dict:
    """A row as decode_records made it (labels), back in the encoding its row in the file (`raw`) had.

    Each field is written the way it was read: a `failure_report` boolean stays a boolean (updated to
    the label), a native `screening` label stays a label, a bare-boolean coder pass stays a bare
    boolean; an unchanged value is written exactly as it was. Where a row had both fields, both are
    updated, so they never disagree. A new row (no `raw`) takes the file's encoding: booleans when
    `boolean_file`. Raises ValueError for a label the boolean cannot hold.
    """
    out = dict(row)  # assigned in place below: keys keep the file's order
    label = out.get(DIM)
    was = raw or {}
    # A row without either field (new, or unlabeled in the file) takes the file's encoding.
    own = raw is not None and (FIELD in was or DIM in was)
    has_field = FIELD in was if own else boolean_file
    has_dim = DIM in was if own else not boolean_file
    if has_dim:
        out[DIM] = _value(label, was.get(DIM), boolean=False)
    elif FIELD not in out:  # a new row: the boolean takes the label's place
        out = {(FIELD if k == DIM else k): v for k, v in out.items()}
    else:
        out.pop(DIM, None)  # added by decode_records, not the file's
    if has_field:
        out[FIELD] = _value(label, was.get(FIELD), boolean=True)
    for ck in [k for k in out if k.startswith("coder_")]:
        v, cw = out[ck], was.get(ck)
        if not isinstance(v, dict) or DIM not in v:
            continue  # no screening call in this pass
        lab = v[DIM]
        if isinstance(cw, dict):  # a pass with several fields ({failure_report: true, symptom: ...})
            c = dict(v)
            if DIM not in cw:
                del c[DIM]
            if FIELD in cw:
                c[FIELD] = _value(lab, cw.get(FIELD), boolean=True)
            out[ck] = c
        else:  # a bare value: true/false, or a label
            out[ck] = _value(lab, cw, boolean=_is_boolean(cw) or (cw is None and boolean_file))
    return out
