"""Live agreement of a project's coders, over each coder's first code (the blind-coding rule,
classify.workbench.items): the figures `classify gold stats` prints (Cohen's kappa
with a bootstrap interval per coder pair and dimension, through the same function), Krippendorff's
alpha over all coders, confusion matrices and the list of disagreements.

Kappa is undefined when both coders used one and the same category throughout (expected agreement
1): it is reported as null ("n/a"), never as 0 or 1. When only one coder used a single category,
kappa is 0 [0, 0]: defined, and saying the agreement is no better than chance; the figure names
that coder (`single_category`) and the page explains it.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from classify.evaluation.agreement import label_agreement
from classify.evaluation.metrics import SMALL_N
from classify.workbench.items import ItemState
from classify.workbench.project import Project


def _finite(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def pair_agreement(
    project: Project, a: str, b: str, states: list[ItemState] | None = None, n_boot: int = 1000
) -> dict[str, dict[str, Any]]:
    """Per dimension, root-cause group and cause-shown decision: kappa, lo, hi, n, small over the
    first codes of the items both coders coded (label_agreement, the function `gold stats` and eval
    use: null is no category in a dimension's row; the `<dim>_shown` row counts "not shown"
    against a named label as a disagreement)."""
    states = states if states is not None else project.states()
    both = [s for s in states if a in s.codes and b in s.codes]
    out: dict[str, dict[str, Any]] = {}
    for d, dim in project.taxonomy.dimensions.items():
        xs = [s.codes[a].labels.get(d) for s in both]
        ys = [s.codes[b].labels.get(d) for s in both]
        for name, r in label_agreement(xs, ys, dim, n_boot=n_boot).items():
            row = {k: r[k] for k in ("kappa", "lo", "hi", "n", "small")}
            if r.get("single_category"):
                row["single_category"] = [(a, b)[j] for j in r["single_category"]]
            out[name] = row
    return out


def alpha(project: Project, states: list[ItemState]) -> dict[str, dict[str, Any]]:
    """Krippendorff's alpha (nominal) per dimension over every coder, null labels as missing."""
    import krippendorff
    import numpy as np

    coders = project.coders()
    out = {}
    for d in project.dims:
        ids = project.taxonomy.dimensions[d].ids
        data = np.full((len(coders), len(states)), np.nan)
        for j, s in enumerate(states):
            for i, c in enumerate(coders):
                y = s.codes[c].labels.get(d) if c in s.codes else None
                if y is not None:
                    data[i, j] = ids.index(y)
        pairable = int(sum(1 for j in range(len(states)) if np.sum(~np.isnan(data[:, j])) >= 2))
        value = None
        if pairable and len(set(data[~np.isnan(data)].tolist())) >= 2:
            try:
                value = _finite(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
            except (ValueError, ZeroDivisionError):  # no variation where units are pairable
                value = None
        out[d] = {"alpha": value, "n": pairable}
    return out


def confusion(project: Project, a: str, b: str, states: list[ItemState], d: str) -> dict[str, Any]:
    """Coder a's labels (rows) against coder b's (columns), null as "not shown"."""
    dim = project.taxonomy.dimensions[d]
    labels: list[str | None] = [*dim.ids, None]
    idx = {y: i for i, y in enumerate(labels)}
    m = [[0] * len(labels) for _ in labels]
    for s in states:
        if a in s.codes and b in s.codes:
            m[idx[s.codes[a].labels.get(d)]][idx[s.codes[b].labels.get(d)]] += 1
    used = [i for i in range(len(labels)) if any(m[i]) or any(row[i] for row in m)]
    return {
        "labels": [labels[i] for i in used],
        "matrix": [[m[i][j] for j in used] for i in used],
    }


def summary(project: Project, viewer: str | None = None, n_boot: int = 1000) -> dict[str, Any]:
    """Everything the agreement page shows. `disagreements` lists the items to adjudicate (first
    codes differ, a code changed later, or marked unsure), only those the viewer may see
    (blindness: none they still have to code)."""
    states = project.states()
    coders = project.coders()
    pairs = []
    for a, b in itertools.combinations(coders, 2):
        n_both = sum(1 for s in states if a in s.codes and b in s.codes)
        if not n_both:
            continue
        pairs.append(
            {
                "coders": [a, b],
                "n": n_both,
                "dimensions": pair_agreement(project, a, b, states, n_boot=n_boot),
                "confusion": {d: confusion(project, a, b, states, d) for d in project.dims},
            }
        )
    dis = []
    for s in states:
        why = s.reasons(project.dims)
        if why and (viewer is None or project.can_see_codes(s, viewer)):
            dis.append(
                {
                    "id": s.id,
                    "title": s.record.get("title") or "",
                    "dimensions": s.disagreeing(project.dims),
                    "reasons": why,
                    "codes": {c: s.codes[c].labels for c in s.assigned},
                    "adjudicated": s.decision is not None,
                }
            )
    return {
        "coders": coders,
        "pairs": pairs,
        "alpha": alpha(project, states) if len(coders) >= 2 else {},
        "disagreements": dis,
        "hidden": sum(1 for s in states if s.reasons(project.dims)) - len(dis),
        "small_n": SMALL_N,
        "progress": project.progress(),
    }
