"""`classify eval`, `classify leaderboard`, `classify learning-curve`: agreement with gold."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from classify.cli.common import (
    BatchSize,
    EncoderName,
    Folds,
    GoldPath,
    LLMFlags,
    ModelOpts,
    ModelSpec,
    NBoot,
    NoDiscussion,
    Seed,
    Task,
    TaskOpt,
    TaxonomyPath,
    console,
    err,
    fail,
    model_options,
    with_llm_flags,
)
from classify.core import paths

EvalsDir = Annotated[Path, typer.Option("--out-dir", help="Root folder for run reports.")]


def print_metrics(metrics: dict[str, Any], spec: str, out_dir: Path | None) -> None:
    t = Table(title=Text(f"{spec}: agreement with gold"))  # Text: a spec's [opts] are not markup
    for col in ("dimension", "n", "kappa [95% CI]", "acc", "macro-F1", "kappa @70% conf", "coders' kappa"):
        t.add_column(col)
    for name, rep in metrics["dimensions"].items():
        k = rep["kappa"]
        c = metrics.get("coders", {}).get(name)
        sel70 = next((r for r in rep["selective"] if r["coverage"] == 70), None)
        t.add_row(
            name,
            str(rep["n"]),
            f"{k['kappa']:.3f} [{k['lo']:.3f}, {k['hi']:.3f}]",
            f"{rep['accuracy']:.3f}",
            f"{rep['macro_f1']:.3f}",
            f"{sel70['kappa']:.3f}" if sel70 else "-",
            f"{c['kappa']:.3f} (n={c['n']})" if c else "-",
        )
    console.print(t)
    for name, rep in (metrics.get("selective_labeling") or {}).items():
        parts = []
        for target, c in rep["coverage"].items():
            if c["threshold"] is None:
                parts.append(f"{target}: none (n/a)")
            else:
                parts.append(f"{target}: {c['coverage']:.0%} [{c['coverage_lo']:.0%}, {c['coverage_hi']:.0%}]")
        ece = rep["calibration"]["after"]["ece"]
        console.print(
            f"{name}: auto share at target kappa {'; '.join(parts)}"
            + (f"; calibration error (ECE) {ece:.3f}" if ece is not None else ""),
            highlight=False,
        )
    if out_dir:
        console.print(f"report: {out_dir}/report.md")


def print_comparison(c: dict[str, Any]) -> None:
    p = c["previous"]
    t = Table(title=f"kappa vs {c['previous_run']} ({p.get('model')}, {p.get('taxonomy')}, gold {p.get('gold_hash')})")
    for col in ("dimension", "kappa now", "n", "kappa before", "n", "change"):
        t.add_column(col)
    for name, r in c["dimensions"].items():
        before = f"{r['previous_kappa']:.3f}" if "previous_kappa" in r else "-"
        t.add_row(
            name,
            f"{r['kappa']:.3f}",
            str(r["n"]),
            before,
            str(r.get("previous_n", "-")),
            f"{r['delta']:+.3f}" if "delta" in r else "-",
        )
    console.print(t)
    changed = ", ".join(f"{d} {n}" for d, n in c.get("gold_labels_changed", {}).items()) or "none"
    console.print(
        f"same taxonomy: {c['same_taxonomy']}, same gold: {c['same_gold']}, same model: {c['same_model']}; "
        f"gold labels changed on shared items: {changed}" + (f"; {c['folds']}" if c.get("folds") else ""),
        highlight=False,
    )


@with_llm_flags
def eval_cmd(
    model: ModelSpec = "embed-logreg",
    gold: GoldPath = None,
    taxonomy: TaxonomyPath = None,
    task: TaskOpt = Task.labels,
    test: Annotated[
        Optional[Path],
        typer.Option(
            "--test", help="Evaluate on this labeled file instead of cross-validating (train on all of gold)."
        ),
    ] = None,
    folds: Folds = 5,
    seed: Seed = 0,
    limit: Annotated[
        Optional[int],
        typer.Option(
            "--limit", min=1, help="Evaluate only this many gold records (seeded sample); training folds use all."
        ),
    ] = None,
    n_boot: NBoot = 1000,
    out_dir: EvalsDir = paths.EVALS_DIR,
    encoder: EncoderName = None,
    no_discussion: NoDiscussion = False,
    batch_size: BatchSize = 32,
    opt: ModelOpts = [],  # noqa: B006 (typer reads the default; it is never mutated)
    compare: Annotated[
        Optional[Path],
        typer.Option("--compare", help="An earlier run folder (evals/<run>): report kappa then, now and the change."),
    ] = None,
    *,
    llm: LLMFlags,
) -> None:
    """Cross-validated agreement with gold (or --test FILE) -> evals/<timestamp>-<model>/."""
    from classify.evaluation.pipeline import estimate_eval, run_eval

    options = model_options(encoder, no_discussion, opt, seed=seed, batch_size=batch_size, llm=llm, model=model)
    common = dict(taxonomy=taxonomy, gold=gold, task=task.value, test=test, seed=seed, limit=limit, options=options)
    if llm.dry_run:
        for text in estimate_eval(model, **common):
            console.print(text)
        return
    run = run_eval(
        model,
        folds=folds,
        n_boot=n_boot,
        compare=compare,
        out_dir=out_dir,
        log=lambda m: err.print(m, markup=False, highlight=False),
        **common,
    )
    print_metrics(run.metrics, model, run.out_dir)
    if compare is not None:
        print_comparison(run.metrics["comparison"])


def leaderboard_cmd(
    runs: Annotated[
        Optional[list[Path]], typer.Argument(help="Run folders, or folders holding them (default: evals/).")
    ] = None,
    out: Annotated[
        Optional[Path],
        typer.Option("--out", "-o", help="Also write the table as markdown here (e.g. evals/leaderboard.md)."),
    ] = None,
    all_runs: Annotated[
        bool, typer.Option("--all", help="Every run, not only the newest per model and options.")
    ] = False,
) -> None:
    """One table of evaluation runs: kappa [95% CI] per dimension, kappa on the 50% / 70% most confident, time."""
    from classify.core.records import atomic_write_text
    from classify.evaluation.leaderboard import collect, render_markdown, rows

    try:
        entries = collect(list(runs) if runs else [paths.EVALS_DIR], latest_only=not all_runs)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    if not entries:
        fail("no evaluation runs found; run `classify eval` first")
    header, body = rows(entries)
    t = Table(title="Leaderboard (cross-validated on gold unless the run says otherwise)")
    for col in header:
        t.add_column(col)
    for r in body:
        t.add_row(*r)
    console.print(t)
    if out:
        atomic_write_text(out, render_markdown(entries))
        console.print(f"wrote {out}")


def learning_curve_cmd(
    model: ModelSpec = "embed-logreg",
    gold: GoldPath = None,
    taxonomy: TaxonomyPath = None,
    fractions: Annotated[
        str, typer.Option("--fractions", help="Training fractions per fold, comma-separated.")
    ] = "0.2,0.4,0.6,0.8,1",
    target: Annotated[
        list[str],
        typer.Option(
            "--target",
            help="dimension=kappa to estimate the gold size for, e.g. symptom=0.85 "
            "(repeatable; default: the coders' kappa per dimension).",
        ),
    ] = [],  # noqa: B006
    folds: Folds = 5,
    seed: Seed = 0,
    n_boot: NBoot = 500,
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats", min=1, help="Training samples drawn per fraction below 1, averaged (steadier curve, x time)."
        ),
    ] = 1,
    out_dir: EvalsDir = paths.EVALS_DIR,
    encoder: EncoderName = None,
    no_discussion: NoDiscussion = False,
    batch_size: BatchSize = 32,
    opt: ModelOpts = [],  # noqa: B006
) -> None:
    """Cross-validated kappa vs gold size, and a rough estimate of the gold needed for a target kappa."""
    from classify.evaluation.learning_curve import run_learning_curve

    options = model_options(encoder, no_discussion, opt, seed=seed, batch_size=batch_size)
    out = run_learning_curve(
        model,
        taxonomy=taxonomy,
        gold=gold,
        fractions=fractions,
        targets=target,
        folds=folds,
        seed=seed,
        n_boot=n_boot,
        repeats=repeats,
        options=options,
        out_dir=out_dir,
        log=lambda m: err.print(m, markup=False, highlight=False),
    )
    console.print((out / "report.md").read_text(encoding="utf-8"), markup=False, highlight=False)
    console.print(f"wrote {out}")
