"""Several servers of one model as one (issue 24, 3): least-outstanding balancing, a failing
server taken out and tried again later, per-server figures in `classify logs --endpoints`.
Against real fake servers on 127.0.0.1 (one of them broken, one not there at all)."""

from __future__ import annotations

import json
import socket

from conftest import write_jsonl
from fake_openai_server import FakeOpenAI, assert_expected, expected_labels, fake_classifier
from typer.testing import CliRunner

from classify.classifiers.llm.cache import LLMStore, endpoint_figures
from classify.classifiers.llm.pool import EndpointPool, Route
from classify.cli.main import app
from classify.core.records import Record
from classify.core.taxonomy import load_taxonomy

TAX = load_taxonomy()
DIMS = {d: dim.ids for d, dim in TAX.dimensions.items()}
runner = CliRunner()


def _dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here now: connection refused
    return f"http://127.0.0.1:{port}/v1"


def _records(n: int) -> list[Record]:
    return [Record(id=f"p{i:03d}", title=f"p{i:03d} report", body="The kernel fails.") for i in range(n)]


def _clf(urls: list[str], store: LLMStore, **extra):
    return fake_classifier(urls, store, TAX, timeout=5.0, max_retries=4, **{"concurrency": 8, **extra})


def _all_right(out, recs):
    assert_expected(out, recs, DIMS)


def test_requests_are_balanced_by_outstanding_requests_and_cached_as_one_server(tmp_path):
    recs = _records(32)
    store = LLMStore(tmp_path / "llm.sqlite")
    with FakeOpenAI(DIMS, latency=0.05) as a, FakeOpenAI(DIMS, latency=0.05) as b:
        clf = _clf([a.base_url, b.base_url], store)
        out = clf.predict(recs)
        _all_right(out, recs)
        assert a.n_requests + b.n_requests == 32
        assert 10 <= a.n_requests <= 22, (a.n_requests, b.n_requests)
        figs = {f["endpoint"]: f for f in endpoint_figures(store.path)}
        assert figs[a.base_url]["requests"] == a.n_requests and figs[b.base_url]["ok"] == b.n_requests
        # the replicas are one server to the cache, in whatever order they are given
        again = _clf([b.base_url, a.base_url], store)
        _all_right(again.predict(recs), recs)
        assert again.stats.requests == 0 and a.n_requests + b.n_requests == 32
        assert clf.provenance()["endpoint"] == f"{a.base_url} {b.base_url}"


def test_a_failing_server_is_taken_out_and_the_run_completes(tmp_path):
    recs = _records(30)
    store = LLMStore(tmp_path / "llm.sqlite")
    dead = _dead_url()
    with FakeOpenAI(DIMS) as good, FakeOpenAI(DIMS, always=500) as broken:
        clf = _clf([broken.base_url, dead, good.base_url], store, concurrency=4)
        out = clf.predict(recs)
        _all_right(out, recs)
        assert all(p.status == "ok" for p in out[TAX.dimension_ids[0]])
        # each bad server gets its failures in a row (3), plus what was in flight, then no more
        assert broken.n_requests <= 3 + 4, broken.n_requests
        figs = {f["endpoint"]: f for f in endpoint_figures(store.path)}
        assert figs[good.base_url]["ok"] == 30 and figs[good.base_url]["transient"] == 0
        assert figs[broken.base_url]["transient"] == broken.n_requests and figs[broken.base_url]["ok"] == 0
        assert 1 <= figs[dead]["transient"] <= 3 + 4 and not figs[dead]["ok"]
        failures = broken.n_requests + figs[dead]["transient"]
        assert clf.stats.retries == failures and clf.stats.failed == 0  # each went at once to another
        assert sum("out for" in f for f in clf.stats.fallbacks) == 2


