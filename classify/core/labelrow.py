"""The labels row: one row per record of a labels file (`classify run`, `classify merge`), its fields,
its status words, and how it is written and read. Every writer (labeling.resumable, labeling.routing,
labeling.pipeline, labeling.merge) and reader (the corpus report, the review queue) goes through here.

Per dimension `d` (a taxonomy dimension, its group level `d_group`, a derived `d_shown` decision, or
`screening`):

    d                the label given; None where none is given (`d_status` says why)
    d_confidence     the model's confidence in its answer, in [0, 1]
    d_proba          the model's own class probabilities (uncalibrated; the report calibrates them)
    d_rationale      an LLM's reason, when it gave one
    d_status         who gives the label (`Status`); absent in a run without targets: the model does
    d_suggestion     routed runs: the model's answer, also where the label is left to people
    d_invalid        True where the model gave no valid answer; `d_raw` then holds what it said
    d_coded_by       merge: the people who coded the label; `d_by` says who made it, in words
    d_taxonomy       a dimension labeled against its own taxonomy (`screening`), else the row's
    d_model          a dimension labeled by its own model (`screening`), else the row's

Whether an answer was valid and who gives the label are two facts (a routed run sends an invalid
answer to review), so invalidity is a flag, never a status word. Rows written before this module
said `d_status: "invalid"`; `is_invalid` reads that too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, TypedDict

from classify.core import labelparts
from classify.core.causeshown import NONE_SHOWN
from classify.core.errors import ClassifyError
from classify.core.records import RecordsError, read_rows
from classify.core.screening import DIM as SCREENING
from classify.core.screening import PASS as FAILURE_REPORT
from classify.core.taxonomy import Taxonomy

_LEGACY_INVALID = "invalid"  # a status word of rows written before the `d_invalid` flag


class Status(str, Enum):
    """`d_status`: who gives a row's label for `d`."""

    AUTO = "auto"  # the model, alone: its confidence passed the threshold for the target kappa
    REVIEW = "review"  # people: the model's answer is only a suggestion (`d_suggestion`)
    NONE_SHOWN = NONE_SHOWN  # the model, alone: the thread shows no such thing (no label)
    SCREENED_OUT = "screened_out"  # nobody: screening found no failure report (routed runs say so)
    CODED = "coded"  # people coded it (`classify merge`)

    def __str__(self) -> str:
        return self.value


ROUTED = (Status.AUTO, Status.REVIEW, Status.NONE_SHOWN)  # what `classify run --target-kappa` decides


class LabelRow(TypedDict, total=False):
    """The fields every row has beside its per-dimension fields (module docstring)."""

    id: str
    repo: str | None
    model: str  # the spec that labeled the row
    taxonomy: str  # name@version of the taxonomy the labels use
    gold_hash: str  # the gold the model was trained on
    run_options: dict[str, Any]  # ModelOptions.run_meta(): with `model`, enough to rebuild the model
    labeled_at: str
    provenance: dict[str, Any]
    prompt_hash: str
    routing: dict[str, dict[str, Any]]  # routed runs: per dimension, target kappa and threshold
    screening: str | None  # `classify run --screen`: the screening label
    screening_model: str
    screening_options: dict[str, Any]
    screening_taxonomy: str
    screening_gold_hash: str


ROW_FIELDS = frozenset(LabelRow.__optional_keys__)


class LabelRowError(ClassifyError):
    """A labels file whose rows cannot be used (no id, a duplicated id, a label outside the codebook)."""


