"""The fold models of a cross-validation, their class probabilities averaged: what labels new
reports in a routed run (classify.labeling.routing).

The routing thresholds were set on these models' out-of-fold behaviour; one model trained on all
of gold is more confident than they were, so more reports would pass its thresholds than the
guarantee covers (measured: benchmarks/trust_holdout.py, docs/trust.md). Averaging k models can
only soften the confidence, which errs on the side of review. The averaging is the ensemble's
(classify.classifiers.ensemble.mean_proba).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import clone

from classify.classifiers.base import Classifier, ModelOptions, Prediction, make_classifier, predictions_from_proba
from classify.classifiers.ensemble import mean_proba
from classify.core.records import Record
from classify.core.taxonomy import Taxonomy


class FoldModels(Classifier):
    """One `spec` model per fold of `folds` (one fold index per training record), each trained on
    the records outside its fold; predictions average their probabilities."""

    members_: list[Classifier]

    def __init__(self, spec: str, taxonomy: Taxonomy, options: ModelOptions, folds: list[int]):
        # The wrapped spec's options are validated by fit (make_classifier), once for every fold.
        self.spec = spec
        self.taxonomy = taxonomy
        self.options = options
        self.folds = folds

    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> FoldModels:
        if len(records) != len(self.folds):
            raise ValueError(f"fold models: {len(records)} records for {len(self.folds)} fold assignments")
        self.close()
        template = make_classifier(self.spec, self.taxonomy, self.options)
        members = []
        for f in sorted(set(self.folds)):
            idx = [i for i, x in enumerate(self.folds) if x != f]
            members.append(
                clone(template).fit([records[i] for i in idx], {d: [ys[i] for i in idx] for d, ys in labels.items()})
            )
            self.members_ = members  # what is fitted so far is closed by close() if a later fold fails
        return self

    def prepare(self, records: list[Record], progress: Callable[[int], None] | None = None) -> None:
        # The first model encodes (and caches); the others then find every text in the cache.
        self.check_fitted()
        for j, m in enumerate(self.members_):
            m.prepare(records, progress=progress if j == 0 else None)

    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]:
        self.check_fitted()
        outs = [m.predict(records) for m in self.members_]
        return {d: [_average([o[d][i] for o in outs]) for i in range(len(records))] for d in outs[0]}

    def provenance(self) -> dict[str, Any]:
        self.check_fitted()
        return {**self.members_[0].provenance(), "fold_models": len(self.members_)}

    @property
    def stats(self) -> Any:
        return self.members_[0].stats if self.members else None

    def close(self) -> None:
        for m in self.members:
            m.close()


def _average(preds: list[Prediction]) -> Prediction:
    if any(p.proba is None for p in preds):
        return preds[0]  # no probabilities to average (cannot happen for trained specs)
    mean = mean_proba(preds)
    classes = sorted(mean)
    return predictions_from_proba(classes, np.array([[mean[c] for c in classes]]))[0]
