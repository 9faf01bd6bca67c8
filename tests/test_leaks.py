"""The leak check records what each fold's model was actually fit on, and near-duplicate texts
across the train/test boundary are reported."""

from __future__ import annotations

from dataclasses import replace

import pytest

from classify.classifiers.base import Classifier, ModelOptions, make_classifier, register
from classify.classifiers.baselines import TfidfLogReg
from classify.classifiers.options import OptionsModel
from classify.core.errors import UsageError
from classify.core.gold import gold_from_records
from classify.evaluation import leaks
from classify.evaluation.crossval import cross_validate, evaluate_on_test
from classify.evaluation.leaks import near_duplicates, train_test_leaks


@pytest.fixture(scope="module")
def small(gold, taxonomy):
    return gold_from_records(gold.records[:90], taxonomy)


def _labels_of(preds, dims):
    return {d: [p.label for p in preds[d]] for d in dims}


class SelfTrainingOptions(OptionsModel):
    via_member: bool = False  # the leak happens one level down, inside a member (as in an ensemble)


@register("test-self-training")
class SelfTraining(Classifier):
    """Pseudo-labels the records it predicts and refits on them: a leak of the evaluated texts."""

    Options = SelfTrainingOptions
    uses_encoder = False

    def fit(self, records, labels):
        self.train_ = (list(records), labels)
        self.inner_ = make_classifier("tfidf-logreg", self.taxonomy, ModelOptions()).fit(records, labels)
        if self.params.via_member:
            self.members_ = [self.inner_]  # built by fit, as an ensemble builds its members
        return self

    def predict(self, records):
        first = self.inner_.predict(records)
        recs, labels = self.train_
        pseudo = _labels_of(first, self.taxonomy.dimension_ids)
        more = {d: list(labels[d]) + pseudo[d] for d in self.taxonomy.dimension_ids}
        refit = self.inner_.fit if self.params.via_member else self.fit
        refit(recs + list(records), more)
        return self.inner_.predict(records)

    def provenance(self):
        return {"model": self.spec}


@pytest.mark.parametrize("via_member", [False, True])
def test_a_model_fit_on_the_records_it_predicts_is_caught(small, via_member):
    clf = make_classifier("test-self-training", small.taxonomy, ModelOptions(extra={"via_member": via_member}))
    res = cross_validate(clf, small, k=3)
    # Every evaluated record went through fit() of its own fold's model.
    assert sorted(train_test_leaks(res)) == sorted(small.ids)
    assert not clf.__sklearn_is_fitted__()  # each fold trained a clone; the classifier given stays unfitted


RECEIVED: list[set[str]] = []


@register("test-recording")
class Recording(TfidfLogReg):
    """The lexical baseline, noting what each fit() receives."""

    def fit(self, records, labels):
        RECEIVED.append({r.id for r in records})
        return super().fit(records, labels)


def test_recorded_train_ids_are_what_fit_received(small):
    RECEIVED.clear()
    res = cross_validate(make_classifier("test-recording", small.taxonomy), small, k=3, train_fraction=0.5)
    assert train_test_leaks(res) == []
    assert [res.train_ids[f] for f in range(3)] == RECEIVED
    for f, ids in res.train_ids.items():
        others = {r.id for r, ff in zip(small.records, res.folds) if ff != f}
        assert ids < others and len(ids) == pytest.approx(len(others) / 2, abs=1)


def test_a_classifier_for_other_dimensions_or_with_options_beside_it_is_refused(small, taxonomy):
    from classify.evaluation.profile import derived_gold

    shown = derived_gold(small)  # adds root_cause_shown: the model must be built for it
    with pytest.raises(UsageError, match="built for the dimensions symptom, root_cause, but gold has"):
        cross_validate(make_classifier("tfidf-logreg", taxonomy), shown, k=3)
    with pytest.raises(UsageError, match="give them to the classifier"):
        cross_validate(make_classifier("tfidf-logreg", taxonomy), small, ModelOptions(), k=3)


def _copy(rec, new_id, title=None, body=None):
    return replace(
        rec,
        id=new_id,
        title=rec.title if title is None else title,
        body=rec.body if body is None else body,
        fields=dict(rec.fields),
    )


