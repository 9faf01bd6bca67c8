"""Agreement of two label lists over the taxonomy's dimensions and root-cause groups: the coders'
own kappa, and how category predictions roll up to groups."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from classify.classifiers.base import Prediction
from classify.core.gold import GoldSet
from classify.core.taxonomy import Dimension
from classify.evaluation.metrics import kappa_ci


def dims_with_groups(gold: GoldSet) -> Iterator[tuple[str, str, Dimension | None]]:
    """(name, dimension, the dimension when `name` is its group level): `symptom`, `root_cause`, `root_cause_group`."""
    for d, dim in gold.taxonomy.dimensions.items():
        yield d, d, None
        if dim.groups:
            yield f"{d}_group", d, dim


def group_confidence(p: Prediction, dim) -> float | None:
    """Group confidence sums the category probabilities within the predicted group."""
    if p.label is None:
        return None
    if p.proba:
        g = dim.group_of(p.label)
        return float(sum(v for c, v in p.proba.items() if c in dim.ids and dim.group_of(c) == g))
    return p.confidence


def coder_agreement(gold: GoldSet, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Kappa between the first two coders, per dimension, on items both coders labeled."""
    names = sorted(gold.coders)
    if len(names) < 2:
        return {}
    a, b = names[:2]
    out = {}
    for name, d, group_dim in dims_with_groups(gold):
        pairs = [(x, y) for x, y in zip(gold.coders[a][d], gold.coders[b][d]) if x is not None and y is not None]
        if not pairs:
            continue
        xs: Sequence[str | None]
        ys: Sequence[str | None]
        xs, ys = zip(*pairs)
        if group_dim is not None:
            xs = [group_dim.group_of(x) for x in xs]
            ys = [group_dim.group_of(y) for y in ys]
        out[name] = {"coders": [a, b], **kappa_ci(list(xs), list(ys), n_boot=n_boot, seed=seed)}
    return out


def gold_summary(gold: GoldSet, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """What `classify gold stats` shows: per dimension the count of each category (and its group)
    and the records without a label; the coders' agreement when the file holds two passes."""
    from collections import Counter

    dims: dict[str, Any] = {}
    for d, dim in gold.taxonomy.dimensions.items():
        counts = Counter(y for y in gold.labels[d] if y is not None)
        dims[d] = {
            "n": sum(counts.values()),
            "n_missing": gold.n_missing(d),
            "categories": [{"id": c.id, "group": c.group, "n": counts.get(c.id, 0)} for c in dim.categories],
            "has_groups": bool(dim.groups),
        }
    return {
        "path": str(gold.path),
        "n": len(gold),
        "taxonomy": gold.taxonomy.label,
        "hash": gold.hash,
        "dimensions": dims,
        "coders": coder_agreement(gold, n_boot=n_boot, seed=seed),
    }
