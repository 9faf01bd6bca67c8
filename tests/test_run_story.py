"""`classify run` tells its own story on screen (issue 20 item 18; issue 21 item 20): the thresholds it
applies beside `classify eval`'s and why they differ, and progress bars whose clocks are their phase's."""

from __future__ import annotations

import re
import time

from conftest import write_jsonl
from test_trust import _constructed_rows
from typer.testing import CliRunner

from classify.cli.label import PhaseBar
from classify.cli.main import app


def test_run_prints_its_thresholds_beside_evals_and_why_they_differ(tmp_path):
    gold = write_jsonl(tmp_path / "gold.jsonl", _constructed_rows(90))
    new = write_jsonl(
        tmp_path / "new.jsonl",
        [{k: r[k] for k in ("id", "repo", "title", "body")} for r in _constructed_rows(12, start=1000)],
    )
    out = tmp_path / "labels.jsonl"
    r = CliRunner().invoke(
        app, ["run", "-m", "tfidf-logreg", "-i", str(new), "-o", str(out), "-g", str(gold), "--target-kappa", "0.8"]
    )
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    m = re.search(
        r"symptom: this run gives a label alone at confidence >= ([\d.]+) \((\d+)% of gold would be auto", text
    )
    assert m, text
    assert re.search(r"`classify eval`'s figure: (threshold [\d.]+, \d+% of gold|no threshold)", text)
    assert "cross-fitted" in text and "docs/trust.md" in text
    # the closing summary names the threshold the run applied and the share of gold it made auto
    assert f"at confidence >= {m.group(1)} (which made {m.group(2)}% of gold auto)" in text


def test_a_phase_bar_starts_its_clock_at_its_first_update(capsys):
    bar = PhaseBar("embeddings (encoded, or read from the cache)")
    bar.total = 10
    time.sleep(1.2)  # training the fold models, before any record is encoded
    bar.update(10)
    # tqdm on a terminal, plain lines in a log (pytest's stderr): either one's clock starts at the update
    shown = bar.bar
    elapsed = shown.format_dict["elapsed"] if hasattr(shown, "format_dict") else time.monotonic() - shown.start
    assert elapsed < 1.0
    bar.close()
    never = PhaseBar("labeling")
    never.close()  # a phase that never ran shows no bar
    assert never.bar is None
