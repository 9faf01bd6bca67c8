import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import write_jsonl
from typer.testing import CliRunner

from classify.classifiers.base import register
from classify.classifiers.baselines import TfidfLogReg
from classify.cli.main import app
from classify.core.paths import DEFAULT_INPUT, PROJECT_ROOT

runner = CliRunner()


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_output_schema_and_provenance(tmp_path, taxonomy, gold):
    out = tmp_path / "labels.jsonl"
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--input", str(DEFAULT_INPUT), "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = _rows(out)
    inputs = [json.loads(line) for line in DEFAULT_INPUT.read_text().splitlines()]
    assert [x["id"] for x in rows] == [x["id"] for x in inputs]
    for row in rows:
        assert row["symptom"] in taxonomy.dimensions["symptom"].ids
        assert row["root_cause"] in taxonomy.dimensions["root_cause"].ids
        assert 0 < row["symptom_confidence"] <= 1 and 0 < row["root_cause_confidence"] <= 1
        assert row["model"] == "tfidf-logreg" and row["taxonomy"] == "gpu-kernel-issues@1"
        assert row["gold_hash"] == gold.hash and row["labeled_at"]
        assert row["provenance"]["n_train"] == {"symptom": len(gold), "root_cause": len(gold.labeled("root_cause")[0])}
    assert not (tmp_path / "labels.jsonl.partial.jsonl").exists()


def test_refuses_to_overwrite_without_force(tmp_path):
    out = tmp_path / "labels.jsonl"
    out.write_text("precious\n")
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--out", str(out)])
    assert r.exit_code == 2 and "exists" in r.output
    assert out.read_text() == "precious\n"
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--out", str(out), "--force"])
    assert r.exit_code == 0 and len(_rows(out)) == 141


def test_bad_input_fails_before_any_work(tmp_path, gold_rows):
    rows = gold_rows[:5] + [gold_rows[2]] + [{"title": "no id"}]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "o.jsonl"
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--input", str(inp), "--out", str(out)])
    assert r.exit_code == 2 and "duplicated ids" in r.output and gold_rows[2]["id"] in r.output
    assert "without id" in r.output
    assert not out.exists() and not (tmp_path / "o.jsonl.partial.jsonl").exists()


SEEN_FIELDS: list[dict] = []


@register("test-spying-tfidf")
class _SpyingTfidf(TfidfLogReg):
    """The lexical baseline, noting the fields of every record predict() receives."""

    def predict(self, records):
        SEEN_FIELDS.extend(dict(r.fields) for r in records)
        return super().predict(records)


def test_input_labels_never_reach_the_model_and_formats_by_extension(tmp_path, gold_rows):
    # The model must not see the labels the input carries.
    SEEN_FIELDS.clear()
    clean = [
        {k: v for k, v in r.items() if k not in ("symptom", "root_cause", "coder_a", "coder_b")} for r in gold_rows[:40]
    ]
    lying = [
        {
            **r,
            "symptom": "hang",
            "root_cause": "jit_caching",
            "symptom_confidence": 1.0,
            "coder_a": {"symptom": "hang"},
            "note": "kept",
        }
        for r in clean
    ]
    a, b = write_jsonl(tmp_path / "a.jsonl", clean), write_jsonl(tmp_path / "b.jsonl", lying)
    for src, out in ((a, "a.csv"), (b, "b.parquet")):
        args = ["run", "--model", "test-spying-tfidf", "--input", str(src), "--out", str(tmp_path / out)]
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output
    assert len(SEEN_FIELDS) == 80
    lied_to = SEEN_FIELDS[40:]
    assert all(f.get("note") == "kept" for f in lied_to)  # the spy sees the fields a record carries...
    assert not any(
        {"symptom", "root_cause", "symptom_confidence", "coder_a"} & set(f) for f in lied_to
    )  # ...but no label
    import pandas as pd

    da, db = pd.read_csv(tmp_path / "a.csv"), pd.read_parquet(tmp_path / "b.parquet")
    assert len(da) == len(db) == 40
    assert list(da["symptom"]) == list(db["symptom"])
    assert list(da["root_cause"]) == list(db["root_cause"])


