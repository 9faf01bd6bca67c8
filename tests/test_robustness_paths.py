"""Issue #11 item 16: default paths resolve against the folder you work in (or the nearest folder
with a classify.toml), not the install folder; the shipped files are the fallback for inputs only."""

from __future__ import annotations

import shutil

import yaml
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core import paths
from classify.core.taxonomy import load_taxonomy

runner = CliRunner()


def _own_codebook(project, version="9"):
    (project / "codebook").mkdir(parents=True)
    raw = yaml.safe_load(paths.DEFAULT_TAXONOMY.read_text(encoding="utf-8"))
    raw["version"] = version
    (project / "codebook" / "taxonomy-v1.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")


def test_project_folder_is_the_nearest_with_classify_toml_else_the_current_one(tmp_path, monkeypatch):
    deep = tmp_path / "proj" / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert paths.project_dir() == deep.resolve()
    (tmp_path / "proj" / "classify.toml").write_text("")
    assert paths.project_dir() == (tmp_path / "proj").resolve()


def test_inputs_default_to_the_projects_own_files_else_the_shipped_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert paths.default_gold() == paths.DEFAULT_GOLD
    assert paths.default_taxonomy() == paths.DEFAULT_TAXONOMY
    assert paths.default_input() == paths.DEFAULT_INPUT
    (tmp_path / "gold").mkdir()
    shutil.copy(paths.DEFAULT_GOLD, tmp_path / "gold" / "reports.jsonl")
    (tmp_path / "classify.toml").write_text("")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # found upward through classify.toml
    assert paths.default_gold() == tmp_path.resolve() / "gold" / "reports.jsonl"
    assert paths.default_screening_gold() == paths.DEFAULT_SCREENING  # the project has none: shipped


def test_outputs_default_into_the_project_never_the_install_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert paths.evals_dir() == tmp_path.resolve() / "evals"
    assert paths.leaderboard_dirs() == [paths.EVALS_DIR]  # nothing of its own yet: the reference runs
    (tmp_path / "evals" / "20260101-000000-x").mkdir(parents=True)
    assert paths.leaderboard_dirs() == [tmp_path.resolve() / "evals"]


def test_load_taxonomy_and_taxonomy_show_use_the_projects_codebook(tmp_path, monkeypatch):
    _own_codebook(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert load_taxonomy().version == "9"
    r = runner.invoke(app, ["taxonomy", "show"])
    assert r.exit_code == 0 and "version 9" in r.output, r.output


def test_help_says_where_defaults_resolve():
    r = runner.invoke(app, ["gold", "stats", "--help"], env={"COLUMNS": "200"})
    text = " ".join(r.output.split())
    assert "project folder" in text and "classify.toml" in text
