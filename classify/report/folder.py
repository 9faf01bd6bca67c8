"""The report folder: corpus.json (every figure), one PNG per dimension, and report.html.

from classify.report import write_corpus_report
stats = write_corpus_report(Path("labels.jsonl"), taxonomy, Path("labels.report"))
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from classify.core import labelrow
from classify.core.records import read_rows
from classify.core.taxonomy import Taxonomy
from classify.core.writer import atomic_write_text
from classify.report import quantify as qf
from classify.report.correction import agreement_with_gold, correction_for
from classify.report.labels import ReportError, awaits_review, counted_label, counts_as_failure_report, issue_url
from classify.report.reference import compare_reference, load_reference, reference_summary
from classify.report.stats import WEAK_KAPPA, corpus_stats


def _examples(rows: list[dict[str, Any]], tax: Taxonomy, meta: dict[str, dict], per: int = 3) -> dict[str, dict]:
    """A few of the most confident examples per category, with confidence and link."""
    out: dict[str, dict[str, list[dict]]] = {}
    for d, dim in tax.dimensions.items():
        by: dict[str, list[dict]] = {c: [] for c in dim.ids}
        for r in rows:
            lab = counted_label(r, d)
            if not counts_as_failure_report(r) or lab not in by:
                continue
            m = meta.get(str(r.get("id")), {})
            by[lab].append(
                {
                    "id": r.get("id"),
                    "title": m.get("title") or r.get("title"),
                    "url": m.get("url") or r.get("url") or issue_url(r),
                    "confidence": r.get(f"{d}_confidence"),
                    "human": labelrow.is_coded(r, d),
                    "suggestion": awaits_review(r, d),
                }
            )
        for c in by:
            by[c].sort(key=lambda x: -(x["confidence"] if isinstance(x["confidence"], (int, float)) else 2.0))
            by[c] = by[c][:per]
        out[d] = by
    return out


def _screened(rows: list[dict[str, Any]], meta: dict[str, dict]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        if counts_as_failure_report(r):
            continue
        m = meta.get(str(r.get("id")), {})
        out.append(
            {
                "id": r.get("id"),
                "title": m.get("title") or r.get("title"),
                "url": m.get("url") or r.get("url") or issue_url(r),
                "screening": labelrow.label_or_suggestion(r, "screening"),
                "awaits_review": awaits_review(r, "screening"),
                "confidence": labelrow.confidence(r, "screening"),
            }
        )
    return out


def write_corpus_report(
    labels_path: Path,
    tax: Taxonomy,
    out: Path,
    input_path: Path | None = None,
    *,
    reference: Path | None = None,
    gold_path: Path | None = None,
    correct: bool = True,
    n_boot: int = 1000,
    seed: int = 0,
    eval_dirs: list[Path] | None = None,
    method: str | None = None,
) -> dict[str, Any]:
    from classify.core import paths
    from classify.report import html

    if n_boot < 0:
        raise ReportError(f"--bootstrap must be >= 0, got {n_boot}")
    method = method.strip().upper() if method is not None else None
    if method is not None and method not in qf.METHODS:
        raise ReportError(f"unknown --method {method!r}; known: {', '.join(qf.METHODS)}")
    if method is not None and not correct:
        raise ReportError("--method chooses how labels are corrected; it cannot be combined with --no-correct")
    _refuse_over_inputs(out, tax, [labels_path, input_path, reference, gold_path])
    ref = load_reference(reference, tax) if reference else None  # a bad reference fails before any work
    # merge's checks: usable and unique ids (a duplicate would count twice), labels the codebook has
    rows = labelrow.read_label_rows(labels_path, tax, error=ReportError)
    if not rows:
        raise ReportError(f"{labels_path}: no rows to report on")
    bad = sorted({str(r.get("taxonomy")) for r in rows if r.get("taxonomy")} - {tax.label})
    if bad:
        raise ReportError(f"{labels_path}: labeled with taxonomy {', '.join(bad)}, but the report uses {tax.label}")
    meta: dict[str, dict] = {}
    if input_path:
        meta = {str(r.get("id")): r for r in read_rows(input_path)}
    correction, why = correction_for(rows, tax, gold_path, seed=seed) if correct else (None, ["--no-correct given"])
    if method is not None and correction is None:
        # counts would come out under a method the user fixed and never got
        raise ReportError(f"--method {method} cannot be applied: {'; '.join(why)}")
    stats = corpus_stats(rows, tax, correction, n_boot=n_boot, seed=seed, method=method)
    stats["warnings"] = why
    stats["model"] = correction.model if correction else (stats["models"][0] if len(stats["models"]) == 1 else None)
    stats["eval_run"] = None
    if stats["model"] and (correction or rows[0].get("gold_hash")):
        gh = correction.gold_hash if correction else str(rows[0].get("gold_hash"))
        stats["eval_run"] = agreement_with_gold(stats["model"], gh, eval_dirs or [paths.evals_dir(), paths.EVALS_DIR])
    if correction is None and stats["eval_run"]:
        # counts of a weak model's labels say as little as its corrected shares would: flagged the same way
        for d, k in stats["eval_run"]["dimensions"].items():
            if d in stats["dimensions"] and isinstance(k.get("kappa"), (int, float)) and k["kappa"] < WEAK_KAPPA:
                stats["weak_model"][d] = float(k["kappa"])
    if ref is not None:
        compared = compare_reference(stats, ref)
        stats["reference"] = {
            "path": ref["path"],
            "source": ref["source"],
            "warning": ref["warning"],
            "rows": compared,
            "summary": reference_summary(compared),
        }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "corpus.json", json.dumps(stats, indent=2, default=_json_default) + "\n")
    figures = html.draw(stats, tax, out)
    page = html.render(stats, tax, figures, out, _examples(rows, tax, meta), _screened(rows, meta))
    atomic_write_text(out / "report.html", page)
    return stats


def _refuse_over_inputs(out: Path, tax: Taxonomy, inputs: list[Path | None]) -> None:
    """What the report writes into its folder may not be a file it reads (labels named corpus.json
    in --out-dir would be replaced by the figures)."""
    from classify.core.paths import refuse_output_over_inputs

    names = [n for d, dim in tax.dimensions.items() for n in (d, *([f"{d}_group"] if dim.groups else []))]
    for fn in ["corpus.json", "report.html", *(f"distribution_{n}.png" for n in names)]:
        refuse_output_over_inputs(out / fn, inputs, flag="--out-dir", error=ReportError)


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    raise TypeError(type(o).__name__)
