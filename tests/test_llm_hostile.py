"""Hostile server answers and secrets, against the real fake server on 127.0.0.1 (issue 21, 3-7).

A bulk run never stops on one bad answer: each case below is labeled or recorded as invalid, and
nothing a server sends puts a key, a 30 MB answer or an impossible confidence into what is kept.
"""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
from conftest import write_jsonl
from fake_openai_server import FakeOpenAI, expected_labels, fake_classifier
from typer.testing import CliRunner

from classify.classifiers.base import ModelOptions, ModelSpecError, make_classifier
from classify.classifiers.llm.cache import LLMStore
from classify.classifiers.llm.response import EXCERPT_CHARS
from classify.cli.main import app
from classify.core.errors import ClassifyError
from classify.core.records import Record
from classify.core.taxonomy import load_taxonomy

TAX = load_taxonomy()
DIMS = {d: dim.ids for d, dim in TAX.dimensions.items()}
runner = CliRunner()


def rec(i: int, marker: str = "") -> Record:
    rid = f"h{i:03d}"
    return Record(id=rid, title=f"{rid} {marker} report".replace("  ", " "), body="The kernel fails.")


def clf_for(fake: FakeOpenAI, store: LLMStore, **extra):
    opts = {"timeout": 5.0, "max_retries": 2, "repair_retries": 1, "concurrency": 4, **extra}
    return fake_classifier(fake.base_url, store, TAX, **opts)


def _dump(*paths) -> str:
    """Every text stored in these SQLite files or text files."""
    out = []
    for p in paths:
        if str(p).endswith(".sqlite"):
            db = sqlite3.connect(p)
            for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
                out += [str(v) for row in db.execute(f"SELECT * FROM {t}") for v in row]
            db.close()
        else:
            out.append(p.read_text())
    return "\n".join(out)


def test_deeply_nested_answer_is_invalid_and_its_cached_copy_never_crashes(tmp_path):
    store = LLMStore(tmp_path / "llm.sqlite")
    with FakeOpenAI(DIMS) as fake:
        out = clf_for(fake, store).predict([rec(1, "[fault:nested:99]"), rec(2)])
        p = out[TAX.dimension_ids[0]][0]
        assert p.status == "invalid" and "nested deeper" in p.extra["error"]
        assert out[TAX.dimension_ids[0]][1].label == expected_labels("h002", DIMS)[TAX.dimension_ids[0]]
        sent = fake.n_requests
        # the re-run reads the nested answers from the cache: no request, no crash, same verdict
        again = clf_for(fake, store)
        p2 = again.predict([rec(1, "[fault:nested:99]")])[TAX.dimension_ids[0]][0]
        assert fake.n_requests == sent and again.stats.cache_hits == 2
        assert p2.status == "invalid" and "nested deeper" in p2.extra["error"]
        # a cache row this version cannot read (damaged, nested, not an object) is asked again
        store.close()
        db = sqlite3.connect(tmp_path / "llm-cache.sqlite")
        bad = ['{"content": ' + "[" * 5000, "[1, 2]", '{"content": {"a": 1}}']
        keys = [k for (k,) in db.execute("SELECT key FROM responses")]
        for k, v in zip(keys, bad * len(keys)):
            db.execute("UPDATE responses SET response = ? WHERE key = ?", (v, k))
        db.commit()
        db.close()
        third = clf_for(fake, LLMStore(tmp_path / "llm.sqlite"))
        out3 = third.predict([rec(2)])
        assert out3[TAX.dimension_ids[0]][0].label == expected_labels("h002", DIMS)[TAX.dimension_ids[0]]
        assert third.stats.requests >= 1


@pytest.mark.parametrize("marker", ["parts", "object", "lots", "huge", "surrogate"])
def test_malformed_server_fields_never_stop_a_bulk_run(tmp_path, marker):
    store = LLMStore(tmp_path / "llm.sqlite")
    records = [rec(1, f"[fault:{marker}:99]"), rec(2)]
    with FakeOpenAI(DIMS) as fake:
        clf = clf_for(fake, store, rationale=True)
        out = clf.predict(records)
        for d in TAX.dimension_ids:
            for i, r in enumerate(records):
                assert out[d][i].label == expected_labels(r.id, DIMS)[d], (marker, d, out[d][i])
        if marker == "surrogate":  # text any file holds: replaced, not crashed on
            assert out[TAX.dimension_ids[0]][0].rationale == "\ufffd \ufffd  x"
        # a count that is not a count is no count: the other request's tokens stay exact
        assert isinstance(clf.stats.prompt_tokens, int) and 0 < clf.stats.prompt_tokens < 10**7
        # what was cached reads back (the re-run sends nothing and gets the same labels)
        again = clf_for(fake, store, rationale=True)
        assert [p.label for p in again.predict(records)[TAX.dimension_ids[0]]] == [
            p.label for p in out[TAX.dimension_ids[0]]
        ]
        assert again.stats.requests == 0