# ---------------------------------------------------------------------------------------------
# writing


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def answer_fields(
    dim: str,
    *,
    confidence: float | None = None,
    proba: Mapping[str, float] | None = None,
    rationale: str | None = None,
    invalid: bool = False,
    raw: Any = None,
    extra: Mapping[str, Any] | None = None,
    with_confidence: bool = True,
) -> dict[str, Any]:
    """What the model answered for `dim`, beside the label (which the caller gives: plain or routed)."""
    row: dict[str, Any] = {}
    if with_confidence:
        row[f"{dim}_confidence"] = _r(confidence)
    if proba:
        row[f"{dim}_proba"] = {c: round(float(v), 4) for c, v in proba.items()}
    if rationale:
        row[f"{dim}_rationale"] = rationale
    if invalid:
        row[f"{dim}_invalid"] = True
        row[f"{dim}_raw"] = raw
    for k, v in (extra or {}).items():
        row[f"{dim}_{k}"] = v
    return row


def routed_fields(
    dim: str, *, label: str | None, status: Status, suggestion: str | None, confidence: float | None
) -> dict[str, Any]:
    """A routed label: given only where `status` is auto (none_shown gives none), always suggested."""
    return {
        dim: label if status is Status.AUTO else None,
        f"{dim}_status": status.value,
        f"{dim}_suggestion": suggestion,
        f"{dim}_confidence": _r(confidence),
    }


def screened_out_fields(dims: list[str], *, say_why: bool) -> dict[str, Any]:
    """A record screening kept out: no label; routed runs say why in the status."""
    row: dict[str, Any] = {d: None for d in dims}
    if say_why:
        row.update({f"{d}_status": Status.SCREENED_OUT.value for d in dims})
    return row


def coded_fields(dim: str, label: str | None, coders: str) -> dict[str, Any]:
    """A label people coded (`classify merge`)."""
    return {dim: label, f"{dim}_status": Status.CODED.value, f"{dim}_coded_by": coders, f"{dim}_by": f"coders {coders}"}


def screening_fields(spec: str, taxonomy: str, gold_hash: str, options: dict[str, Any]) -> dict[str, Any]:
    """What a screened run records about its screening model, field by field (never as prose)."""
    return {
        f"{SCREENING}_model": spec,
        f"{SCREENING}_taxonomy": taxonomy,
        f"{SCREENING}_gold_hash": gold_hash,
        f"{SCREENING}_options": options,
    }


# ---------------------------------------------------------------------------------------------
# reading


def status(row: Mapping[str, Any], dim: str) -> Status | None:
    """Who gives the label (None: a run without targets, or a status word this toolkit never wrote)."""
    v = row.get(f"{dim}_status")
    try:
        return Status(v) if isinstance(v, str) else None
    except ValueError:
        return None


def unknown_status(row: Mapping[str, Any], dim: str) -> str | None:
    """The row's status word for `dim` when it is one this toolkit never writes (else None), cut short
    for a message."""
    v = row.get(f"{dim}_status")
    if v is None or status(row, dim) is not None or is_invalid(row, dim):
        return None
    return str(v)[:60]


def is_coded(row: Mapping[str, Any], dim: str) -> bool:
    """Coded by people: counted as is, never corrected for a model's errors."""
    return status(row, dim) is Status.CODED or bool(row.get(f"{dim}_coded_by"))


def is_invalid(row: Mapping[str, Any], dim: str) -> bool:
    return row.get(f"{dim}_invalid") is True or row.get(f"{dim}_status") == _LEGACY_INVALID


def suggestion(row: Mapping[str, Any], dim: str) -> str | None:
    v = row.get(f"{dim}_suggestion")
    return v if isinstance(v, str) else None


def label_or_suggestion(row: Mapping[str, Any], dim: str) -> str | None:
    """The label, or for a label left to people the model's suggestion (what a report counts)."""
    v = row.get(dim)
    if v is None and status(row, dim) is Status.REVIEW:
        v = suggestion(row, dim)
    return v if isinstance(v, str) else None


def confidence(row: Mapping[str, Any], dim: str) -> float | None:
    v = row.get(f"{dim}_confidence")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def proba(row: Mapping[str, Any], dim: str) -> dict[str, float] | None:
    """The class probabilities; CSV and Parquet files keep them as JSON text."""
    p = row.get(f"{dim}_proba")
    if isinstance(p, str):
        try:
            p = json.loads(p)
        except json.JSONDecodeError:
            return None
    if not isinstance(p, dict):
        return None
    try:
        return {str(k): float(v) for k, v in p.items()}
    except (TypeError, ValueError):
        return None


