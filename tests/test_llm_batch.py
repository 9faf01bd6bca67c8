"""`--batch`: requests through the batch API (/v1/files, /v1/batches), polled, collected,
validated, cached, resumable (issue 24, 5). Against the fake server's batch endpoints."""

from __future__ import annotations

import json

import pytest
from conftest import write_jsonl
from fake_openai_server import FakeOpenAI, assert_expected, expected_labels, fake_classifier, no_sleep
from typer.testing import CliRunner

from classify.classifiers.base import ModelOptions, ModelSpecError, make_classifier
from classify.classifiers.llm.cache import LLMStore
from classify.cli.main import app
from classify.core.errors import ClassifyError
from classify.core.records import Record
from classify.core.taxonomy import load_taxonomy

TAX = load_taxonomy()
DIMS = {d: dim.ids for d, dim in TAX.dimensions.items()}
runner = CliRunner()


def _records() -> list[Record]:
    marks = ["", "", "[fault:oot:1]", "[fault:500:1]", "", "[fault:badjson:1]"]
    return [
        Record(id=f"b{i}", title=f"b{i} {m} report".replace("  ", " "), body="The kernel fails.")
        for i, m in enumerate(marks)
    ]


def _clf(fake: FakeOpenAI, store: LLMStore, sleep=no_sleep, **extra):
    opts = {"batch": True, "batch_poll": 0.01, "repair_retries": 1, "max_retries": 2, **extra}
    return fake_classifier(fake.base_url, store, TAX, sleep, **opts)


def _all_right(out, recs):
    assert_expected(out, recs, DIMS)


def _via(fake: FakeOpenAI, via: str) -> list[dict]:
    return [e for e in fake.log if e.get("via", "chat") == via]


def test_batch_answers_are_cached_and_what_failed_is_asked_interactively(tmp_path):
    recs = _records()
    store = LLMStore(tmp_path / "llm.sqlite")
    with FakeOpenAI(DIMS) as fake:
        clf = _clf(fake, store)
        out = clf.predict(recs)
        _all_right(out, recs)
        assert len(fake.batches) == 1 and len(_via(fake, "batch")) == len(recs)  # one line per record
        # the invalid answer (oot) is re-asked, the 500 and the broken body asked again, one by one
        assert sorted(e["id"] for e in _via(fake, "chat")) == ["b2", "b3", "b5"]
        assert clf.stats.requests == len(recs) + 3
        # a re-run: everything from the cache, no batch, no request
        again = _clf(fake, store)
        _all_right(again.predict(recs), recs)
        assert len(fake.batches) == 1 and again.stats.requests == 0 and len(fake.log) == len(recs) + 3


def test_repair_in_the_next_batch_sends_nothing_interactively(tmp_path):
    recs = _records()
    with FakeOpenAI(DIMS) as fake:
        clf = _clf(fake, LLMStore(tmp_path / "llm.sqlite"), repair="batch")
        out = clf.predict(recs)
        _all_right(out, recs)
        assert _via(fake, "chat") == [] and len(fake.batches) == 2
        second = fake.files[fake.batches["batch_2"]["input_file_id"]].decode().splitlines()
        assert sorted(json.loads(x)["body"]["messages"][-1]["role"] for x in second) == ["user"] * 3
        assert len(second) == 3  # the repair of b2, and b3, b5 asked again


class Killed(Exception):
    pass


def test_a_killed_run_picks_up_the_same_batch(tmp_path):
    recs = _records()[:3]
    store = LLMStore(tmp_path / "llm.sqlite")

    async def killed(seconds: float) -> None:
        raise Killed  # the process dies while waiting for the batch

    with FakeOpenAI(DIMS, batch_polls=3) as fake:
        with pytest.raises(Killed):
            _clf(fake, store, sleep=killed).predict(recs)
        assert len(fake.batches) == 1 and fake.batches["batch_1"]["status"] != "completed"
        clf = _clf(fake, store)
        out = clf.predict(recs)
        _all_right(out, recs)
        assert len(fake.batches) == 1 and len(fake.files) == 2  # the same batch: its input and its output


def test_batch_from_the_cli_and_refused_where_it_cannot_act(tmp_path):
    with pytest.raises(ModelSpecError, match="batch"):
        make_classifier("local:smollm2-135m", TAX, ModelOptions(extra={"batch": True}))
    with pytest.raises(ModelSpecError, match="repair"):
        make_classifier("openai:m", TAX, ModelOptions(extra={"repair": "batch"}))
    rows = [{"id": f"c{k}", "title": f"c{k} kernel fails", "body": "b"} for k in range(5)]
    inp, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "labels.jsonl"
    with FakeOpenAI(DIMS, batch_polls=1) as fake:
        args = [
            "run",
            "--model",
            "openai:fake-model",
            "--batch",
            "--opt",
            "batch_poll=0.01",
            "--base-url",
            fake.base_url,
        ]
        r = runner.invoke(app, [*args, "--input", str(inp), "--out", str(out)])
        assert r.exit_code == 0, r.output
        assert len(fake.batches) == 1 and _via(fake, "chat") == []
    labels = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(row[d] == expected_labels(row["id"], DIMS)[d] for row in labels for d in DIMS)


def test_a_batch_that_never_ends_stops_the_run_with_a_way_to_resume(tmp_path):
    with FakeOpenAI(DIMS, batch_polls=10**6) as fake:
        clf = _clf(fake, LLMStore(tmp_path / "llm.sqlite"), batch_poll=4 * 3600.0)
        with pytest.raises(ClassifyError, match="not done after 28 h of polling; run again to resume"):
            clf.predict(_records()[:1])
        assert len(fake.batches) == 1 and fake.batches["batch_1"]["polls"] == 7
