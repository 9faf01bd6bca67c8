import json

from typer.testing import CliRunner

from classify.cli import app
from classify.paths import DEFAULT_INPUT
from classify.screening import load_screening_gold

runner = CliRunner()


def test_screening_gold_maps_booleans_and_coders():
    g = load_screening_gold()
    assert len(g) == 563
    assert g.labels["screening"].count("failure_report") == 407 and g.labels["screening"].count("other") == 156
    assert set(g.coders) == {"a", "b"} and all(v in ("failure_report", "other") for v in g.coders["a"]["screening"])


def test_eval_task_screening(tmp_path):
    r = runner.invoke(app, ["eval", "--task", "screening", "--model", "tfidf-logreg", "--folds", "3", "--n-boot", "200",
                            "--out-dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    (run,) = list(tmp_path.iterdir())
    m = json.loads((run / "metrics.json").read_text())
    assert m["dimensions"]["screening"]["n"] == 563 and m["coders"]["screening"]["n"] == 563
    assert (run / "confusion_screening.png").exists()


def test_run_with_screening(tmp_path):
    out = tmp_path / "l.jsonl"
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--screen", "--screen-model", "tfidf-logreg",
                            "--input", str(DEFAULT_INPUT), "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(rows) == 141
    kept = [x for x in rows if x["screening"] == "failure_report"]
    dropped = [x for x in rows if x["screening"] == "other"]
    assert kept and dropped and len(kept) + len(dropped) == 141
    assert all(x["symptom"] is None and x["root_cause"] is None for x in dropped)
    assert all(x["symptom"] and x["root_cause"] and x["symptom_confidence"] for x in kept)
    assert all(0 < x["screening_confidence"] <= 1 and x["screening_model"].startswith("tfidf-logreg") for x in rows)
