"""`classify eval` as one function: load the task's gold, cross-validate (or test on a file),
compute agreement, compare with an earlier run, write the report.

    from classify import run_eval
    run = run_eval("tfidf-logreg", folds=5)
    run.scores["symptom"].kappa                       # Score: kappa, kappa_lo/hi, accuracy, macro_f1, n
    run.out_dir                                       # evals/<timestamp>-tfidf-logreg/
    run.metrics                                       # the whole report, as metrics.json holds it
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from classify.classifiers.base import ModelOptions, make_classifier, uses_llm
from classify.classifiers.names import DEFAULT_MODEL
from classify.core import paths
from classify.core.errors import ClassifyError, UsageError
from classify.core.goldfile import load_gold_for, load_task
from classify.core.progress import Progress
from classify.evaluation.bygroup import check_group_args, evaluate_groups
from classify.evaluation.compare import compare_metrics, load_run, previous_folds
from classify.evaluation.crossval import (
    EvalResult,
    cross_validate,
    evaluate_on_test,
    evaluated_folds,
    limit_sample,
    prediction_rows,
)
from classify.evaluation.leaderboard import run_label
from classify.evaluation.leaks import train_test_leaks
from classify.evaluation.metrics import Score, compute_metrics
from classify.evaluation.profile import derived_gold, profile_from_result, profile_key, store_profile
from classify.evaluation.report import write_eval
from classify.evaluation.runfolder import RunFolder
from classify.evaluation.testoverlap import resolve_test_overlap


class _ProjectEvals:
    """The default out_dir: `evals/` of the project folder, resolved when run_eval runs (the
    current folder may change between import and call); None still means "write nothing"."""

    def __repr__(self) -> str:
        return "<evals/ of the project folder>"


PROJECT_EVALS: Any = _ProjectEvals()


class EvalLeakError(ClassifyError):
    """A gold record was predicted by a model trained on it: the evaluation is not reported."""


@dataclass
class EvalRun:
    """What `run_eval` returns: the predictions, the report and where it was written."""

    result: EvalResult
    metrics: dict[str, Any]  # the report as metrics.json holds it
    out_dir: Path | None  # None when out_dir=None was asked

    @property
    def scores(self) -> dict[str, Score]:
        """Per dimension (and group level), the headline agreement figures, typed."""
        return {name: Score.from_report(name, rep) for name, rep in self.metrics["dimensions"].items()}


def run_eval(
    model: str | None = None,
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
    out_dir: str | Path | None = PROJECT_EVALS,
    progress: Progress | None = None,
    by: str | None = None,
    leave_group_out: bool = False,
    test_overlap: str = "refuse",
) -> EvalRun:
    """Agreement of `model` (default DEFAULT_MODEL) with the gold set: k-fold cross-validation, or
    training on all of gold and testing on the labeled file `test`. Writes `out_dir/<timestamp>-<model>/`
    (default: `evals/` of the project folder, classify.core.paths.evals_dir) unless out_dir is None.
    `progress` (the object `label_file` takes too): `log` gets a line per step, `total(n)` is told once
    how many records will be predicted, `labeled(n)` after each few (for a progress bar; LLM specs
    report every few records, others once per fold).

    `cause_shown` (default: on, for every spec; False turns it off) adds a `<dim>_shown` decision for
    every dimension that gold leaves null (classify.core.causeshown; an LLM is asked it in the same
    request, right before the dimension); `metrics["selective_labeling"]` holds calibration
    and coverage at target kappa per dimension (classify.evaluation.profile).

    `compare` names an earlier run folder: its folds are reused (a kappa change then comes from the
    labels, not the split), and so are its model and options when `model` (and `options`) are None;
    a different model or options are evaluated as asked, with a warning that the change then mixes
    model and labels. metrics["comparison"] holds then, now, the change with a paired bootstrap
    interval, and how many gold changes took the earlier run's prediction.

    `by` (a record field, e.g. "repo") evaluates per group (classify.evaluation.bygroup: one model per
    group, or with `leave_group_out` each group predicted by a model trained on the others);
    metrics["by_group"] holds each group, their mean and the worst. `test_overlap` (refuse, drop-train,
    keep) says what to do with `test` records that repeat gold (classify.evaluation.testoverlap).
    """
    progress = progress or Progress()
    say = progress.say
    expected, predicted = progress.total, progress.labeled
    if folds < 2:
        raise UsageError(f"folds must be at least 2, got {folds}")
    check_group_args(by, leave_group_out, limit=limit, compare=compare)
    if test is None and test_overlap != "refuse":
        raise UsageError(f"--test-overlap {test_overlap}: only with --test (cross-validation never repeats a record)")
    if out_dir is PROJECT_EVALS:
        out_dir = paths.evals_dir()
    if compare is not None:
        prev_run = load_run(compare)  # fail before spending minutes on the evaluation
        model, options = _model_of_compared_run(model, options, prev_run, compare, seed, say)
    model = model or DEFAULT_MODEL
    options = options or ModelOptions(seed=seed)
    tax, g = load_task(task, taxonomy, gold)
    base_dims = tax.dimension_ids
    # "Cause shown" is learned as a decision of its own (classify.core.causeshown), so the report's
    # coverage figures are those `classify run --target-kappa` will act on.
    g = derived_gold(g, cause_shown)
    # Validated here, once (a bad spec or option fails before any training); each fold trains a clone.
    clf = make_classifier(model, g.taxonomy, options)
    if uses_llm(model):  # a missing key or a dead server fails now, not after the first fold
        clf.preflight()
    t = derived_gold(load_gold_for(test, tax), cause_shown) if test is not None else None
    overlap = resolve_test_overlap(g, t, test_overlap, say) if t is not None else None
    if overlap is not None:
        g = overlap.train
    grouped = None
    if by is not None:
        if expected:
            expected(len(t if t is not None else g))
        grouped = evaluate_groups(
            clf, g, by=by, leave_out=leave_group_out, k=folds, seed=seed, test=t,
            allow_overlap=test_overlap == "keep", predicted=predicted, say=say,
        )  # fmt: skip
        res = grouped.result
    elif t is not None:
        say(f"{clf.spec}: trained on all {len(g)} gold records, tested on {len(t)} records of {test}")
        if expected:
            expected(len(t))
        res = evaluate_on_test(clf, g, t, predicted=predicted, allow_overlap=test_overlap == "keep")
    else:
        given_folds = None
        folds_note = None
        if compare is not None:
            given_folds, folds_note = previous_folds(compare, g.ids, folds)
            say(folds_note)
        held = evaluated_folds(g, folds, seed, limit, given_folds)
        n_eval = len(limit_sample(len(g), limit, seed))
        if n_eval == len(g):
            say(f"{clf.spec}: {folds}-fold cross-validation on {len(g)} gold records")
        else:
            # Say what is really evaluated: a sample, in the folds that hold it (each fold's model still
            # trains on every record outside its fold).
            say(
                f"{clf.spec}: {n_eval} of {len(g)} gold records evaluated (seeded sample, --limit), in "
                f"{len(held)} of the {folds} cross-validation folds; each fold's model trains on the "
                "records outside its fold"
            )
        if expected:
            expected(n_eval)
        order = {f: j + 1 for j, f in enumerate(held)}
        res = cross_validate(
            clf,
            g,
            k=folds,
            seed=seed,
            limit=limit,
            progress=lambda f, k: say(
                f"  fold {f}/{k} done" if len(held) == k else f"  fold {f} done ({order[f - 1]} of {len(held)})"
            ),
            folds=given_folds,
            predicted=predicted,
        )
    leaks = train_test_leaks(res) if res.mode == "cv" else []
    if leaks:  # cannot happen by construction; refuse to report a leaky evaluation
        raise EvalLeakError(f"evaluation leak: {len(leaks)} records predicted by a model trained on them: {leaks[:5]}")
    metrics = compute_metrics(res, n_boot=n_boot, seed=seed)
    if grouped is not None:
        metrics["by_group"] = grouped.metrics(n_boot=n_boot, seed=seed)
    if overlap is not None and overlap.report:
        metrics["test_overlap"] = overlap.report
    if test is None and limit is None and compare is None and by is None:
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
        new_meta = {
            "model": clf.spec,  # as the compared run's meta holds it: credentials stripped
            "options": options.run_meta(),
            "taxonomy_fingerprint": tax.fingerprint(),
            "gold_hash": res.gold.hash,
        }
        new_gold = {r.id: {d: res.gold.labels[d][i] for d in tax.dimension_ids} for i, r in enumerate(res.gold.records)}
        metrics["comparison"] = compare_metrics(
            metrics,
            new_meta,
            compare,
            new_gold,
            new_predictions=prediction_rows(res),
            taxonomy=res.gold.taxonomy,
            n_boot=n_boot,
            seed=seed,
        )
        metrics["comparison"]["folds"] = folds_note if test is None else None
    out = None
    if out_dir is not None:
        # Options name the run in `classify leaderboard` (same spec, other encoder = other row).
        # The codebook's own fingerprint, not that of the gold with `<dim>_shown` added: `review build -e`
        # and `--compare` check a run against the codebook the user passes.
        meta = {"options": options.run_meta(), "taxonomy_fingerprint": tax.fingerprint()}
        out = write_eval(res, metrics, Path(out_dir), extra_meta=meta)
    return EvalRun(res, metrics, out)


def _model_of_compared_run(
    model: str | None,
    options: ModelOptions | None,
    prev_run: RunFolder,
    compare: str | Path,
    seed: int,
    say: Callable[[str], None],
) -> tuple[str | None, ModelOptions | None]:
    """With --compare: the earlier run's spec and options where none are given; a warning where the
    given ones differ (the change then mixes the model and the labels)."""
    prev = prev_run.meta
    prev_model = prev.get("model")
    if not isinstance(prev_model, str) or not prev_model:
        if model is None:
            raise UsageError(f"--compare {compare}: the run records no model; give --model")
        return model, options
    label = prev.get("label") or run_label(prev)
    prev_options, recorded = prev_run.options(seed)
    model = model or prev_model
    if model == prev_model and options is None:
        options = prev_options
    if model != prev_model:
        say(
            f"warning: --model {model} differs from the compared run's model {prev_model}: the change mixes "
            "the model and the gold labels (omit --model to evaluate the run's own)"
        )
    elif options is not None and options.run_meta() != prev_options.run_meta():
        say(
            f"warning: the options differ from the compared run's ({label}): the change mixes the options "
            "and the gold labels (omit them to reuse the run's own)"
        )
    else:
        say(
            f"--compare: evaluating the compared run's model and options ({label})"
            + ("" if recorded else "; it recorded no options, so the defaults are used")
        )
    return model, options


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
    g = derived_gold(g)  # the eval asks the "cause shown" decisions too: the prompts it will send
    clf = make_classifier(model, g.taxonomy, options)
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
