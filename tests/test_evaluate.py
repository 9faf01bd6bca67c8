import json

import pytest

from classify.core.gold import gold_from_records
from classify.evaluation.crossval import assign_folds, cross_validate, evaluate_on_test
from classify.evaluation.leaks import train_test_leaks
from classify.evaluation.metrics import compute_metrics
from classify.evaluation.report import write_eval


def test_folds_cover_everything_and_spread_rare_classes(gold):
    folds = assign_folds(gold, k=5, seed=0)
    assert set(folds) == set(range(5))
    rc_idx, rc = gold.labeled("root_cause")
    # software_incompatibility (the commonest root cause) must be in every fold
    per_fold = {folds[i] for i, y in zip(rc_idx, rc) if y == "software_incompatibility"}
    assert per_fold == set(range(5))
    assert assign_folds(gold, 5, 0) == folds and assign_folds(gold, 5, 1) != folds


@pytest.fixture(scope="module")
def part_gold(gold, taxonomy):
    """Half of gold: every path of a 5-fold CV and its report, in half the training time."""
    return gold_from_records(gold.records[:300], taxonomy)


@pytest.fixture(scope="module")
def cv_result(part_gold):
    return cross_validate("tfidf-logreg", part_gold)


@pytest.fixture(scope="module")
def small_gold(gold, taxonomy):
    return gold_from_records(gold.records[:160], taxonomy)


def test_cv_predicts_every_record_with_a_model_that_never_saw_it(part_gold, cv_result):
    res, gold = cv_result, part_gold
    assert train_test_leaks(res) == []
    for f, ids in res.train_ids.items():
        test_ids = {r.id for r, ff in zip(gold.records, res.folds) if ff == f}
        assert test_ids and not (test_ids & ids)
        assert len(ids) + len(test_ids) == len(gold)
    assert all(p is not None for p in res.predictions["symptom"])
    m = compute_metrics(res, n_boot=200)
    n_cause = len(gold.labeled("root_cause")[0])
    assert m["dimensions"]["root_cause"]["n"] == n_cause
    assert m["dimensions"]["root_cause"]["n_without_label"] == len(gold) - n_cause
    assert m["dimensions"]["root_cause_group"]["level"] == "group"
    assert 0 < m["dimensions"]["symptom"]["kappa"]["kappa"] < 1
    assert m["coders"]["symptom"]["n"] == len(gold)


def test_leak_detector_catches_a_leak(small_gold):
    res = cross_validate("tfidf-logreg", small_gold, k=2)
    res.train_ids[0].add(next(r.id for r, f in zip(small_gold.records, res.folds) if f == 0))
    assert len(train_test_leaks(res)) == 1


def test_limit_evaluates_a_sample(small_gold):
    res = cross_validate("tfidf-logreg", small_gold, limit=50)
    evaluated = [f for f in res.folds if f != -2]
    assert len(evaluated) == 50
    m = compute_metrics(res, n_boot=100)
    assert m["dimensions"]["symptom"]["n"] == 50


def test_held_out_test_file(gold, taxonomy):
    train = gold_from_records(gold.records[:150], taxonomy)
    test = gold_from_records(gold.records[300:], taxonomy)
    n_test = len(gold) - 300
    res = evaluate_on_test("tfidf-logreg", train, test)
    assert res.mode == "test" and len(res.predictions["symptom"]) == n_test
    assert all(p.label in taxonomy.dimensions["symptom"].ids for p in res.predictions["symptom"])
    with pytest.raises(ValueError, match=f"shares {n_test} ids"):
        evaluate_on_test("tfidf-logreg", gold, test)


def test_report_files(part_gold, cv_result, tmp_path):
    res, gold = cv_result, part_gold
    m = compute_metrics(res, n_boot=100)
    out = write_eval(res, m, tmp_path)
    files = {p.name for p in out.iterdir()}
    assert {
        "metrics.json",
        "report.md",
        "predictions.jsonl",
        "selective.png",
        "confusion_symptom.png",
        "confusion_root_cause.png",
        "confusion_root_cause_group.png",
    } <= files
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["meta"]["gold_hash"] == gold.hash and doc["meta"]["taxonomy"] == "gpu-kernel-issues@1"
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == len(gold) and {"id", "fold", "gold_symptom", "symptom", "symptom_proba"} <= set(preds[0])
    assert (out / "confusion_symptom.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "coders' kappa" in (out / "report.md").read_text()


def test_run_folder_and_report_name_the_options(cv_result, tmp_path):
    m = compute_metrics(cv_result, n_boot=100)
    meta = {"options": {"encoder": None, "include_discussion": True, "extra": {"strategy": "few-shot", "k": 2}}}
    out = write_eval(cv_result, m, tmp_path, extra_meta=meta)
    assert out.name.endswith("-tfidf-logreg_k_2_strategy_few-shot")
    assert "- run: `tfidf-logreg k=2 strategy=few-shot`" in (out / "report.md").read_text()
    plain = write_eval(cv_result, m, tmp_path / "plain")
    assert plain.name.endswith("-tfidf-logreg") and "- run:" not in (plain / "report.md").read_text()


def test_two_runs_in_the_same_second_get_their_own_folders(tmp_path):
    from classify.evaluation.report import unique_dir

    a, b = unique_dir(tmp_path / "run"), unique_dir(tmp_path / "run")
    assert a != b and a.is_dir() and b.is_dir() and b.name == "run-2"
