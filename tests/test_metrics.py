import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from classify.evaluation.metrics import INVALID, dimension_report, kappa_ci, selective_curve


def test_kappa_is_sklearns_on_a_known_case():
    # Classic 2x2 example: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no -> kappa 0.4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    r = kappa_ci(a, b, n_boot=500)
    assert r["kappa"] == pytest.approx(0.4)
    assert r["kappa"] == pytest.approx(cohen_kappa_score(a, b))
    assert r["lo"] < 0.4 < r["hi"] and r["n"] == 50 and r["n_boot"] == 500


def test_ci_narrows_with_more_items():
    rng = np.random.default_rng(1)

    def sample(n):
        a = rng.integers(0, 3, n)
        b = np.where(rng.random(n) < 0.8, a, rng.integers(0, 3, n))
        r = kappa_ci([str(x) for x in a], [str(x) for x in b], n_boot=400)
        return r["hi"] - r["lo"]

    assert sample(2000) < sample(60)


def test_selective_curve_orders_by_confidence():
    y_true = ["a", "a", "b", "b"]
    y_pred = ["a", "b", "b", "a"]
    conf = [0.9, 0.1, 0.8, 0.2]
    rows = selective_curve(y_true, y_pred, conf, steps=[50, 100])
    assert rows[0]["n"] == 2 and rows[0]["accuracy"] == 1.0 and rows[0]["kappa"] == 1.0
    assert rows[1]["n"] == 4 and rows[1]["accuracy"] == 0.5


def test_invalid_predictions_count_as_disagreement():
    rep = dimension_report(
        ["a", "b", "a", "b"], ["a", "b", None, "b"], [0.9, 0.9, None, 0.5], ["a", "b", "c"], n_boot=200
    )
    assert rep["n_invalid"] == 1 and rep["accuracy"] == 0.75
    assert INVALID in rep["confusion"]["labels"] and "c" not in rep["confusion"]["labels"]
    assert rep["per_category"]["c"]["support"] == 0
    assert rep["kappa"]["kappa"] == pytest.approx(cohen_kappa_score(["a", "b", "a", "b"], ["a", "b", INVALID, "b"]))


def test_undefined_figures_are_none_not_a_number_that_looks_measured():
    # "c" has no gold item and is never predicted; "b" is predicted once but never gold.
    rep = dimension_report(["a", "a", "d", "d"], ["a", "b", "d", "d"], [0.9, 0.8, 0.7, 0.6], ["a", "b", "c", "d"])
    c, b, a = rep["per_category"]["c"], rep["per_category"]["b"], rep["per_category"]["a"]
    assert c == {"precision": None, "recall": None, "f1": None, "support": 0, "kappa_ovr": None}  # was kappa 1.0
    assert b["precision"] == 0.0 and b["recall"] is None and b["f1"] == 0.0 and b["kappa_ovr"] is None
    assert a["precision"] == 1.0 and a["recall"] == 0.5 and a["kappa_ovr"] == pytest.approx(0.5)
    missed = dimension_report(["a", "b", "b"], ["a", "a", "a"], [0.9, 0.8, 0.7], ["a", "b"])["per_category"]["b"]
    assert missed["precision"] is None and missed["recall"] == 0.0 and missed["f1"] == 0.0  # was precision 0.00


def test_kappa_against_one_gold_class_is_undefined_whatever_the_accuracy():
    # 29 of 30 right, but gold holds one class: sklearn says 0, which reads as "no better than chance".
    y_true, y_pred = ["x"] * 30, ["x"] * 29 + ["y"]
    assert cohen_kappa_score(y_true, y_pred) == 0
    assert kappa_ci(y_true, y_pred, n_boot=100, reference=True)["kappa"] is None
    # A constant prediction against two gold classes is a measured 0, not n/a.
    assert kappa_ci(["x", "y", "x"], ["x", "x", "x"], n_boot=100, reference=True)["kappa"] == 0
    # Coders: neither pass is the reference; both constant and equal is undefined (chance agreement 1).
    same = kappa_ci(["x"] * 5, ["x"] * 5, n_boot=100)
    assert same["kappa"] is None and same["lo"] is None and same["n_boot_undefined"] == 100
    # The selective slice of the 50% most confident holds one gold group at 100% accuracy: n/a, not 0.
    rows = selective_curve(["x", "x", "y", "x"], ["x", "x", "x", "x"], [0.9, 0.8, 0.1, 0.2], steps=[50, 100])
    assert rows[0]["kappa"] is None and rows[0]["accuracy"] == 1.0
    assert rows[1]["kappa"] == 0 and rows[1]["accuracy"] == 0.75


