"""`classify run/eval/logs` with LLM specs, against the fault-injecting server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest
from conftest import write_jsonl
from fake_openai_server import FakeOpenAI, expected_labels
from typer.testing import CliRunner

from classify.classifiers.base import ModelOptions
from classify.cli.main import app
from classify.evaluation.crossval import cross_validate
from classify.evaluation.leaks import train_test_leaks

runner = CliRunner()


@pytest.fixture
def fake(taxonomy):
    with FakeOpenAI({d: dim.ids for d, dim in taxonomy.dimensions.items()}) as f:
        yield f


def _input(tmp_path, n=12):
    rows = [
        {"id": f"i{k:02d}", "title": f"i{k:02d} {'[fault:500:1] ' if k == 3 else ''}kernel fails", "body": f"body {k}"}
        for k in range(n)
    ]
    return write_jsonl(tmp_path / "in.jsonl", rows)


def test_run_labels_every_record_with_llm_provenance_and_logs(tmp_path, fake, taxonomy, gold):
    inp, out = _input(tmp_path), tmp_path / "labels.jsonl"
    args = [
        "run",
        "--model",
        "openai:fake-model",
        "--base-url",
        fake.base_url,
        "--input",
        str(inp),
        "--out",
        str(out),
        "--concurrency",
        "3",
    ]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["id"] for x in rows] == [f"i{k:02d}" for k in range(12)]
    for row in rows:
        want = expected_labels(row["id"], {d: dim.ids for d, dim in taxonomy.dimensions.items()})
        assert row["symptom"] == want["symptom"] and row["root_cause"] == want["root_cause"]
        assert row["model"] == "openai:fake-model" and row["taxonomy"] == taxonomy.label
        assert len(row["prompt_hash"]) == 16 and row["gold_hash"] == gold.hash
        p = row["provenance"]
        assert p["endpoint"] == fake.base_url and p["strategy"] == "zero-shot" and p["llm_model"] == "fake-model"
    assert "LLM requests: 13 sent (1 retries" in r.output
    sent = fake.n_requests

    r = runner.invoke(app, ["logs", "-n", "50"])
    assert r.exit_code == 0 and "i03" in r.output and "transient" in r.output

    # the same run again: every answer from the response cache
    r = runner.invoke(app, args + ["--force"])
    assert r.exit_code == 0, r.output
    assert fake.n_requests == sent and "LLM requests: 0 sent" in r.output and "12 answered from the cache" in r.output


def test_dry_run_sends_nothing_and_writes_nothing(tmp_path, fake):
    inp, out = _input(tmp_path), tmp_path / "labels.jsonl"
    r = runner.invoke(
        app,
        [
            "run",
            "--model",
            "openai:fake-model",
            "--base-url",
            fake.base_url,
            "--input",
            str(inp),
            "--out",
            str(out),
            "--dry-run",
            "--samples",
            "2",
            "--opt",
            "price_in=1",
            "--opt",
            "price_out=4",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "requests to send:   24" in r.output and "estimated cost:     ~$" in r.output
    assert fake.n_requests == 0 and not out.exists()


def test_clear_errors_instead_of_tracebacks(tmp_path, fake, monkeypatch):
    inp, out = _input(tmp_path), tmp_path / "labels.jsonl"
    monkeypatch.delenv("NOPE_KEY", raising=False)
    r = runner.invoke(
        app,
        [
            "run",
            "--model",
            "openai:fake-model",
            "--base-url",
            fake.base_url,
            "--api-key-env",
            "NOPE_KEY",
            "--input",
            str(inp),
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 2 and "NOPE_KEY" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["eval", "--model", "embed-logreg", "--shots", "3"])
    assert r.exit_code == 2 and "--shots: only for LLM models" in r.output
    r = runner.invoke(
        app, ["eval", "--model", "openai:fake-model", "--base-url", fake.base_url, "--opt", "temprature=1"]
    )
    assert r.exit_code == 2 and "unknown LLM option 'temprature'" in r.output
    r = runner.invoke(
        app,
        [
            "run",
            "--model",
            "openai:wrong-model",
            "--base-url",
            fake.base_url,
            "--input",
            str(inp),
            "--out",
            str(tmp_path / "other.jsonl"),
        ],
    )
    assert r.exit_code == 2 and "not found" in r.output and "wrong-model" in r.output


def test_eval_writes_a_report(tmp_path, fake):
    r = runner.invoke(
        app,
        [
            "eval",
            "--model",
            "openai:fake-model",
            "--base-url",
            fake.base_url,
            "--limit",
            "20",
            "--n-boot",
            "100",
            "--out-dir",
            str(tmp_path),
        ],
    )
    assert r.exit_code == 0, r.output
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert "prompt_hash" in (run_dir / "metrics.json").read_text()  # provenance recorded with the metrics
    assert (run_dir / "report.md").exists()
    preds = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 20
    assert fake.n_requests == 20


@pytest.mark.slow
def test_cross_validated_few_shot_never_uses_an_evaluated_record_as_its_example(gold, fake, shared_cache):
    opts = ModelOptions(
        show_progress=False,
        extra={"base_url": fake.base_url, "strategy": "few-shot", "k": 3, "concurrency": 8, "max_chars": 1500},
    )
    res = cross_validate("openai:fake-model", gold, opts, k=5, seed=0, limit=60)
    assert not train_test_leaks(res)
    n_checked = 0
    for i, r in enumerate(gold.records):
        if res.folds[i] < 0:
            continue
        train = res.train_ids[res.folds[i]]
        for d in gold.taxonomy.dimension_ids:
            p = res.predictions[d][i]
            ex = p.extra["examples"]
            assert len(ex) == 3 and r.id not in ex and set(ex) <= train
            n_checked += 1
    assert n_checked == 60 * len(gold.taxonomy.dimension_ids)


def test_routed_dry_run_counts_the_cause_shown_question_it_will_ask(tmp_path, fake):
    import re

    inp = _input(tmp_path)

    def dry(*extra):
        args = ["run", "--model", "openai:fake-model", "--base-url", fake.base_url, "--input", str(inp)]
        r = runner.invoke(app, [*args, "--out", str(tmp_path / "l.jsonl"), "--dry-run", *extra])
        assert r.exit_code == 0, r.output
        tokens = int(re.search(r"prompt tokens:\s+~([\d,]+)", r.output).group(1).replace(",", ""))
        return tokens, re.search(r"prompt set (\w+)", r.output).group(1)

    plain, plain_hash = dry()
    routed, routed_hash = dry("--target-kappa", "0.87")
    assert routed > plain and routed_hash != plain_hash  # the prompts a routed run sends, not a plain run's
    assert fake.n_requests == 0
