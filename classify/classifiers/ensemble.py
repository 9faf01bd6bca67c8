"""Ensembles: average the members' class probabilities; confidence counts member agreement.

Specs:
  ensemble                 the default members (DEFAULT_MEMBERS below)
  ensemble:M1+M2+...       members given inline; each is  SPEC[@ENCODER][[key=value,...]]
                           e.g. ensemble:tfidf-embed@all-mpnet-base-v2+tfidf-embed[embed=false,char=true]

Label: argmax of the mean probability. Confidence (`--opt confidence=...`):
  agreement (default)  mean probability of the label x share of members whose own top label it is,
                       so a label two models both pick outranks one they split on
  mean                 mean probability alone
Each prediction's extra holds `agreement` (that share), `members` (each member's label) and, for
dimensions with groups, `group` / `group_confidence` (summed mean probability of the group).

Other `--opt` keys go to the members that take them: LLM settings (`k` is the few-shot count)
to LLM members only, the rest (C, char, ...) to the trained members whose options have the key;
`backend` (the embedding backend) to every member that has it. A key no member takes is an
error. Options inside a member's brackets are that member's alone.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from classify.classifiers.base import (
    LLM_PREFIXES,
    Classifier,
    ModelOptions,
    ModelSpecError,
    Prediction,
    family,
    validate_options,
)
from classify.classifiers.llm.settings import is_llm_option
from classify.classifiers.options import OptionsModel, normalize_keys, parse_options
from classify.core.http import redact_urls_text
from classify.core.records import Record
from classify.core.taxonomy import Dimension, Taxonomy

# Chosen after looking at cross-validation results (docs/agreement.md says which and how).
DEFAULT_MEMBERS = (
    "tfidf-embed@all-mpnet-base-v2",
    "hier-tfidf-embed@all-mpnet-base-v2",
    "tfidf-embed[embed=false,tfidf=false,char=true]",
)

# Keys that mean the same for every member that has them (an LLM embeds few-shot candidates with it).
SHARED_KEYS = frozenset({"backend"})

_MEMBER_RE = re.compile(r"^(?P<spec>[^@\[\]]+?)(?:@(?P<encoder>[^\[\]]+))?(?:\[(?P<opts>[^\]]*)\])?$")


class EnsembleOptions(OptionsModel):
    confidence: Literal["agreement", "mean"] = "agreement"


def parse_member(text: str) -> tuple[str, str | None, dict[str, Any]]:
    m = _MEMBER_RE.match(text.strip())
    if not m:
        raise ModelSpecError(f"bad ensemble member {text!r}; expected SPEC[@ENCODER][[key=value,...]]")
    opts: dict[str, Any] = {}
    for kv in filter(None, (m.group("opts") or "").split(",")):
        if "=" not in kv:
            raise ModelSpecError(f"bad option {kv!r} in ensemble member {text!r}; expected key=value")
        k, v = kv.split("=", 1)
        opts[k.strip()] = v.strip()
    return m.group("spec").strip(), m.group("encoder"), opts


def member_texts(spec: str) -> list[str]:
    if spec == "ensemble":
        return list(DEFAULT_MEMBERS)
    return [m for m in spec[len("ensemble:") :].split("+") if m.strip()]


def llm_members(spec: str) -> list[str]:
    """The LLM member specs of an inline ensemble spec (empty for anything else).

    LLM flags given on the command line (--base-url, --strategy, --shots...) reach the LLM
    members only; other shared options (--opt C=3, char=true...) reach the trained members only.
    """
    if not spec.startswith("ensemble:"):
        return []
    return [mspec for mspec, _, _ in map(parse_member, member_texts(spec)) if mspec.startswith(LLM_PREFIXES)]


def _takes_encoder(mspec: str, extra: dict[str, Any]) -> bool:
    """Whether the run's --encoder reaches this member (a char-only member runs no encoder)."""
    cls = family(mspec)
    try:
        return cls.takes_encoder(parse_options(cls.Options, mspec, extra))
    except ModelSpecError:
        return cls.uses_encoder  # the member's own check reports the bad option


def member_plan(spec: str, options: ModelOptions) -> list[tuple[str, str, ModelOptions]]:
    """(member text, member spec, member options) per member, shared options routed (module docstring)."""
    texts = member_texts(spec)
    if len(texts) < 2:
        raise ModelSpecError(f"{spec}: an ensemble needs at least two members")
    parsed = []
    for text in texts:
        mspec, encoder, opts = parse_member(text)
        if mspec.startswith("ensemble"):
            raise ModelSpecError(f"{spec}: ensembles do not nest ({text!r})")
        parsed.append((text, mspec, encoder, opts, family(mspec).Options.model_fields))

    def takes(i: int, name: str) -> bool:
        _, mspec, _, _, accepted = parsed[i]
        llm_only = is_llm_option(name) and name not in SHARED_KEYS
        return name in accepted and (mspec.startswith(LLM_PREFIXES) or not llm_only)

    routed: list[dict[str, Any]] = [{} for _ in parsed]
    for name, (key, value) in normalize_keys(options.extra).items():
        if name == "confidence":
            continue
        takers = [i for i in range(len(parsed)) if takes(i, name)]
        if not takers:
            allowed = sorted({"confidence", *(k for i, p in enumerate(parsed) for k in p[4] if takes(i, k))})
            own = [p[1] for p in parsed if name in p[4]]
            hint = (
                f" ({key} is an LLM setting and no LLM member is here; give it to one member in "
                f"brackets, e.g. {own[0]}[{key}={value}])"
                if own
                else ""
            )
            raise ModelSpecError(f"{spec}: unknown option {key!r}{hint}; allowed: {', '.join(allowed)}")
        for i in takers:
            routed[i][key] = value
    return [
        (
            text,
            mspec,
            replace(
                options,
                encoder=encoder or (options.encoder if _takes_encoder(mspec, {**routed[i], **opts}) else None),
                extra={**routed[i], **opts},
            ),
        )
        for i, (text, mspec, encoder, opts, _) in enumerate(parsed)
    ]


