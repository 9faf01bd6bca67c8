"""Issue #11 items 14, 17, 18, 19 and the project-folder defaults of `classify eval`, `classify
leaderboard` and `classify gold stats`: what an evaluation says must be what it measured."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core import paths
from classify.core.gold import gold_from_records
from classify.evaluation.crossval import cross_validate
from classify.evaluation.metrics import compute_metrics
from classify.evaluation.report import write_eval

runner = CliRunner()


def _flat(text: str) -> str:
    return " ".join(text.split())


def _gold_lines(path, n, start=0):
    lines = paths.DEFAULT_GOLD.read_text(encoding="utf-8").splitlines()[start : start + n]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_gold_stats_reads_the_project_folders_gold(tmp_path, monkeypatch):
    _gold_lines(tmp_path / "gold" / "reports.jsonl", 40)
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["gold", "stats", "--n-boot", "100"])
    assert r.exit_code == 0, r.output
    assert "40 records" in r.output and str(tmp_path.name) in _flat(r.output)


def test_screening_defaults_are_the_project_folders(tmp_path, monkeypatch):
    lines = paths.DEFAULT_SCREENING.read_text(encoding="utf-8").splitlines()[:25]
    (tmp_path / "gold").mkdir()
    (tmp_path / "gold" / "screening.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["gold", "stats", "--task", "screening", "--n-boot", "100"])
    assert r.exit_code == 0, r.output
    assert "25 records" in r.output
    from classify.core.screening import load_screening_gold, screening_taxonomy

    assert len(load_screening_gold()) == 25 and screening_taxonomy().path == paths.DEFAULT_SCREENING_TAXONOMY


def test_eval_writes_into_the_projects_evals_and_the_leaderboard_reads_them(tmp_path, monkeypatch):
    gold = _gold_lines(tmp_path / "g.jsonl", 120)
    (tmp_path / "proj" / "sub").mkdir(parents=True)
    (tmp_path / "proj" / "classify.toml").write_text("")
    monkeypatch.chdir(tmp_path / "proj" / "sub")
    r = runner.invoke(app, ["eval", "-m", "tfidf-logreg", "--gold", str(gold), "--n-boot", "100", "-k", "3"])
    assert r.exit_code == 0, r.output
    runs = list((tmp_path / "proj" / "evals").iterdir())
    assert len(runs) == 1 and (runs[0] / "report.md").exists()
    lb = runner.invoke(app, ["leaderboard"])
    # One row, this run's (the console is 160 wide here: names are cut); the reference runs stay out.
    assert lb.exit_code == 0 and lb.output.count("│ tfidf-lo") == 1 and "embed-" not in lb.output, lb.output
    assert "project folder" in _flat(runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "200"}).output)


def test_limit_is_announced_as_what_is_evaluated_with_a_small_sample_warning(tmp_path):
    gold = _gold_lines(tmp_path / "g.jsonl", 150)
    r = runner.invoke(
        app,
        ["eval", "-m", "tfidf-logreg", "--gold", str(gold), "--limit", "5", "--n-boot", "100"]
        + ["--out-dir", str(tmp_path / "evals")],
    )
    assert r.exit_code == 0, r.output
    out = _flat(r.output)
    assert "5 of 150 gold records evaluated" in out and "5-fold cross-validation on 150" not in out
    assert "/5 done" not in out and "done (1 of" in out  # folds named by what they hold
    assert "small sample" in out and "n=5" in out
    run = next((tmp_path / "evals").iterdir())
    report = (run / "report.md").read_text()
    assert "small sample" in report and "evaluated: 5 of the 150 gold records" in report
    assert json.loads((run / "metrics.json").read_text())["meta"]["n_evaluated"] == 5


@pytest.fixture(scope="module")
def small_cv(gold, taxonomy):
    return cross_validate("tfidf-logreg", gold_from_records(gold.records[:120], taxonomy), k=3)


def test_no_confidence_gives_n_a_selective_figures_not_numbers(small_cv, tmp_path, capsys):
    # What an LLM without confidences returns: labels only.
    res = replace(
        small_cv,
        predictions={
            d: [None if p is None else replace(p, confidence=None, proba=None) for p in ps]
            for d, ps in small_cv.predictions.items()
        },
    )
    m = compute_metrics(res, n_boot=100)
    sel = m["dimensions"]["symptom"]["selective"]
    assert [r["kappa"] for r in sel[:-1]] == [None] * 9 and sel[-1]["kappa"] is not None
    out = write_eval(res, m, tmp_path)
    report = (out / "report.md").read_text()
    assert "| 70% | n/a | n/a |" in report and "No confidences to rank by for symptom" in report
    json.loads((out / "metrics.json").read_text())  # null, not NaN: still valid JSON
    from classify.cli.evaluate import print_metrics

    print_metrics(m, "x", None)
    printed = capsys.readouterr().out
    assert "-0.600" not in printed and "n/a" in printed


def test_report_marks_undefined_per_category_figures(small_cv, tmp_path):
    m = compute_metrics(small_cv, n_boot=100)
    cats = m["dimensions"]["root_cause"]["per_category"]
    unsupported = [c for c, v in cats.items() if v["support"] == 0]
    assert unsupported, "the 120-record sample lacks some root causes"
    assert all(cats[c]["kappa_ovr"] is None for c in unsupported)
    report = (write_eval(small_cv, m, tmp_path) / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith(f"| {unsupported[0]} | 0 |"))
    assert row.endswith("| n/a |") and "n/a: undefined, not zero" in report


def test_confusion_png_has_a_row_normalised_panel_and_the_selective_legend_sits_outside(small_cv, tmp_path):
    import matplotlib.image as mpimg

    m = compute_metrics(small_cv, n_boot=100)
    out = write_eval(small_cv, m, tmp_path)
    img = mpimg.imread(out / "confusion_symptom.png")
    assert img.shape[1] > 1.7 * img.shape[0]  # two panels side by side: counts and row shares
    sel = mpimg.imread(out / "selective.png")
    assert sel.shape[1] > 1.6 * sel.shape[0]  # the legend's column beside the axes


def _tamper_gold(src, dst, run, n):
    """A reviewed gold: `n` records whose symptom the run got wrong now carry the run's prediction."""
    preds = {r["id"]: r for r in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}
    rows, changed = [], 0
    for line in src.read_text().splitlines():
        row = json.loads(line)
        p = preds.get(row["id"])
        if changed < n and p and p["symptom"] != row["symptom"]:
            row["symptom"] = p["symptom"]
            changed += 1
        rows.append(row)
    assert changed == n
    dst.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dst


