"""Live agreement of a project's coders: the figures `classify gold stats` prints (Cohen's kappa
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

from classify.core.gold import GoldSet
from classify.core.records import Record
from classify.evaluation.agreement import coder_agreement
from classify.workbench.project import ItemState, Project

NA: dict[str, Any] = {"kappa": None, "lo": None, "hi": None}


def _finite(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def pair_agreement(
    project: Project, a: str, b: str, states: list[ItemState] | None = None, n_boot: int = 1000
) -> dict[str, dict[str, Any]]:
    """Per dimension (and root-cause group): kappa, lo, hi, n over the items both coders coded
    with a label (null, "not shown", is no category, as in `gold stats`)."""
    states = states if states is not None else project.states()
    both = [s for s in states if a in s.codes and b in s.codes]
    tax = project.taxonomy
    # a gold set of the two passes, so that the figures come from the very function gold stats uses
    gold = GoldSet(
        records=[Record(id=s.id) for s in both],
        taxonomy=tax,
        labels={d: [None] * len(both) for d in tax.dimension_ids},
        coders={
            "1": {d: [s.codes[a].labels.get(d) for s in both] for d in tax.dimension_ids},
            "2": {d: [s.codes[b].labels.get(d) for s in both] for d in tax.dimension_ids},
        },
    )
    got = coder_agreement(gold, n_boot=n_boot) if both else {}
    out: dict[str, dict[str, Any]] = {}
    names = [d for d in tax.dimension_ids] + [f"{d}_group" for d, dim in tax.dimensions.items() if dim.groups]
    for name in names:
        d = name[: -len("_group")] if name.endswith("_group") and name not in tax.dimensions else name
        pairs = [
            (s.codes[a].labels.get(d), s.codes[b].labels.get(d))
            for s in both
            if s.codes[a].labels.get(d) is not None and s.codes[b].labels.get(d) is not None
        ]
        if name != d:
            dim = tax.dimensions[d]
            pairs = [(dim.group_of(str(x)), dim.group_of(str(y))) for x, y in pairs]
        r = got.get(name)
        if not r or len({v for p in pairs for v in p}) < 2:
            out[name] = {**NA, "n": len(pairs)}
        else:
            out[name] = {"kappa": _finite(r["kappa"]), "lo": _finite(r["lo"]), "hi": _finite(r["hi"]), "n": r["n"]}
            # One coder kept to one category: kappa is defined but exactly 0 (observed agreement equals
            # chance agreement), in every bootstrap resample too; the page explains it.
            single = [c for c, j in ((a, 0), (b, 1)) if len({p[j] for p in pairs}) == 1]
            if single:
                out[name]["single_category"] = single
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
    """Everything the agreement page shows. Disagreements list only items the viewer may see
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
        dd = s.disagreeing(project.dims)
        if dd and (viewer is None or project.can_see_codes(s, viewer)):
            dis.append(
                {
                    "id": s.id,
                    "title": s.record.get("title") or "",
                    "dimensions": dd,
                    "codes": {c: s.codes[c].labels for c in s.assigned},
                    "adjudicated": s.decision is not None,
                }
            )
    return {
        "coders": coders,
        "pairs": pairs,
        "alpha": alpha(project, states) if len(coders) >= 2 else {},
        "disagreements": dis,
        "hidden": sum(1 for s in states if s.disagreeing(project.dims)) - len(dis),
        "progress": project.progress(),
    }
