"""The model's measured behaviour on gold, which the report corrects a corpus's counts with.

The gold profile (out-of-fold predictions, calibration) is rebuilt from the labels rows' `model`,
`run_options` and `gold_hash`. Without one (a labels file from elsewhere, a gold set that changed since
the run) the report gives counts with Wilson intervals and says why. The model's agreement with gold
comes from its newest eval run on the same gold (`classify.evaluation.runfolder`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from classify.core import labelrow
from classify.core.taxonomy import Taxonomy

log = logging.getLogger("classify")


@dataclass
class Correction:
    """A model's measured behaviour per dimension, ready to correct a corpus's counts."""

    model: str
    profile: Any  # classify.evaluation.profile.GoldProfile
    gold_hash: str
    caveats: list[str] = field(default_factory=list)


def proba_matrix(preds: list, classes: list[str]) -> np.ndarray | None:
    if not preds or any(p is None or p.proba is None for p in preds):
        return None
    return np.array([[float(p.proba.get(c, 0.0)) for c in classes] for p in preds])


def row_prediction(row: dict[str, Any], dim: str):
    """A labels row's answer for `dim` as a Prediction (None where it has neither label nor probabilities)."""
    from classify.classifiers.base import Prediction

    proba = labelrow.proba(row, dim)
    label = row.get(dim)
    if proba is None and label is None:
        return None
    return Prediction(label=label, confidence=labelrow.confidence(row, dim), proba=proba)


def correction_for(
    rows: list[dict[str, Any]], tax: Taxonomy, gold_path: Path | None = None, *, seed: int = 0
) -> tuple[Correction | None, list[str]]:
    """The gold profile of the model that labeled `rows`, or None and the reasons why not."""
    from classify.core.goldfile import load_gold_for
    from classify.evaluation.profile import gold_profile
    from classify.evaluation.runfolder import options_from_meta

    models = {str(r.get("model")) for r in rows if r.get("model")}
    if not models:
        return None, ["the labels carry no `model`: they cannot be corrected for a classifier's errors"]
    if len(models) > 1:
        return None, [f"the labels come from several models ({', '.join(sorted(models))}); run the report per model"]
    model = models.pop()
    metas = {json.dumps(r.get("run_options"), sort_keys=True) for r in rows if r.get("run_options") is not None}
    if not metas:
        return None, ["the labels carry no `run_options` (written before they were recorded): no gold profile"]
    if len(metas) > 1:
        return None, ["the labels were made with several option sets; run the report per run"]
    hashes = {str(r.get("gold_hash")) for r in rows if r.get("gold_hash")}
    gold = load_gold_for(gold_path, tax)
    if hashes and gold.hash not in hashes:
        return None, [
            f"the labels were made with gold {', '.join(sorted(hashes))} but {gold_path or 'the default gold'} is {gold.hash}: "
            f"the classifier's errors cannot be measured on the gold it was trained on (pass --gold)"
        ]
    meta = json.loads(metas.pop())
    if not isinstance(meta, dict):
        return None, ["the labels' `run_options` is not a mapping: no gold profile"]
    has_proba = any(labelrow.proba(r, d) is not None for r in rows for d in tax.dimension_ids)
    options = options_from_meta(meta, seed, where="the labels' run_options")
    log.info("measuring %s on gold (out-of-fold, cached after the first time)", model)
    prof = gold_profile(model, gold, options, seed=seed)
    caveats = []
    if not has_proba:
        caveats.append(
            f"{model} gives no class probabilities: only the corrections that need labels alone (counting, "
            f"adjusted counting) could be applied."
        )
    return Correction(model, prof, gold.hash, caveats), []


def agreement_with_gold(model: str, gold_hash: str, dirs: list[Path]) -> dict[str, Any] | None:
    """The model's kappa on gold per dimension, from its newest cross-validated eval run on this gold."""
    from classify.evaluation.runfolder import newest_run

    run = newest_run(dirs, model=model, gold_hash=gold_hash)
    if run is None:
        return None
    dims = {}
    for d, v in run.dimensions.items():
        kap = v.get("kappa") or {}
        cov = None
        for row in v.get("selective") or []:
            if isinstance(row, dict) and (row.get("kappa") or 0) >= 0.8:
                cov = max(cov or 0, row.get("coverage") or 0)
        dims[d] = {"kappa": kap.get("kappa"), "lo": kap.get("lo"), "hi": kap.get("hi"), "coverage_at_0.80": cov}
    return {"path": str(run.path), "created_at": run.meta.get("created_at"), "dimensions": dims}
