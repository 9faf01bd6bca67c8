"""Category shares corrected for classifier error (quantification), through QuaPy.

Counting a classifier's labels gives biased shares whenever its errors are not symmetric (a class it
over-predicts comes out too large, whatever the sample size). Quantification methods correct the
count with the classifier's behaviour measured on gold, here its out-of-fold, calibrated class
probabilities from the model's gold profile (`classify.evaluation.profile`):

- CC: classify and count (the naive share, kept beside every estimate);
- PCC: the mean of the calibrated class probabilities;
- ACC / PACC: the count (or PCC) corrected with the confusion matrix measured on gold;
- EMQ: the EM prior adjustment of Saerens et al. on the calibrated probabilities.

QuaPy implements the methods; each is fed precomputed posteriors through a stand-in "classifier"
whose input rows *are* the posteriors, so no model is re-trained. Which method suits a dimension is
measured, not assumed: `select_method` simulates shifted class shares on held-out folds of gold
(QuaPy's artificial-prevalence protocol) and keeps the method with the lowest mean error. A
confusion matrix estimated from a few hundred gold items is noisy and ACC/PACC amplify that noise,
so on the shipped gold the plain probabilistic mean often wins; the protocol says so per dimension.

Intervals: a bootstrap that resamples both gold (the error estimate the correction relies on) and
the corpus, re-fitting the chosen method on each gold resample.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from classify.core.errors import ClassifyError

METHODS: tuple[str, ...] = ("CC", "PCC", "ACC", "PACC", "EMQ")
NAIVE = "CC"
CRISP = ("CC", "ACC")  # methods that need only labels (models without class probabilities)
METHOD_NAMES = {
    "CC": "classify and count",
    "PCC": "probabilistic classify and count",
    "ACC": "adjusted classify and count",
    "PACC": "probabilistic adjusted classify and count",
    "EMQ": "EM prior adjustment (Saerens et al.)",
}
# Samples of the artificial-prevalence grid per held-out fold: enough for a stable mean error,
# few enough that choosing a method stays a matter of seconds.
MAX_GRID = 300


class QuantifyError(ClassifyError):
    """The classifier's behaviour on gold cannot support an estimate (no gold items, no classes)."""


def tv(p: np.ndarray, q: np.ndarray) -> float:
    """Total variation distance between two share vectors: the share of reports that would have to
    move category to turn one into the other (0.03 = "3 points")."""
    return float(0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum())


@contextmanager
def _quiet() -> Iterator[None]:
    # QuaPy warns on every non-converged EM or clipped adjustment; the error measured by the
    # protocol is what tells whether a method is fit for a dimension, so these say nothing new.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@functools.cache
def _stand_in_class() -> Any:
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Posteriors(ClassifierMixin, BaseEstimator):
        def __init__(self, k: int = 2) -> None:
            self.k = k
            self.classes_ = np.arange(k)  # "fitted", in scikit-learn's sense

        def fit(self, X: Any, y: Any) -> Posteriors:
            return self

        def predict_proba(self, X: Any) -> np.ndarray:
            return np.asarray(X, dtype=float)

        def predict(self, X: Any) -> np.ndarray:
            return np.asarray(X, dtype=float).argmax(axis=1)

    return Posteriors


def _stand_in(k: int) -> Any:
    """A fitted scikit-learn classifier whose input rows are already its class probabilities."""
    return _stand_in_class()(k)


def make_quantifier(method: str, k: int) -> Any:
    from quapy.method.aggregative import ACC, CC, EMQ, PACC, PCC

    c = _stand_in(k)
    if method == "CC":
        return CC(c, fit_classifier=False)
    if method == "PCC":
        return PCC(c, fit_classifier=False)
    # exact-cc: solve the adjustment exactly (falling back to the count when the confusion matrix is
    # singular) and clip to the simplex; QuaPy's default constrained minimiser takes ~400x as long,
    # too slow for a protocol and a bootstrap that refit the method hundreds of times.
    if method == "ACC":
        return ACC(c, fit_classifier=False, val_split=None, solver="exact-cc")
    if method == "PACC":
        return PACC(c, fit_classifier=False, val_split=None, solver="exact-cc")
    if method == "EMQ":
        # exact_train_prev: the prior the posteriors were calibrated under is gold's own share.
        return EMQ(c, fit_classifier=False, val_split=None, exact_train_prev=True)
    raise QuantifyError(f"unknown quantification method {method!r}; known: {', '.join(METHODS)}")


