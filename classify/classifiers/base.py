"""The interface every classifier implements, and the registry of model specs.

A classifier is built from a spec string (`embed-logreg`, `openai:gpt-4o-mini`,
`local:smollm2-135m`, ...) and is a scikit-learn estimator: `__init__` stores the spec, the
taxonomy, the run options and the typed options (`params`) and does nothing else; `fit` builds
encoders, members and endpoints; what fit learns ends in `_`; `get_params`/`set_params` and
`sklearn.base.clone` work; predict before fit raises `NotFittedError`.

    clf = make_classifier("embed-logreg", taxonomy, ModelOptions(extra={"C": 1.0}))
    clf.fit(train_records, {"symptom": [...], "root_cause": [... or None]})
    preds = clf.predict(records)        # {dimension: [Prediction, ...]} aligned with records
    clf.provenance()                    # what to record beside every label
    clf.close()                         # free encoders and connections (or use `with`)

Label lists may hold None (no gold label for that record and dimension): fit skips those.

Each spec names a `Classifier` subclass in the `classify.classifiers` entry-point group
(pyproject.toml); built-ins register there exactly as a third-party package would. The class's
`Options` (a pydantic model, classify.classifiers.options) declares the `--opt` keys it accepts;
`make_classifier` validates them before building anything.
"""

from __future__ import annotations

import logging
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar, Generic, TypeVar

from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError as SklearnNotFittedError

from classify.classifiers.names import ENTRY_POINT_GROUP
from classify.classifiers.options import (
    ModelSpecError,
    NoOptions,
    OptionsModel,
    option_keys,
    options_table,
    parse_options,
)
from classify.core.errors import ClassifyError
from classify.core.http import redact_urls_in, redact_urls_text
from classify.core.records import Record
from classify.core.taxonomy import Taxonomy

__all__ = [
    "Classifier",
    "LLM_PREFIXES",
    "ModelOptions",
    "ModelSpecError",
    "NotFittedError",
    "Prediction",
    "SharedPool",
    "known_specs",
    "make_classifier",
    "options_schema",
    "register",
    "uses_llm",
    "validate_options",
]

log = logging.getLogger("classify")

# Spec prefixes of the prompted-LLM classifiers (classify.classifiers.llm); everything else trains on gold.
LLM_PREFIXES = ("openai:", "local:")


@dataclass
class Prediction:
    label: str | None
    confidence: float | None = None
    proba: dict[str, float] | None = None
    rationale: str | None = None
    status: str = "ok"  # "ok", or "invalid" when a model never gave a valid answer
    raw: str | None = None  # the model's raw answer, kept when invalid
    extra: dict[str, Any] = field(default_factory=dict)


def predictions_from_proba(classes: list[str], P: Any) -> list[Prediction]:
    """One Prediction per row of the probability matrix `P` (columns = `classes`): the argmax is
    the label and its probability the confidence."""
    best = P.argmax(axis=1)
    return [
        Prediction(label=classes[b], confidence=float(p[b]), proba={c: float(v) for c, v in zip(classes, p)})
        for b, p in zip(best, P)
    ]


@dataclass
class ModelOptions:
    encoder: str | None = None  # sentence-transformers model path/name; None = packaged MiniLM
    include_discussion: bool = True
    batch_size: int = 32
    seed: int = 0
    show_progress: bool = True
    # The raw `--opt key=value` values; the spec's Options model validates and types them.
    extra: dict[str, Any] = field(default_factory=dict)

    def run_meta(self) -> dict[str, Any]:
        """The options that tell two runs of one spec apart (recorded in reports, named in folders)."""
        # Credentials in a server URL (a gateway's ?api-key=) are never recorded.
        return {
            "encoder": self.encoder,
            "include_discussion": self.include_discussion,
            "extra": redact_urls_in(self.extra),
        }


class NotFittedError(ClassifyError, SklearnNotFittedError):
    """predict() (or what needs a fit) before fit(): scikit-learn's NotFittedError, and a
    ClassifyError, so the command line prints it as one line."""


