"""Typed model options: every documented option changes the model, every bad one is refused."""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint

import numpy as np
import pytest
from typer.testing import CliRunner

import classify.classifiers.base as base
import classify.classifiers.names as names
from classify.classifiers.base import (
    Classifier,
    ModelOptions,
    ModelSpecError,
    known_specs,
    make_classifier,
    options_schema,
    validate_options,
)
from classify.classifiers.ensemble import member_plan


def _opts(**extra):
    return ModelOptions(show_progress=False, extra=extra)


@pytest.fixture(scope="module")
def small(gold, taxonomy):
    train = list(range(60))
    records = [gold.records[i] for i in train]
    labels = {d: [gold.labels[d][i] for i in train] for d in taxonomy.dimension_ids}
    return records, labels, gold.records[60:90]


def _probs(spec, taxonomy, small, **extra):
    records, labels, test = small
    with make_classifier(spec, taxonomy, _opts(**extra)) as clf:
        preds = clf.fit(records, labels).predict(test)
    return np.array([[p.proba[c] for c in sorted(p.proba)] for p in preds["symptom"]])


@pytest.mark.parametrize("spec", ["tfidf-logreg", "embed-logreg"])
def test_C_reaches_the_logistic_regression(spec, taxonomy, small, shared_cache):
    default = _probs(spec, taxonomy, small)
    assert np.allclose(_probs(spec, taxonomy, small, C=10), default)  # 10 is the default
    strong = _probs(spec, taxonomy, small, C="0.001")  # as the CLI hands over an unparsed value
    assert strong.shape == default.shape and not np.allclose(strong, default, atol=1e-3)
    # Heavy regularisation pulls every record toward the class prior: the rows barely differ.
    assert strong.std(axis=0).max() < 0.1 * default.std(axis=0).max()


def test_k_reaches_knn(taxonomy, small, shared_cache):
    records, labels, test = small
    one = make_classifier("embed-knn", taxonomy, _opts(k=1)).fit(records, labels)
    assert one.estimators_["symptom"].n_neighbors == 1
    # One neighbour decides alone: every probability is 0 or 1.
    assert all(p.confidence == 1.0 for p in one.predict(test)["symptom"])
    ten = make_classifier("embed-knn", taxonomy, _opts()).fit(records, labels)
    assert ten.estimators_["symptom"].n_neighbors == 10
    assert any(p.confidence < 1.0 for p in ten.predict(test)["symptom"])


@pytest.mark.parametrize(
    "spec,extra,message",
    [
        ("tfidf-embed", {"char": "ture"}, "tfidf-embed: option char: 'ture' is not a boolean"),
        ("embed-logreg", {"bogus": 1}, "embed-logreg: unknown option 'bogus'; allowed: C, backend"),
        ("tfidf-logreg", {"C": 0}, "tfidf-logreg: option C: must be more than 0"),
        ("embed-knn", {"k": 2.5}, "embed-knn: option k: expected a whole number, got 2.5"),
        ("embed-knn", {"C": 1}, "embed-knn: unknown option 'C'; allowed: backend, k"),  # knn has no C
        ("embed-logreg", {"backend": "static"}, "unknown encoder backend 'static'; known: torch"),
        ("tfidf-embed", {"embed": False, "tfidf": "false"}, "no features left"),
        ("finetune", {"ft_epoch": 2}, "finetune: unknown option 'ft_epoch'; allowed: .*ft_epochs"),
        ("finetune", {"ft_seed": 1}, "unknown option 'ft_seed'"),  # the seed is --seed
        ("finetune", {"backend": "onnx"}, "unknown option 'backend'"),  # fine-tuning runs torch
        ("ensemble", {"confidence": "median"}, "ensemble: option confidence: 'median' is not one of"),
        ("openai:m", {"temprature": 0.2}, "openai:m: unknown LLM option 'temprature'; allowed: "),
        ("openai:m", {"base-url": "http://x/v1", "base_url": "http://y/v1"}, "base_url given twice"),
    ],
)
def test_bad_options_are_refused_naming_spec_key_and_allowed_keys(taxonomy, spec, extra, message):
    with pytest.raises(ModelSpecError, match=message):
        validate_options(spec, taxonomy, _opts(**extra))


