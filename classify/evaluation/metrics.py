"""Agreement metrics: Cohen's kappa with bootstrap CIs, per-category scores, selective labeling.

Kappa itself is scikit-learn's `cohen_kappa_score`; this module only resamples and tabulates.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    cohen_kappa_score,
    confusion_matrix,
    f1_score,
    precision_recall_fscore_support,
)

INVALID = "__invalid__"  # a prediction that never became a valid label counts as a disagreement


def _kappa(a: Sequence | np.ndarray, b: Sequence | np.ndarray) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one-class samples: sklearn warns and returns nan
        k = cohen_kappa_score(a, b)
    if math.isnan(k):
        # Both sides constant: perfect agreement if they are the same label, else none.
        return 1.0 if list(a) == list(b) else 0.0
    return float(k)


def kappa_ci(
    y_true: Sequence, y_pred: Sequence, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, float]:
    """Cohen's kappa and a percentile bootstrap interval, resampling items (issues) with replacement."""
    a, b = np.asarray(y_true, dtype=object), np.asarray(y_pred, dtype=object)
    n = len(a)
    if n == 0:
        return {"kappa": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": 0, "n_boot": 0}
    k = _kappa(a, b)
    rng = np.random.default_rng(seed)
    boots = np.empty(n_boot)
    for i in range(n_boot):
        idx = rng.integers(0, n, n)
        boots[i] = _kappa(a[idx], b[idx])
    alpha = (1 - level) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return {"kappa": k, "lo": float(lo), "hi": float(hi), "n": n, "n_boot": n_boot}


def per_category(y_true: Sequence, y_pred: Sequence, labels: list[str]) -> dict[str, dict[str, float]]:
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=0)
    out = {}
    yt, yp = np.asarray(y_true, dtype=object), np.asarray(y_pred, dtype=object)
    for i, lab in enumerate(labels):
        out[lab] = {
            "precision": float(p[i]),
            "recall": float(r[i]),
            "f1": float(f[i]),
            "support": int(s[i]),
            # One-vs-rest agreement: "is it this category or not" as a two-class kappa.
            "kappa_ovr": _kappa(yt == lab, yp == lab),
        }
    return out


def selective_curve(
    y_true: Sequence, y_pred: Sequence, confidence: Sequence[float | None], steps: Sequence[int] = range(10, 101, 10)
) -> list[dict[str, float]]:
    """Kappa and accuracy on the x% most confident predictions (ties broken by input order)."""
    conf = np.array([c if c is not None else -1.0 for c in confidence], dtype=float)
    order = np.argsort(-conf, kind="stable")
    yt, yp = np.asarray(y_true, dtype=object)[order], np.asarray(y_pred, dtype=object)[order]
    n = len(yt)
    rows = []
    for x in steps:
        m = max(1, math.ceil(n * x / 100)) if n else 0
        rows.append(
            {
                "coverage": x,
                "n": m,
                "kappa": _kappa(yt[:m], yp[:m]) if m else float("nan"),
                "accuracy": float(accuracy_score(yt[:m], yp[:m])) if m else float("nan"),
                "min_confidence": float(conf[order][m - 1]) if m else float("nan"),
            }
        )
    return rows


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
    present = [c for c in labels if c in set(y_true) | set(yp)]
    cm_labels = present + ([INVALID] if INVALID in yp else [])
    return {
        "n": len(y_true),
        "n_invalid": sum(1 for p in y_pred if p is None),
        "kappa": kappa_ci(y_true, yp, n_boot=n_boot, seed=seed),
        "accuracy": float(accuracy_score(y_true, yp)),
        "macro_f1": float(f1_score(y_true, yp, labels=present, average="macro", zero_division=0)),
        "per_category": per_category(y_true, yp, labels),
        "confusion": {"labels": cm_labels, "matrix": confusion_matrix(y_true, yp, labels=cm_labels).tolist()},
        "selective": selective_curve(y_true, yp, confidence),
    }
