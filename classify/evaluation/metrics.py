"""Agreement metrics: Cohen's kappa with bootstrap CIs, per-category scores, selective labeling.

Kappa itself is scikit-learn's `cohen_kappa_score`; bootstrap resamples use an equal bincount form of
it (`_kappa_codes`, checked against scikit-learn in the tests), as thousands of them are drawn.

A figure that is undefined is None (JSON null, "n/a" in tables), never a number that looks
measured: kappa when both sides use one and the same category throughout (chance agreement is 1),
kappa against gold that holds one category only (it is 0 whatever the accuracy, so it says nothing),
precision of a category never predicted, recall of a category with no gold item.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    cohen_kappa_score,
    confusion_matrix,
    f1_score,
    precision_recall_fscore_support,
)

if TYPE_CHECKING:
    from classify.classifiers.base import Prediction
    from classify.core.taxonomy import Dimension
    from classify.evaluation.crossval import EvalResult

INVALID = "__invalid__"  # a prediction that never became a valid label counts as a disagreement
# Below this many items a kappa and its bootstrap interval are too unstable to read (the interval
# can collapse to one point): tables say so next to the figure.
SMALL_N = 30


def _kappa(a: Sequence | np.ndarray, b: Sequence | np.ndarray, reference: bool = False) -> float | None:
    """Cohen's kappa of two label lists; None where it is undefined.

    Undefined: both lists hold one and the same label (chance agreement 1: sklearn returns nan).
    With `reference` (`a` is gold): also when gold holds a single label, where kappa is 0 for any
    prediction that is not perfect (97% accuracy included) and so measures nothing.
    """
    if len(a) == 0 or (reference and len(set(a)) < 2):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one-class samples: sklearn warns and returns nan
        k = cohen_kappa_score(a, b)
    return None if math.isnan(k) else float(k)


def _codes(*cols: np.ndarray) -> tuple[list[np.ndarray], int]:
    """The columns as integer codes over one shared label list, and its length."""
    index: dict[Any, int] = {}
    out = [np.array([index.setdefault(v, len(index)) for v in c], dtype=np.intp) for c in cols]
    return out, len(index)


def _kappa_codes(a: np.ndarray, b: np.ndarray, k: int, reference: bool = False) -> float | None:
    """`_kappa` on integer codes (see `_codes`): the same figure, computed from one bincount, for the
    bootstrap's thousands of resamples (scikit-learn's input checks made them most of an eval's time)."""
    n = len(a)
    if n == 0 or (reference and a.min() == a.max()):
        return None
    cm = np.bincount(a * k + b, minlength=k * k).reshape(k, k)
    po = np.trace(cm) / n
    pe = float(cm.sum(axis=1) @ cm.sum(axis=0)) / (n * n)
    if pe >= 1 - 1e-12:  # one and the same label on both sides: undefined, as in _kappa
        return None
    return float((po - pe) / (1 - pe))


def kappa_ci(
    y_true: Sequence,
    y_pred: Sequence,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    reference: bool = False,
) -> dict[str, Any]:
    """Cohen's kappa and a percentile bootstrap interval, resampling items (issues) with replacement.

    Resamples where kappa is undefined (one class left, see _kappa) are left out of the percentiles
    and counted in `n_boot_undefined`; kappa, lo and hi are None where undefined. `reference`: y_true
    is gold (see _kappa); the coders' agreement leaves it False, neither pass being the reference.
    """
    a, b = np.asarray(y_true, dtype=object), np.asarray(y_pred, dtype=object)
    n = len(a)
    if n == 0:
        return {"kappa": None, "lo": None, "hi": None, "n": 0, "n_boot": 0, "n_boot_undefined": 0}
    k = _kappa(a, b, reference)
    (ca, cb), m = _codes(a, b)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        v = _kappa_codes(ca[idx], cb[idx], m, reference)
        if v is not None:
            boots.append(v)
    lo = hi = None
    if boots and k is not None:
        alpha = (1 - level) / 2
        lo, hi = (float(x) for x in np.quantile(boots, [alpha, 1 - alpha]))
    return {"kappa": k, "lo": lo, "hi": hi, "n": n, "n_boot": n_boot, "n_boot_undefined": n_boot - len(boots)}


