"""Agreement of two label lists over the taxonomy's dimensions, their groups and the cause-shown
decision: the coders' own kappa (gold stats, eval, the workbench all call label_agreement), and how
category predictions roll up to groups."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from classify.classifiers.base import Prediction
from classify.core.causeshown import NONE_SHOWN, SHOWN, SUFFIX, shown_dim
from classify.core.gold import GoldSet
from classify.core.taxonomy import Dimension
from classify.evaluation.metrics import SMALL_N, kappa_ci


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


def _finite(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _row(xs: Sequence[str | None], ys: Sequence[str | None], n_boot: int, seed: int) -> dict[str, Any]:
    r = kappa_ci(list(xs), list(ys), n_boot=n_boot, seed=seed)
    out = {**r, "kappa": _finite(r["kappa"]), "lo": _finite(r["lo"]), "hi": _finite(r["hi"])}
    out["small"] = 0 < r["n"] < SMALL_N
    # One coder kept to one category: kappa is defined but exactly 0 (observed agreement equals
    # chance agreement), in every resample too; callers explain it.
    single = [j for j, v in enumerate((xs, ys)) if r["n"] and len(set(v)) == 1 and len(set(xs) | set(ys)) > 1]
    if single:
        out["single_category"] = single
    return out


def label_agreement(
    xs: Sequence[str | None], ys: Sequence[str | None], dim: Dimension, n_boot: int = 1000, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """Two coders' labels of the same items on one dimension: kappa rows (kappa, lo, hi, n, small,
    single_category: 0 and/or 1 for the list that used one category only) under the names

    - `<dim>`: over the items both labeled; null ("not shown") is no category, so an item either
      coder left null is not counted here;
    - `<dim>_group`: the same items, categories rolled up to their groups (grouped dimensions);
    - `<dim>_shown`: over every item, whether each coder named a label at all (shown / none_shown),
      so "not shown" against a named label is a disagreement; given when either list has a null.
    """
    if len(xs) != len(ys):
        raise ValueError(f"two label lists of different lengths ({len(xs)} and {len(ys)})")
    both = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
    a = [x for x, _ in both]
    b = [y for _, y in both]
    out = {dim.id: _row(a, b, n_boot, seed)}
    if dim.groups:
        out[f"{dim.id}_group"] = _row([dim.group_of(x) for x in a], [dim.group_of(y) for y in b], n_boot, seed)
    if any(v is None for v in (*xs, *ys)):
        shown = [[SHOWN if v is not None else NONE_SHOWN for v in vs] for vs in (xs, ys)]
        out[shown_dim(dim.id)] = _row(shown[0], shown[1], n_boot, seed)
    return out


def records_coded_twice(gold: GoldSet, a: str, b: str) -> list[int]:
    """Positions of the records both passes coded: a record one pass never saw (a single-coded item
    of a workbench export with --overlap < 1) is no "not shown" of the other pass."""
    return [
        i
        for i, r in enumerate(gold.records)
        if isinstance(r.fields.get(f"coder_{a}"), dict) and isinstance(r.fields.get(f"coder_{b}"), dict)
    ]


def coder_agreement(gold: GoldSet, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Kappa between the first two coders per dimension (label_agreement's rows: the dimension,
    its groups, and the cause-shown decision where a pass left a label null), over the records
    that carry both passes."""
    names = sorted(gold.coders)
    if len(names) < 2:
        return {}
    a, b = names[:2]
    both = records_coded_twice(gold, a, b)
    out: dict[str, Any] = {}
    for d, dim in gold.taxonomy.dimensions.items():
        xs, ys = gold.coders[a][d], gold.coders[b][d]
        rows = label_agreement([xs[i] for i in both], [ys[i] for i in both], dim, n_boot=n_boot, seed=seed)
        for name, r in rows.items():
            if name in out or (name != d and name in gold.taxonomy.dimensions):
                continue  # a derived `<dim>_shown` dimension of its own (eval's gold) reports itself
            if not r["n"]:
                continue
            single = [[a, b][j] for j in r.pop("single_category", [])]
            out[name] = {"coders": [a, b], **r, **({"single_category": single} if single else {})}
    return out


def agreement_notes(rows: dict[str, dict[str, Any]]) -> list[str]:
    """Plain lines under an agreement table: how null is counted, and what n/a, 0 and small mean."""
    out = []
    shown = [n for n in rows if n.endswith(SUFFIX)]
    if shown:
        out.append(
            f"null ('not shown') is no category: a dimension's kappa counts the items both passes labeled; "
            f"{', '.join(shown)} compares whether each pass named a label at all, over every item both passes coded, "
            "so 'not shown' against a named label counts as a disagreement there"
        )
    small = [n for n, r in rows.items() if r.get("small")]
    if small:
        out.append(
            f"small sample: {', '.join(small)} rest on fewer than {SMALL_N} items; kappa and its interval "
            "are unstable there (one item more or less moves them a lot)"
        )
    if any(r["kappa"] is None for r in rows.values()):
        out.append("n/a: both passes used one and the same category throughout; kappa is undefined there")
    singles = [f"{n} ({', '.join(r['single_category'])})" for n, r in rows.items() if r.get("single_category")]
    if singles:
        out.append(f"0: one pass used a single category ({'; '.join(singles)}): agreement no better than chance")
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
        # records both passes coded (agreement is over these only), when the file holds two passes
        "n_coded_twice": len(records_coded_twice(gold, *sorted(gold.coders)[:2])) if len(gold.coders) >= 2 else 0,
    }
