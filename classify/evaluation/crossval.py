"""Cross-validated (or held-out) predictions on gold: every record predicted by a model that never
saw it. `cross_validate` and `evaluate_on_test` take a Classifier (or a spec string, built and
validated once); each fold trains a `sklearn.base.clone` of it. Metrics: classify.evaluation.metrics;
leak checks: classify.evaluation.leaks."""

from __future__ import annotations

import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import KFold, StratifiedKFold

from classify.classifiers.base import Classifier, ModelOptions, Prediction, make_classifier, uses_llm
from classify.core.errors import UsageError
from classify.core.gold import GoldSet
from classify.core.records import Record
from classify.evaluation.leaks import check_test_overlap, near_duplicates, spy_on_fit

# LLM specs predict this many records per call when the caller watches progress: a bar that moves
# every few requests instead of once per fold (records are predicted independently, so it changes
# no label; each call still runs its requests concurrently).
PROGRESS_CHUNK = 16


def _predict(
    clf: Classifier, records: list[Record], predicted: Callable[[int], None] | None
) -> dict[str, list[Prediction]]:
    """clf.predict(records), in chunks for LLM specs when someone watches (`predicted(n)` after each)."""
    if predicted is None or not uses_llm(clf.spec) or len(records) <= PROGRESS_CHUNK:
        out = clf.predict(records)
        if predicted:
            predicted(len(records))
        return out
    merged: dict[str, list[Prediction]] = {}
    for start in range(0, len(records), PROGRESS_CHUNK):
        chunk = records[start : start + PROGRESS_CHUNK]
        for d, plist in clf.predict(chunk).items():
            merged.setdefault(d, []).extend(plist)
        predicted(len(chunk))
    return merged


@dataclass
class EvalResult:
    spec: str
    gold: GoldSet
    # dimension -> one Prediction per gold record (None where the record has no label for it)
    predictions: dict[str, list[Prediction | None]]
    folds: list[int]  # fold of each gold record (-1 for a held-out test set)
    # fold -> ids of every record its model's fit() received (recorded at the call, for leak checks)
    train_ids: dict[int, set[str]]
    provenance: dict[str, Any]
    seconds: float
    mode: str  # "cv" or "test"
    params: dict[str, Any] = field(default_factory=dict)
    # Warnings, not errors: evaluated records with a near-identical text among their fold's training
    # records ({"fold", "id", "train_id", "similarity", "identical"}); they flatter the scores.
    near_duplicates: list[dict[str, Any]] = field(default_factory=list)


def stratify_keys(gold: GoldSet) -> list[str]:
    """One stratum per record: its label in the dimension with fewest labeled items (rarest first).

    Root cause is labeled for about a third of the gold set and has 15 classes, so stratifying on it
    where present keeps its rare classes spread over folds; the rest stratify on symptom.
    """
    dims = sorted(gold.taxonomy.dimension_ids, key=lambda d: len(gold.labeled(d)[0]))
    keys = []
    for i in range(len(gold)):
        key = "-"
        for d in dims:
            y = gold.labels[d][i]
            if y is not None:
                key = f"{d}:{y}"
                break
        keys.append(key)
    return keys


def assign_folds(gold: GoldSet, k: int = 5, seed: int = 0) -> list[int]:
    if len(gold) < k:
        raise ValueError(
            f"gold has {len(gold)} record(s), too few for {k}-fold cross-validation; add coded reports to gold"
        )
    keys = stratify_keys(gold)
    folds = [-1] * len(gold)
    splitter: StratifiedKFold | KFold = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    if max(Counter(keys).values()) < k:
        # Every stratum is smaller than k (a small gold set): sklearn refuses to stratify, and
        # stratifying such strata spreads nothing; plain shuffled folds still give each record one.
        splitter = KFold(n_splits=k, shuffle=True, random_state=seed)
    with warnings.catch_warnings():
        # Categories with fewer than k items cannot appear in every fold; sklearn warns, we know.
        warnings.simplefilter("ignore", UserWarning)
        for f, (_, test) in enumerate(splitter.split(np.zeros(len(keys)), keys)):
            for i in test:
                folds[i] = f
    return folds


