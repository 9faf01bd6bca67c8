"""One corpus file from a routed run and what people coded: `classify merge`.

    from classify.labeling.merge import merge_coded
    merge_coded("labels.jsonl", ["coded.jsonl"], "corpus.jsonl")

Every label in the result says who made it, in `<dim>_by`:
- `model <spec> (auto at confidence >= t, target kappa k)` for labels `classify run --target-kappa`
  gave alone (`<dim>_status: auto`; `none_shown` likewise, with no label);
- `coders <names>` for labels people coded (`<dim>_status: coded`, `<dim>_coded_by`), from any gold-format
  file: the workbench's export, a gold version from the review loop, or a hand-made JSONL/CSV with `id`
  and the dimensions (an empty root cause there means "the thread shows none");
- `model <spec>` for rows of a run without targets.
Rows still waiting for people keep `<dim>_status: review` and no label.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from classify.core import labelrow, paths
from classify.core.errors import ClassifyError
from classify.core.labelrow import Status
from classify.core.paths import refuse_output_over_inputs
from classify.core.records import RecordsError, read_rows
from classify.core.taxonomy import Taxonomy, load_taxonomy
from classify.core.writer import write_rows
from classify.labeling.routing import routable_dimensions

CODED = Status.CODED.value
log = logging.getLogger("classify")


class MergeError(ClassifyError):
    """Files that cannot be merged (unknown labels or ids, conflicting codes)."""


@dataclass
class MergeSummary:
    out: Path
    rows: int
    # dimension -> {"auto": n, "none_shown": n, "coded": n, "review": n, "model": n}
    by_dimension: dict[str, dict[str, int]] = field(default_factory=dict)


def _coders_of(row: dict[str, Any]) -> str:
    """Who coded a row: `coded_by` (a name, a list, or the workbench's {pass: name}), else the passes."""
    by = row.get("coded_by")
    if isinstance(by, dict):
        names = [str(v) for v in by.values() if v]
    elif isinstance(by, list):
        names = [str(v) for v in by if v]
    elif by:
        names = [str(by)]
    else:
        names = [k for k in ("coder_a", "coder_b") if row.get(k)]
    who = (", " if by else "+").join(names) if names else "people"
    return who + (" (adjudicated)" if row.get("adjudication_note") else "")


def _row_id(path: Path, n: int, row: dict[str, Any]) -> str:
    rid = labelrow.row_id(row)  # the labels row's owner says what a usable id is
    if rid is None:
        raise MergeError(f"{path}: row {n} has no usable id (`id` is {row.get('id')!r}): {str(row)[:120]}")
    return rid


def _bad_number(key: str, v: Any) -> bool:
    """NaN / Infinity anywhere (JSON has no such numbers), and a confidence outside [0, 1]."""
    if isinstance(v, float) and not math.isfinite(v):
        return True
    if key == "confidence" or key.endswith("_confidence"):
        return v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1)
    return False


