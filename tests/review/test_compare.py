"""`classify eval --compare`: kappa then, now and the change, and what differs between the runs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from classify.cli.main import app
from classify.evaluation.compare import CompareError, compare_metrics, render_comparison


def _run(tmp_path, name, kappas, gold_hash, gold_labels):
    d = tmp_path / name
    d.mkdir()
    meta = {"model": "m", "taxonomy": "t@1", "taxonomy_fingerprint": "f1", "gold_hash": gold_hash, "n_gold": 3}
    dims = {k: {"n": 3, "kappa": {"kappa": v, "lo": v - 0.1, "hi": v + 0.1}} for k, v in kappas.items()}
    (d / "metrics.json").write_text(json.dumps({"meta": meta, "dimensions": dims}))
    (d / "predictions.jsonl").write_text(
        "".join(json.dumps({"id": i, "gold_symptom": y}) + "\n" for i, y in gold_labels.items())
    )
    return d


def test_compare_deltas_and_changed_gold(tmp_path):
    old = _run(tmp_path, "old", {"symptom": 0.5, "root_cause": 0.3}, "h1", {"a": "crash", "b": "hang", "c": "crash"})
    new = {
        "dimensions": {
            "symptom": {"n": 4, "kappa": {"kappa": 0.6, "lo": 0.5, "hi": 0.7}},
            "extra": {"n": 2, "kappa": {"kappa": 0.1, "lo": 0.0, "hi": 0.2}},
        }
    }
    c = compare_metrics(
        new,
        {"model": "m", "taxonomy_fingerprint": "f2", "gold_hash": "h2"},
        old,
        {"a": {"symptom": "crash"}, "b": {"symptom": "crash"}, "d": {"symptom": "hang"}},
    )
    assert c["dimensions"]["symptom"]["delta"] == pytest.approx(0.1)
    assert c["dimensions"]["symptom"]["previous_n"] == 3
    assert "delta" not in c["dimensions"]["extra"]
    assert c["same_model"] and not c["same_gold"] and not c["same_taxonomy"]
    assert c["shared_items"] == 2 and c["gold_labels_changed"] == {"symptom": 1}
    md = "\n".join(render_comparison(c))
    assert "| symptom | 0.600 [0.500, 0.700] | 4 | 0.500 [0.400, 0.600] | 3 | +0.100 |" in md
    with pytest.raises(CompareError, match="no metrics.json"):
        compare_metrics(new, {}, tmp_path / "nowhere")


def test_previous_folds_reused_and_new_ids_hashed(tmp_path):
    from classify.evaluation.compare import previous_folds

    d = _run(tmp_path, "old", {"symptom": 0.5}, "h", {})
    meta = json.loads((d / "metrics.json").read_text())
    meta["meta"].update(mode="cv", params={"k": 3})
    (d / "metrics.json").write_text(json.dumps(meta))
    (d / "predictions.jsonl").write_text(
        "".join(json.dumps({"id": i, "fold": f}) + "\n" for i, f in (("a", 2), ("b", 0)))
    )
    folds, note = previous_folds(d, ["b", "a", "new"], 3)
    assert folds[:2] == [0, 2] and 0 <= folds[2] < 3
    assert folds == previous_folds(d, ["b", "a", "new"], 3)[0]  # hashing is stable
    assert note == "folds of the earlier run reused (2 records; 1 new ones hashed to a fold)"
    folds, note = previous_folds(d, ["a"], 5)
    assert folds is None and "not a 5-fold" in note


def test_cross_validate_rejects_bad_folds(gold):
    from classify.evaluation.crossval import cross_validate

    with pytest.raises(ValueError, match="one fold in 0..4"):
        cross_validate("embed-centroid", gold, k=5, folds=[0] * (len(gold) - 1))
    with pytest.raises(ValueError, match="one fold in 0..1"):
        cross_validate("embed-centroid", gold, k=2, folds=[3] * len(gold))


def test_eval_compare_with_a_bad_run_fails_before_evaluating(tmp_path):
    res = CliRunner().invoke(app, ["eval", "--compare", str(tmp_path), "--out-dir", str(tmp_path / "evals")])
    assert res.exit_code == 2 and "no metrics.json" in " ".join(res.output.split())
    assert not (tmp_path / "evals").exists()
