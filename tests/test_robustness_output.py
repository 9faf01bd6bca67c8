"""Issue #11 items 20 and 21: what the command line prints. `--version`, no `<bool>` beside flags,
a did-you-mean for specs, `classify models` one described line per spec, `logs --json` as JSON
lines, and no progress-bar escape codes or "Loading weights" bar when output is not a terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from classify import __version__
from classify.cli.main import app
from classify.cli.models import reference_figures
from classify.core.paths import EVALS_DIR, PROJECT_ROOT

runner = CliRunner()


def test_version():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.strip() == f"classify {__version__}"


@pytest.mark.parametrize("cmd", [["run"], ["eval"], ["fetch", "github"], ["review", "apply"]])
def test_flags_show_no_bool_type_in_help(cmd):
    r = runner.invoke(app, [*cmd, "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    assert "<bool>" not in r.output
    assert "<int" in r.output or "<path>" in r.output or "<str>" in r.output  # other types still shown


def test_misspelled_spec_gets_a_suggestion_and_nothing_runs(tmp_path):
    r = runner.invoke(app, ["run", "--model", "embd-logreg", "--out", str(tmp_path / "o.jsonl")])
    assert r.exit_code == 2
    assert "did you mean 'embed-logreg'?" in r.output
    # nothing trained (the known-spec list may name specs other tests registered, e.g. test-self-training)
    assert not any(line.lstrip().startswith("training") for line in r.output.splitlines()), r.output
    r = runner.invoke(app, ["eval", "--model", "opneai:gpt-4o-mini", "--out-dir", str(tmp_path)])
    assert r.exit_code == 2 and "did you mean 'openai:gpt-4o-mini'?" in r.output
    assert not list(tmp_path.iterdir())


def test_models_lists_one_described_line_per_spec():
    r = runner.invoke(app, ["models"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    lines = {ln.split()[0]: ln for ln in r.output.splitlines() if ln.strip()}
    ref = reference_figures(EVALS_DIR / "leaderboard.md")
    assert ref["embed-logreg"]["symptom"].startswith("0.")
    el = lines["embed-logreg"]
    assert "logistic regression" in el and f"symptom {ref['embed-logreg']['symptom']}" in el
    assert ref["embed-logreg"]["speed"] in el
    assert "OpenAI-compatible" in lines["openai:<model>"] and "llama.cpp" in lines["local:<model>"]


def test_reference_figures_skip_runs_with_options(tmp_path):
    lb = tmp_path / "leaderboard.md"
    lb.write_text(
        "| model | symptom kappa [95% CI] | root_cause kappa [95% CI] | s / 1000 rec |\n|---|---|---|---|\n"
        "| tfidf-embed --encoder x | 0.9 [0.8, 1.0] | 0.5 [0.4, 0.6] | 9 |\n"
        "| tfidf-embed | 0.7 [0.6, 0.8] | 0.4 [0.3, 0.5] | 200 |\n"
    )
    assert reference_figures(lb) == {"tfidf-embed": {"symptom": "0.7", "root_cause": "0.4", "speed": "200"}}
    assert reference_figures(tmp_path / "missing.md") == {}


def test_logs_json_is_one_object_a_line(tmp_path, monkeypatch):
    from classify.classifiers.llm.cache import LLMStore, default_db_path

    store = LLMStore(default_db_path())
    for i in range(3):
        store.log(run_id="r1", endpoint="http://x", model="m", record_id=f"id{i}", outcome="ok", messages=[{"a": i}])
    store.close()
    r = runner.invoke(app, ["logs", "--json", "-n", "3"])
    assert r.exit_code == 0
    lines = r.output.splitlines()
    assert len(lines) == 3
    rows = [json.loads(ln) for ln in lines]
    assert [x["record_id"] for x in rows] == ["id2", "id1", "id0"] and rows[0]["messages"]


@pytest.mark.slow
def test_no_progress_bar_noise_when_stderr_is_not_a_terminal(tmp_path):
    code = "from classify.encoders.encoder import Encoder; Encoder(use_cache=False).encode(['a b c'] * 40)"
    env = {**os.environ, "CLASSIFY_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(PROJECT_ROOT)}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Loading weights" not in r.stderr and "Batches" not in r.stderr and "\r" not in r.stderr
