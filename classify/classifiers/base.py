"""The one small interface every classifier implements, and the registry of model specs.

A classifier is built from a spec string (`embed-logreg`, `openai:gpt-4o-mini`,
`local:smollm2-135m`, ...) and used like a scikit-learn estimator:

    clf = make_classifier("embed-logreg", taxonomy, ModelOptions())
    clf.fit(train_records, {"symptom": [...], "root_cause": [... or None]})
    preds = clf.predict(records)        # {dimension: [Prediction, ...]} aligned with records
    clf.provenance()                    # what to record beside every label

Label lists may hold None (no gold label for that record and dimension): fit skips those.
"""

from __future__ import annotations

from classify.core.errors import ClassifyError
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from classify.core.records import Record
from classify.core.taxonomy import Taxonomy


@dataclass
class Prediction:
    label: str | None
    confidence: float | None = None
    proba: dict[str, float] | None = None
    rationale: str | None = None
    status: str = "ok"  # "ok", or "invalid" when a model never gave a valid answer
    raw: str | None = None  # the model's raw answer, kept when invalid
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModelOptions:
    encoder: str | None = None  # sentence-transformers model path/name; None = packaged MiniLM
    include_discussion: bool = True
    batch_size: int = 32
    seed: int = 0
    show_progress: bool = True
    # Anything model-family specific (LLM endpoint, strategy, k, ...).
    extra: dict[str, Any] = field(default_factory=dict)

    def run_meta(self) -> dict[str, Any]:
        """The options that tell two runs of one spec apart (recorded in reports, named in folders)."""
        return {"encoder": self.encoder, "include_discussion": self.include_discussion, "extra": self.extra}


class Classifier(Protocol):
    spec: str
    taxonomy: Taxonomy

    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> "Classifier": ...

    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]: ...

    def provenance(self) -> dict[str, Any]: ...


class ModelSpecError(ClassifyError, ValueError):
    pass


# prefix -> factory(spec, taxonomy, options). A prefix ending in ":" matches `prefix...`.
_REGISTRY: dict[str, Callable[[str, Taxonomy, ModelOptions], Classifier]] = {}


# Spec prefixes of the prompted-LLM classifiers (classify.classifiers.llm); everything else trains on gold.
LLM_PREFIXES = ("openai:", "local:")


def register(prefix: str):
    def deco(fn):
        _REGISTRY[prefix] = fn
        return fn

    return deco


def _load_builtin() -> None:
    # Imported here so `classify --help` stays fast: model families pull heavy libraries lazily.
    import classify.classifiers.baselines  # noqa: F401
    import classify.classifiers.features  # noqa: F401  (tfidf-embed, hier-tfidf-embed, finetune, hier-finetune)
    import classify.classifiers.ensemble  # noqa: F401  (ensemble, ensemble:...)

    try:
        import classify.classifiers.llm.classifier  # noqa: F401
    except ModuleNotFoundError as e:
        if not e.name or not e.name.startswith("classify.classifiers.llm"):
            raise


def known_specs() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def make_classifier(spec: str, taxonomy: Taxonomy, options: ModelOptions | None = None) -> Classifier:
    _load_builtin()
    options = options or ModelOptions()
    if spec in _REGISTRY:
        return _REGISTRY[spec](spec, taxonomy, options)
    for prefix, factory in _REGISTRY.items():
        if prefix.endswith(":") and spec.startswith(prefix):
            return factory(spec, taxonomy, options)
    raise ModelSpecError(f"unknown model spec {spec!r}; known: {', '.join(sorted(_REGISTRY))}")


def uses_llm(spec: str) -> bool:
    """Whether `spec` talks to an LLM: an LLM spec, or an inline ensemble with an LLM member."""
    from classify.classifiers.ensemble import llm_members

    return spec.startswith(LLM_PREFIXES) or bool(llm_members(spec))