def test_values_are_typed_once_for_the_family(taxonomy):
    assert validate_options("tfidf-logreg", taxonomy, _opts(C="0.001")).C == 0.001
    p = validate_options("tfidf-embed", taxonomy, _opts(char="true", codebook=0, C=None))
    assert (p.char, p.codebook, p.C) == (True, False, 10.0)  # None means the default
    ft = make_classifier("finetune", taxonomy, ModelOptions(seed=7, extra={"ft-epochs": "2", "ft_lr": 3e-4}))
    assert (ft.ft_config.epochs, ft.ft_config.lr, ft.ft_config.seed) == (2, 3e-4, 7)
    llm = validate_options("openai:m", taxonomy, _opts(**{"base-url": "http://x/v1", "k": "3", "strategy": "few-shot"}))
    assert (llm.base_url, llm.k) == ("http://x/v1", 3)
    schema = options_schema("embed-knn")
    assert set(schema) == {"backend", "k"} and schema["k"]["default"] == 10 and schema["k"]["description"]


def test_ensemble_routes_shared_options_to_the_members_that_take_them():
    plan = member_plan(
        "ensemble:embed-knn+tfidf-embed[char=true]+openai:m", _opts(C=3, k=2, backend="onnx", confidence="mean")
    )
    extras = {spec: o.extra for _, spec, o in plan}
    assert extras["embed-knn"] == {"backend": "onnx"}  # no C (it has none), no k (the LLM's few-shot k)
    assert extras["tfidf-embed"] == {"C": 3, "backend": "onnx", "char": "true"}
    assert extras["openai:m"] == {"k": 2, "backend": "onnx"}
    with pytest.raises(ModelSpecError, match=r"unknown option 'k' \(k is an LLM setting .* embed-knn\[k=2\]\)"):
        member_plan("ensemble:embed-knn+tfidf-logreg", _opts(k=2))


