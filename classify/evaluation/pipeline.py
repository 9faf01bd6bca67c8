"""`classify eval` as one function: load the task's gold, cross-validate (or test on a file),
compute agreement, compare with an earlier run, write the report.

    from classify.evaluation import run_eval
    run = run_eval("tfidf-logreg", folds=5)
    run.metrics["dimensions"]["symptom"]["kappa"]     # {"kappa": ..., "lo": ..., "hi": ...}
    run.out_dir                                       # evals/<timestamp>-tfidf-logreg/
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from classify.classifiers.base import ModelOptions, make_classifier, validate_options
from classify.core import paths
from classify.core.errors import ClassifyError, UsageError
from classify.core.goldfile import load_gold_for, load_task
from classify.evaluation.compare import compare_metrics, load_run_metrics, previous_folds
from classify.evaluation.crossval import (
    EvalResult,
    compute_metrics,
    cross_validate,
    evaluate_on_test,
    limit_sample,
    train_test_leaks,
)
from classify.evaluation.profile import derived_gold, profile_from_result, profile_key, store_profile
from classify.evaluation.report import write_eval


class EvalLeakError(ClassifyError):
    """A gold record was predicted by a model trained on it: the evaluation is not reported."""


@dataclass
class EvalRun:
    result: EvalResult
    metrics: dict[str, Any]
    out_dir: Path | None  # None when write=False


def run_eval(
    model: str = "embed-logreg",
    *,
    taxonomy: str | Path | None = None,
    gold: str | Path | None = None,
    task: str = "labels",
    test: str | Path | None = None,
    folds: int = 5,
    seed: int = 0,
    limit: int | None = None,
    n_boot: int = 1000,
    options: ModelOptions | None = None,
    cause_shown: bool | None = None,
    compare: str | Path | None = None,
    out_dir: str | Path | None = paths.EVALS_DIR,
    log: Callable[[str], None] | None = None,
) -> EvalRun:
    """Agreement of `model` with the gold set: k-fold cross-validation, or training on all of gold
    and testing on the labeled file `test`. Writes `out_dir/<timestamp>-<model>/` unless out_dir is None.

    `cause_shown` (default: on for trained specs) adds a `<dim>_shown` decision for every dimension
    that gold leaves null (classify.core.causeshown); `metrics["selective_labeling"]` holds calibration
    and coverage at target kappa per dimension (classify.evaluation.profile).

    `compare` names an earlier run folder: its folds are reused (a kappa change then comes from the
    labels, not the split) and metrics["comparison"] holds then, now and the change.
    """
    say = log or (lambda msg: None)
    if folds < 2:
        raise UsageError(f"folds must be at least 2, got {folds}")
    if compare is not None:
        load_run_metrics(compare)  # fail before spending minutes on the evaluation
    options = options or ModelOptions(seed=seed)
    tax, g = load_task(task, taxonomy, gold)
    validate_options(model, tax, options)  # a bad spec or option fails here, before any training
    base_dims = tax.dimension_ids
    # "Cause shown" is learned as a decision of its own (classify.core.causeshown), so the report's
    # coverage figures are those `classify run --target-kappa` will act on.
    g = derived_gold(g, model, cause_shown)
    if test is not None:
        res = evaluate_on_test(model, g, derived_gold(load_gold_for(test, tax), model, cause_shown), options)
    else:
        given_folds = None
        folds_note = None
        if compare is not None:
            given_folds, folds_note = previous_folds(compare, g.ids, folds)
            say(folds_note)
        say(f"{model}: {folds}-fold cross-validation on {len(g)} gold records")
        res = cross_validate(
            model,
            g,
            options,
            k=folds,
            seed=seed,
            limit=limit,
            progress=lambda f, k: say(f"  fold {f}/{k} done"),
            folds=given_folds,
        )
        leaks = train_test_leaks(res)
        if leaks:  # cannot happen by construction; refuse to report a leaky evaluation
            raise EvalLeakError(
                f"evaluation leak: {len(leaks)} records predicted by a model trained on them: {leaks[:5]}"
            )
    metrics = compute_metrics(res, n_boot=n_boot, seed=seed)
    if test is None and limit is None and compare is None:
        # The same out-of-fold predictions `classify run --target-kappa` would compute: keep them.
        store_profile(profile_key(model, g, options, folds, seed), res)
    metrics["selective_labeling"] = profile_from_result(res, base_dims).selective_report()
    # Near-identical texts on both sides of the train/test boundary flatter kappa as a leak would.
    metrics["near_duplicates"] = res.near_duplicates
    if res.near_duplicates:
        say(
            f"warning: {len(res.near_duplicates)} evaluated records have a near-duplicate text among their "
            f"model's training records (listed in the report); their agreement is flattered"
        )
    if compare is not None:
        new_meta = {"model": model, "taxonomy_fingerprint": tax.fingerprint(), "gold_hash": res.gold.hash}
        new_gold = {r.id: {d: res.gold.labels[d][i] for d in tax.dimension_ids} for i, r in enumerate(res.gold.records)}
        metrics["comparison"] = compare_metrics(metrics, new_meta, compare, new_gold)
        metrics["comparison"]["folds"] = folds_note if test is None else None
    out = None
    if out_dir is not None:
        # Options name the run in `classify leaderboard` (same spec, other encoder = other row).
        out = write_eval(res, metrics, Path(out_dir), extra_meta={"options": options.run_meta()})
    return EvalRun(res, metrics, out)


def estimate_eval(
    model: str,
    *,
    taxonomy: str | Path | None = None,
    gold: str | Path | None = None,
    task: str = "labels",
    test: str | Path | None = None,
    limit: int | None = None,
    seed: int = 0,
    options: ModelOptions | None = None,
) -> list[str]:
    """Dry run of `run_eval` for LLM specs: what it would send, per LLM, as printable text; sends nothing."""
    from classify.classifiers.llm.estimate import dry_run_estimates

    options = options or ModelOptions(seed=seed)
    tax, g = load_task(task, taxonomy, gold)
    clf = make_classifier(model, tax, options)
    if test is not None:
        records = load_gold_for(test, tax).records
        note = ""
    else:
        records = [g.records[i] for i in limit_sample(len(g), limit, seed)]
        note = (
            "(few-shot examples here come from all of gold; cross-validation takes them from the training "
            "folds: same request count, similar tokens)"
        )
    return dry_run_estimates(clf, g, records) + ([note] if note else [])