def fit_quantifier(method: str, P: np.ndarray, y: np.ndarray, k: int) -> Any:
    """`method` fitted on gold posteriors `P` (n x k) and gold class indices `y`."""
    q = make_quantifier(method, k)
    with _quiet():
        q.fit(P, y)
    return q


def predict_shares(q: Any, P: np.ndarray) -> np.ndarray:
    if len(P) == 0:
        return np.full(q.classifier.k, np.nan)
    with _quiet():
        est = np.asarray(q.predict(P), dtype=float)
    s = est.sum()
    return est / s if s > 0 else est


@dataclass
class Behaviour:
    """What a classifier does on gold for one dimension: out-of-fold calibrated posteriors beside
    the gold labels, with the folds they were predicted in."""

    classes: list[str]
    P: np.ndarray  # n x k
    y: np.ndarray  # n, class indices
    folds: np.ndarray  # n
    probabilistic: bool = True  # False: one-hot rows from labels only (an LLM), crisp methods only

    def __post_init__(self) -> None:
        if len(self.y) == 0:
            raise QuantifyError("no gold items with a label: the classifier's error cannot be measured")
        if self.P.shape != (len(self.y), len(self.classes)):
            raise QuantifyError(
                f"gold posteriors have shape {self.P.shape}, expected {(len(self.y), len(self.classes))}"
            )

    @property
    def k(self) -> int:
        return len(self.classes)

    @property
    def candidates(self) -> tuple[str, ...]:
        return METHODS if self.probabilistic else CRISP

    def prevalence(self) -> np.ndarray:
        return np.bincount(self.y, minlength=self.k) / len(self.y)


def one_hot(labels: Sequence[str | None], classes: list[str]) -> np.ndarray:
    """Rows for a model that gives a label only: all its probability on that label."""
    P = np.zeros((len(labels), len(classes)))
    for i, lab in enumerate(labels):
        if lab in classes:
            P[i, classes.index(lab)] = 1.0
    return P


@dataclass
class Selection:
    """Which method the protocol chose for a dimension, and the error each candidate made."""

    method: str
    protocol: str
    sample_size: int
    n_samples: int
    errors: dict[str, float]  # mean total variation over the protocol's samples, per method
    # the protocol's samples, kept so that errors can be measured on any roll-up of the classes
    truths: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # S x k true shares
    estimates: dict[str, np.ndarray] = field(default_factory=dict)  # per method, S x k
    chosen_by: str = "protocol"  # or "user" (`classify report --method`)

    @property
    def residuals(self) -> np.ndarray:
        """true - estimate of the chosen method, per protocol sample."""
        est = self.estimates.get(self.method)
        return self.truths - est if est is not None and len(self.truths) else np.zeros((0, 0))

    def forced(self, method: str) -> Selection:
        """The same measurements with `method` chosen by the user instead of by the protocol."""
        if method not in self.errors:
            raise QuantifyError(
                f"method {method} cannot be applied here; candidates: {', '.join(self.errors)} "
                "(a model without class probabilities allows only CC and ACC)"
            )
        return replace(self, method=method, chosen_by="user")

    def errors_on(self, roll: np.ndarray) -> dict[str, float]:
        """Mean TV error per method on shares rolled up by `roll` (k x g, 0/1): a report moved
        between two categories of one group is no error on groups."""
        return {
            m: float(np.mean([tv(e @ roll, t @ roll) for e, t in zip(est, self.truths)]))
            for m, est in self.estimates.items()
        }

    @property
    def error(self) -> float:
        return self.errors[self.method]

    @property
    def naive_error(self) -> float:
        return self.errors[NAIVE]

    def as_dict(self, roll: np.ndarray | None = None) -> dict[str, Any]:
        """The selection as JSON; with `roll`, its errors measured on the rolled-up shares."""
        errors = self.errors if roll is None else self.errors_on(roll)
        return {
            "method": self.method,
            "method_name": METHOD_NAMES[self.method],
            "chosen_by": self.chosen_by,
            "error": errors[self.method],
            "naive_error": errors[NAIVE],
            "errors": errors,
            "error_metric": "mean total variation distance between estimated and true shares",
            "protocol": self.protocol,
            "sample_size": self.sample_size,
            "n_samples": self.n_samples,
        }