def test_an_input_text_no_utf8_file_holds_is_labeled(tmp_path):
    # A lone surrogate comes in through a JSON escape in the input; the prompt carries U+FFFD.
    bad = Record(id="h009", title="h009 crash \ud800 in kernel", body="body \udfff")
    with FakeOpenAI(DIMS) as fake:
        out = clf_for(fake, LLMStore(tmp_path / "llm.sqlite")).predict([bad])
        assert out[TAX.dimension_ids[0]][0].label == expected_labels("h009", DIMS)[TAX.dimension_ids[0]]
        assert "crash \ufffd in kernel" in fake.log[0]["body"]["messages"][-1]["content"]


@pytest.mark.parametrize("marker", ["poslp", "nanlp"])
def test_impossible_logprobs_give_no_confidence(tmp_path, marker):
    with FakeOpenAI(DIMS) as fake:
        clf = clf_for(fake, LLMStore(tmp_path / "llm.sqlite"), logprobs=True)
        out = clf.predict([rec(1, f"[fault:{marker}:99]"), rec(2)])
        for d in TAX.dimension_ids:
            bad, good = out[d]
            assert bad.status == "ok" and bad.confidence is None, bad  # labeled, but no probability
            assert good.confidence is not None and 0 < good.confidence <= 1


def test_oversized_answer_is_refused_and_only_an_excerpt_is_stored(tmp_path):
    store = LLMStore(tmp_path / "llm.sqlite")
    with FakeOpenAI(DIMS) as fake:
        out = clf_for(fake, store).predict([rec(1, "[fault:big:99]")])
    for d in TAX.dimension_ids:
        p = out[d][0]
        assert p.status == "invalid" and p.label is None and "far above max_tokens" in p.extra["error"]
        assert len(p.raw) <= EXCERPT_CHARS
    store.close()
    for f in ("llm.sqlite", "llm-cache.sqlite"):
        assert (tmp_path / f).stat().st_size < 400_000, f  # 2 answers of 1 MB each were sent


def test_credentials_in_base_url_are_refused_or_never_stored(tmp_path, monkeypatch):
    # user:password@ is a clear error that does not repeat the password
    with pytest.raises(ModelSpecError, match="api-key-env") as ei:
        make_classifier("openai:m", TAX, ModelOptions(extra={"base_url": "http://bob:hunter2pw@localhost:9/v1"}))
    assert "hunter2pw" not in str(ei.value)
    r = runner.invoke(
        app, ["run", "--model", "openai:m", "--base-url", "http://bob:hunter2pw@localhost:9/v1", "--input", "x.jsonl"]
    )
    assert r.exit_code == 2 and "error:" in r.output and "hunter2pw" not in r.output
    monkeypatch.setenv("OPENAI_BASE_URL", "http://bob:hunter2pw@localhost:9/v1")  # the same rule there
    with pytest.raises(ClassifyError, match="api-key-env") as ei:
        make_classifier("openai:m", TAX, ModelOptions()).fit([], {})
    assert "hunter2pw" not in str(ei.value)
    monkeypatch.delenv("OPENAI_BASE_URL")

    # a gateway key in the query is sent with every request, and kept nowhere; a server that
    # echoes the Authorization header and the query into its answer gets both blanked
    secret, qkey = "sk-test-ECHOED-0123456789abcdef", "QKEY-9876543210"
    monkeypatch.setenv("MY_KEY", secret)
    rows = [
        {"id": f"e{k}", "title": f"e{k} {'[fault:echo:99]' if k < 2 else ''} kernel fails", "body": "b"}
        for k in range(4)
    ]
    inp, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "labels.jsonl"
    with FakeOpenAI(DIMS, query_key=qkey) as fake:
        url = f"{fake.base_url}?api-key={qkey}"
        args = ["run", "--model", "openai:fake-model", "--base-url", url, "--api-key-env", "MY_KEY"]
        r = runner.invoke(app, [*args, "--input", str(inp), "--out", str(out)])
        assert r.exit_code == 0, r.output
        assert all(e["status"] == 200 for e in fake.log)  # the query key reached the server
        echoed = [e for e in fake.log if e["id"] in ("e0", "e1")]
        assert echoed
        r = runner.invoke(app, ["logs", "-n", "50", "--json"])
        assert r.exit_code == 0
    labels = [json.loads(x) for x in out.read_text().splitlines()]
    assert labels[0]["run_options"]["extra"]["base_url"] == fake.base_url
    assert labels[0]["provenance"]["endpoint"] == fake.base_url
    assert all(row[d] == expected_labels(row["id"], DIMS)[d] for row in labels for d in DIMS)
    from classify.core.paths import cache_dir

    stored = _dump(out, cache_dir() / "llm.sqlite", cache_dir() / "llm-cache.sqlite") + r.output
    assert "you sent" in stored  # the echo was stored, blanked
    for s in (secret, qkey, "0123456789abcdef"):
        assert s not in stored, s