def _null_bad_numbers(path: Path, rows: list[dict[str, Any]]) -> None:
    """Null, with one warning naming them, the values that would be written as non-standard JSON
    (NaN, Infinity) or that no confidence can be; nested values (`<dim>_proba`) too."""
    found: list[str] = []

    def clean(where: str, key: str, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: clean(f"{where}.{k}", str(k), x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(f"{where}[{i}]", key, x) for i, x in enumerate(v)]
        if _bad_number(key, v):
            found.append(f"{where} = {v!r}")
            return None
        return v

    for n, row in enumerate(rows, 1):
        for k in list(row):
            row[k] = clean(f"id {row.get('id', f'(row {n})')}: {k}", k, row[k])
    if found:
        more = f" (+{len(found) - 5} more)" if len(found) > 5 else ""
        log.warning(
            "%s: %d values are not finite numbers (or confidences outside [0, 1]); written as null: %s%s",
            path,
            len(found),
            "; ".join(found[:5]),
            more,
        )


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        rows = read_rows(path)
    except RecordsError as e:
        raise MergeError(str(e)) from e
    for n, row in enumerate(rows, 1):
        _row_id(path, n, row)
    _null_bad_numbers(path, rows)
    return rows


def _check_labels_row(row: dict[str, Any], tax: Taxonomy, where: str) -> None:
    """What merge copies and reads from a labels row: labels the codebook has, a status this toolkit
    writes, a routing table of thresholds, a model named by text."""
    labelrow.check_labels(row, tax, where, error=MergeError)
    for d in routable_dimensions(tax):
        word = labelrow.unknown_status(row, d)
        if word is not None:
            known = ", ".join(s.value for s in labelrow.Status)
            raise MergeError(f"{where}: unknown {d}_status {word!r} (known: {known})")
    routing = row.get("routing")
    if routing is not None and (
        not isinstance(routing, dict) or not all(isinstance(r, dict) or r is None for r in routing.values())
    ):
        raise MergeError(f"{where}: routing must map dimensions to their thresholds, got {str(routing)[:60]!r}")
    model = row.get("model")
    if model is not None and not isinstance(model, str):
        raise MergeError(f"{where}: model must be the model's spec (text), got {str(model)[:60]!r}")


def _coded_rows(paths: list[Path], tax: Taxonomy) -> dict[str, dict[str, Any]]:
    coded: dict[str, dict[str, Any]] = {}
    origin: dict[str, Path] = {}
    for p in paths:
        for row in _read(p):
            rid = labelrow.row_id(row)
            if rid is None:
                raise MergeError(f"{p}: a row without a usable id: {str(row)[:120]}")
            labelrow.check_labels(row, tax, f"{p}: id {rid}", error=MergeError, groups_follow=True)
            if rid in coded:
                a, b = coded[rid], row
                clash = [d for d in tax.dimension_ids if d in a and d in b and a[d] != b[d]]
                if clash:
                    raise MergeError(
                        f"id {rid} is coded differently in {origin[rid]} and {p} ({', '.join(clash)}): settle it first"
                    )
                coded[rid] = {**a, **b}
            else:
                coded[rid], origin[rid] = row, p
    return coded


def merge_coded(
    labels: str | Path,
    coded: Sequence[str | Path],
    out: str | Path,
    *,
    taxonomy: str | Path | None = None,
    force: bool = False,
    only_labeled: bool = False,
) -> MergeSummary:
    labels, out = Path(labels), Path(out)
    coded_paths = [Path(c) for c in coded]
    if not coded_paths:
        raise MergeError("give at least one --coded file")
    tax_path = Path(taxonomy) if taxonomy else paths.default_taxonomy()
    refuse_output_over_inputs(out, [labels, *coded_paths, tax_path], flag="--out", error=MergeError)
    if out.exists() and not force:
        raise MergeError(f"{out} exists; pass --force to overwrite it")
    tax = load_taxonomy(taxonomy)
    rows = _read(labels)
    if not rows:
        raise MergeError(f"{labels}: no rows")
    other = sorted({str(r.get("taxonomy")) for r in rows if r.get("taxonomy") not in (None, tax.label)})
    if other:
        raise MergeError(
            f"{labels}: labeled with taxonomy {', '.join(other)}, but the codes are checked against {tax.label}"
        )
    labelrow.check_ids(rows, labels, error=MergeError)
    for row in rows:
        _check_labels_row(row, tax, f"{labels}: id {row['id']}")
    by_id = {str(r["id"]): r for r in rows}
    codes = _coded_rows(coded_paths, tax)
    unknown = sorted(set(codes) - set(by_id))
    if unknown and not only_labeled:
        raise MergeError(
            f"{len(unknown)} coded ids are not in {labels}: {unknown[:10]}; a gold version from `classify review "
            "apply` also holds the gold reports: pass --only-labeled to take only the codes of rows in the labels file"
        )
    if unknown:  # a review-loop gold version: the gold it grew from is not part of this corpus
        log.warning("%d coded ids are not rows of %s and are left out (--only-labeled)", len(unknown), labels)
        codes = {i: c for i, c in codes.items() if i in by_id}
    counts: dict[str, Counter] = {d: Counter() for d in routable_dimensions(tax)}
    merged = []
    for row in rows:
        row = dict(row)
        code = codes.get(str(row["id"]))
        routing = row.get("routing") or {}
        coded_groups = set()
        for d in routable_dimensions(tax):
            if d in coded_groups:
                continue
            if code is not None and d in code and d not in tax.dimensions:  # a group coded on its own
                row.update(labelrow.coded_fields(d, code[d], _coders_of(code)))
                counts[d][CODED] += 1
                continue
            if code is not None and d in code and d in tax.dimensions:
                row.update(labelrow.coded_fields(d, code[d], _coders_of(code)))
                counts[d][CODED] += 1
                if tax.dimensions[d].groups:  # the group follows the coded category
                    gd = f"{d}_group"
                    group = tax.dimensions[d].group_of(code[d]) if code[d] is not None else None
                    row.update(labelrow.coded_fields(gd, group, _coders_of(code)))
                    coded_groups.add(gd)
                    counts[gd][CODED] += 1
                continue
            status = labelrow.status(row, d)
            r = routing.get(d) or {}
            if status in (Status.AUTO, Status.NONE_SHOWN):
                row[f"{d}_by"] = (
                    f"model {row.get('model')} ({status.value} at confidence >= {r.get('threshold')}, "
                    f"target kappa {r.get('target_kappa')})"
                )
                counts[d][status] += 1
            elif status == Status.REVIEW:
                row[f"{d}_by"] = None
                counts[d]["review"] += 1
            elif d in row:
                row[f"{d}_by"] = f"model {row.get('model')}"
                counts[d]["model"] += 1
        merged.append(row)
    write_rows(out, merged)
    return MergeSummary(out, len(merged), {d: dict(c) for d, c in counts.items()})