def _grid_points(k: int, repeats: int) -> int:
    """The finest artificial-prevalence grid (points on [0, 1]) that keeps <= MAX_GRID samples."""
    from quapy.functional import num_prevalence_combinations

    best = 2
    for n in (21, 11, 6, 5, 4, 3):
        if num_prevalence_combinations(n, k, repeats) <= MAX_GRID:
            best = n
            break
    return best


PROTOCOLS = ("dirichlet", "app")
CONCENTRATION = 20.0  # Dirichlet protocol: shares drawn around gold's, typically 10-20 points (TV) away


def select_method(
    beh: Behaviour,
    sample_size: int,
    *,
    methods: Sequence[str] | None = None,
    protocol: str = "dirichlet",
    repeats: int = 60,
    seed: int = 0,
) -> Selection:
    """Choose the method with the lowest error on gold under shifted class shares.

    Cross-fitted: for each gold fold, every candidate is fitted on the other folds and scored on
    samples drawn from this fold at shifted class shares, so no sample is scored by a method that
    saw it. Samples are the corpus's size (capped at 500), the size the estimate is made at.

    `protocol` "dirichlet" (default): QuaPy's DirichletProtocol centred on gold's shares, `repeats`
    samples per fold: shifts of the size a corpus plausibly shows. "app": QuaPy's artificial-
    prevalence protocol, every share vector of a grid over the simplex (a sample that is 100% of one
    class as often as one like gold). Measured on the shipped gold, APP favours EMQ/PACC, which were
    far worse than PCC on held-out reports with realistic shares (docs/report.md); hence the default.
    """
    from quapy.data import LabelledCollection
    from quapy.protocol import APP, DirichletProtocol

    if protocol not in PROTOCOLS:
        raise QuantifyError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    methods = list(methods or beh.candidates)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise QuantifyError(f"unknown quantification method(s) {unknown}; known: {', '.join(METHODS)}")
    if not beh.probabilistic:
        methods = [m for m in methods if m in CRISP]
    if NAIVE not in methods:
        methods.insert(0, NAIVE)
    size = int(max(10, min(sample_size, 500)))
    errs: dict[str, list[float]] = {m: [] for m in methods}
    truths: list[np.ndarray] = []
    ests: dict[str, list[np.ndarray]] = {m: [] for m in methods}
    grids: list[int] = []
    prior = beh.prevalence()
    folds = np.unique(beh.folds)
    for f in folds:
        test = beh.folds == f
        train = ~test
        if test.sum() == 0 or train.sum() == 0:
            continue
        fitted = {m: fit_quantifier(m, beh.P[train], beh.y[train], beh.k) for m in methods}
        # Shares span the classes this fold holds: a share cannot be drawn from no items.
        present, local = np.unique(beh.y[test], return_inverse=True)
        data = LabelledCollection(beh.P[test], local, classes=np.arange(len(present)))
        prot: Any
        if protocol == "app":
            n_points = _grid_points(len(present), 1)
            grids.append(n_points)
            prot = APP(
                data,
                size,
                n_prevalences=n_points,
                repeats=1,
                random_state=seed + int(f),
                sanity_check=None,
                return_type="index",
            )
        else:
            p = prior[present] / prior[present].sum()
            alpha = CONCENTRATION * (0.9 * p + 0.1 / len(present))  # no share pinned at zero
            prot = DirichletProtocol(
                data, alpha, size, repeats=repeats, random_state=seed + int(f), return_type="index"
            )
        for idx in prot():
            Ps = beh.P[test][idx]
            true = np.zeros(beh.k)
            true[present] = np.bincount(local[idx], minlength=len(present)) / len(idx)
            truths.append(true)
            for m, q in fitted.items():
                est = predict_shares(q, Ps)
                errs[m].append(tv(est, true))
                ests[m].append(est)
    if not errs[NAIVE]:
        raise QuantifyError("gold has a single fold: the method cannot be chosen on held-out items")
    mean = {m: float(np.mean(v)) for m, v in errs.items()}
    best = min(methods, key=lambda m: (mean[m], methods.index(m)))
    desc = (
        f"QuaPy APP (grid of {min(grids)}-{max(grids)} points per class)"
        if protocol == "app"
        else f"QuaPy Dirichlet protocol centred on gold's shares (concentration {CONCENTRATION:g})"
    )
    return Selection(
        method=best,
        protocol=f"{desc}, samples of {size} drawn from held-out gold folds ({len(folds)} folds)",
        sample_size=size,
        n_samples=len(errs[NAIVE]),
        errors=mean,
        truths=np.array(truths),
        estimates={m: np.array(v) for m, v in ests.items()},
    )