def test_confidence_is_a_probability_whatever_the_server_sends():
    from classify.classifiers.llm.answer import span_probability

    content = '{"a": "b"}'
    toks = [('{"a": "', -0.1), ("b", 3.0), ('"}', -0.1)]
    assert span_probability(toks, content, (7, 8)) is None
    assert span_probability([(t, math.nan if t == "b" else v) for t, v in toks], content, (7, 8)) is None
    ok = span_probability([(t, -0.2) for t, _ in toks], content, (7, 8))
    assert ok == pytest.approx(math.exp(-0.2))


def test_a_gateway_key_in_an_ensemble_members_brackets_is_sent_and_kept_nowhere(tmp_path, monkeypatch):
    # `openai:m[base_url=URL?api-key=K]` is the only way to give one member its own gateway: the key
    # reaches that server, and the spec kept in labels rows, provenance and eval folders lacks it.
    qkey = "QKEY-ensemble-5550123"
    rows = [{"id": f"m{k}", "title": f"m{k} kernel fails", "body": "b"} for k in range(3)]
    inp, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "labels.jsonl"
    with FakeOpenAI(DIMS, query_key=qkey) as keyed, FakeOpenAI(DIMS) as plain:
        spec = f"ensemble:openai:fake-model[base_url={keyed.base_url}?api-key={qkey}]+openai:fake-model[base_url={plain.base_url}]"
        r = runner.invoke(app, ["run", "--model", spec, "--input", str(inp), "--out", str(out)])
        assert r.exit_code == 0, r.output
        assert keyed.log and all(e["status"] == 200 for e in keyed.log)  # the key was sent
        evals = tmp_path / "evals"
        r2 = runner.invoke(app, ["eval", "--model", spec, "--limit", "6", "--out-dir", str(evals)])
        assert r2.exit_code == 0, r2.output
    row = json.loads(out.read_text().splitlines()[0])
    assert (
        row["model"]
        == f"ensemble:openai:fake-model[base_url={keyed.base_url}]+openai:fake-model[base_url={plain.base_url}]"
    )
    assert row[TAX.dimension_ids[0]] == expected_labels("m0", DIMS)[TAX.dimension_ids[0]]
    kept = out.read_text() + r.output + r2.output
    kept += "".join(
        str(p) + (p.read_text() if p.suffix in (".json", ".md", ".jsonl") else "") for p in evals.rglob("*")
    )
    assert qkey not in kept
    # a bad member quoted back in an error keeps no key either
    r3 = runner.invoke(
        app, ["run", "--model", f"ensemble:openai:m[base_url=http://h/v1?api-key={qkey}", "-i", str(inp)]
    )
    assert r3.exit_code == 2 and "error:" in r3.output and qkey not in r3.output


def test_the_internal_error_log_keeps_no_key(monkeypatch):
    from classify.cli.common import _internal_error_log

    monkeypatch.setattr("sys.argv", ["classify", "run", "--base-url", "http://h/v1?api-key=QKEY-log-12345"])
    try:
        raise RuntimeError("boom at http://bob:pw-LOG-9876@h/v1 with sk-abcdefghijklmnopqrstu")
    except RuntimeError as e:
        path = _internal_error_log(e)
    text = open(path).read()
    assert "boom at http://h/v1" in text
    for s in ("QKEY-log-12345", "pw-LOG-9876", "sk-abcdefghijklmnopqrstu"):
        assert s not in text


@pytest.mark.parametrize("retry_after", ["1e308", "inf", "-5", "Wed, 21 Oct 2999 07:28:00 GMT"])
def test_a_servers_absurd_retry_after_is_capped(tmp_path, retry_after):
    from classify.classifiers.llm.client import MAX_RETRY_AFTER

    waits: list[float] = []

    async def record(s: float) -> None:
        waits.append(s)

    with FakeOpenAI(DIMS, retry_after=retry_after) as fake:
        clf = fake_classifier(fake.base_url, LLMStore(tmp_path / "llm.sqlite"), TAX, sleep=record, max_retries=3)
        out = clf.predict([rec(1, "[fault:429:1]")])
    assert out[TAX.dimension_ids[0]][0].label == expected_labels("h001", DIMS)[TAX.dimension_ids[0]]
    assert len(waits) == 1 and 0 <= waits[0] <= MAX_RETRY_AFTER * 1.2, waits