def test_planted_near_duplicates_across_folds_are_flagged(small, taxonomy):
    recs = list(small.records)
    a, b = recs[0], recs[1]
    # Same report, shouted and re-punctuated: identical once normalised.
    loud = _copy(a, "copy-of-a", title=a.title.upper() + "!!", body=a.body.replace(".", " ;"))
    # One sentence added to a long report: not identical, still far above the cosine threshold.
    assert len(b.body.split()) > 60
    edited = _copy(b, "edit-of-b", body=b.body + " Any update on this?")
    g = gold_from_records(recs + [loud, edited], taxonomy)
    n = len(recs)
    folds = [i % 3 for i in range(n)] + [(0 + 1) % 3, 1 % 3]  # loud apart from a; edited with b
    assert folds[0] != folds[n] and folds[1] == folds[n + 1]
    res = cross_validate("tfidf-logreg", g, k=3, folds=folds)
    pairs = {(d["id"], d["train_id"]): d for d in res.near_duplicates}
    # a and its copy are in different folds: each is evaluated by a model trained on the other.
    assert set(pairs) == {(a.id, "copy-of-a"), ("copy-of-a", a.id)}
    assert all(d["identical"] and d["similarity"] == pytest.approx(1.0) for d in pairs.values())
    assert pairs[(a.id, "copy-of-a")]["fold"] == folds[0]
    # b and its edit share a fold: never train/test neighbours, nothing to report for them.
    assert not any("edit-of-b" in key for key in pairs)
    # Moved into another fold, the edit is flagged, as similar but not identical.
    folds[n + 1] = (folds[1] + 1) % 3
    res = cross_validate("tfidf-logreg", g, k=3, folds=folds)
    edit = [d for d in res.near_duplicates if d["id"] == "edit-of-b"]
    assert len(edit) == 1 and edit[0]["train_id"] == b.id and not edit[0]["identical"]
    assert leaks.NEAR_DUPLICATE_COSINE <= edit[0]["similarity"] < 1


def test_real_gold_sample_has_no_near_duplicates(small):
    res = cross_validate("tfidf-logreg", small, k=3)
    assert res.near_duplicates == []


def test_limit_and_training_sample_bound_the_comparison(small):
    recs = list(small.records)
    # Record 0 duplicated by record 1: only the evaluated and the trained-on are compared.
    recs[1] = _copy(recs[0], recs[1].id)
    folds = [0, 1] + [i % 2 for i in range(2, len(recs))]
    both = near_duplicates(
        recs,
        folds,
        {0: {r.id for r, f in zip(recs, folds) if f != 0}, 1: {r.id for r, f in zip(recs, folds) if f != 1}},
    )
    assert {(d["id"], d["train_id"]) for d in both} == {(recs[0].id, recs[1].id), (recs[1].id, recs[0].id)}
    not_evaluated = [-2] + folds[1:]
    one = near_duplicates(recs, not_evaluated, {1: {r.id for r, f in zip(recs, folds) if f != 1}})
    assert [(d["id"], d["train_id"]) for d in one] == [(recs[1].id, recs[0].id)]
    assert near_duplicates(recs, folds, {0: set(), 1: set()}) == []


def test_held_out_test_file_repeating_gold_is_refused_and_an_edited_copy_flagged(small, taxonomy):
    train = gold_from_records(small.records[:60], taxonomy)
    # A gold report under a new id, shouted and re-punctuated: the same text by hash once normalised.
    src = small.records[5]
    reposted = _copy(src, "reposted", title=src.title.upper(), body=src.body.replace(".", " ."))
    test = gold_from_records(small.records[60:] + [reposted], taxonomy)
    with pytest.raises(leaks.TestOverlapError, match=rf"1 of {len(test)} records .*reposted = gold {src.id}"):
        evaluate_on_test("tfidf-logreg", train, test)
    # Only the title and body count: another discussion does not make it a new report.
    again = _copy(src, "again")
    again = replace(again, discussion="a different thread below the same report")
    with pytest.raises(leaks.TestOverlapError):
        evaluate_on_test("tfidf-logreg", train, gold_from_records(small.records[60:] + [again], taxonomy))
    # An edited copy is not the same text: evaluated, and listed as a near-duplicate.
    b = small.records[7]
    assert len(b.body.split()) > 60
    edited = _copy(b, "edited", body=b.body + " Any update on this?")
    res = evaluate_on_test("tfidf-logreg", train, gold_from_records(small.records[60:] + [edited], taxonomy))
    assert [(d["id"], d["train_id"], d["identical"]) for d in res.near_duplicates] == [("edited", b.id, False)]
