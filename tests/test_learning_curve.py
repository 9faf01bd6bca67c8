import json
import math

import pytest
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.gold import gold_from_records
from classify.evaluation.crossval import assign_folds, cross_validate, stratify_keys
from classify.evaluation.leaks import train_test_leaks
from classify.evaluation.learning_curve import CurveFit, extrapolate, fit_curve, parse_fractions
from tests.conftest import write_jsonl

runner = CliRunner()


@pytest.fixture(scope="module")
def small_gold(gold, taxonomy):
    return gold_from_records(gold.records[:150], taxonomy)


def test_train_fraction_samples_are_nested_sized_and_never_the_test_fold(small_gold):
    folds = assign_folds(small_gold, 3, 0)
    runs = {
        fr: cross_validate("tfidf-logreg", small_gold, k=3, folds=folds, train_fraction=fr) for fr in (0.3, 0.6, 1.0)
    }
    keys = stratify_keys(small_gold)
    for fr, res in runs.items():
        assert train_test_leaks(res) == []
        # Stratified: every stratum is cut at about the fraction (a plain random sample of a
        # 40-item stratum is off by 3 at 0.3 as often as not).
        for f, ids in res.train_ids.items():
            strata = {}
            for r, x, key in zip(small_gold.records, folds, keys):
                if x != f:
                    strata.setdefault(key, [0, 0])[0] += 1
                    strata[key][1] += r.id in ids
            for full_n, kept in strata.values():
                assert abs(kept - fr * full_n) <= 1.5, (fr, key, full_n, kept)
        for f, ids in res.train_ids.items():
            full = sum(1 for x in folds if x != f)
            assert len(ids) == math.ceil(fr * full)
            assert not ids & {r.id for r, x in zip(small_gold.records, folds) if x == f}
        # Every record is still predicted: the sample shrinks training, never the evaluated fold.
        assert all(p is not None for p in res.predictions["symptom"])
    for f in range(3):
        assert runs[0.3].train_ids[f] < runs[0.6].train_ids[f] < runs[1.0].train_ids[f]
    assert runs[0.3].params["train_fraction"] == 0.3 and "train_fraction" not in runs[1.0].params
    # another sample seed: same folds and size, another draw
    other = cross_validate("tfidf-logreg", small_gold, k=3, folds=folds, train_fraction=0.3, sample_seed=7)
    assert [len(other.train_ids[f]) for f in range(3)] == [len(runs[0.3].train_ids[f]) for f in range(3)]
    assert other.train_ids != runs[0.3].train_ids
    with pytest.raises(ValueError, match="train_fraction"):
        cross_validate("tfidf-logreg", small_gold, k=3, train_fraction=0)


def test_fit_recovers_a_known_power_law_and_says_when_a_target_is_out_of_reach():
    ns = [50, 100, 200, 300, 400]
    ks = [0.8 - 2.0 * n**-0.5 for n in ns]
    fit = fit_curve(ns, ks)
    assert fit is not None
    assert fit.a == pytest.approx(0.8, abs=0.01) and fit.c == pytest.approx(0.5, abs=0.05)
    assert fit.n_for(0.75) == pytest.approx(1600, rel=0.1)
    assert math.isinf(fit.n_for(0.85))
    assert fit_curve([100, 200], [0.5, 0.6]) is None


def test_extrapolation_scales_to_whole_gold_records():
    # One dimension labeled on half the records: 200 labeled per fold needs 200*5/4/0.5 = 500 gold.
    curve = {
        "n_gold": 400,
        "points": [
            {"dimensions": {"d": {"n_train": n, "kappa": CurveFit(0.9, 2.0, 0.5).kappa_at(n), "n": 200}}}
            for n in (20, 40, 80, 160)
        ],
    }
    out = extrapolate(curve, {"d": 0.9 - 2.0 * 200**-0.5}, k=5)
    assert out["d"]["gold_needed"] == pytest.approx(500, rel=0.05)
    assert extrapolate(curve, {"d": 0.95}, k=5)["d"]["gold_needed"] is None


@pytest.mark.parametrize("bad", ["1", "0,0.5", "0.5,1.5", "a,b"])
def test_bad_fractions_are_refused(bad):
    with pytest.raises(ValueError, match="--fractions"):
        parse_fractions(bad)


def test_cli_writes_curve_table_and_picture(tmp_path, gold_rows, taxonomy):
    g = write_jsonl(tmp_path / "gold.jsonl", gold_rows[:150])
    out_root = tmp_path / "evals"
    r = runner.invoke(
        app,
        [
            "learning-curve",
            "--model",
            "tfidf-logreg",
            "--gold",
            str(g),
            "--fractions",
            "0.4,0.7,1",
            "--folds",
            "3",
            "--n-boot",
            "100",
            "--target",
            "symptom=0.9",
            "--opt",
            "C=3",
            "--repeats",
            "2",
            "--out-dir",
            str(out_root),
        ],
    )
    assert r.exit_code == 0, r.output
    (run,) = list(out_root.iterdir())
    assert run.name.endswith("-learning-curve-tfidf-logreg_C_3")  # options name the run, as in eval
    # A name is only honest if the option it carries reaches the model: C=3 must not fit like C=0.001.
    from classify.classifiers.base import ModelOptions, make_classifier
    from classify.core.gold import load_gold

    small = load_gold(g, taxonomy)
    fitted = [
        make_classifier("tfidf-logreg", taxonomy, ModelOptions(extra={"C": c})).fit(small.records, small.labels)
        for c in (3, 0.001)
    ]
    strong, weak = (f.predict(small.records[:20])["symptom"] for f in fitted)
    assert max(abs(a.confidence - b.confidence) for a, b in zip(strong, weak)) > 0.05
    doc = json.loads((run / "curve.json").read_text())
    assert [p["fraction"] for p in doc["points"]] == [0.4, 0.7, 1.0]
    n = [p["dimensions"]["symptom"]["n_train"] for p in doc["points"]]
    assert n[0] < n[1] < n[2] <= 100
    for p in doc["points"]:
        for v in p["dimensions"].values():
            assert -1 <= v["lo"] <= v["hi"] <= 1 and -1 <= v["kappa"] <= 1
    assert doc["extrapolation"]["symptom"]["target"] == 0.9
    assert doc["repeats"] == 2
    assert [p["dimensions"]["symptom"]["draws"] for p in doc["points"]] == [2, 2, 1]
    assert doc["points"][-1]["dimensions"]["symptom"]["sd"] == 0.0
    assert " sd " in (run / "report.md").read_text()
    assert (run / "learning_curve.png").stat().st_size > 5000
    assert "| symptom |" in (run / "report.md").read_text()
    # Not a leaderboard run: no metrics.json.
    assert not (run / "metrics.json").exists()


def test_cli_refuses_unknown_target_and_llm_specs(tmp_path):
    r = runner.invoke(
        app, ["learning-curve", "--model", "tfidf-logreg", "--target", "nope=0.5", "--out-dir", str(tmp_path)]
    )
    assert r.exit_code != 0 and "unknown dimension" in r.output
    for spec in ("local:smollm2-135m", "ensemble:tfidf-logreg+openai:gpt-4o-mini"):
        r = runner.invoke(app, ["learning-curve", "--model", spec, "--out-dir", str(tmp_path)])
        assert r.exit_code == 2 and "few-shot" in r.output
    assert not any(tmp_path.iterdir())
