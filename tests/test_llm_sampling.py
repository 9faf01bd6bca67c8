"""Self-consistency samples in one request with `n` where the server honours it (issue 24, 4),
one by one where it ignores `n` (llama-cpp-python 0.3's server) or refuses it; found once per
server. Against the real fake server in each mode."""

from __future__ import annotations

import pytest
from fake_openai_server import FakeOpenAI, expected_labels, fake_classifier

from classify.classifiers.llm.cache import LLMStore
from classify.classifiers.llm.pool import forget_capabilities
from classify.core.records import Record
from classify.core.taxonomy import load_taxonomy

TAX = load_taxonomy()
DIMS = {d: dim.ids for d, dim in TAX.dimensions.items()}
FIRST = TAX.dimension_ids[0]
SAMPLES = 5


@pytest.fixture(autouse=True)
def _fresh_capabilities():
    forget_capabilities()
    yield
    forget_capabilities()


def records(n: int = 4) -> list[Record]:
    return [Record(id=f"s{i:02d}", title=f"s{i:02d} [fault:vote:0] report", body="The kernel fails.") for i in range(n)]


def run(fake: FakeOpenAI, store: LLMStore, recs: list[Record]):
    opts = {"timeout": 5.0, "samples": SAMPLES, "concurrency": 4, "repair_retries": 0}
    c = fake_classifier(fake.base_url, store, TAX, **opts)
    return c, c.predict(recs)


def _check_votes(out, recs):
    for i, r in enumerate(recs):
        p = out[FIRST][i]
        # choice/seed i disagrees when i % 3 == 2: one of five
        assert p.label == expected_labels(r.id, DIMS)[FIRST] and p.confidence == pytest.approx(4 / 5), p
        assert sum(p.proba.values()) == pytest.approx(1.0)


def test_samples_come_in_one_request_where_the_server_returns_n_choices(tmp_path):
    recs = records()
    with FakeOpenAI(DIMS, n_mode="support") as fake:
        clf, out = run(fake, LLMStore(tmp_path / "llm.sqlite"), recs)
        _check_votes(out, recs)
        assert fake.n_requests == len(recs) and all(e["body"].get("n") == SAMPLES for e in fake.log)
        # the prompt is paid once per record: the request's own prompt tokens, counted once
        one_prompt = clf.stats.prompt_tokens / len(recs)
        assert one_prompt > 1000 and clf.stats.prompt_tokens == pytest.approx(len(recs) * one_prompt)
        # each sample is cached under its own key: a re-run sends nothing and votes the same
        again, out2 = run(fake, LLMStore(tmp_path / "llm.sqlite"), recs)
        assert fake.n_requests == len(recs) and again.stats.requests == 0
        assert again.stats.cache_hits == len(recs) * SAMPLES
        _check_votes(out2, recs)
    # the same records one by one cost five prompts each
    forget_capabilities()
    with FakeOpenAI(DIMS, n_mode="ignore") as fake:
        sep, _ = run(fake, LLMStore(tmp_path / "other.sqlite"), recs)
    assert sep.stats.prompt_tokens == pytest.approx(SAMPLES * clf.stats.prompt_tokens, rel=0.01)


@pytest.mark.parametrize("mode", ["ignore", "reject"])
def test_samples_fall_back_to_one_request_each_found_once_per_server(tmp_path, mode):
    recs = records()
    with FakeOpenAI(DIMS, n_mode=mode) as fake:
        clf, out = run(fake, LLMStore(tmp_path / "llm.sqlite"), recs)
        _check_votes(out, recs)
        with_n = [e for e in fake.log if (e["body"].get("n") or 1) > 1]
        assert len(with_n) == 1  # one request found out; none after it asked for n again
        rejected = 1 if mode == "reject" else 0
        assert [e["status"] for e in with_n] == [400 if rejected else 200]
        # ignored: the probe's one choice is the first sample, so nothing is wasted
        assert fake.n_requests == len(recs) * SAMPLES + rejected
        assert sorted(e["body"]["seed"] for e in fake.log if e["status"] == 200 and e["id"] == "s00") == list(
            range(SAMPLES)
        )
        # remembered for the server: a later run does not ask again
        more = [Record(id="s99", title="s99 [fault:vote:0] report", body="x")]
        before = fake.n_requests
        run(fake, LLMStore(tmp_path / "llm.sqlite"), more)
        assert fake.n_requests - before == SAMPLES
        assert not any((e["body"].get("n") or 1) > 1 for e in fake.log[before:])