def test_strip_label_fields_keeps_everything_but_labels(taxonomy):
    from classify.core.records import Record
    from classify.labeling.resumable import strip_label_fields

    rec = Record(
        id="x",
        title="t",
        fields={
            "symptom": "hang",
            "root_cause": None,
            "coder_b": {},
            "root_cause_confidence": 0.9,
            "labels": ["kept"],
            "symptomatic": "kept",
        },
    )
    (out,) = strip_label_fields([rec], taxonomy.dimension_ids)
    assert out.fields == {"labels": ["kept"], "symptomatic": "kept"}


def test_resume_skips_checkpointed_rows_and_drops_torn_line(tmp_path, gold_rows):
    from classify.classifiers.base import make_classifier
    from classify.core.gold import load_gold
    from classify.core.paths import DEFAULT_GOLD
    from classify.core.records import read_records
    from classify.core.taxonomy import load_taxonomy
    from classify.labeling.resumable import label_records, partial_path, provenance_for

    tax = load_taxonomy()
    g = load_gold(DEFAULT_GOLD, tax)
    recs = read_records(DEFAULT_INPUT)
    clf = make_classifier("tfidf-logreg", tax).fit(g.records, g.labels)
    out = tmp_path / "o.jsonl"
    part = partial_path(out)
    # A checkpoint holding 10 finished rows (marked so we can tell they were kept) and a torn line.
    done = [{"id": r.id, "symptom": "hang", "marker": "from-checkpoint"} for r in recs[:10]]
    part.write_text(
        json.dumps({"signature": "S1"}) + "\n" + "".join(json.dumps(d) + "\n" for d in done) + '{"id": "torn'
    )
    calls = []
    orig = clf.predict
    clf.predict = lambda rs: (calls.append([r.id for r in rs]), orig(rs))[1]
    s = label_records(clf, recs, out, provenance_for(clf, g), "S1", chunk_size=50)
    rows = _rows(out)
    assert [r["id"] for r in rows] == [r.id for r in recs]
    assert sum(1 for r in rows if r.get("marker") == "from-checkpoint") == 10
    predicted = [i for c in calls for i in c]
    assert len(predicted) == len(set(predicted)) == 131 and not set(predicted) & {d["id"] for d in done}
    assert s.resumed == 10 and s.labeled == 131 and not part.exists()
    # A checkpoint written by different arguments is refused, not mixed in.
    part.write_text(json.dumps({"signature": "OTHER"}) + "\n")
    from classify.labeling.resumable import RunError

    with pytest.raises(RunError, match="different arguments"):
        label_records(clf, recs, out, {}, "S1")


@pytest.mark.slow
def test_killed_run_resumes_without_loss_or_duplicates(tmp_path, gold_rows, shared_cache):
    """SIGKILL a real run mid-way, start it again with the same arguments, check the result."""
    inp = tmp_path / "in.jsonl"
    rows = [
        {"id": f"x-{i}", "title": r["title"], "body": r["body"] + f" (copy {i})", "discussion": r["discussion"]}
        for i, r in enumerate(gold_rows)
    ][:160]
    write_jsonl(inp, rows)
    # Trained on the first 150 gold records (their vectors are the session cache's when an earlier test
    # encoded gold): what is tested is the kill and the resume, not the model.
    gold = write_jsonl(tmp_path / "gold.jsonl", gold_rows[:150])
    out = tmp_path / "out.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "classify.cli.main",
        "run",
        "--model",
        "embed-logreg",
        "--input",
        str(inp),
        "--out",
        str(out),
        "--gold",
        str(gold),
        "--chunk-size",
        "8",
    ]
    env = {**os.environ}
    part = tmp_path / "out.jsonl.partial.jsonl"
    p = subprocess.Popen(cmd, env=env, cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        # Encoding goes in blocks of 4 chunks (32 records): past one block, the next is in flight.
        if part.exists() and len(part.read_text().splitlines()) > 1 + 32:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not out.exists(), "run finished before it could be killed; test needs more records"
    n_before = len(part.read_text().splitlines()) - 1
    assert 0 < n_before < 160
    r = subprocess.run(cmd, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    got = _rows(out)
    assert [g["id"] for g in got] == [x["id"] for x in rows]
    assert f"{n_before} resumed" in r.stderr
