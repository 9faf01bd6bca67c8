"""Cross-validation on a gold set smaller than its folds can stratify: a clear one-line refusal
naming what is missing (or, where every fold can still train, folds without stratification), never
scikit-learn's "n_splits=5 cannot be greater than the number of members in each class"."""

from __future__ import annotations

import json

import pytest
from conftest import caused_records
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.gold import gold_from_records
from classify.evaluation.crossval import assign_folds, cross_validate

runner = CliRunner()


def _uncaused(gold, per_symptom, n_symptoms):
    """Records without a root cause (stratified by symptom), `per_symptom` of each of `n_symptoms`."""
    by: dict[str, list] = {}
    for r in gold.records:
        if not r.fields.get("root_cause"):
            by.setdefault(r.fields["symptom"], []).append(r)
    groups = [v[:per_symptom] for v in by.values() if len(v) >= per_symptom][:n_symptoms]
    assert len(groups) == n_symptoms
    return [r for g in groups for r in g]


def test_strata_all_smaller_than_the_folds_still_get_folds(gold):
    # 4 causes of one record each + 3 symptoms of 2 records each: no stratum reaches 5
    small = gold_from_records(caused_records(gold, 4) + _uncaused(gold, 2, 3), gold.taxonomy)
    folds = assign_folds(small, k=5, seed=0)
    assert sorted(set(folds)) == [0, 1, 2, 3, 4]
    assert all(folds.count(f) == 2 for f in range(5))
    res = cross_validate("tfidf-logreg", small, k=5, seed=0)
    assert all(p is not None and p.label for p in res.predictions["symptom"])


def test_fewer_records_than_folds_is_refused_in_one_line(gold):
    tiny = gold_from_records(caused_records(gold, 3), gold.taxonomy)
    with pytest.raises(ValueError, match=r"^gold has 3 record\(s\), too few for 5-fold cross-validation"):
        assign_folds(tiny, k=5)


def test_eval_on_five_records_without_a_cause_names_the_dimension(gold, tmp_path, monkeypatch):
    monkeypatch.setenv("CLASSIFY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    # the first five shipped gold records: no root cause, symptoms in strata of 3 and 2
    recs = [r for r in gold.records if not r.fields.get("root_cause")][:5]
    path = tmp_path / "gold5.jsonl"
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recs), encoding="utf-8")
    r = runner.invoke(app, ["eval", "--model", "tfidf-logreg", "--gold", str(path)])
    assert r.exit_code != 0
    assert "0 root_cause label(s), too few for 5-fold" in " ".join(r.output.split())
    assert "n_splits" not in r.output and "Traceback" not in r.output