def paired_delta_ci(
    before: tuple[Sequence, Sequence],
    after: tuple[Sequence, Sequence],
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Change in kappa (after - before) on the same items, with a paired percentile bootstrap interval.

    `before` and `after` are (gold, prediction) lists over the same items in the same order; each
    resample draws items once and scores both on them, so the interval reflects the change, not the
    two runs' own sampling noise. Resamples where either kappa is undefined are left out.
    """
    gb, pb = (np.asarray(x, dtype=object) for x in before)
    ga, pa = (np.asarray(x, dtype=object) for x in after)
    n = len(gb)
    if not (len(pb) == len(ga) == len(pa) == n):
        raise ValueError("paired_delta_ci: before and after must cover the same items")
    kb, ka = _kappa(gb, pb, True), _kappa(ga, pa, True)
    out: dict[str, Any] = {"n": n, "kappa_before": kb, "kappa_after": ka, "delta": None, "lo": None, "hi": None}
    if kb is None or ka is None:
        return out
    (cgb, cpb, cga, cpa), m = _codes(gb, pb, ga, pa)
    rng = np.random.default_rng(seed)
    deltas = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        b, a = _kappa_codes(cgb[idx], cpb[idx], m, True), _kappa_codes(cga[idx], cpa[idx], m, True)
        if a is not None and b is not None:
            deltas.append(a - b)
    out["delta"] = ka - kb
    if deltas:
        alpha = (1 - level) / 2
        out["lo"], out["hi"] = (float(x) for x in np.quantile(deltas, [alpha, 1 - alpha]))
    return out


def per_category(y_true: Sequence, y_pred: Sequence, labels: list[str]) -> dict[str, dict[str, Any]]:
    """Precision, recall, F1, support and one-vs-rest kappa per category; None where undefined
    (precision of a category never predicted, recall of one without support, F1 when both)."""
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=0)
    out = {}
    yt, yp = np.asarray(y_true, dtype=object), np.asarray(y_pred, dtype=object)
    for i, lab in enumerate(labels):
        support, predicted = int(s[i]), int(np.sum(yp == lab))
        out[lab] = {
            "precision": float(p[i]) if predicted else None,
            "recall": float(r[i]) if support else None,
            # Missed throughout, or predicted but never gold: F1 0 is the fair verdict; neither: n/a.
            "f1": float(f[i]) if support or predicted else None,
            "support": support,
            # One-vs-rest agreement: "is it this category or not" as a two-class kappa (n/a without support).
            "kappa_ovr": _kappa(yt == lab, yp == lab, reference=True),
        }
    return out


def ranks_by_confidence(confidence: Sequence[float | None]) -> bool:
    """Whether the confidences can order the items (at least two different values given)."""
    return len({c for c in confidence if c is not None}) > 1


def selective_curve(
    y_true: Sequence, y_pred: Sequence, confidence: Sequence[float | None], steps: Sequence[int] = range(10, 101, 10)
) -> list[dict[str, Any]]:
    """Kappa and accuracy on the x% most confident predictions (ties broken by input order).

    Without confidences that differ (an LLM that gives none, or the same one for every item) there is
    no ordering to keep the most confident by: every row but 100% is None. Kappa is None where the slice holds one gold class (see _kappa).
    """
    conf = np.array([c if c is not None else -1.0 for c in confidence], dtype=float)
    has_conf = ranks_by_confidence(confidence)
    order = np.argsort(-conf, kind="stable")
    yt, yp = np.asarray(y_true, dtype=object)[order], np.asarray(y_pred, dtype=object)[order]
    n = len(yt)
    rows = []
    for x in steps:
        m = max(1, math.ceil(n * x / 100)) if n else 0
        ok = m and (has_conf or m == n)
        rows.append(
            {
                "coverage": x,
                "n": m,
                "kappa": _kappa(yt[:m], yp[:m], reference=True) if ok else None,
                "accuracy": float(accuracy_score(yt[:m], yp[:m])) if ok else None,
                "min_confidence": float(conf[order][m - 1]) if ok and has_conf else None,
            }
        )
    return rows


def _confusion(y_true: Sequence, y_pred: Sequence, labels: list[str]) -> list[list[int]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one label only (a small sample): sklearn warns though labels are given
        return confusion_matrix(y_true, y_pred, labels=labels).tolist()


def dimension_report(
    y_true: Sequence[str],
    y_pred: Sequence[str | None],
    confidence: Sequence[float | None],
    labels: list[str],
    n_boot: int = 1000,
    seed: int = 0,
) -> dict:
    """All metrics for one dimension; `labels` fixes the category order of tables and matrices."""
    yp = [p if p is not None else INVALID for p in y_pred]
    if not y_true:  # e.g. a --limit sample holding no record with a label in this dimension
        none: dict[str, Any] = {"precision": None, "recall": None, "f1": None, "support": 0, "kappa_ovr": None}
        return {
            "n": 0,
            "n_invalid": 0,
            "kappa": kappa_ci([], []),
            "accuracy": None,
            "macro_f1": None,
            "weighted_f1": None,
            "per_category": {c: dict(none) for c in labels},
            "confusion": {"labels": [], "matrix": []},
            "selective": selective_curve([], [], []),
            "has_confidence": False,
        }
    present = [c for c in labels if c in set(y_true) | set(yp)]
    cm_labels = present + ([INVALID] if INVALID in yp else [])
    return {
        "n": len(y_true),
        "n_invalid": sum(1 for p in y_pred if p is None),
        "kappa": kappa_ci(y_true, yp, n_boot=n_boot, seed=seed, reference=True),
        "accuracy": float(accuracy_score(y_true, yp)),
        "macro_f1": float(f1_score(y_true, yp, labels=present, average="macro", zero_division=0)),
        # Weighted by gold support: the F1 most published issue-classification baselines report.
        "weighted_f1": float(f1_score(y_true, yp, labels=present, average="weighted", zero_division=0)),
        "per_category": per_category(y_true, yp, labels),
        "confusion": {"labels": cm_labels, "matrix": _confusion(y_true, yp, cm_labels)},
        "selective": selective_curve(y_true, yp, confidence),
        "has_confidence": ranks_by_confidence(confidence),
    }


def _group_of(dim: Dimension, cid: str) -> str:
    group = dim.group_of(cid)
    # The taxonomy loader requires a group on every category of a dimension that declares groups.
    assert group is not None, f"{dim.id}: category {cid} has no group"
    return group


def compute_metrics(res: EvalResult, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The agreement of an evaluation's predictions with gold: {"dimensions": {name: report}, "coders":
    ...}, a report per dimension and per group level of a dimension with groups (dimension_report)."""
    # Here, not at the top: agreement uses kappa_ci from this module.
    from classify.evaluation.agreement import coder_agreement, dims_with_groups, group_confidence

    gold, tax = res.gold, res.gold.taxonomy
    out: dict[str, Any] = {"dimensions": {}}
    for name, d, group_dim in dims_with_groups(gold):
        # The records with both a gold label and a prediction.
        y_true: list[str] = []
        preds: list[Prediction] = []
        for i, y in enumerate(gold.labels[d]):
            if y is None:
                continue
            p = res.predictions[d][i]
            if p is None:
                continue
            y_true.append(y)
            preds.append(p)
        y_pred = [p.label for p in preds]
        conf = [p.confidence for p in preds]
        labels = tax.dimensions[d].ids
        if group_dim is not None:
            y_true = [_group_of(group_dim, y) for y in y_true]
            y_pred = [group_dim.group_of(y) if y is not None else None for y in y_pred]
            conf = [group_confidence(p, group_dim) for p in preds]
            labels = list(group_dim.groups)
        rep = dimension_report(y_true, y_pred, conf, labels, n_boot=n_boot, seed=seed)
        rep["n_without_label"] = gold.n_missing(d)
        rep["level"] = "group" if group_dim is not None else "category"
        rep["dimension"] = d
        out["dimensions"][name] = rep
    out["coders"] = coder_agreement(gold, n_boot=n_boot, seed=seed)
    return out


@dataclass(frozen=True)
class Score:
    """The agreement of a model with gold on one dimension (or a dimension's group level): the
    headline figures of its report in `compute_metrics(...)["dimensions"][name]`, typed."""

    name: str  # as the report names it: "symptom", "root_cause", the group level of a dimension
    level: str  # "category" or "group"
    n: int  # records with both a gold label and a prediction
    kappa: float | None  # Cohen's kappa; None where it is undefined
    kappa_lo: float | None  # bootstrap 95% interval
    kappa_hi: float | None
    accuracy: float | None
    macro_f1: float | None
    n_invalid: int  # predictions that never became a valid label (counted as disagreements)

    @classmethod
    def from_report(cls, name: str, rep: dict[str, Any]) -> Score:
        k = rep["kappa"]
        return cls(
            name=name,
            level=rep.get("level", "category"),
            n=rep["n"],
            kappa=k["kappa"],
            kappa_lo=k["lo"],
            kappa_hi=k["hi"],
            accuracy=rep["accuracy"],
            macro_f1=rep["macro_f1"],
            n_invalid=rep["n_invalid"],
        )
