"""The review loop's files survive hand edits and kills (issue 20 items 9, 10), and `review build`
prints plain words (issue 21 item 22)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from review_helpers import built_queue
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.taxonomy import load_taxonomy
from classify.review.decisions import append_decision, read_decisions
from classify.review.schema import Decision

runner = CliRunner()


@pytest.fixture
def built(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return built_queue(tmp_path)


def _keep(rid: str, note: str, proposal: dict | None = None) -> Decision:
    return Decision.model_validate(
        {
            "id": rid,
            "dimension": "root_cause",
            "action": "keep",
            "gold": "api_misuse",
            "note": note,
            "proposals": [proposal] if proposal else [],
            "reviewer": "dana",
            "decided_at": "2026-01-02T00:00:00+00:00",
        }
    )


def test_review_build_prints_plain_words(built):
    out = built["output"]
    assert "priority" in out and "score" not in out and "strongest reason" in out


def test_appending_after_a_hand_edit_without_final_newline(built):
    path = built["queue"].with_name("decisions.jsonl")
    first = _keep(built["id"], "first")
    path.write_text(first.model_dump_json(exclude_none=True), encoding="utf-8")  # a hand edit: no final newline
    append_decision(path, _keep(built["id"], "second"))
    got, torn = read_decisions(path)
    assert [d.note for d in got] == ["first", "second"] and not torn


def test_kill_9_during_apply_leaves_nothing_that_blocks_a_retry(built):
    tmp = built["tmp"]
    prop = {"kind": "add_cue", "dimension": "root_cause", "category": "api_misuse", "cue": "include", "text": "x"}
    dec = built["queue"].with_name("decisions.jsonl")
    append_decision(dec, _keep(built["id"], "cue", prop))
    # the apply process is killed (SIGKILL: no cleanup runs) while it writes the new gold
    script = (
        "import os, signal, sys\n"
        "from classify.core import goldfile\n"
        "goldfile.write_gold = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
        "from classify.cli.main import app\n"
        "sys.argv = ['classify', 'review', 'apply', '--queue', sys.argv[1]]\n"
        "app()\n"
    )
    killed = subprocess.run([sys.executable, "-c", script, str(built["queue"])], cwd=tmp, capture_output=True)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    res = runner.invoke(app, ["review", "apply", "--queue", str(built["queue"])])
    assert res.exit_code == 0, res.output
    assert (tmp / "gold" / "reports.v2.jsonl").exists() and (tmp / "codebook" / "taxonomy-v2.yaml").exists()
    assert (
        "x"
        in load_taxonomy(tmp / "codebook" / "taxonomy-v2.yaml").dimensions["root_cause"].category("api_misuse").include
    )
    assert not [p.name for p in (tmp / "gold").iterdir() if p.name.startswith(".")]
    assert not [p.name for p in (tmp / "codebook").iterdir() if p.name.startswith(".")]
    assert json.loads((tmp / "gold" / "reports.v2.jsonl").read_text().splitlines()[0])["id"]


def _kill_after_the_codebook_is_renamed(built) -> None:
    """An apply killed (SIGKILL) between renaming the new codebook into place and renaming its gold."""
    prop = {"kind": "add_cue", "dimension": "root_cause", "category": "api_misuse", "cue": "include", "text": "x"}
    append_decision(built["queue"].with_name("decisions.jsonl"), _keep(built["id"], "cue", prop))
    script = (
        "import os, signal, sys\n"
        "real = os.replace\n"
        "def replace(src, dst, *a, **k):\n"
        "    if os.path.basename(dst) == 'reports.v2.jsonl':\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return real(src, dst, *a, **k)\n"
        "os.replace = replace\n"
        "from classify.cli.main import app\n"
        "sys.argv = ['classify', 'review', 'apply', '--queue', sys.argv[1]]\n"
        "app()\n"
    )
    killed = subprocess.run([sys.executable, "-c", script, str(built["queue"])], cwd=built["tmp"], capture_output=True)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    assert (built["tmp"] / "codebook" / "taxonomy-v2.yaml").exists()  # the lone codebook version
    assert not (built["tmp"] / "gold" / "reports.v2.jsonl").exists()


def test_the_retry_removes_the_lone_codebook_it_wrote_and_nothing_else(built):
    tmp = built["tmp"]
    _kill_after_the_codebook_is_renamed(built)
    lone = tmp / "codebook" / "taxonomy-v2.yaml"
    # written since under that name by something else (another apply, a hand edit): not the retry's to remove
    foreign = lone.read_text(encoding="utf-8").replace("version:", "# edited by hand\nversion:", 1)
    lone.write_text(foreign, encoding="utf-8")
    res = runner.invoke(app, ["review", "apply", "--queue", str(built["queue"])])
    assert res.exit_code != 0 and "never overwritten" in " ".join(res.output.split())
    assert lone.read_text(encoding="utf-8") == foreign


def test_the_retry_after_a_kill_between_the_two_renames_succeeds(built):
    tmp = built["tmp"]
    _kill_after_the_codebook_is_renamed(built)
    res = runner.invoke(app, ["review", "apply", "--queue", str(built["queue"])])
    assert res.exit_code == 0, res.output
    assert "without its gold" in " ".join(res.output.split())
    assert (tmp / "gold" / "reports.v2.jsonl").exists() and (tmp / "codebook" / "taxonomy-v2.yaml").exists()
    assert not [p.name for p in (tmp / "gold").iterdir() if p.name.startswith(".")]
