"""The CLI's surface: fast listings, quiet pipes, readable help, plain progress in logs, tidy git status."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from classify.cli.main import app

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "sentence_transformers", "sklearn")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "CLASSIFY_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT), **extra}
    env.pop("CLASSIFY_DEBUG", None)
    return env


def test_models_lists_every_spec_without_importing_heavy_libraries(tmp_path):
    # issue 21 item 22: `classify models` took 6-19 s importing every classifier module to list names.
    code = (
        "import sys\n"
        "from classify.cli.main import app\n"
        "try:\n    app(['models'])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stderr
    names = [line.split()[0] for line in r.stdout.splitlines()[1:] if line.strip()]
    for spec in ("embed-logreg", "tfidf-logreg", "ensemble", "ensemble:A+B[+...]", "openai:<model>", "local:<model>"):
        assert spec in names
    # the descriptions and reference figures are still there
    assert "symptom 0." in r.stdout


def test_models_options_still_loads_the_one_spec_asked():
    r = CliRunner().invoke(app, ["models", "--options", "tfidf-logreg"])
    assert r.exit_code == 0, r.output
    assert "--opt keys" in r.output


# A stdout whose reader leaves once it has read every help panel (`classify run --help | head -n 130`):
# rich's panels land, the newline click writes after them meets a broken pipe.
_READER_LEAVES = """
import io, sys
class Pipe(io.RawIOBase):
    seen = b""
    def writable(self):
        return True
    def write(self, b):
        if b"LLM (" in self.seen and self.seen.count("╰".encode()) == self.seen.count("╭".encode()):
            raise BrokenPipeError(32, "Broken pipe")
        self.seen += bytes(b)
        return len(b)
sys.stdout = io.TextIOWrapper(io.BufferedWriter(Pipe()), encoding="utf-8")
from classify.cli.main import main
sys.argv = ["classify", "run", "--help"]
main()
"""


def test_help_into_a_pipe_closed_early_exits_quietly(tmp_path):
    # issue 21 item 22: `classify run --help | head` wrote a BrokenPipe traceback to errors.log.
    r = subprocess.run(
        [sys.executable, "-c", _READER_LEAVES],
        capture_output=True,
        text=True,
        env=_env(tmp_path, COLUMNS="80"),
        timeout=120,
    )
    assert r.returncode == 1  # as typer does for a broken pipe
    assert not (tmp_path / "cache" / "errors.log").exists()
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "BrokenPipe" not in r.stderr, r.stderr


def test_run_help_groups_its_options_in_panels():
    # issue 21 item 22: 179 lines at 80 columns, one flat list of 30 options.
    r = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0
    out = r.output
    heads = [line for line in out.splitlines() if line.startswith("╭─ ")]
    titles = [h.strip("╭─ ").split(" ─")[0] for h in heads]
    for panel in ("Model", "Data", "Screening", "Trust: routing to review"):
        assert panel in titles, titles
    assert any(t.startswith("LLM") for t in titles), titles

    def panel_of(flag: str) -> str:
        title = ""
        for line in out.splitlines():
            if line.startswith("╭─ "):
                title = line.strip("╭─ ").split(" ─")[0]
            elif f" {flag} " in line:
                return title
        raise AssertionError(f"{flag} not in the help")

    assert panel_of("--base-url").startswith("LLM")
    assert panel_of("--target-kappa") == "Trust: routing to review"
    assert panel_of("--screen-model") == "Screening"
    assert panel_of("--input") == "Data"
    assert panel_of("--encoder") == "Model"
    assert len(out.splitlines()) < 150


def test_validation_counts_are_pluralised():
    # issue 21 item 22: "1 dimensions"
    r = CliRunner().invoke(app, ["taxonomy", "validate", str(ROOT / "codebook" / "screening-v1.yaml")])
    assert r.exit_code == 0, r.output
    assert "1 dimension, 2 categories" in r.output
    r = CliRunner().invoke(app, ["taxonomy", "validate", str(ROOT / "codebook" / "taxonomy-v1.yaml")])
    assert "2 dimensions" in r.output


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_command_outputs_are_ignored_and_reference_runs_stay_tracked():
    # issue 21 item 22: evals/<new>, labels.report/ and review/ showed up as untracked.
    outputs = ["evals/20991231-000000-embed-logreg/metrics.json", "labels.report/index.html", "review/queue.json"]
    r = subprocess.run(["git", "check-ignore", "--no-index", *outputs], cwd=ROOT, capture_output=True, text=True)
    assert r.stdout.split() == outputs
    tracked = subprocess.run(["git", "ls-files", "evals"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert "evals/leaderboard.md" in tracked and any(p.endswith("/metrics.json") for p in tracked)
    # a tracked reference run is not reported as ignored: its changes still show in git status
    r = subprocess.run(["git", "check-ignore", *tracked], cwd=ROOT, capture_output=True, text=True)
    assert r.stdout == ""


def test_progress_off_a_terminal_is_plain_lines(monkeypatch):
    from classify.core import progress

    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    out = io.StringIO()  # not a terminal
    bar = progress.progress_bar("encoding", "texts", file=out)
    bar.total = 4
    bar.update(1)
    bar.write("a log line")
    bar.update(3)
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("encoding: 1/4 texts (25%), ")
    assert lines[1] == "a log line"
    assert lines[2].startswith("encoding: 4/4 texts (100%)")
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_progress_of_a_short_loop_off_a_terminal_says_nothing():
    from classify.core.progress import progress_bar

    out = io.StringIO()
    with progress_bar("encoding", "texts", total=3, file=out) as bar:
        bar.update(3)
    assert out.getvalue() == ""


@pytest.mark.slow
def test_a_cold_eval_into_a_log_file_says_how_the_encoding_goes(tmp_path):
    # issue 21 item 2: a cold `classify eval` encoded gold for minutes with no output into a log.
    gold = tmp_path / "g.jsonl"
    gold.write_text("".join((ROOT / "gold" / "reports.jsonl").read_text().splitlines(True)[:40]))
    log = tmp_path / "eval.log"
    with log.open("w") as f:
        r = subprocess.run(
            [sys.executable, "-m", "classify.cli", "eval", "-m", "embed-logreg", "--gold", str(gold), "-k", "2"]
            + ["--n-boot", "100", "--out-dir", str(tmp_path / "evals")],
            stdout=subprocess.DEVNULL,
            stderr=f,
            env=_env(tmp_path, CLASSIFY_PROGRESS_SECONDS="0"),
            timeout=600,
        )
    text = log.read_text()
    assert r.returncode == 0, text
    lines = [line for line in text.splitlines() if line.startswith("encoding: ")]
    assert lines and lines[-1].split(",")[0].endswith("texts (100%)"), text
    assert "\r" not in text and "\x1b" not in text