def test_compare_reuses_the_runs_model_and_options_and_gives_a_paired_ci(tmp_path):
    gold = _gold_lines(tmp_path / "g.jsonl", 150)
    ev = tmp_path / "evals"
    base = ["--n-boot", "200", "-k", "3", "--out-dir", str(ev)]
    r = runner.invoke(app, ["eval", "-m", "tfidf-logreg", "--opt", "C=2", "--gold", str(gold)] + base)
    assert r.exit_code == 0, r.output
    first = next(ev.iterdir())
    gold2 = _tamper_gold(gold, tmp_path / "g2.jsonl", first, 8)
    r = runner.invoke(app, ["eval", "--gold", str(gold2), "--compare", str(first)] + base)
    assert r.exit_code == 0, r.output
    out = _flat(r.output)
    assert "evaluating the compared run's model and options (tfidf-logreg C=2" in out
    second = next(p for p in ev.iterdir() if p != first)
    doc = json.loads((second / "metrics.json").read_text())
    assert doc["meta"]["model"] == "tfidf-logreg" and doc["meta"]["options"]["extra"] == {"C": 2}
    c = doc["comparison"]
    assert c["same_model"] and c["same_options"] and c["same_taxonomy"] and not c["same_gold"]
    assert c["gold_labels_changed"]["symptom"] == 8 and c["gold_changes_to_model_label"]["symptom"] == 8
    p = c["dimensions"]["symptom"]["paired"]
    assert p["n"] == 150 and p["delta"] > 0 and p["lo"] <= p["delta"] <= p["hi"]
    assert "8 to the earlier run's prediction" in out and "paired change" in out
    assert "paired change [95% CI]" in (second / "report.md").read_text()

    # Another spec than the run's: evaluated as asked, and said clearly.
    meta_doc = json.loads((first / "metrics.json").read_text())
    meta_doc["meta"]["model"] = "embed-knn"
    other = tmp_path / "other"
    shutil.copytree(first, other)
    (other / "metrics.json").write_text(json.dumps(meta_doc))
    r = runner.invoke(app, ["eval", "-m", "tfidf-logreg", "--gold", str(gold2), "--compare", str(other)] + base)
    assert r.exit_code == 0, r.output
    assert "--model tfidf-logreg differs from the compared run's model embed-knn" in _flat(r.output)
    # Other options than the run's: said clearly too.
    r = runner.invoke(app, ["eval", "--opt", "C=5", "--gold", str(gold2), "--compare", str(first)] + base)
    assert r.exit_code == 0 and "the options differ from the compared run's" in _flat(r.output), r.output


