"""Confidence thresholds with a guarantee: the largest share of labels a model may give alone while
their agreement with the coders stays at or above a target kappa, with 95% confidence.

Method (docs/trust.md says it for users):
- Out-of-fold predictions on gold are sorted by confidence, most confident first. Candidate cuts are
  the `step` coverage points (5%, 10%, ... 100% of items), starting at the first cut holding at least
  `min_n` items.
- At each cut, a one-sided Clopper-Pearson lower bound (exact binomial) on the accuracy of the items
  above it, turned into a kappa bound on the dimension's own scale: kappa = (accuracy - pe) / (1 - pe),
  with pe the chance agreement of the model with gold over all of gold (sum over classes of gold share
  times predicted share). Why not Cohen's kappa inside the slice: the most confident slice often holds
  one class (for root cause: "the thread shows no cause"), where in-slice kappa is undefined or near 0
  even at 97% accuracy (the kappa paradox); fixing pe at the dimension's level measures the slice's
  errors on the scale the coders' kappa uses. The in-slice kappa is reported beside it (None when
  undefined).
- Cuts are tested in order of growing coverage, starting where a bound can be informative (at twice the
  fewest items whose bound would reach the target with no error at all: smaller slices fail on one
  error), and the search stops at the first cut whose bound falls below the target (fixed-sequence testing, as in Learn-then-Test, Angelopoulos et al. 2021): with exact
  bounds tested in a fixed order, stopping at the first failure needs no multiple-testing correction.
- The threshold is the confidence at the last cut that passed; coverage is the share of items at or
  above it, with a Wilson 95% interval.
Assumptions: new reports are exchangeable with the gold reports (same sources, same kind of issue), and
the model used on them is trained like the cross-validation folds (it is trained on all of gold, which
can only make it a little better). Undefined figures are None (shown as n/a), never 0 or 1.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import beta

TARGETS = (0.80, 0.87, 0.95)


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float | None, float | None]:
    if n == 0:
        return None, None
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def slice_kappa(y_true: Sequence, y_pred: Sequence) -> float | None:
    """Cohen's kappa within a slice; None where undefined (chance agreement 1: one class on both sides)."""
    labels = sorted({str(v) for v in y_true} | {str(v) for v in y_pred})
    if not len(y_true):
        return None
    index = {lab: i for i, lab in enumerate(labels)}
    cm = np.zeros((len(labels), len(labels)))
    for a, b in zip(y_true, y_pred):
        cm[index[str(a)], index[str(b)]] += 1
    n = cm.sum()
    po = np.trace(cm) / n
    pe = float((cm.sum(axis=1) * cm.sum(axis=0)).sum() / (n * n))
    return None if pe >= 1 - 1e-12 else float((po - pe) / (1 - pe))


def chance_agreement(y_true: Sequence, y_pred: Sequence) -> float:
    """Cohen's pe: the agreement expected from the two sides' marginal shares alone."""
    n = len(y_true)
    if not n:
        return 0.0
    t, p = Counter(map(str, y_true)), Counter(map(str, y_pred))
    return sum(t[c] * p[c] for c in t) / (n * n)


def accuracy_lower_bound(k: int, n: int, level: float = 0.95) -> float:
    """One-sided Clopper-Pearson lower bound on a proportion (k successes in n)."""
    if n == 0 or k == 0:
        return 0.0
    return float(beta.ppf(1 - level, k, n - k + 1))


def to_kappa(accuracy: float, pe: float) -> float | None:
    return None if pe >= 1 - 1e-12 else (accuracy - pe) / (1 - pe)


@dataclass
class Threshold:
    target: float
    threshold: float | None  # None: no cut reaches the target (everything goes to review)
    coverage: float  # share of items at or above the threshold (0 when none)
    coverage_lo: float | None
    coverage_hi: float | None
    n_auto: int
    n: int
    kappa: float | None  # the auto items' accuracy on the kappa scale (None: no auto items)
    kappa_lo: float | None  # its one-sided lower bound at `level` (the guarantee)
    accuracy: float | None
    accuracy_lo: float | None
    slice_kappa: float | None  # Cohen's kappa inside the auto items (None where undefined)
    chance: float  # pe, the dimension's chance agreement
    level: float
    method: str = "clopper-pearson-fixed-sequence"

    def as_dict(self) -> dict:
        return asdict(self)


def search_thresholds(
    y_true: Sequence,
    y_pred: Sequence,
    confidence: Sequence[float | None],
    targets: Sequence[float] = TARGETS,
    *,
    level: float = 0.95,
    min_n: int = 20,
    step: float = 0.05,
) -> list[Threshold]:
    """One `Threshold` per target (see the module's docstring for the method). `y_pred` may hold None
    (an invalid answer: a disagreement); confidence None or NaN is never auto-labeled."""
    n = len(y_true)
    conf = np.array([np.nan if c is None else float(c) for c in confidence], dtype=float)
    usable = ~np.isnan(conf)
    yp = ["\0invalid" if v is None else str(v) for v in y_pred]
    yt = [str(v) for v in y_true]
    pe = chance_agreement(yt, yp)
    order = np.argsort(-np.where(usable, conf, -np.inf), kind="stable")
    n_usable = int(usable.sum())
    sorted_conf = conf[order]
    correct = np.cumsum([yt[i] == yp[i] for i in order])
    # Cuts: coverage points, snapped past ties (items with the same confidence are auto together).
    cuts: list[int] = []
    for frac in np.arange(step, 1 + 1e-9, step):
        m = min(n_usable, math.ceil(n * frac - 1e-9))
        if m < max(1, min_n):
            continue
        while m < n_usable and sorted_conf[m] == sorted_conf[m - 1]:
            m += 1
        if not cuts or m > cuts[-1]:
            cuts.append(m)
    bounds = [to_kappa(accuracy_lower_bound(int(correct[m - 1]), m, level), pe) for m in cuts]
    out = []
    for target in targets:
        start = 2 * _perfect_slice_size(target, pe, level)
        best = None
        for j, lo in enumerate(bounds):
            if cuts[j] < start:
                continue
            if lo is None or lo < target:
                break
            best = j
        if best is None:
            out.append(Threshold(target, None, 0.0, *wilson(0, n), 0, n, None, None, None, None, None, pe, level))
            continue
        m = cuts[best]
        acc = float(correct[m - 1]) / m
        auto = order[:m]
        out.append(
            Threshold(
                target,
                float(sorted_conf[m - 1]),
                m / n,
                *wilson(m, n),
                m,
                n,
                to_kappa(acc, pe),
                bounds[best],
                acc,
                accuracy_lower_bound(int(correct[m - 1]), m, level),
                slice_kappa([yt[i] for i in auto], [yp[i] for i in auto]),
                pe,
                level,
            )
        )
    return out


def _perfect_slice_size(target: float, pe: float, level: float) -> int:
    """The fewest items whose bound reaches `target` when every one of them is right."""
    need = pe + target * (1 - pe)  # the accuracy that is kappa `target` at this chance agreement
    if need >= 1:
        return 10**9
    return math.ceil(math.log(1 - level) / math.log(need))


def apply_threshold(confidence: float | None, threshold: float | None) -> bool:
    """Whether a label with this confidence is given alone (`auto`)."""
    return threshold is not None and confidence is not None and not math.isnan(confidence) and confidence >= threshold
