"""`classify leaderboard` fits the terminal with full model names, and writes the committed table only
when asked (issue 21 item 21). Reads run folders; trains nothing."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from classify.cli.main import app
from classify.core import paths
from classify.evaluation.leaderboard import collect, fit_columns, rows

BACKENDS = ("onnx-int8", "onnx", "model2vec")


def _runs(root: Path) -> Path:
    for i, b in enumerate(BACKENDS):
        d = root / f"2026120{i}-run-{b}"
        d.mkdir(parents=True)
        dims = {
            dim: {
                "n": 576,
                "kappa": {"kappa": 0.6 + i / 100, "lo": 0.55, "hi": 0.65},
                "selective": [{"coverage": 50, "kappa": 0.8}, {"coverage": 70, "kappa": 0.7}],
            }
            for dim in ("symptom", "root_cause", "root_cause_group", "root_cause_shown")
        }
        meta = {
            "model": "embed-logreg",
            "mode": "cv",
            "options": {"encoder": "sentence-transformers/all-mpnet-base-v2", "extra": {"backend": b}},
            "created_at": f"2026-12-0{i + 1}T00:00:00+00:00",
            "gold_hash": "333d051d2ee7",
            "seconds_per_1000": 123.4,
        }
        (d / "metrics.json").write_text(json.dumps({"meta": meta, "dimensions": dims}))
        (d / "report.md").write_text("# run\n")
    return root


def test_columns_are_dropped_least_important_first():
    header, body = rows(collect([_runs(Path(__import__("tempfile").mkdtemp()))]))
    cols, dropped = fit_columns(header, body, 1000)
    assert dropped == [] and cols == list(range(len(header)))
    cols, dropped = fit_columns(header, body, 120)
    assert dropped[0] == "symptom @50% / @70%" and 0 in cols
    assert all("kappa [95% CI]" in header[i] or i == 0 or header[i] == "gold" for i in cols)


def test_leaderboard_shows_full_names_and_writes_only_when_asked(tmp_path, monkeypatch):
    runs = _runs(tmp_path / "evals")
    committed_dir = tmp_path / "shipped"
    committed_dir.mkdir()
    committed = committed_dir / "leaderboard.md"
    committed.write_text("the committed table\n")
    monkeypatch.setattr(paths, "EVALS_DIR", committed_dir)
    r = CliRunner().invoke(app, ["leaderboard", str(runs)])
    assert r.exit_code == 0, r.output
    # the model column's text, its folded lines joined
    flat = "".join(line.split("│")[1].replace(" ", "") for line in r.output.splitlines() if line.startswith("│"))
    for b in BACKENDS:  # every model told apart by its full name (folded onto lines, never cut with …)
        assert f"embed-logreg--encoderall-mpnet-base-v2backend={b}" in flat
    assert "…" not in r.output and "left out to fit 160 columns" in r.output
    assert committed.read_text() == "the committed table\n"  # nothing written unasked
    r = CliRunner().invoke(app, ["leaderboard", str(runs), "--out", str(committed)])
    assert r.exit_code == 2 and "pass --write" in r.output and committed.read_text() == "the committed table\n"
    r = CliRunner().invoke(app, ["leaderboard", str(runs), "--write"])
    assert r.exit_code == 0 and "backend=onnx-int8" in committed.read_text()
