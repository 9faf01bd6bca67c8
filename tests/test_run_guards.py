"""`classify run` guards from issue #11: title/url kept on every row (--keep), a lock on the output,
and --max-invalid turning a run of invalid answers into a failed exit."""

from __future__ import annotations

import json

import pytest
from conftest import write_jsonl
from fake_openai_server import FakeOpenAI
from typer.testing import CliRunner

from classify.cli.main import app
from classify.labeling.pipeline import Progress, label_file
from classify.labeling.resumable import RunError, output_lock

runner = CliRunner()


@pytest.fixture
def small_input(tmp_path):
    rows = [
        {
            "id": f"x{k}",
            "repo": "org/lib",
            "url": f"https://github.com/org/lib/issues/{k}",
            "title": f"crash {k}",
            "body": "segfault in kernel",
            "team": "gpu",
        }
        for k in range(4)
    ]
    return write_jsonl(tmp_path / "in.jsonl", rows)


def test_rows_keep_title_and_url_by_default_and_keep_is_checked(small_input, tmp_path):
    out = tmp_path / "a.jsonl"
    label_file("tfidf-logreg", small_input, out)
    row = json.loads(out.read_text().splitlines()[0])
    assert row["title"] == "crash 0" and row["url"] == "https://github.com/org/lib/issues/0"
    label_file("tfidf-logreg", small_input, tmp_path / "b.jsonl", keep=("team",))
    row = json.loads((tmp_path / "b.jsonl").read_text().splitlines()[0])
    assert row["team"] == "gpu" and "title" not in row
    label_file("tfidf-logreg", small_input, tmp_path / "c.jsonl", keep=())
    assert "title" not in json.loads((tmp_path / "c.jsonl").read_text().splitlines()[0])
    with pytest.raises(ValueError, match="--keep tema: no such field"):
        label_file("tfidf-logreg", small_input, tmp_path / "d.jsonl", keep=("tema",))
    r = runner.invoke(
        app,
        [
            "run",
            "--model",
            "tfidf-logreg",
            "-i",
            str(small_input),
            "-o",
            str(tmp_path / "e.jsonl"),
            "--keep",
            "title",
            "--no-keep",
        ],
    )
    assert r.exit_code == 2 and "--keep and --no-keep" in r.output


def test_a_second_run_on_the_same_output_is_refused_while_the_first_holds_it(small_input, tmp_path):
    out = tmp_path / "labels.jsonl"
    with output_lock(out):
        with pytest.raises(RunError, match="another classify run is writing it"):
            label_file("tfidf-logreg", small_input, out)
        r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "-i", str(small_input), "-o", str(out)])
        assert r.exit_code == 2 and "another classify run is writing it" in r.output
    assert not out.exists()
    label_file("tfidf-logreg", small_input, out)  # released: the next run goes ahead
    assert len(out.read_text().splitlines()) == 4
    assert not out.with_name(out.name + ".lock").exists()


def test_all_invalid_answers_fail_the_run_but_keep_the_rows(tmp_path, taxonomy):
    rows = [{"id": f"i{k}", "title": f"i{k} [fault:400:99] kernel fails", "body": "b"} for k in range(5)]
    inp, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "labels.jsonl"
    with FakeOpenAI({d: dim.ids for d, dim in taxonomy.dimensions.items()}) as fake:
        args = ["run", "--model", "openai:fake-model", "--base-url", fake.base_url, "-i", str(inp), "-o", str(out)]
        r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    assert "too many invalid answers: symptom 5/5 (100%)" in " ".join(r.output.split())
    assert len(out.read_text().splitlines()) == 5  # nothing already labeled is lost


def test_a_few_invalid_answers_pass_under_the_threshold(tmp_path, taxonomy):
    rows = [
        {"id": f"i{k}", "title": f"i{k} {'[fault:400:99] ' if k == 0 else ''}kernel fails", "body": "b"}
        for k in range(10)
    ]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    with FakeOpenAI({d: dim.ids for d, dim in taxonomy.dimensions.items()}) as fake:
        base = ["run", "--model", "openai:fake-model", "--base-url", fake.base_url, "-i", str(inp)]
        ok = runner.invoke(app, base + ["-o", str(tmp_path / "a.jsonl")])
        strict = runner.invoke(app, base + ["-o", str(tmp_path / "b.jsonl"), "--max-invalid", "0.05"])
    assert ok.exit_code == 0, ok.output
    assert strict.exit_code == 1 and "symptom 1/10 (10%)" in " ".join(strict.output.split())


def _closed_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


def test_a_dead_server_or_missing_key_fails_before_training_and_leaves_no_checkpoint(
    small_input, tmp_path, monkeypatch
):
    out = tmp_path / "labels.jsonl"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    r = runner.invoke(app, ["run", "--model", "openai:m", "--base-url", dead, "-i", str(small_input), "-o", str(out)])
    assert r.exit_code == 2 and "cannot reach the LLM server" in " ".join(r.output.split()), r.output
    assert "training" not in r.output
    r = runner.invoke(app, ["eval", "--model", "openai:m", "--base-url", dead, "--out-dir", str(tmp_path / "ev")])
    assert r.exit_code == 2 and "cannot reach the LLM server" in " ".join(r.output.split()), r.output
    monkeypatch.delenv("OPENAI_API_KEY")
    r = runner.invoke(app, ["run", "--model", "openai:gpt-4o-mini", "-i", str(small_input), "-o", str(out)])
    assert r.exit_code == 2 and "no API key" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # no output, no checkpoint, no eval folder


