"""Quantification: corrected shares beat counting where the issue says they must, measured on the
shipped gold with the fast lexical baseline (tfidf-logreg; the profile is cross-validated once per
module in a shared cache)."""

from dataclasses import replace

import numpy as np
import pytest

from classify.classifiers.base import ModelOptions, make_classifier
from classify.evaluation.profile import gold_profile
from classify.report import quantify as qf

SPEC = "tfidf-logreg"


def _matrix(preds, classes):
    return np.array([[p.proba.get(c, 0.0) for c in classes] for p in preds])


def behaviour(prof, dim):
    classes = prof.gold.taxonomy.dimensions[dim].ids
    idx, y = prof.gold.labeled(dim)
    P = _matrix(prof.calibrate(dim, [prof.result.predictions[dim][i] for i in idx]), classes)
    return qf.Behaviour(
        classes, P, np.array([classes.index(v) for v in y]), np.array([prof.result.folds[i] for i in idx])
    )


@pytest.fixture(scope="module")
def profile(gold, shared_cache):
    return gold_profile(SPEC, gold, ModelOptions())


def test_stand_in_matches_quapy_on_a_known_confusion():
    # A classifier that calls every class-1 item class 0 half the time: counting halves class 1,
    # ACC (fitted on that behaviour) recovers it exactly.
    k = 2
    y_gold = np.array([0] * 100 + [1] * 100)
    P_gold = np.zeros((200, 2))
    P_gold[:100, 0] = 1
    P_gold[100:150, 0] = 1
    P_gold[150:, 1] = 1
    corpus = np.zeros((100, 2))
    corpus[:20, 0] = 1  # 20 true class 0
    corpus[20:60, 0] = 1  # 80 true class 1: 40 called 0 ...
    corpus[60:, 1] = 1  # ... and 40 called 1
    cc = qf.predict_shares(qf.fit_quantifier("CC", P_gold, y_gold, k), corpus)
    acc = qf.predict_shares(qf.fit_quantifier("ACC", P_gold, y_gold, k), corpus)
    assert cc[1] == pytest.approx(0.4)
    assert acc[1] == pytest.approx(0.8)


def test_unknown_method_and_empty_gold_are_clear_errors():
    with pytest.raises(qf.QuantifyError, match="unknown quantification method"):
        qf.make_quantifier("XYZ", 3)
    with pytest.raises(qf.QuantifyError, match="no gold items"):
        qf.Behaviour(["a", "b"], np.zeros((0, 2)), np.zeros(0, int), np.zeros(0, int))


@pytest.mark.parametrize("dim", ["symptom", "root_cause"])
def test_chosen_method_beats_counting_on_shifted_gold(profile, dim):
    beh = behaviour(profile, dim)
    sel = qf.select_method(beh, 120)
    assert set(sel.errors) == set(qf.METHODS)
    assert sel.error < sel.naive_error  # the first "done when"
    assert sel.error == min(sel.errors.values())
    assert sel.n_samples == 5 * 60


def test_bootstrap_interval_holds_the_estimate_and_adds_human_counts(profile):
    beh = behaviour(profile, "symptom")
    P = beh.P[:50]
    human = np.zeros(beh.k)
    human[beh.classes.index("hang")] = 10  # ten reports coded "hang" by people
    est = qf.estimate_shares(beh, "PCC", {"all": qf.Subset(P, human)}, n_boot=100)["all"]
    assert est.n == 60 and est.n_human == 10
    assert est.estimate.sum() == pytest.approx(1.0)
    # pooled exactly: 50 model-labeled rows' mean probability of hang plus 10 coded
    assert est.estimate[beh.classes.index("hang")] == pytest.approx((P[:, beh.classes.index("hang")].sum() + 10) / 60)
    lo, hi = qf.interval(est.replicates)
    assert np.all(lo <= est.estimate + 1e-9) and np.all(est.estimate <= hi + 1e-9)