def test_cli_refuses_a_bad_option_before_any_work(tmp_path):
    from classify.cli.main import app

    r = CliRunner().invoke(app, ["eval", "--model", "tfidf-embed", "--opt", "char=ture", "--out-dir", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert "tfidf-embed: option char: 'ture' is not a boolean" in r.output and "Traceback" not in r.output
    assert list(tmp_path.iterdir()) == []


class _Plugin(Classifier):
    """A third-party spec, found through the entry-point group like the built-ins."""

    def fit(self, records, labels):
        return self

    def predict(self, records):
        return {}

    def provenance(self):
        return {"model": self.spec}


def test_plugins_register_through_entry_points_and_a_broken_one_only_warns(monkeypatch, caplog, taxonomy):
    group = base.ENTRY_POINT_GROUP
    eps = [
        EntryPoint("test-plugin", f"{__name__}:_Plugin", group),
        EntryPoint("broken-plugin", "no_such_module_for_classify:Thing", group),
        EntryPoint("not-a-classifier", "os:path", group),
    ]
    monkeypatch.setattr(base, "_entry_points", lambda: eps)
    monkeypatch.setattr(names, "entry_points", lambda group: eps)  # what `classify models` lists
    monkeypatch.setattr(base, "_REGISTRY", {})
    monkeypatch.setattr(base, "_FAILED", {})
    monkeypatch.setattr(base, "_LOADED", False)
    with caplog.at_level(logging.WARNING, logger="classify"):
        assert known_specs() == ["test-plugin"]
    assert "'broken-plugin' (no_such_module_for_classify:Thing) failed to load" in caplog.text
    assert "'not-a-classifier' (os:path) is not a Classifier subclass" in caplog.text
    clf = make_classifier("test-plugin", taxonomy)
    assert isinstance(clf, _Plugin) and clf.stats is None and clf.members == []
    with pytest.raises(ModelSpecError, match="test-plugin: unknown option 'x'; this model takes no options"):
        make_classifier("test-plugin", taxonomy, _opts(x=1))  # a plugin that declares no Options
    from classify.cli.main import app

    r = CliRunner().invoke(app, ["models"])
    assert r.exit_code == 0 and "test-plugin" in r.output and "broken-plugin" not in r.output, r.output
    # asking for the broken plugin's spec says why it is missing, not "unknown model spec"
    with pytest.raises(ModelSpecError, match="its plugin failed to load .*no_such_module_for_classify"):
        make_classifier("broken-plugin", taxonomy)


class _FakeDist:
    def __init__(self, name):
        self.name = name


def test_a_plugin_cannot_take_a_built_in_name(monkeypatch, caplog):
    from importlib.metadata import EntryPoint as EP

    group = base.ENTRY_POINT_GROUP
    theirs = EP("tfidf-logreg", f"{__name__}:_Plugin", group)
    ours = EP("tfidf-logreg", "classify.classifiers.baselines:TfidfLogReg", group)
    # EntryPoint is immutable; its `dist` is set the way importlib.metadata sets it
    object.__setattr__(theirs, "dist", _FakeDist("some-plugin"))
    object.__setattr__(ours, "dist", _FakeDist("classify"))
    monkeypatch.setattr(base, "entry_points", lambda group: [theirs, ours])
    monkeypatch.setattr(base, "_SHADOWED", set())
    with caplog.at_level(logging.WARNING, logger="classify"):
        eps = base._entry_points()
    assert [(e.name, e.dist.name) for e in eps] == [("tfidf-logreg", "classify")]
    assert "'tfidf-logreg' from some-plugin is ignored: classify already registers that name" in caplog.text


@pytest.mark.parametrize(("spec", "key"), [("tfidf-logreg", "C"), ("embed-knn", "k"), ("openai:x", "samples")])
def test_a_boolean_is_not_a_number(taxonomy, spec, key):
    with pytest.raises(ModelSpecError, match=f"{spec}: option {key}: expected a number, got true"):
        make_classifier(spec, taxonomy, _opts(**{key: True}))


def test_dry_run_is_a_flag_not_an_llm_option(taxonomy):
    with pytest.raises(ModelSpecError, match="unknown LLM option 'dry_run'"):
        make_classifier("openai:x", taxonomy, _opts(dry_run=True))


@pytest.mark.parametrize(
    ("spec", "encoder", "extra", "message"),
    [
        ("tfidf-logreg", "org/enc", {}, "--encoder 'org/enc' means nothing here"),
        ("tfidf-embed", "org/enc", {"embed": False}, "--encoder 'org/enc' means nothing here"),
        ("tfidf-embed", None, {"embed": False, "backend": "onnx"}, "backend: only with embed=true"),
        ("finetune", None, {"embed": False, "ft_epochs": 2}, "ft_epochs: only with embed=true"),
        ("openai:x", None, {"k": 3}, r"option k \(--shots\): only with strategy few-shot"),
        ("openai:x", None, {"n_ctx": 1024}, "option n_ctx: only for local: servers"),
        ("local:smollm2-135m", None, {"base_url": "http://x/v1"}, "option base_url: the local server is started"),
        ("ensemble:tfidf-logreg@org/enc+embed-logreg", None, {}, "tfidf-logreg: --encoder 'org/enc' means nothing"),
    ],
)
def test_settings_that_cannot_act_are_refused(taxonomy, spec, encoder, extra, message):
    with pytest.raises(ModelSpecError, match=message):
        validate_options(spec, taxonomy, ModelOptions(encoder=encoder, extra=extra))


def test_the_runs_encoder_reaches_only_members_that_encode(taxonomy):
    # a hub-style name: resolving it loads nothing (a packaged one would be unpacked)
    clf = make_classifier("ensemble:tfidf-logreg+embed-logreg", taxonomy, ModelOptions(encoder="org/my-encoder"))
    tfidf, embed = clf.make_members()  # built by fit; constructors do no work, so this is cheap
    assert tfidf.options.encoder is None and embed.options.encoder == "org/my-encoder"


@pytest.mark.parametrize(("key", "value"), [("dialect", "llama"), ("structured", "grammar"), ("layout", "fancy")])
def test_llm_choices_are_refused_before_anything_is_built(taxonomy, key, value):
    # Declared once (classify.classifiers.llm.choices); the endpoint is built only at fit, so this
    # check is the only one before training.
    with pytest.raises(ModelSpecError, match=f"openai:x: option {key}: '{value}' is not one of"):
        validate_options("openai:x", taxonomy, _opts(**{key: value}))


class _NeverFitted(Classifier):
    """A plugin whose fit() forgets to fit: its predict() finds it unfitted."""

    uses_encoder = False

    def fit(self, records, labels):
        return self

    def predict(self, records):
        self.check_fitted()
        return {}

    def provenance(self):
        return {"model": self.spec}


def test_an_unfitted_model_is_a_clear_error_on_the_command_line(tmp_path):
    from classify.cli.main import app

    base.register("test-never-fitted", _NeverFitted)
    out = tmp_path / "o.jsonl"
    r = CliRunner().invoke(app, ["run", "--model", "test-never-fitted", "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert "error: test-never-fitted: call fit() before predict()" in " ".join(r.output.split())
    assert "internal error" not in r.output