def test_a_run_that_fails_before_its_first_row_leaves_no_checkpoint(small_input, tmp_path, taxonomy):
    from classify.classifiers.base import ModelOptions, make_classifier
    from classify.core.records import read_records
    from classify.labeling.resumable import label_records, partial_path

    clf = make_classifier("tfidf-logreg", taxonomy, ModelOptions())  # never fitted: predict fails
    out = tmp_path / "labels.jsonl"
    with pytest.raises(Exception):  # noqa: B017 (whatever the failure, the checkpoint must go)
        label_records(clf, read_records(small_input), out, {}, "S")
    assert not partial_path(out).exists()


def test_routed_run_details(small_input, tmp_path):
    """Issue #12 review findings: checkpoint refusal names what changed, before any training; untargeted
    dimensions are labeled as a plain run labels them; --keep refuses fields the output writes itself."""
    from conftest import ROOT

    from classify.labeling.resumable import partial_path

    gold = tmp_path / "gold.jsonl"  # a third of gold: the same paths, a faster cross-validation
    gold.write_text("".join((ROOT / "gold" / "reports.jsonl").read_text().splitlines(True)[:200]))
    out = tmp_path / "r.jsonl"
    part = partial_path(out)
    part.write_text('{"signature": "old", "parts": {"targets": "x"}}\n')
    with pytest.raises(RunError, match=r"\(.*targets.* changed\)"):
        label_file("tfidf-logreg", small_input, out, gold=gold, target_kappa=0.87)
    part.unlink()
    label_file("tfidf-logreg", small_input, out, gold=gold, targets={"symptom": 0.8})
    plain = tmp_path / "p.jsonl"
    label_file("tfidf-logreg", small_input, plain, gold=gold)
    routed_rows = [json.loads(x) for x in out.read_text().splitlines()]
    plain_rows = [json.loads(x) for x in plain.read_text().splitlines()]
    for r, p in zip(routed_rows, plain_rows):
        assert "root_cause_status" not in r and r["root_cause"] == p["root_cause"] is not None
        assert r["symptom_status"] in ("auto", "review")
    with pytest.raises(ValueError, match="--keep symptom_status: the output writes that field itself"):
        label_file("tfidf-logreg", small_input, tmp_path / "k.jsonl", gold=gold, keep=("symptom_status",))
    with pytest.raises(ValueError, match="--target-kappa must be between 0 and 1"):
        label_file("tfidf-logreg", small_input, tmp_path / "t.jsonl", gold=gold, target_kappa=1.0)
    r = runner.invoke(
        app, ["run", "--model", "tfidf-logreg", "-i", str(small_input), "-o", str(tmp_path / "e.jsonl"), "--keep", ""]
    )
    assert r.exit_code == 2 and "--keep: give field names" in r.output


def test_routed_screening_records_its_threshold_and_says_why_labels_are_empty(tmp_path, monkeypatch):
    from conftest import ROOT

    inp = tmp_path / "in.jsonl"
    inp.write_text("".join((ROOT / "data" / "issues.jsonl").read_text().splitlines(True)[:30]))
    # A project folder whose gold sets are the shipped ones cut to 300 records each: the same paths
    # (two gold profiles, by cross-validation) in a third of the time of the full sets.
    (tmp_path / "classify.toml").write_text("")
    for name in ("reports.jsonl", "screening.jsonl"):
        (tmp_path / "gold").mkdir(exist_ok=True)
        (tmp_path / "gold" / name).write_text("".join((ROOT / "gold" / name).read_text().splitlines(True)[:300]))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "s.jsonl"
    said: list[str] = []
    s = label_file(
        "tfidf-logreg",
        inp,
        out,
        screen=True,
        screen_model="tfidf-logreg",
        target_kappa=0.8,
        progress=Progress(log=said.append),
    )
    assert any("on 300 screening records" in m for m in said), said  # the project folder's gold
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert set(rows[0]["routing"]) >= {"screening", "symptom", "root_cause"}
    assert s.routing["screening"]["auto"] + s.routing["screening"]["review"] == 30
    for r in rows:
        assert r["screening_status"] in ("auto", "review")
        if r["screening_status"] == "auto" and r["screening_suggestion"] != "failure_report":
            assert r["symptom"] is None and r["symptom_status"] == "screened_out"  # said, not left blank
        else:  # kept or doubtful: labeled (or routed) for the reviewer
            assert r["symptom_status"] in ("auto", "review")


def test_an_internal_error_is_one_line_with_the_log_path(monkeypatch, tmp_path):
    import classify.evaluation.agreement as agreement
    from classify.core.paths import cache_dir

    def broken(*a, **k):
        raise RuntimeError("boom")  # stands for any bug of ours below the CLI

    monkeypatch.setattr(agreement, "gold_summary", broken)
    r = runner.invoke(app, ["gold", "stats", "--n-boot", "100"])
    assert r.exit_code == 1
    assert "internal error: RuntimeError: boom (traceback in" in " ".join(r.output.split())
    assert "Traceback" not in r.output
    log = (cache_dir() / "errors.log").read_text()
    assert "Traceback" in log and "RuntimeError: boom" in log
