"""FoldModels (what labels new reports in a routed run) averages its fold models' probabilities
(with the ensemble's mean_proba); checked on a stub classifier registered through the public
`register`, no training."""

from __future__ import annotations

import pytest
from sklearn.base import clone

from classify import Classifier, ModelOptions, NotFittedError, Prediction, register
from classify.classifiers.foldmodels import FoldModels
from classify.core.records import Record


@register("test-shares")
class Shares(Classifier):
    """Predicts, for every record, each label's share among the labels it was fit on."""

    uses_encoder = False

    def fit(self, records, labels):
        self.shares_ = {}
        for d, ys in labels.items():
            given = [y for y in ys if y is not None]
            self.shares_[d] = {c: given.count(c) / len(given) for c in sorted(set(given))}
        return self

    def predict(self, records):
        self.check_fitted()
        out = {}
        for d, proba in self.shares_.items():
            best = max(proba, key=lambda c: proba[c])
            out[d] = [Prediction(label=best, confidence=proba[best], proba=dict(proba)) for _ in records]
        return out

    def provenance(self):
        return {"model": self.spec}


def _records(n):
    return [Record(id=f"r{i}", title=f"t{i}") for i in range(n)]


def test_fold_models_average_the_folds_probabilities(taxonomy):
    labels = {"symptom": ["a", "a", "b", "b", "a", "c"]}
    folds = [0, 0, 1, 1, 2, 2]
    fm = FoldModels("test-shares", taxonomy, ModelOptions(), folds)
    with pytest.raises(NotFittedError):
        fm.predict(_records(1))
    fm.fit(_records(6), labels)
    # fold 0 trains on b b a c, fold 1 on a a a c, fold 2 on a a b b
    expected = {"a": (1 / 4 + 3 / 4 + 2 / 4) / 3, "b": (2 / 4 + 0 + 2 / 4) / 3, "c": (1 / 4 + 1 / 4 + 0) / 3}
    (p,) = fm.predict(_records(1))["symptom"]
    assert p.proba == pytest.approx(expected)
    assert p.label == "a" and p.confidence == pytest.approx(expected["a"])
    assert len(fm.members) == 3 and fm.provenance()["fold_models"] == 3


def test_fold_models_clone_and_refuse_a_fold_list_of_another_length(taxonomy):
    fm = FoldModels("test-shares", taxonomy, ModelOptions(), [0, 1])
    twin = clone(fm)
    assert twin.folds == [0, 1] and twin.spec == "test-shares" and not twin.__sklearn_is_fitted__()
    with pytest.raises(ValueError, match="3 records for 2 fold assignments"):
        fm.fit(_records(3), {"symptom": ["a", "b", "a"]})
