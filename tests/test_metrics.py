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
