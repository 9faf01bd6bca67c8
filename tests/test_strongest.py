"""Which spec is "strongest": the leaderboard's rule (highest mean of symptom and root-cause kappa,
plain-spec 5-fold CV runs on the newest gold), and `classify models` showing it and the default."""

from __future__ import annotations

from typer.testing import CliRunner

from classify.classifiers.names import DEFAULT_MODEL
from classify.cli.main import app
from classify.cli.models import strongest_line
from classify.evaluation.leaderboard import Entry, render_markdown, strongest


def _e(label: str, sym: float, rc: float, gold: str = "g2", at: str = "2026-12-02", mode: str = "cv") -> Entry:
    return Entry(
        label=label,
        run=f"run-{label}",
        created_at=at,
        mode=mode,
        kappa={"symptom": {"kappa": sym}, "root_cause": {"kappa": rc}},
        gold_hash=gold,
    )


def test_strongest_is_the_best_mean_on_the_newest_gold():
    entries = [
        _e("a", 0.80, 0.40),  # mean 0.60
        _e("b", 0.70, 0.56),  # mean 0.63: best on g2
        _e("old", 0.99, 0.99, gold="g1", at="2026-11-01"),  # older gold: not comparable
        _e("c --encoder x", 0.99, 0.99),  # a run with options is not a spec's reference
        _e("t", 0.99, 0.99, mode="test"),  # a fixed test file is another measure
    ]
    best, mean = strongest(entries)
    assert best.label == "b" and abs(mean - 0.63) < 1e-9


def test_no_strongest_without_both_dimensions():
    e = _e("a", 0.8, 0.4)
    e.kappa["root_cause"] = {"kappa": None}
    assert strongest([e]) is None


def test_models_prints_the_leaderboards_strongest_line(tmp_path):
    lb = tmp_path / "leaderboard.md"
    lb.write_text(render_markdown([_e("a", 0.80, 0.40), _e("b", 0.70, 0.56)]))
    line = strongest_line(lb)
    assert line is not None and line.startswith("Strongest spec: b (mean of symptom and root-cause kappa 0.630")
    assert strongest_line(tmp_path / "missing.md") is None


def test_models_marks_the_default():
    r = CliRunner().invoke(app, ["models"])
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if line.startswith(DEFAULT_MODEL + " "))
    assert "the default" in row
    assert sum("the default" in line for line in r.output.splitlines()) == 1


def test_a_test_file_run_is_its_own_leaderboard_row():
    from classify.evaluation.leaderboard import run_label

    cv = run_label({"model": "setfit", "mode": "cv"})
    test = run_label({"model": "setfit", "mode": "test", "gold": "/tmp/x/appended-169.jsonl"})
    assert cv == "setfit" and test == "setfit (test appended-169.jsonl)"