def dimension_taxonomy(row: Mapping[str, Any], dim: str) -> str | None:
    """The taxonomy (name@version) `dim` was labeled against: its own (`screening`), else the row's."""
    v = row.get(f"{dim}_taxonomy") or row.get("taxonomy")
    return str(v) if v else None


def dimension_model(row: Mapping[str, Any], dim: str) -> str | None:
    """The model that labeled `dim`: its own (`screening`), else the row's."""
    v = row.get(f"{dim}_model") or row.get("model")
    return str(v) if v else None


def is_failure_report(row: Mapping[str, Any]) -> bool:
    """Kept by screening (or never screened)."""
    return row.get(SCREENING) in (None, FAILURE_REPORT)


def was_screened(rows: list[dict[str, Any]]) -> bool:
    return any(SCREENING in r for r in rows)


def row_id(row: Mapping[str, Any]) -> str | None:
    """The row's id as text; None when it has no usable one."""
    rid = row.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or rid == "":
        return None
    return str(rid)


def check_ids(rows: list[dict[str, Any]], where: str | Path, *, error: type[ClassifyError] = LabelRowError) -> None:
    """Every row has a usable id and no id comes twice (a duplicate would be counted twice)."""
    seen: set[str] = set()
    dups: list[str] = []
    for i, r in enumerate(rows, 1):
        rid = row_id(r)
        if rid is None:
            raise error(f"{where}: row {i} has no usable id: {str(r)[:120]}")
        if rid in seen:
            dups.append(rid)
        seen.add(rid)
    if dups:
        raise error(f"{where}: duplicate ids ({len(dups)}): {', '.join(sorted(set(dups))[:10])}")


def check_labels(
    row: Mapping[str, Any],
    tax: Taxonomy,
    where: str,
    *,
    error: type[ClassifyError] = LabelRowError,
    groups_follow: bool = False,
) -> None:
    """Every label (and group, and suggestion) of `row` is one the codebook has; with `groups_follow`
    (people's codes) a group given beside its category must be that category's group. A model's group
    may differ from its category's: the routed group is the likeliest group, not the likeliest
    category's."""
    for d, dim in tax.dimensions.items():
        for key in (d, f"{d}_suggestion"):
            v = row.get(key)
            if v is None or (key != d and v == NONE_SHOWN):
                continue
            problem = tax.validate_label(d, v)
            if problem:
                raise error(f"{where}: {problem} (allowed: {', '.join(dim.ids)}, or null for no label)")
        gd = f"{d}_group"
        g = row.get(gd)
        if g is None:
            continue
        if not dim.groups or not isinstance(g, str) or g not in dim.groups:
            allowed = ", ".join(dim.groups) or f"none: {d} has no groups"
            raise error(f"{where}: unknown {gd} {g!r} (allowed: {allowed}, or null)")
        if groups_follow and row.get(d) is not None and dim.group_of(row[d]) != g:
            raise error(f"{where}: {gd} {g!r} is not the group of {d} {row[d]!r}")


def read_label_rows(
    path: str | Path, tax: Taxonomy | None = None, *, error: type[ClassifyError] = LabelRowError
) -> list[dict[str, Any]]:
    """The rows of a labels file, checked: usable and unique ids, and with `tax` labels it knows."""
    try:  # a labels file, or the Parquet parts folder of a partitioned run (core.labelparts)
        rows = labelparts.read_parts(Path(path)) if labelparts.is_parts_folder(Path(path)) else read_rows(path)
    except RecordsError as e:
        raise error(str(e)) from e
    check_ids(rows, path, error=error)
    if tax is not None:
        for r in rows:
            check_labels(r, tax, f"{path}: id {row_id(r)}", error=error)
    return rows