def test_bootstrap_leaves_out_resamples_with_one_class():
    # 6 items, 5 of one class: many resamples draw no "y"; they must not enter the percentiles as 0 or 1.
    y_true = ["x", "x", "x", "x", "x", "y"]
    y_pred = ["x", "x", "x", "x", "y", "y"]
    r = kappa_ci(y_true, y_pred, n_boot=500, reference=True)
    assert 0 < r["n_boot_undefined"] < 500
    a, b = np.asarray(y_true, dtype=object), np.asarray(y_pred, dtype=object)
    rng, kept = np.random.default_rng(0), []
    for _ in range(500):
        idx = rng.integers(0, 6, 6)
        if len(set(a[idx])) > 1:
            kept.append(cohen_kappa_score(a[idx], b[idx]))
    assert len(kept) == 500 - r["n_boot_undefined"]
    assert [r["lo"], r["hi"]] == pytest.approx(list(np.quantile(kept, [0.025, 0.975])))


def test_selective_rows_are_none_without_confidences():
    rows = selective_curve(["a", "b", "a", "b"], ["a", "b", "b", "b"], [None] * 4, steps=[50, 70, 100])
    assert [r["kappa"] for r in rows[:2]] == [None, None] and rows[0]["accuracy"] is None
    assert rows[2]["n"] == 4 and rows[2]["kappa"] == pytest.approx(0.5) and rows[2]["accuracy"] == 0.75
    # The same confidence for every item orders nothing either.
    assert selective_curve(["a", "b"], ["a", "b"], [1.0, 1.0], steps=[50])[0]["kappa"] is None
    rep = dimension_report(["a", "b"], ["a", "b"], [None, None], ["a", "b"], n_boot=100)
    assert rep["has_confidence"] is False


def test_paired_delta_ci_on_the_same_items():
    from classify.evaluation.metrics import paired_delta_ci

    rng = np.random.default_rng(3)
    gold = rng.integers(0, 3, 200).astype(str)
    before = np.where(rng.random(200) < 0.6, gold, rng.integers(0, 3, 200).astype(str))
    after = np.where(rng.random(200) < 0.3, before, gold)  # after fixes most of before's errors
    d = paired_delta_ci((gold, before), (gold, after), n_boot=300)
    assert d["delta"] == pytest.approx(cohen_kappa_score(gold, after) - cohen_kappa_score(gold, before))
    assert 0 < d["lo"] < d["delta"] < d["hi"] and d["n"] == 200
    # Paired: far narrower than the two unpaired intervals would suggest.
    kb, ka = kappa_ci(gold, before, n_boot=300), kappa_ci(gold, after, n_boot=300)
    assert d["hi"] - d["lo"] < (kb["hi"] - kb["lo"]) + (ka["hi"] - ka["lo"])
    with pytest.raises(ValueError):
        paired_delta_ci((gold, before), (gold[:5], after[:5]))


def test_dimension_without_items_is_all_none():
    rep = dimension_report([], [], [], ["a", "b"], n_boot=100)
    assert rep["n"] == 0 and rep["kappa"]["kappa"] is None and rep["accuracy"] is None
    assert rep["per_category"]["a"]["kappa_ovr"] is None and rep["selective"][-1]["kappa"] is None


def test_bootstrap_kappa_equals_scikit_learns_including_undefined_cases():
    import numpy as np

    from classify.evaluation.metrics import _codes, _kappa, _kappa_codes

    rng = np.random.default_rng(1)
    labels = np.array(["a", "b", "c", "d", "__invalid__"], dtype=object)
    cases = [(rng.choice(labels, 40), rng.choice(labels, 40)) for _ in range(200)]
    cases += [
        (np.array(["a"] * 5, dtype=object), np.array(["a"] * 5, dtype=object)),  # undefined
        (np.array(["a"] * 5, dtype=object), np.array(["a", "b", "a", "a", "a"], dtype=object)),  # one gold class
        (np.array(["a", "b"] * 3, dtype=object), np.array(["a", "b"] * 3, dtype=object)),  # perfect
    ]
    for a, b in cases:
        (ca, cb), k = _codes(a, b)
        for ref in (False, True):
            want, got = _kappa(a, b, ref), _kappa_codes(ca, cb, k, ref)
            assert (want is None) == (got is None), (a, b, ref)
            if want is not None:
                assert got == pytest.approx(want, abs=1e-12)