def test_test_file_that_repeats_gold_under_new_ids_is_refused_on_the_command_line(tmp_path):
    gold = _gold_lines(tmp_path / "g.jsonl", 80)
    rows = [json.loads(line) for line in paths.DEFAULT_GOLD.read_text().splitlines()[:3]]
    for i, row in enumerate(rows):
        row["id"] = f"new-{i}"
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = runner.invoke(
        app,
        ["eval", "-m", "tfidf-logreg", "--gold", str(gold), "--test", str(tmp_path / "t.jsonl")]
        + ["--out-dir", str(tmp_path / "evals")],
    )
    assert r.exit_code == 2 and "3 of 3 records have the title and body of a gold record" in _flat(r.output)
    assert not (tmp_path / "evals").exists()


def test_llm_eval_reports_progress_every_few_records_and_says_n_a_without_confidence(taxonomy, monkeypatch):
    from fake_openai_server import FakeOpenAI

    from classify.classifiers.base import ModelOptions
    from classify.core.progress import Progress
    from classify.evaluation import crossval
    from classify.evaluation.pipeline import run_eval

    monkeypatch.setattr(crossval, "PROGRESS_CHUNK", 3)
    seen: list[int] = []
    total: list[int] = []
    with FakeOpenAI({d: dim.ids for d, dim in taxonomy.dimensions.items()}) as fake:
        opts = ModelOptions(show_progress=False, extra={"base_url": fake.base_url})
        run = run_eval(
            "openai:fake-model",
            limit=40,
            n_boot=100,
            options=opts,
            out_dir=None,
            progress=Progress(labeled=seen.append, total=total.append),
        )
        assert fake.n_requests == 40
    assert total == [40] and sum(seen) == 40
    assert max(seen) <= 3 and len(seen) >= 40 / 3  # every few records, not one jump per fold
    # The fake server's answers carry no confidence: no selective figure is made up.
    sym = run.metrics["dimensions"]["symptom"]
    if not sym["has_confidence"]:
        assert all(r["kappa"] is None for r in sym["selective"][:-1])


def test_gold_too_small_for_the_folds_is_refused_before_any_training(gold):
    from classify.core.gold import gold_from_records
    from classify.evaluation.crossval import cross_validate

    one_cause = next(r for r in gold.records if r.fields.get("root_cause"))
    no_cause = [r for r in gold.records if not r.fields.get("root_cause")][:11]
    small = gold_from_records([one_cause, *no_cause], gold.taxonomy)
    with pytest.raises(ValueError, match=r"1 root_cause label\(s\), too few for 5-fold cross-validation"):
        cross_validate("tfidf-logreg", small, k=5)
    # two labeled records in different folds: every training part holds one, so it trains
    two = [one_cause, next(r for r in gold.records if r.fields.get("root_cause") and r.id != one_cause.id)]
    res = cross_validate("tfidf-logreg", gold_from_records([*two, *no_cause], gold.taxonomy), k=2, seed=0)
    assert all(p is not None for p in res.predictions["symptom"])
