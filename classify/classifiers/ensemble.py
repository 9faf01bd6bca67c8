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
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from classify.classifiers.llm.settings import is_llm_option
from classify.classifiers.base import LLM_PREFIXES, ModelOptions, ModelSpecError, Prediction, make_classifier, register
from classify.core.records import Record
from classify.core.taxonomy import Taxonomy

# Chosen after looking at cross-validation results (docs/agreement.md says which and how).
DEFAULT_MEMBERS = (
    "tfidf-embed@all-mpnet-base-v2",
    "hier-tfidf-embed@all-mpnet-base-v2",
    "tfidf-embed[embed=false,tfidf=false,char=true]",
)

_MEMBER_RE = re.compile(r"^(?P<spec>[^@\[\]]+?)(?:@(?P<encoder>[^\[\]]+))?(?:\[(?P<opts>[^\]]*)\])?$")


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


def llm_members(spec: str) -> list[str]:
    """The LLM member specs of an inline ensemble spec (empty for anything else).

    LLM flags given on the command line (--base-url, --strategy, --shots...) reach the LLM
    members only; other shared options (--opt C=3, backend=...) reach the trained members only.
    """
    if not spec.startswith("ensemble:"):
        return []
    out = []
    for text in spec[len("ensemble:"):].split("+"):
        if text.strip():
            mspec = parse_member(text)[0]
            if mspec.startswith(LLM_PREFIXES):
                out.append(mspec)
    return out


class EnsembleClassifier:
    def __init__(self, spec: str, taxonomy: Taxonomy, options: ModelOptions, members: list[str]):
        if len(members) < 2:
            raise ModelSpecError(f"{spec}: an ensemble needs at least two members")
        self.spec = spec
        self.taxonomy = taxonomy
        self.options = options
        self.confidence_mode = str(options.extra.get("confidence", "agreement"))
        if self.confidence_mode not in ("agreement", "mean"):
            raise ModelSpecError(f"{spec}: confidence must be 'agreement' or 'mean', got {self.confidence_mode!r}")
        self.member_specs = members
        self.members = []
        for text in members:
            mspec, encoder, opts = parse_member(text)
            if mspec.startswith("ensemble"):
                raise ModelSpecError(f"{spec}: ensembles do not nest ({text!r})")
            # Shared options go where they mean something: LLM settings (--shots is `k`) to LLM
            # members only, the rest (C, backend, k of embed-knn...) to the trained members only.
            llm = mspec.startswith(LLM_PREFIXES)
            extra = {k: v for k, v in options.extra.items() if k != "confidence" and is_llm_option(k) == llm}
            mopts = replace(options, encoder=encoder or options.encoder, extra={**extra, **opts})
            self.members.append(make_classifier(mspec, taxonomy, mopts))

    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> "EnsembleClassifier":
        for m in self.members:
            m.fit(records, labels)
        return self

    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]:
        outs = [m.predict(records) for m in self.members]
        dims = [d for d in self.taxonomy.dimension_ids if all(d in o for o in outs)]
        result: dict[str, list[Prediction]] = {}
        for d in dims:
            dim = self.taxonomy.dimensions[d]
            preds = []
            for i in range(len(records)):
                member_preds = [o[d][i] for o in outs]
                preds.append(self._combine(member_preds, dim))
            result[d] = preds
        return result

    def _combine(self, member_preds: list[Prediction], dim) -> Prediction:
        n = len(member_preds)
        mean: dict[str, float] = {}
        for p in member_preds:
            # A member without probabilities (e.g. an LLM) votes with its confidence on its label.
            proba = p.proba or ({p.label: p.confidence if p.confidence is not None else 1.0} if p.label else {})
            for c, v in proba.items():
                mean[c] = mean.get(c, 0.0) + float(v) / n
        if not mean:
            return Prediction(label=None, confidence=None, status="invalid", raw="no member gave a label")
        label = max(mean, key=mean.get)
        agreement = sum(1 for p in member_preds if p.label == label) / n
        conf = mean[label] * agreement if self.confidence_mode == "agreement" else mean[label]
        extra: dict[str, Any] = {"agreement": agreement, "members": [p.label for p in member_preds]}
        if dim.groups:
            g = dim.group_of(label)
            extra["group"] = g
            extra["group_confidence"] = float(sum(v for c, v in mean.items() if dim.group_of(c) == g))
        return Prediction(label=label, confidence=float(conf), proba=mean, extra=extra)

    def provenance(self) -> dict[str, Any]:
        return {
            "model": self.spec,
            "confidence": self.confidence_mode,
            "members": [{"member": t, **m.provenance()} for t, m in zip(self.member_specs, self.members)],
        }


@register("ensemble")
def _default(spec: str, taxonomy: Taxonomy, options: ModelOptions) -> EnsembleClassifier:
    return EnsembleClassifier(spec, taxonomy, options, list(DEFAULT_MEMBERS))


@register("ensemble:")
def _inline(spec: str, taxonomy: Taxonomy, options: ModelOptions) -> EnsembleClassifier:
    members = [m for m in spec[len("ensemble:"):].split("+") if m.strip()]
    return EnsembleClassifier(spec, taxonomy, options, members)