class Classifier(BaseEstimator, ABC):
    """Base of every classifier. Subclasses implement fit/predict/provenance and declare `Options`.

    `params` is `Options` validated from `options.extra`; `make_classifier` builds it (validating
    once), so a constructor never sees an unknown key or a value of the wrong type. Constructors
    store their arguments and nothing else (scikit-learn's rule, which `clone` relies on).
    """

    Options: ClassVar[type[OptionsModel]] = NoOptions
    # False for families that encode no text with a sentence encoder: --encoder is refused for them.
    uses_encoder: ClassVar[bool] = True

    def __init__(self, spec: str, taxonomy: Taxonomy, options: ModelOptions, params: Any):
        # What is shown and stored (labels rows, eval folders): an ensemble member's
        # `[base_url=...?api-key=K]` without the key. The members' own options keep the real URL.
        self.spec = redact_urls_text(spec)
        self.taxonomy = taxonomy
        self.options = options
        self.params = params

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:  # noqa: N803 (BaseEstimator's signature)
        return f"{type(self).__name__}({self.spec!r})"  # the taxonomy and options would fill a screen

    def __sklearn_is_fitted__(self) -> bool:
        # scikit-learn's rule: fit sets attributes ending in "_" and __init__ sets none.
        return any(k.endswith("_") and not k.startswith("__") for k in vars(self))

    def check_fitted(self) -> None:
        """Raise NotFittedError unless fit() has run (the one unfitted check every classifier uses)."""
        if not self.__sklearn_is_fitted__():
            raise NotFittedError(f"{self.spec}: call fit() before predict()")

    @classmethod
    def check(cls, spec: str, taxonomy: Taxonomy, options: ModelOptions) -> Any:
        """Validate `options` for `spec` without building anything heavy; return the typed params.

        Raises ModelSpecError. Families with more to check (ensemble members, LLM model names) extend it.
        """
        params = parse_options(cls.Options, spec, options.extra)
        if options.encoder and not cls.takes_encoder(params):
            raise ModelSpecError(f"{spec}: --encoder {options.encoder!r} means nothing here: no sentence encoder runs")
        return params

    @classmethod
    def takes_encoder(cls, params: Any) -> bool:
        """Whether a model of this family with these typed options encodes text with `--encoder`."""
        return cls.uses_encoder

    @abstractmethod
    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> Classifier: ...

    @abstractmethod
    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]: ...

    @abstractmethod
    def provenance(self) -> dict[str, Any]: ...

    def prepare(self, records: list[Record], progress: Callable[[int], None] | None = None) -> None:  # noqa: B027 (optional hook)
        """Before a bulk run: do per-record work that caches (encoding) in one pass. Default: nothing."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Free what the classifier holds (loaded encoders, connections). It may be used again after."""

    def preflight(self) -> None:
        """Before any training: fail now on what would fail later (a missing API key, a server that
        refuses connections). Default: check the members it would build, if any."""
        for m in self.make_members():
            m.preflight()

    @property
    def stats(self) -> Any:
        """Request statistics of models that call a server (LLMs); None for the others."""
        return None

    @property
    def members(self) -> list[Classifier]:
        """The fitted classifiers this one combines (ensembles); empty for the others and before fit."""
        return list(getattr(self, "members_", []))

    def make_members(self) -> list[Classifier]:
        """New unfitted classifiers of the kind this one combines (fit builds its members so); empty
        for the others. Cheap: constructors do no work."""
        return []

    def __enter__(self) -> Classifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- heavy objects shared between classifiers ------------------------------------------------------

T = TypeVar("T")


class SharedPool(Generic[T]):
    """Heavy objects that classifiers built one after another reuse: a loaded encoder, the
    frozen-layer states of fine-tuning. A cross-validation builds one classifier per fold and
    each finds the previous fold's object here instead of loading it again.

    Each classifier `acquire`s what it uses and `release`s it in close(). An object nobody holds
    is kept while it is among the `keep_idle` most recently released (the next fold likely wants
    it) and freed (its `close()` called, if any) after that, so memory stays bounded. `clear()`
    frees everything.
    """

    def __init__(self, keep_idle: int = 1):
        self.keep_idle = keep_idle
        self._items: dict[Hashable, T] = {}
        self._holders: dict[Hashable, int] = {}
        self._idle: list[Hashable] = []  # released keys, oldest first
        self._lock = threading.Lock()

    def acquire(self, key: Hashable, make: Callable[[], T]) -> T:
        with self._lock:
            if key not in self._items:
                self._items[key] = make()
            self._holders[key] = self._holders.get(key, 0) + 1
            if key in self._idle:
                self._idle.remove(key)
            return self._items[key]

    def release(self, key: Hashable) -> None:
        with self._lock:
            if key not in self._holders:
                return
            self._holders[key] -= 1
            if self._holders[key] > 0:
                return
            del self._holders[key]
            self._idle.append(key)
            while len(self._idle) > self.keep_idle:
                self._free(self._idle.pop(0))

    def clear(self) -> None:
        with self._lock:
            for key in list(self._items):
                self._free(key)
            self._holders.clear()
            self._idle.clear()

    def _free(self, key: Hashable) -> None:
        obj = self._items.pop(key, None)
        close = getattr(obj, "close", None)  # pooled objects need not be closeable
        if callable(close):
            close()

    def __len__(self) -> int:
        return len(self._items)


# -- the registry --------------------------------------------------------------------------------
# name -> Classifier subclass. A name ending in ":" matches every spec it begins (`openai:gpt-4o`).
_REGISTRY: dict[str, type[Classifier]] = {}
_LOADED = False
_FAILED: dict[str, str] = {}  # entry points that failed to load -> why: reported once, not retried
_SHADOWED: set[tuple[str, str]] = set()  # (name, distribution) left out for a clash, warned once
_LOAD_LOCK = threading.Lock()


def register(name: str, cls: type[Classifier] | None = None) -> Any:
    """Register `cls` for spec `name` at run time (tests, notebooks); packages use the entry-point
    group instead. Usable as a decorator: `@register("my-spec")`."""

    def deco(c: type[Classifier]) -> type[Classifier]:
        if not (isinstance(c, type) and issubclass(c, Classifier)):
            raise TypeError(f"register({name!r}): {c!r} is not a Classifier subclass")
        _REGISTRY[name] = c
        return c

    return deco(cls) if cls is not None else deco