def _sum_stats(stats: list[Any]) -> Any:
    """Field-by-field sum of request statistics (dataclasses of numbers and lists)."""
    total = copy.deepcopy(stats[0])
    for s in stats[1:]:
        for f in dataclasses.fields(s):
            setattr(total, f.name, getattr(total, f.name) + getattr(s, f.name))
    return total


@dataclass(frozen=True)
class Member:
    """One validated ensemble member: its text in the spec, its spec, options and typed options."""

    text: str
    spec: str
    options: ModelOptions
    params: Any


@dataclass(frozen=True)
class EnsembleParams:
    """What `EnsembleClassifier.check` validates once: the confidence mode and the members."""

    confidence: Literal["agreement", "mean"]
    members: tuple[Member, ...]


def mean_proba(preds: list[Prediction]) -> dict[str, float]:
    """The class probabilities of `preds` averaged (a class a prediction lacks counts 0). A
    prediction without probabilities (e.g. an LLM's) votes with its confidence on its label."""
    n = len(preds)
    mean: dict[str, float] = {}
    for p in preds:
        proba = p.proba or ({p.label: p.confidence if p.confidence is not None else 1.0} if p.label else {})
        for c, v in proba.items():
            mean[c] = mean.get(c, 0.0) + float(v) / n
    return mean


class EnsembleClassifier(Classifier):
    Options = EnsembleOptions
    params: EnsembleParams
    members_: list[Classifier]

    @classmethod
    def check(cls, spec: str, taxonomy: Taxonomy, options: ModelOptions) -> EnsembleParams:
        own = {k: v for k, v in options.extra.items() if k == "confidence"}
        confidence = parse_options(EnsembleOptions, spec, own).confidence
        members = tuple(
            Member(text, mspec, mopts, validate_options(mspec, taxonomy, mopts))
            for text, mspec, mopts in member_plan(spec, options)
        )
        return EnsembleParams(confidence, members)

    def make_members(self) -> list[Classifier]:
        # Validated once by check(): the members are built from their typed options, unchecked again.
        return [family(m.spec)(m.spec, self.taxonomy, m.options, m.params) for m in self.params.members]

    @property
    def stats(self) -> Any:
        found = [m.stats for m in self.members if m.stats is not None]
        return _sum_stats(found) if found else None

    def prepare(self, records: list[Record], progress: Callable[[int], None] | None = None) -> None:
        # Each member encodes with its own encoder; the progress bar counts every pass.
        self.check_fitted()
        for m in self.members_:
            m.prepare(records, progress=progress)

    def close(self) -> None:
        for m in self.members:
            m.close()

    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> EnsembleClassifier:
        self.close()  # a refit replaces the members: free what the previous ones hold
        self.members_ = self.make_members()
        for m in self.members_:
            m.fit(records, labels)
        return self

    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]:
        self.check_fitted()
        outs = [m.predict(records) for m in self.members_]
        dims = [d for d in self.taxonomy.dimension_ids if all(d in o for o in outs)]
        result: dict[str, list[Prediction]] = {}
        for d in dims:
            dim = self.taxonomy.dimensions[d]
            result[d] = [self._combine([o[d][i] for o in outs], dim) for i in range(len(records))]
        return result

    def _combine(self, member_preds: list[Prediction], dim: Dimension) -> Prediction:
        n = len(member_preds)
        mean = mean_proba(member_preds)
        if not mean:
            return Prediction(label=None, confidence=None, status="invalid", raw="no member gave a label")
        label = max(mean, key=lambda c: mean[c])
        agreement = sum(1 for p in member_preds if p.label == label) / n
        conf = mean[label] * agreement if self.params.confidence == "agreement" else mean[label]
        extra: dict[str, Any] = {"agreement": agreement, "members": [p.label for p in member_preds]}
        if dim.groups:
            g = dim.group_of(label)
            extra["group"] = g
            extra["group_confidence"] = float(sum(v for c, v in mean.items() if dim.group_of(c) == g))
        return Prediction(label=label, confidence=float(conf), proba=mean, extra=extra)

    def provenance(self) -> dict[str, Any]:
        self.check_fitted()
        return {
            "model": self.spec,
            "confidence": self.params.confidence,
            "members": [
                {"member": redact_urls_text(m.text), **c.provenance()}
                for m, c in zip(self.params.members, self.members_)
            ],
        }
