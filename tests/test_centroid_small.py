"""embed-centroid on tiny training sets: scikit-learn's NearestCentroid scales distances by the
within-class spread, 0/0 (NaN) when no class has a second row, which used to end a run with
"Input contains NaN"; and it refuses rows that are all the same vector."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import caused_records

from classify.classifiers.base import make_classifier
from classify.classifiers.baselines import fit_per_dimension, predict_per_dimension
from classify.core.gold import gold_from_records
from classify.evaluation.crossval import cross_validate


def _unit(rows):
    X = np.asarray(rows, dtype=np.float64)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _fit_predict(taxonomy, X, labels, X_test):
    clf = make_classifier("embed-centroid", taxonomy)  # the encoder is not built before fit
    est, _ = fit_per_dimension(taxonomy, X, labels, clf.make_estimator)
    return predict_per_dimension(est, X_test)


def test_one_row_per_class_predicts_the_nearest_row(taxonomy):
    rng = np.random.default_rng(0)
    X = _unit(rng.normal(size=(3, 16)))
    causes = ["a", "b", "c"]
    labels = {"root_cause": causes}  # every class a single row: no within-class spread
    test = _unit(X + 0.05 * rng.normal(size=X.shape))  # each close to one training row
    preds = _fit_predict(taxonomy, X, labels, test)["root_cause"]
    assert [p.label for p in preds] == causes
    for p in preds:
        assert all(math.isfinite(v) for v in p.proba.values())
        assert sum(p.proba.values()) == pytest.approx(1.0)
        assert 1 / 3 < p.confidence < 1  # plain distances on unit vectors: soft, not certain


def test_rows_that_are_one_vector_predict_the_class_shares(taxonomy):
    X = _unit(np.ones((3, 8)))  # duplicate (or empty) texts with different labels
    preds = _fit_predict(taxonomy, X, {"symptom": ["x", "y", "y"]}, X[:1])["symptom"]
    assert preds[0].label == "y"
    assert preds[0].proba == pytest.approx({"x": 1 / 3, "y": 2 / 3})


def test_cross_validation_where_each_cause_trains_on_one_record(gold, shared_cache):
    # four causes of one record each + six uncaused records: in a 5-fold split no cause has
    # a second training record
    caused = caused_records(gold, 4)
    seen = {r.fields["root_cause"] for r in caused}
    uncaused = [r for r in gold.records if not r.fields.get("root_cause")][:6]
    small = gold_from_records(caused + uncaused, gold.taxonomy)
    res = cross_validate("embed-centroid", small, k=5, seed=0)
    got = [p for p in res.predictions["root_cause"] if p is not None]
    assert got and all(p.label in seen for p in got)
    assert all(math.isfinite(v) for p in got for v in p.proba.values())
