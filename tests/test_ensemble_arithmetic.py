"""The ensemble's arithmetic on stub members registered through the public `register`, no training:
mean probability, the agreement-weighted confidence, the group's confidence, an invalid member."""

from __future__ import annotations

import pytest

from classify import Classifier, ModelOptions, Prediction, make_classifier, register
from classify.core.records import Record

# per stub: (root_cause label, its proba) and the symptom proba; None label = an invalid answer
ANSWERS = {
    "test-fixed-a": {"symptom": {"crash": 0.8, "hang": 0.2}, "root_cause": {"memory_access": 0.6, "api_misuse": 0.4}},
    "test-fixed-b": {
        "symptom": {"crash": 0.3, "hang": 0.7},
        "root_cause": {"memory_access": 0.9, "synchronization": 0.1},
    },
    "test-fixed-none": {"symptom": {}, "root_cause": {}},
}


class _Fixed(Classifier):
    uses_encoder = False

    def fit(self, records, labels):
        self.answers_ = ANSWERS[self.spec]
        return self

    def predict(self, records):
        self.check_fitted()
        out = {}
        for d, proba in self.answers_.items():
            if not proba:
                out[d] = [Prediction(label=None, confidence=None, status="invalid") for _ in records]
                continue
            best = max(proba, key=lambda c: proba[c])
            out[d] = [Prediction(label=best, confidence=proba[best], proba=dict(proba)) for _ in records]
        return out

    def provenance(self):
        return {"model": self.spec}


for _name in ANSWERS:
    register(_name, type(_name.replace("-", "_"), (_Fixed,), {}))


def _predict(spec, taxonomy, **opts):
    clf = make_classifier(spec, taxonomy, ModelOptions(extra=opts))
    clf.fit([Record(id="t", title="t")], {d: ["crash" if d == "symptom" else None] for d in taxonomy.dimension_ids})
    return clf.predict([Record(id="x", title="x")])


def test_mean_probability_and_agreement_weighted_confidence(taxonomy):
    out = _predict("ensemble:test-fixed-a+test-fixed-b", taxonomy)
    (p,) = out["symptom"]
    assert p.proba == pytest.approx({"crash": 0.55, "hang": 0.45})
    assert p.label == "crash" and p.extra["members"] == ["crash", "hang"]
    assert p.extra["agreement"] == 0.5 and p.confidence == pytest.approx(0.55 * 0.5)
    (r,) = out["root_cause"]
    assert r.label == "memory_access" and r.confidence == pytest.approx(0.75)  # both members agree
    assert r.proba == pytest.approx({"memory_access": 0.75, "api_misuse": 0.2, "synchronization": 0.05})
    # memory_access and synchronization are kernel_implementation; api_misuse is usage
    assert r.extra["group"] == "kernel_implementation" and r.extra["group_confidence"] == pytest.approx(0.8)


def test_mean_confidence_ignores_agreement(taxonomy):
    (p,) = _predict("ensemble:test-fixed-a+test-fixed-b", taxonomy, confidence="mean")["symptom"]
    assert p.confidence == pytest.approx(0.55)


def test_an_invalid_member_counts_as_no_probability_and_no_vote(taxonomy):
    # the mean is over every member, so an invalid answer lowers it: the label is not overconfident
    (p,) = _predict("ensemble:test-fixed-a+test-fixed-none", taxonomy)["symptom"]
    assert p.label == "crash" and p.proba == pytest.approx({"crash": 0.4, "hang": 0.1})
    assert p.extra["agreement"] == 0.5 and p.confidence == pytest.approx(0.4 * 0.5)