@dataclass
class Subset:
    """Corpus rows to estimate shares over (all of them, or one library's)."""

    P: np.ndarray  # posteriors of the rows the model labeled (n_auto x k)
    human: np.ndarray = field(default_factory=lambda: np.zeros(0))  # k: counts of rows coded by people

    def human_counts(self, k: int) -> np.ndarray:
        return self.human if len(self.human) == k else np.zeros(k)


@dataclass
class ShareEstimate:
    naive: np.ndarray  # counts of labels (model labels + human codes) / n
    estimate: np.ndarray
    replicates: np.ndarray  # B x k bootstrap replicates of the estimate
    n_auto: int
    n_human: int

    @property
    def n(self) -> int:
        return self.n_auto + self.n_human


def _mix(est: np.ndarray, n_auto: int, human: np.ndarray) -> np.ndarray:
    """Estimated shares of the model-labeled rows pooled with the exact counts of human-coded rows."""
    n_h = float(human.sum())
    if n_auto == 0:
        return human / n_h if n_h else np.full(len(human), np.nan)
    return (n_auto * est + human) / (n_auto + n_h)


def estimate_shares(
    beh: Behaviour,
    method: str,
    subsets: Mapping[str, Subset],
    *,
    residuals: np.ndarray | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, ShareEstimate]:
    """Shares of every subset by `method`, with `n_boot` bootstrap replicates that resample gold
    (refitting the method) and each subset's model-labeled rows.

    `residuals` (true - estimate on the selection protocol's samples): each replicate adds one,
    drawn at random. Resampling gold moves an adjusted method's correction, but not what a method
    with nothing to fit (PCC) gets wrong about a class; the protocol measured that error, so the
    interval carries it.
    """
    rng = np.random.default_rng(seed)
    k = beh.k
    q = fit_quantifier(method, beh.P, beh.y, k)
    out: dict[str, ShareEstimate] = {}
    reps: dict[str, list[np.ndarray]] = {name: [] for name in subsets}
    for _ in range(n_boot):
        gi = rng.integers(0, len(beh.y), len(beh.y))
        qb = fit_quantifier(method, beh.P[gi], beh.y[gi], k)
        for name, s in subsets.items():
            n = len(s.P)
            est = predict_shares(qb, s.P[rng.integers(0, n, n)]) if n else np.zeros(k)
            if n and residuals is not None and len(residuals):
                est = np.clip(est + residuals[rng.integers(0, len(residuals))], 0.0, 1.0)
            reps[name].append(_mix(est, n, s.human_counts(k)))
    for name, s in subsets.items():
        n = len(s.P)
        human = s.human_counts(k)
        counts = np.bincount(s.P.argmax(axis=1), minlength=k) if n else np.zeros(k)
        total = n + human.sum()
        naive = (counts + human) / total if total else np.full(k, np.nan)
        est = _mix(predict_shares(q, s.P) if n else np.zeros(k), n, human)
        out[name] = ShareEstimate(
            naive=naive,
            estimate=est,
            replicates=np.array(reps[name]) if n_boot else np.zeros((0, k)),
            n_auto=n,
            n_human=int(human.sum()),
        )
    return out


def interval(replicates: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval per column."""
    if len(replicates) == 0:
        nan = np.full(replicates.shape[1], np.nan)
        return nan, nan
    a = (1 - level) / 2
    return np.quantile(replicates, a, axis=0), np.quantile(replicates, 1 - a, axis=0)