def test_unseen_reports(gold, shared_cache):
    """Reports the profile never saw: a random 170 of gold held back, the model and its profile
    built on the other 406. Figures printed for docs/report.md; the asserts are what holds."""
    rng = np.random.default_rng(1)
    perm = rng.permutation(len(gold))
    te, tr = sorted(perm[:170]), sorted(perm[170:])

    def pick(v, ix):
        return [v[i] for i in ix]

    train = replace(
        gold,
        records=pick(gold.records, tr),
        labels={d: pick(v, tr) for d, v in gold.labels.items()},
        coders={k: {d: pick(v, tr) for d, v in c.items()} for k, c in gold.coders.items()},
        hash=gold.hash + "-heldout1",
    )
    prof = gold_profile(SPEC, train, ModelOptions())
    clf = make_classifier(SPEC, prof.gold.taxonomy, ModelOptions()).fit(prof.gold.records, prof.gold.labels)
    preds = clf.predict(pick(gold.records, te))
    for dim in ("symptom", "root_cause"):
        beh = behaviour(prof, dim)
        truth_l = pick(gold.labels[dim], te)
        rows = [i for i, v in enumerate(truth_l) if v is not None]
        P = _matrix(prof.calibrate(dim, [preds[dim][i] for i in rows]), beh.classes)
        truth = np.bincount([beh.classes.index(truth_l[i]) for i in rows], minlength=beh.k) / len(rows)
        sel = qf.select_method(beh, len(rows))
        est = qf.estimate_shares(beh, sel.method, {"all": qf.Subset(P)}, residuals=sel.residuals, n_boot=300)["all"]
        lo, hi = qf.interval(est.replicates)
        err, naive = qf.tv(est.estimate, truth), qf.tv(est.naive, truth)
        cover = float(np.mean((truth >= lo - 1e-9) & (truth <= hi + 1e-9)))
        print(f"{dim}: {sel.method} TV {err:.3f} (counting {naive:.3f}), coverage {cover:.2f}, n={len(rows)}")
        assert err < naive  # the correction helps on reports it never saw
        assert cover >= 0.8  # intervals cover the true share for at least 80% of categories


def test_errors_on_groups_are_measured_on_groups():
    # a classifier that confuses classes 0 and 1 (one group) but never crosses into class 2
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 60)
    P = np.zeros((len(y), 3))
    for i, c in enumerate(y):
        if c == 2:
            P[i, 2] = 1
        else:
            P[i, rng.integers(0, 2)] = 1
    beh = qf.Behaviour(["a", "b", "c"], P, y, np.arange(len(y)) % 5, probabilistic=False)
    sel = qf.select_method(beh, 60)
    assert sel.errors_on(np.eye(3)) == pytest.approx(sel.errors)
    groups = np.array([[1, 0], [1, 0], [0, 1]])
    on_groups = sel.errors_on(groups)
    assert on_groups["CC"] < 1e-12 < sel.errors["CC"]
    d = sel.as_dict(groups)
    assert d["error"] == on_groups[sel.method] and d["naive_error"] == on_groups["CC"]


def test_a_method_forced_by_the_user_keeps_the_protocols_measurements(profile):
    beh = behaviour(profile, "symptom")
    sel = qf.select_method(beh, 120)
    other = next(m for m in qf.METHODS if m != sel.method)
    forced = sel.forced(other)
    assert forced.method == other and forced.chosen_by == "user"
    assert forced.error == sel.errors[other] and forced.naive_error == sel.naive_error
    # the interval's error draws follow the forced method's own measured errors
    assert np.allclose(forced.residuals, forced.truths - forced.estimates[other])
    assert not np.allclose(forced.residuals, sel.residuals)
    assert forced.as_dict()["chosen_by"] == "user" and sel.as_dict()["chosen_by"] == "protocol"
    crisp = qf.select_method(replace(beh, probabilistic=False), 120)
    with pytest.raises(qf.QuantifyError, match="cannot be applied"):
        crisp.forced("PCC")