def _dist_name(ep: EntryPoint) -> str:
    return ep.dist.name if ep.dist is not None else "?"


def _entry_points() -> list[EntryPoint]:
    """One entry point per spec name; on a clash the built-in (this package's) wins, with a warning,
    so which class a name means never depends on the order things were imported in."""
    eps = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.name, _dist_name(ep) != "classify"))
    out: dict[str, EntryPoint] = {}
    for ep in eps:
        if ep.name in out:
            if (ep.name, _dist_name(ep)) not in _SHADOWED:
                _SHADOWED.add((ep.name, _dist_name(ep)))
                log.warning(
                    "model plugin %r from %s is ignored: %s already registers that name",
                    ep.name,
                    _dist_name(ep),
                    _dist_name(out[ep.name]),
                )
            continue
        out[ep.name] = ep
    return list(out.values())


def _load(ep: EntryPoint) -> None:
    """Import one entry point; a plugin that fails is reported and left out, never fatal."""
    if ep.name in _FAILED:
        return
    try:
        obj = ep.load()
    except Exception as e:  # a broken plugin must not take `classify models` down with it
        log.warning(
            "model plugin %r (%s) failed to load and is left out: %s: %s", ep.name, ep.value, type(e).__name__, e
        )
        _FAILED[ep.name] = f"{ep.value}: {type(e).__name__}: {e}"
        return
    if not (isinstance(obj, type) and issubclass(obj, Classifier)):
        log.warning("model plugin %r (%s) is not a Classifier subclass; left out", ep.name, ep.value)
        _FAILED[ep.name] = f"{ep.value} is not a Classifier subclass"
        return
    _REGISTRY.setdefault(ep.name, obj)  # run-time registrations win


def _load_all() -> None:
    global _LOADED
    with _LOAD_LOCK:
        if not _LOADED:
            for ep in _entry_points():
                if ep.name not in _REGISTRY:
                    _load(ep)
            _LOADED = True


def _match(names: list[str], spec: str) -> str | None:
    if spec in names:
        return spec
    prefixes = [n for n in names if n.endswith(":") and spec.startswith(n)]
    return max(prefixes, key=len) if prefixes else None


def _did_you_mean(spec: str, known: list[str]) -> str:
    """`did you mean 'embed-logreg'? ` for a misspelled spec (its name part: before `:`, `[` or `@`)."""
    import difflib

    head = re.split(r"[\[@]", spec, maxsplit=1)[0]
    name = head[: head.index(":") + 1] if ":" in head else head
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if not close:
        return ""
    suggestion = close[0] + spec[len(name) :] if close[0].endswith(":") else close[0] + spec[len(head) :]
    return f"did you mean {suggestion!r}? "


def family(spec: str) -> type[Classifier]:
    """The Classifier subclass behind `spec`; imports only the entry point it needs."""
    name = _match(list(_REGISTRY), spec)
    if name is None and not _LOADED:
        eps = {ep.name: ep for ep in _entry_points()}
        ep_name = _match(list(eps), spec)
        if ep_name is not None:
            _load(eps[ep_name])
        name = _match(list(_REGISTRY), spec)
    if name is None:
        known = known_specs()
        failed = _match(list(_FAILED), spec)
        if failed is not None:
            raise ModelSpecError(f"model spec {spec!r}: its plugin failed to load ({_FAILED[failed]})")
        hint = ", ".join(known) if known else "none (is the package installed? pip install -e .)"
        raise ModelSpecError(f"unknown model spec {spec!r}; {_did_you_mean(spec, known)}known: {hint}")
    return _REGISTRY[name]


def known_specs() -> list[str]:
    """Every spec name this installation knows: built-ins and plugins (a name ending in ':' takes a suffix)."""
    _load_all()
    return sorted(_REGISTRY)


def validate_options(spec: str, taxonomy: Taxonomy, options: ModelOptions | None = None) -> Any:
    """Check `spec` and its options up front, building nothing heavy; return the typed options.

    Raises ModelSpecError naming the spec, the key and the allowed keys.
    """
    return family(spec).check(spec, taxonomy, options or ModelOptions())


def make_classifier(spec: str, taxonomy: Taxonomy, options: ModelOptions | None = None) -> Classifier:
    """Build the classifier for `spec`, its options validated first."""
    options = options or ModelOptions()
    cls = family(spec)
    return cls(spec, taxonomy, options, cls.check(spec, taxonomy, options))


def options_schema(spec: str) -> dict[str, dict[str, Any]]:
    """{key: {"type", "default", "description"}} of the `--opt` keys `spec` accepts."""
    return options_table(family(spec).Options)


def allowed_options(spec: str) -> list[str]:
    return option_keys(family(spec).Options)


def uses_llm(spec: str) -> bool:
    """Whether `spec` talks to an LLM: an LLM spec, or an inline ensemble with an LLM member."""
    from classify.classifiers.ensemble import llm_members

    return spec.startswith(LLM_PREFIXES) or bool(llm_members(spec))