def _nested_sample(idx: list[int], keys: list[str], fraction: float, rng: np.random.Generator) -> list[int]:
    """ceil(fraction * len(idx)) of `idx`, spread over strata in proportion, nested across fractions.

    Each item gets the key (rank within its stratum + U(0,1)) / stratum size, from one seeded
    permutation per stratum; the sample is the lowest keys. So every stratum (a rare root cause
    too) is cut at about the same fraction, and a smaller fraction's sample lies inside a larger
    one's: a learning curve's points differ only by the records added.
    """
    by_stratum: dict[str, list[int]] = {}
    for i in idx:
        by_stratum.setdefault(keys[i], []).append(i)
    order = []
    for s in sorted(by_stratum):
        members = by_stratum[s]
        perm = rng.permutation(len(members))
        u = rng.random(len(members))
        order += [((rank + u[rank]) / len(members), members[j]) for rank, j in enumerate(perm)]
    order.sort()
    keep = max(1, int(np.ceil(fraction * len(idx))))
    return sorted(i for _, i in order[:keep])


def _subset_labels(gold: GoldSet, idx: list[int]) -> dict[str, list[str | None]]:
    return {d: [gold.labels[d][i] for i in idx] for d in gold.taxonomy.dimension_ids}


def limit_sample(n: int, limit: int | None, seed: int = 0) -> list[int]:
    """Indices of the `limit` records `--limit` evaluates: a seeded sample (all when limit is None or >= n)."""
    if limit is None or limit >= n:
        return list(range(n))
    return sorted(int(i) for i in np.random.default_rng(seed).permutation(n)[:limit])


def evaluated_folds(gold: GoldSet, k: int, seed: int, limit: int | None, folds: list[int] | None = None) -> list[int]:
    """The folds (0-based) that hold a record cross_validate evaluates with these arguments."""
    folds = folds if folds is not None else assign_folds(gold, k, seed)
    return sorted({folds[i] for i in limit_sample(len(gold), limit, seed)})


def model_for(model: str | Classifier, gold: GoldSet, options: ModelOptions | None, seed: int = 0) -> Classifier:
    """`model` as an unfitted Classifier for `gold`'s taxonomy: a spec string is built (its options
    validated, once); a Classifier must be built for the same dimensions as gold."""
    if isinstance(model, str):
        return make_classifier(model, gold.taxonomy, options or ModelOptions(seed=seed))
    if options is not None:
        raise UsageError("options: give them to the classifier, not beside it")
    if model.taxonomy.dimension_ids != gold.taxonomy.dimension_ids:
        raise UsageError(
            f"{model.spec}: built for the dimensions {', '.join(model.taxonomy.dimension_ids)}, but gold has "
            f"{', '.join(gold.taxonomy.dimension_ids)} (build it with gold.taxonomy)"
        )
    return model


def cross_validate(
    model: str | Classifier,
    gold: GoldSet,
    options: ModelOptions | None = None,
    k: int = 5,
    seed: int = 0,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    folds: list[int] | None = None,
    train_fraction: float = 1.0,
    sample_seed: int | None = None,
    predicted: Callable[[int], None] | None = None,
) -> EvalResult:
    """Every gold record is predicted by a model trained on the other folds only: a clone of `model`
    (a Classifier, or a spec string built with `options`) per fold.

        `limit` evaluates only the first `limit` records of a seeded shuffle (for slow LLMs); the
        training folds still use every other gold record. `folds` (one fold index per record) replaces
        the stratified assignment, e.g. to reuse an earlier run's split for a paired comparison.
        `train_fraction` < 1 trains each fold's model on a seeded sample of its training records (for
        learning curves); samples are nested: a smaller fraction's sample lies inside a larger one's.
        `sample_seed` (default `seed`) draws another sample with the same folds and model seed.
        `progress(fold, k)` after each fold that holds evaluated records (under `limit` some hold none
        and are skipped: see evaluated_folds); `predicted(n)`: n more records predicted (LLM specs report
        every few records).
    """
    if not 0 < train_fraction <= 1:
        raise ValueError(f"train_fraction must be in (0, 1], got {train_fraction}")
    template = model_for(model, gold, options, seed)
    t0 = time.perf_counter()
    given_folds = folds is not None
    if folds is None:
        folds = assign_folds(gold, k, seed)
    elif len(folds) != len(gold) or any(not 0 <= f < k for f in folds):
        raise ValueError(f"folds: need one fold in 0..{k - 1} per gold record ({len(gold)})")
    n = len(gold)
    keys = stratify_keys(gold)
    evaluate_idx = set(limit_sample(n, limit, seed))
    _check_every_fold_can_train(gold, folds, k)
    preds: dict[str, list[Prediction | None]] = {d: [None] * n for d in gold.taxonomy.dimension_ids}
    train_ids: dict[int, set[str]] = {}
    prov: dict[str, Any] = {}
    for f in range(k):
        test = [i for i in range(n) if folds[i] == f and i in evaluate_idx]
        if not test:
            continue
        train = [i for i in range(n) if folds[i] != f]
        if train_fraction < 1:
            rng = np.random.default_rng([seed if sample_seed is None else sample_seed, f])
            train = _nested_sample(train, keys, train_fraction, rng)
        train_recs = [gold.records[i] for i in train]
        test_recs = [gold.records[i] for i in test]
        clf = clone(template)
        # What fit() actually receives, through the fold's predictions too: a model that refits on
        # the records it predicts, or hands them to a member, shows up as a leak.
        train_ids[f] = set()
        if not spy_on_fit(clf, train_ids[f]):
            train_ids[f].update(r.id for r in train_recs)
        with clf:  # close() frees the fold's encoders; pooled ones stay for the next fold
            clf.fit(train_recs, _subset_labels(gold, train))
            out = _predict(clf, test_recs, predicted)
            prov = clf.provenance()
        for d, plist in out.items():
            if d not in preds:
                continue
            for i, p in zip(test, plist):
                preds[d][i] = p
        if progress:
            progress(f + 1, k)
    folds_out = [folds[i] if i in evaluate_idx else -2 for i in range(n)]
    dups = near_duplicates(gold.records, folds_out, train_ids)
    return EvalResult(
        template.spec,
        gold,
        preds,
        folds_out,
        train_ids,
        prov,
        time.perf_counter() - t0,
        "cv",
        {
            "k": k,
            "seed": seed,
            "limit": limit,
            **({"folds": "given"} if given_folds else {}),
            **({"train_fraction": train_fraction} if train_fraction < 1 else {}),
        },
        dups,
    )


