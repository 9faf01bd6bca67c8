"""`classify run` as one function: train on gold, label every record of a file (optionally
screened first), resumably, with provenance on every row.

    from classify.labeling import label_file
    summary = label_file("tfidf-logreg", "data/issues.jsonl", "out/labels.jsonl")
    summary.total, summary.invalid          # rows written, invalid answers per dimension
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from classify.classifiers.base import Classifier, ModelOptions, make_classifier
from classify.classifiers.foldmodels import FoldModels
from classify.classifiers.names import DEFAULT_SCREEN_MODEL
from classify.core import labelparts, labelrow, paths
from classify.core.errors import UsageError
from classify.core.goldfile import load_gold_for, load_task
from classify.core.paths import refuse_output_over_inputs
from classify.core.progress import Progress
from classify.core.records import CORE_FIELDS, RecordStream, scan_records
from classify.core.taxonomy import load_taxonomy
from classify.labeling.block import FieldsFn, FittedRun, default_fields
from classify.labeling.resumable import (
    DEFAULT_KEEP,
    RunError,
    RunSummary,
    checkpoint_ids,
    input_fingerprint,
    is_label_field,
    label_run,
    output_lock,
    part_hashes,
    partial_path,
    provenance_for,
    run_signature,
    strip_label_fields,
)
from classify.labeling.routing import Router, make_router, parse_targets, routable_dimensions

ENGINES = ("local", "ray")


def _check_out(out: Path, inputs: list[Path | None]) -> None:
    refuse_output_over_inputs(out, inputs, flag="--out", error=RunError)


def _prepare_inputs(model: str, input: str | Path, taxonomy, gold, options: ModelOptions | None):
    tax = load_taxonomy(taxonomy)
    # One pass checks the whole input (ids, duplicates, types) before any work and keeps its ids; the
    # engines read the records again a block at a time, so their texts are never all in memory.
    records = scan_records(input)
    if not len(records):
        raise RunError(f"{input}: no records to label")
    options = options or ModelOptions()
    g = load_gold_for(gold, tax)
    clf = make_classifier(model, tax, options)  # bad specs and options fail before any training
    return tax, records, g, options, clf


def label_file(
    model: str,
    input: str | Path | None = None,
    out: str | Path = "labels.jsonl",
    *,
    taxonomy: str | Path | None = None,
    gold: str | Path | None = None,
    options: ModelOptions | None = None,
    force: bool = False,
    chunk_size: int = 256,
    screen: bool = False,
    screen_model: str = DEFAULT_SCREEN_MODEL,
    screen_options: ModelOptions | None = None,
    target_kappa: float | None = None,
    targets: dict[str, float] | None = None,
    keep: tuple[str, ...] = DEFAULT_KEEP,
    progress: Progress | None = None,
    engine: str = "local",
    ray_address: str | None = None,
) -> RunSummary:
    """Train `model` on gold and write one labeled row per record of `input` to `out` (.jsonl, .csv,
    .parquet, or a dataset folder), in input order. Resumable: an interrupted run started again with the
    same arguments continues from `<out>.partial.jsonl`.

    With `screen`, a screening model (trained on gold/screening.jsonl, with its own `screen_options`)
    decides first; only failure reports get a symptom and root cause.

    `keep` names input fields copied to every row (default title and url; () for none).

    `target_kappa` (every dimension, screening included) and `targets` ({dimension: kappa}, overriding)
    route each label (classify.labeling.routing): `<dim>` holds the label only where the model may give
    it alone at that agreement with the coders, `<dim>_status` says auto / review / none_shown, and
    `<dim>_suggestion` always holds the model's top label. Thresholds come from the model's gold
    profile (cross-validation on gold, cached). Without targets nothing is routed.

    `engine`: "local" (this process, checkpointed) or "ray" (Ray Data workers, `ray_address` a cluster's
    or None for a local Ray; classify.labeling.rayengine). Both make rows with classify.labeling.block.
    """
    t0 = time.perf_counter()
    progress = progress or Progress()
    input = Path(input) if input else paths.default_input()
    partitioned = str(out).endswith(("/", os.sep)) or (Path(out).is_dir() and Path(out).suffix != ".hf")
    out = Path(out)
    if partitioned and engine != "ray":
        raise UsageError(f"--out {out}/ is a folder: only --engine ray writes a folder (of Parquet parts); give a file")
    if partitioned and out.exists():
        if not labelparts.is_parts_folder(out) and any(out.iterdir()):  # never written into, nor removed
            raise RunError(f"{out}: a folder that holds no classify run; give an empty or new folder")
        if labelparts.is_parts_folder(out) and labelparts.read_run(out).get("complete") and not force:
            raise RunError(f"{out} holds a finished run; pass --force to overwrite it")
    elif out.exists() and not force:
        raise RunError(f"{out} exists; pass --force to overwrite it")
    if chunk_size < 1:
        raise UsageError(f"chunk_size must be at least 1, got {chunk_size}")
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine}: unknown engine (known: {', '.join(ENGINES)})")
    if engine == "ray":
        from classify.labeling.rayengine import require_ray

        require_ray()  # a missing extra fails now, not after training
    # Refused now, not after hours of labeling: the final write would fail on these.
    if out.suffix == ".hf" and out.exists() and not out.is_dir():
        raise RunError(f"{out} is a file; a .hf output is a dataset folder")
    if out.is_dir() and out.suffix != ".hf" and not partitioned:
        raise RunError(f"{out} is a folder; give a file (.jsonl, .csv, .parquet) or a dataset folder ending in .hf")
    say = progress.log or (lambda msg: None)
    # Held for the whole run: a second run on this output is refused at once (resumable.output_lock).
    with output_lock(out):
        tax, records, g, options, clf = _prepare_inputs(model, input, taxonomy, gold, options)
        _check_out(out, [Path(input), tax.path, g.path])
        clf.preflight()  # a missing key or a dead server fails now, not after training
        keep = tuple(keep)
        _check_keep(keep, records, tax.dimension_ids)
        dims = tax.dimension_ids
        routable = routable_dimensions(tax)
        routed = parse_targets(target_kappa, targets or {}, routable + (["screening"] if screen else []))
        screen_target = routed.pop("screening", None)
        if progress.total:
            progress.total(len(records))
        if force:
            partial_path(out).unlink(missing_ok=True)
        sig_parts: dict[str, Any] = {
            "model": model,
            "options": options.__dict__,
            "taxonomy": tax.fingerprint(),
            "gold": g.hash,
            "input": input_fingerprint(Path(input)),
            **({"keep": list(keep)} if keep != DEFAULT_KEEP else {}),
            **({"targets": routed, "screen_target": screen_target} if routed or screen_target else {}),
        }
        screen_clf: Classifier | None = None
        if screen:
            s_tax, s_gold = load_task("screening")
            # The screening model gets its own options: the labeling model's (LLM flags, C, ...) are not its.
            s_opts = screen_options or replace(ModelOptions(), seed=options.seed, show_progress=False)
            screen_clf = make_classifier(screen_model, s_tax, s_opts)  # validated before any training
            _check_out(out, [s_gold.path, s_tax.path])
            sig_parts["screen"] = {
                "model": screen_model,
                "options": s_opts.__dict__,
                "gold": s_gold.hash,
                "taxonomy": s_tax.fingerprint(),
            }
        signature = run_signature(sig_parts)
        if partial_path(out).exists():  # a checkpoint of other arguments is refused before any training
            checkpoint_ids(partial_path(out), signature, part_hashes(sig_parts))
        row_fields: FieldsFn = default_fields
        screen_fields = None
        s_router_used: Router | None = None
        try:
            screen_fn = None
            if screen_clf is not None:
                if screen_target is not None:
                    s_router = _router(screen_model, s_gold, s_opts, {"screening": screen_target}, say)
                    screen_fields = lambda ps: s_router.fields({"screening": ps})  # noqa: E731
                    s_router_used = s_router
                    screen_clf.close()
                    screen_clf = s_router.labeling_model(screen_model, s_opts)
                say(f"training screening model {screen_model} on {len(s_gold)} screening records")
                s_train = s_router.training_gold if screen_target is not None else s_gold
                screen_clf.fit(s_train.records, s_train.labels)
                fitted = screen_clf
                screen_fn = lambda recs: fitted.predict(recs)["screening"]  # noqa: E731
            router = None
            train_gold = g
            if routed:
                router = _router(model, g, options, routed, say)
                train_gold = router.training_gold  # with the "cause shown" decisions the thresholds assume
                clf.close()
                clf = router.labeling_model(model, options)
                row_fields = router.fields
            n_models = f"{len(set(clf.folds))} fold models of " if isinstance(clf, FoldModels) else ""
            say(f"training {n_models}{clf.spec} on {len(g)} gold records ({tax.label})")
            clf.fit(train_gold.records, train_gold.labels)
            prov = provenance_for(clf, g)
            prov["taxonomy"] = tax.label
            routing: dict[str, Any] = {}
            for r in (router, s_router_used):
                if r is not None:
                    routing.update(r.provenance()["routing"])
            if routing:
                prov["routing"] = routing
            if screen_clf is not None:
                prov.update(
                    labelrow.screening_fields(screen_model, s_tax.label, s_gold.hash, screen_clf.options.run_meta())
                )
            run = FittedRun(
                clf,
                prov,
                routable if routed else dims,
                keep,
                row_fields,
                screen_fn,
                screen_clf.prepare if screen_clf is not None else None,
                screen_fields,
                bool(routed),
            )
            if engine == "ray":
                from classify.labeling.rayengine import label_with_ray

                summary = label_with_ray(
                    run, Path(input), records, out, signature, part_hashes(sig_parts), chunk_size=chunk_size,
                    progress=progress.labeled, address=ray_address, models=[clf, screen_clf], say=say,
                    partitioned=partitioned, force=force, strip=dims,
                )  # fmt: skip
            else:
                summary = label_run(
                    run, records, out, signature, chunk_size, progress.labeled, progress.encoded, part_hashes(sig_parts),
                    strip=dims,
                )  # fmt: skip
            summary.model_stats = clf.stats
        finally:
            clf.close()
            if screen_clf is not None:
                screen_clf.close()
        summary.seconds = time.perf_counter() - t0
        return summary


# Fields every labels row has of its own: an input column of the same name would be overwritten.
OWN_FIELDS = labelrow.ROW_FIELDS


def _check_keep(keep: tuple[str, ...], records: RecordStream, dims: list[str]) -> None:
    """--keep names fields the input has (a typo would silently give an empty column) and no field the
    output writes itself (a label, its status or confidence, provenance)."""
    present = set(CORE_FIELDS) | {k for k in records.fields if not is_label_field(k, dims)}
    for k in keep:
        if k in OWN_FIELDS or any(k == d or k.startswith(f"{d}_") for d in [*dims, "screening"]):
            raise UsageError(f"--keep {k}: the output writes that field itself")
        if k not in present:
            raise UsageError(f"--keep {k}: no such field in the input (fields: {', '.join(sorted(present))})")


def _router(model: str, gold, options: ModelOptions, targets: dict[str, float], say) -> Router:
    say(f"thresholds for target kappa {targets}: {model}'s out-of-fold predictions on {len(gold)} gold records")
    router = make_router(model, gold, options, targets, progress=lambda f, k: say(f"  fold {f}/{k} done"))
    if router.profile.from_cache:
        say("  (cross-validation read from the cache)")
    for line in threshold_lines(router):
        say(line)
    return router


def threshold_lines(router: Router) -> list[str]:
    """This run's thresholds beside `classify eval`'s for the same targets, and why they differ: eval
    calibrates each fold with a temperature fitted on the other folds (cross-fitted: honest figures for a
    report), a run with the one temperature fitted on all out-of-fold predictions, the one it applies to
    new reports (docs/trust.md)."""
    evals = router.profile.thresholds({d: t.target for d, t in router.thresholds.items()}, cross_fit=True)
    lines = []
    for d, t in router.thresholds.items():
        if t.threshold is None:
            lines.append(f"  {d}: no confidence threshold reaches kappa {t.target} on gold: every {d} goes to review")
            continue
        e = evals.get(d)
        ev = (
            f"threshold {e.threshold:.3f}, {e.coverage:.0%} of gold"
            if e is not None and e.threshold is not None
            else "no threshold"
        )
        lines.append(
            f"  {d}: this run gives a label alone at confidence >= {t.threshold:.3f} ({t.coverage:.0%} of gold would be "
            f"auto; their kappa {t.kappa:.3f}, 95% lower bound {t.kappa_lo:.3f}); `classify eval`'s figure: {ev}"
        )
    if any(t.threshold is not None for t in router.thresholds.values()):
        lines.append(
            "  (eval and run differ slightly: eval calibrates each fold with a temperature fitted on the other folds, "
            "cross-fitted, for honest figures; the run calibrates with the one temperature fitted on all of gold's "
            "out-of-fold predictions, which it applies to the new reports; docs/trust.md)"
        )
    return lines


def estimate_labeling(
    model: str,
    input: str | Path | None = None,
    *,
    taxonomy: str | Path | None = None,
    gold: str | Path | None = None,
    options: ModelOptions | None = None,
    screen: bool = False,
    routed: bool = False,
) -> list[str]:
    """Dry run of `label_file` for LLM specs: what it would send, as printable text; sends nothing."""
    input = Path(input) if input else paths.default_input()
    from classify.classifiers.llm.estimate import dry_run_estimates

    tax, stream, g, options, clf = _prepare_inputs(model, input, taxonomy, gold, options)
    # A dry run renders every prompt: the records are all read (an LLM run over millions is no dry run)
    records = strip_label_fields([r for chunk in stream.chunks() for r in chunk], tax.dimension_ids)
    notes = ["(--screen would send fewer: only records screened as failure reports)"] if screen else []
    if routed:
        from classify.evaluation.profile import derived_gold

        # a routed run asks the "cause shown" decisions too (classify.core.causeshown): longer prompts
        g = derived_gold(g)
        clf.close()
        clf = make_classifier(model, g.taxonomy, options)
        notes.append(
            f"(--target-kappa also needs the model's gold profile: a 5-fold cross-validation that predicts all "
            f"{len(g)} gold records once more, unless `classify eval` or an earlier routed run cached it)"
        )
    return dry_run_estimates(clf, g, records) + notes