def test_a_server_refusing_the_key_or_model_is_retired_and_the_others_serve_the_run(tmp_path):
    import pytest

    from classify.classifiers.llm.client import LLMError

    recs = _records(16)
    with FakeOpenAI(DIMS) as good, FakeOpenAI(DIMS, always=401) as nokey, FakeOpenAI(DIMS, model="other") as nomodel:
        clf = _clf([nokey.base_url, nomodel.base_url, good.base_url], LLMStore(tmp_path / "llm.sqlite"))
        out = clf.predict(recs)
        _all_right(out, recs)
        # each misconfigured replica answers what was in flight to it, then is never asked again
        assert 1 <= nokey.n_requests <= 8 and 1 <= nomodel.n_requests <= 8
        assert sum("out for the rest of the run" in f for f in clf.stats.fallbacks) == 2
        assert good.n_requests == 16 and clf.stats.failed == 0
        # with no server left that takes the key, the run stops with the clear error
        with pytest.raises(LLMError, match="authentication failed"):
            _clf([nokey.base_url, nokey.base_url + "/"], LLMStore(tmp_path / "b.sqlite")).predict(recs[:2])


def test_repeated_base_url_flag_and_logs_endpoints(tmp_path):
    rows = [{"id": f"c{k:02d}", "title": f"c{k:02d} kernel fails", "body": "b"} for k in range(10)]
    inp, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "labels.jsonl"
    with FakeOpenAI(DIMS) as a, FakeOpenAI(DIMS, always=503) as bad:
        args = ["run", "--model", "openai:fake-model", "--base-url", a.base_url, "--base-url", bad.base_url]
        r = runner.invoke(app, [*args, "--input", str(inp), "--out", str(out), "--concurrency", "2"])
        assert r.exit_code == 0, r.output
        assert f"{bad.base_url} out for 5 s after 3 failures in a row" in r.output
        labels = [json.loads(x) for x in out.read_text().splitlines()]
        assert labels[0]["run_options"]["extra"]["base_url"] == [a.base_url, bad.base_url]
        assert all(row[d] == expected_labels(row["id"], DIMS)[d] for row in labels for d in DIMS)
        r = runner.invoke(app, ["logs", "--endpoints", "-n", "100"])
        assert r.exit_code == 0, r.output
        line_a = next(x for x in r.output.splitlines() if x.startswith(a.base_url))
        line_bad = next(x for x in r.output.splitlines() if x.startswith(bad.base_url))
        assert line_a.split()[1:3] == ["10", "10"]  # requests, ok
        assert line_bad.split()[1:4] == [str(bad.n_requests), "0", str(bad.n_requests)]  # all transient


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_pool_takes_a_failing_server_out_and_tries_it_again_later():
    clock = _Clock()
    a, b = Route("a", None, "m"), Route("b", None, "m")
    pool = EndpointPool([a, b], fail_limit=3, cooldown=5.0, max_cooldown=20.0, clock=clock)

    def fail_at(route: Route) -> None:
        while pool.pick() is not route:  # the other one is less busy: keep it busy
            pass
        pool.release(route, True)

    # least outstanding: with one out at a, the next goes to b
    assert pool.pick() is a and pool.pick() is b and pool.pick() is a
    for r in (a, b, a):
        pool.release(r, False)
    for _ in range(3):  # three failures in a row at a take it out for 5 s
        fail_at(a)
    assert pool.up() == [b] and a.down_until == 5.0
    for _ in range(b.outstanding):
        pool.release(b, None)
    assert all(pool.pick() is b for _ in range(5))  # everything goes to b, however busy
    clock.t = 5.1  # the break is over: a gets a request again
    assert pool.pick() is a
    pool.release(a, True)  # and fails at once: out for twice as long
    assert pool.up() == [b] and a.down_until == clock.t + 10.0
    clock.t = 16.0
    assert pool.pick() is a
    pool.release(a, False)  # a success puts it back for good
    assert a.fails == 0 and a.cooldown == 0 and a in pool.up()
    # every server out: the one back soonest is still tried, never none
    a.down_until, b.down_until = 100.0, 101.0
    assert pool.pick() is a