def _check_every_fold_can_train(gold: GoldSet, folds: Sequence[int], k: int) -> None:
    """Refuse, before any training, a gold set too small for `k` folds: a fold whose training part
    holds no label of a dimension cannot train a model for it (found here, not after other folds)."""
    for d in gold.taxonomy.dimension_ids:
        labeled = [i for i, y in enumerate(gold.labels[d]) if y is not None]
        for f in range(k):
            if not any(folds[i] != f for i in labeled):
                raise ValueError(
                    f"gold has {len(labeled)} {d} label(s), too few for {k}-fold cross-validation: the training part "
                    f"of fold {f + 1} has none; add coded reports to gold"
                )


def evaluate_on_test(
    model: str | Classifier,
    gold: GoldSet,
    test: GoldSet,
    options: ModelOptions | None = None,
    predicted: Callable[[int], None] | None = None,
    allow_overlap: bool = False,
) -> EvalResult:
    """Train a clone of `model` on the whole gold set, predict a separate labeled file (refused when
    it repeats gold: check_test_overlap, unless `allow_overlap`: the caller reports the repeats)."""
    template = model_for(model, gold, options)
    if not allow_overlap:
        check_test_overlap(gold, test)
    t0 = time.perf_counter()
    with clone(template) as clf:
        clf.fit(gold.records, gold.labels)
        out = _predict(clf, test.records, predicted)
        prov = clf.provenance()
    preds = {d: list(out.get(d, [None] * len(test))) for d in test.taxonomy.dimension_ids}
    # A test file that repeats gold reports under new ids flatters the scores as much as a CV leak.
    dups = near_duplicates(gold.records + test.records, [-2] * len(gold) + [-1] * len(test), {-1: set(gold.ids)})
    return EvalResult(
        template.spec,
        test,
        preds,
        [-1] * len(test),
        {-1: set(gold.ids)},
        prov,
        time.perf_counter() - t0,
        "test",
        {"train": str(gold.path), "train_hash": gold.hash},
        dups,
    )


def prediction_rows(res: EvalResult) -> list[dict[str, Any]]:
    """One row per evaluated gold record: gold label, prediction, confidence, probabilities."""
    rows = []
    for i, r in enumerate(res.gold.records):
        if res.folds[i] == -2:
            continue
        row: dict[str, Any] = {"id": r.id, "fold": res.folds[i]}
        for d in res.gold.taxonomy.dimension_ids:
            p = res.predictions[d][i]
            row[f"gold_{d}"] = res.gold.labels[d][i]
            row[d] = p.label if p else None
            row[f"{d}_confidence"] = p.confidence if p else None
            if p and p.proba:
                row[f"{d}_proba"] = p.proba
            if p and p.rationale:
                row[f"{d}_rationale"] = p.rationale
            if p and p.status != "ok":
                row[f"{d}_status"] = p.status
                row[f"{d}_raw"] = p.raw
        rows.append(row)
    return rows