def test_a_trickling_answer_hits_the_total_deadline_and_is_retried(tmp_path):
    # One byte every 0.3 s: no single read waits out the 1 s timeout, so only a total deadline
    # ends the request; the retry gets the right answer.
    import time

    with FakeOpenAI(DIMS, trickle_seconds=0.3) as fake:
        clf = clf_for(fake, LLMStore(tmp_path / "llm.sqlite"), timeout=1.0, max_retries=3)
        t0 = time.monotonic()
        out = clf.predict([rec(1, "[fault:trickle:1]")])
        took = time.monotonic() - t0
    assert out[TAX.dimension_ids[0]][0].label == expected_labels("h001", DIMS)[TAX.dimension_ids[0]]
    assert clf.stats.retries == 1 and took < 8, took


def test_a_giant_answer_is_cut_off_as_it_arrives_and_not_asked_again(tmp_path):
    from classify.classifiers.llm.bounded import MAX_CHAT_BYTES

    store = LLMStore(tmp_path / "llm.sqlite")
    with FakeOpenAI(DIMS) as fake:
        clf = clf_for(fake, store, max_retries=3)
        out = clf.predict([rec(1, "[fault:giant:99]"), rec(2)])
        assert len(fake.requests_for("h001")) == 1  # the same 20 MB would come again
    bad, good = out[TAX.dimension_ids[0]]
    assert bad.status == "invalid" and f"larger than {MAX_CHAT_BYTES / 1e6:.0f} MB" in bad.extra["error"], bad
    assert good.label == expected_labels("h002", DIMS)[TAX.dimension_ids[0]]
    store.close()
    assert (tmp_path / "llm.sqlite").stat().st_size < 400_000


@pytest.mark.parametrize(
    "url, shown",
    [
        ("http://bob:pw-PORT-123@127.0.0.1:notaport/v1?api-key=QKEY-port-123", "http://127.0.0.1:notaport"),
        ("http://127.0.0.1:99999/v1?api-key=QKEY-port-123", "http://127.0.0.1:99999"),
    ],
)
def test_a_base_url_with_a_bad_port_is_a_clear_error_without_its_key(tmp_path, url, shown):
    inp = write_jsonl(tmp_path / "in.jsonl", [{"id": "p1", "title": "t", "body": "b"}])
    r = runner.invoke(app, ["run", "--model", "openai:m", "--base-url", url, "--input", str(inp)])
    assert r.exit_code == 2 and f"base URL '{shown}'" in r.output and "expected http(s)://host" in r.output, r.output
    assert "QKEY-port-123" not in r.output and "pw-PORT-123" not in r.output and "CLASSIFY_DEBUG" not in r.output


@pytest.mark.parametrize(
    "key, value",
    [("temperature", "nan"), ("temperature", "inf"), ("temperature", "-1"), ("timeout", "inf")]
    + [("max_tokens", "-5"), ("price_in", "nan"), ("price_in", "-1"), ("price_out", "inf")],
)
def test_llm_settings_no_request_or_estimate_can_use_are_refused(key, value):
    # NaN would go into the request body as non-standard JSON; a negative price gives a $-0.0 estimate.
    with pytest.raises(ModelSpecError, match=f"option {key}: "):
        make_classifier("openai:m", TAX, ModelOptions(extra={"base_url": "http://127.0.0.1:9/v1", key: value}))
    assert make_classifier("openai:m", TAX, ModelOptions(extra={"base_url": "http://127.0.0.1:9/v1", key: "2"}))


def test_urls_in_messages_lose_credentials_and_keep_what_names_the_request():
    from classify.core.http import redact_urls_text

    assert redact_urls_text("GET https://api.github.com/repos/a/b/issues?state=all&page=3: HTTP 502").endswith(
        "issues?state=all&page=3: HTTP 502"
    )
    shown = redact_urls_text("at http://bob:pw-123456@h:8/v1?page=2&api-key=K-123456&code=Z-123456 failed")
    assert shown == "at http://h:8/v1?page=2 failed"
    spec = "ensemble:openai:x[base_url=http://h/v1?token=T-123456,k=3]+tfidf-embed"
    assert redact_urls_text(spec) == "ensemble:openai:x[base_url=http://h/v1,k=3]+tfidf-embed"
