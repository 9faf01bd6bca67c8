""" "Does the thread show it?" as a decision of its own.

Gold leaves a label null where the thread never shows one (two thirds of the shipped root causes):
null is not a category, but it is information. `with_shown_dimensions` adds, for every dimension
that has nulls in gold, a two-class dimension `<dim>_shown` (`shown` / `none_shown`) to the
taxonomy and the gold set, so any classifier learns it like any other dimension. A model's
probability that the thread shows a cause, times its probability of each cause given one is shown,
gives one distribution over the causes plus `none_shown` (`classify.evaluation.selective`); a
report whose thread shows no cause is then routed (`none_shown` or review), never given a
confident guess.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

from classify.core.gold import GoldSet
from classify.core.taxonomy import Taxonomy, parse_taxonomy

SHOWN = "shown"
NONE_SHOWN = "none_shown"
SUFFIX = "_shown"


def shown_dim(dim: str) -> str:
    return f"{dim}{SUFFIX}"


@dataclass(frozen=True)
class ShownWords:
    """How reports and figures speak of a dimension's "shown" decision, in the dimension's own words.

    Any codebook's nullable dimension gets one (an `area` too), so nothing says "cause" unless the
    dimension is a cause. E.g. for `area`: noun "area", none_shown "reports with no area shown",
    shown "reports with an area shown", decision "'area shown' decision", routed "routed as showing
    no area".
    """

    noun: str
    shown: str
    none_shown: str
    decision: str
    routed: str


def shown_words(dim: str) -> ShownWords:
    """The words for `dim`'s shown decision (see ShownWords); the report and its HTML use these."""
    noun = dim.replace("_", " ").replace("-", " ").strip() or dim
    article = "an" if noun[:1].lower() in "aeiou" else "a"
    return ShownWords(
        noun=noun,
        shown=f"reports with {article} {noun} shown",
        none_shown=f"reports with no {noun} shown",
        decision=f"'{noun} shown' decision",
        routed=f"routed as showing no {noun}",
    )


def nullable_dimensions(gold: GoldSet) -> list[str]:
    """Dimensions that gold leaves null for some records (and labels for others)."""
    return [d for d in gold.taxonomy.dimension_ids if 0 < gold.n_missing(d) < len(gold)]


def shown_partners(tax: Taxonomy) -> dict[str, str]:
    """`{dim: "<dim>_shown"}` for each dimension of `tax` that has a derived "shown" decision."""
    out = {}
    for d in tax.dimension_ids:
        s = shown_dim(d)
        if s in tax.dimensions and set(tax.dimensions[s].ids) == {SHOWN, NONE_SHOWN}:
            out[d] = s
    return out


def asking_order(tax: Taxonomy) -> list[str]:
    """The dimension ids with each `<dim>_shown` decision right before its dimension: a prompt asks
    whether the thread shows a cause before asking which one (the taxonomy keeps them last)."""
    partners = shown_partners(tax)
    decisions = set(partners.values())
    out: list[str] = []
    for d in tax.dimension_ids:
        if d in decisions:
            continue
        if d in partners:
            out.append(partners[d])
        out.append(d)
    return out


def _shown_labels(labels: list[str | None]) -> list[str | None]:
    return [SHOWN if y is not None else NONE_SHOWN for y in labels]


def with_shown_dimensions(gold: GoldSet, dims: list[str] | None = None) -> GoldSet:
    """`gold` with a `<dim>_shown` dimension for each of `dims` (default: the nullable ones).

    The derived taxonomy keeps name and version (provenance still says `name@version`) but has its
    own fingerprint, so caches keyed on it never mix the two.
    """
    dims = nullable_dimensions(gold) if dims is None else dims
    if not dims:
        return gold
    tax = gold.taxonomy
    raw = copy.deepcopy(tax.raw)
    for d in dims:
        name = tax.dimensions[d].question or d
        raw["dimensions"][shown_dim(d)] = {
            "question": f"Does the thread show the answer to: {name}",
            "categories": [
                {
                    "id": SHOWN,
                    "name": "Shown",
                    "definition": f"The thread or its fix establishes the {d.replace('_', ' ')}.",
                },
                {
                    "id": NONE_SHOWN,
                    "name": "Not shown",
                    "definition": f"The thread never establishes the {d.replace('_', ' ')}.",
                },
            ],
        }
    derived: Taxonomy = parse_taxonomy(raw, tax.path or "<taxonomy>")
    derived = replace(derived, path=tax.path)
    labels = dict(gold.labels)
    for d in dims:
        labels[shown_dim(d)] = _shown_labels(gold.labels[d])
    coders = {}
    for name, by_dim in gold.coders.items():
        coders[name] = dict(by_dim)
        for d in dims:
            if d in by_dim:
                coders[name][shown_dim(d)] = _shown_labels(by_dim[d])
    return replace(gold, taxonomy=derived, labels=labels, coders=coders)
