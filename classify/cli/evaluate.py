"""`classify eval`, `classify leaderboard`, `classify learning-curve`: agreement with gold."""

from __future__ import annotations

import sys
from dataclasses import replace
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

EvalsDir = Annotated[
    Optional[Path],
    typer.Option(
        "--out-dir",
        help=f"Root folder for run reports (default: evals/ of the project folder, nearest with "
        f"{paths.PROJECT_FILE}, else the current one).",
    ),
]
EvalModelSpec = Annotated[
    Optional[str],
    typer.Option(
        "--model",
        "-m",
        help="Model spec (see `classify models`), e.g. embed-logreg, tfidf-embed, openai:<model>, local:smollm2-135m "
        "(default: embed-logreg; with --compare, the compared run's model and options).",
    ),
]


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def print_metrics(metrics: dict[str, Any], spec: str, out_dir: Path | None) -> None:
    from classify.evaluation.report import fmt_kappa, small_sample_warning

    t = Table(title=Text(f"{spec}: agreement with gold"))  # Text: a spec's [opts] are not markup
    for col in ("dimension", "n", "kappa [95% CI]", "acc", "macro-F1", "kappa @70% conf", "coders' kappa"):
        t.add_column(col)
    na = False
    for name, rep in metrics["dimensions"].items():
        k = rep["kappa"]
        c = metrics.get("coders", {}).get(name)
        sel70 = next((r for r in rep["selective"] if r["coverage"] == 70), None)
        row = [
            name,
            str(rep["n"]),
            fmt_kappa(k),
            _f(rep["accuracy"]),
            _f(rep["macro_f1"]),
            _f(sel70["kappa"]) if sel70 else "-",
            f"{_f(c['kappa'])} (n={c['n']})" if c else "-",
        ]
        na = na or any("n/a" in cell for cell in row)
        t.add_row(*row)
    console.print(t)
    if na:
        console.print(
            "n/a: undefined, not zero (one gold class left, or no confidence to rank by; see report.md)",
            highlight=False,
        )
    small = small_sample_warning(metrics)
    if small:
        console.print(f"[bold yellow]warning:[/] {small}", highlight=False)
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
    from classify.evaluation.compare import changes_text, paired_text

    p = c["previous"]
    t = Table(
        title=Text(
            f"kappa vs {c['previous_run']} ({p.get('label') or p.get('model')}, {p.get('taxonomy')}, "
            f"gold {p.get('gold_hash')})"
        )
    )
    for col in ("dimension", "kappa now", "n", "kappa before", "n", "change", "paired change [95% CI]"):
        t.add_column(col)
    for name, r in c["dimensions"].items():
        before = _f(r["previous_kappa"]) if "previous_kappa" in r else "-"
        delta = r.get("delta")
        t.add_row(
            name,
            _f(r["kappa"]),
            str(r["n"]),
            before,
            str(r.get("previous_n", "-")),
            ("n/a" if delta is None else f"{delta:+.3f}") if "previous_kappa" in r else "-",
            paired_text(r.get("paired")),
        )
    console.print(t)
    same = f"same taxonomy: {c['same_taxonomy']}, same gold: {c['same_gold']}, same model: {c['same_model']}"
    if "same_options" in c:
        same += f", same options: {c['same_options']}"
    console.print(
        f"{same}; gold labels changed on shared items: {changes_text(c)}"
        + (f"; {c['folds']}" if c.get("folds") else ""),
        highlight=False,
    )
    if any((c.get("gold_changes_to_model_label") or {}).values()):
        console.print(
            "note: gold labels changed to the earlier run's own prediction (accepting the model's label) raise "
            "that model's kappa by construction",
            highlight=False,
        )


@with_llm_flags
def eval_cmd(
    model: EvalModelSpec = None,
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
    out_dir: EvalsDir = None,
    encoder: EncoderName = None,
    no_discussion: NoDiscussion = False,
    batch_size: BatchSize = 32,
    opt: ModelOpts = [],  # noqa: B006 (typer reads the default; it is never mutated)
    compare: Annotated[
        Optional[Path],
        typer.Option(
            "--compare",
            help="An earlier run folder (evals/<run>): evaluate its model and options on its folds and report kappa "
            "then, now and the change with a paired 95% CI.",
        ),
    ] = None,
    *,
    llm: LLMFlags,
) -> None:
    """Cross-validated agreement with gold (or --test FILE) -> evals/<timestamp>-<model>/."""
    from classify.classifiers.base import uses_llm
    from classify.evaluation.pipeline import DEFAULT_MODEL, estimate_eval, run_eval

    # Without --model, --compare takes the run's spec (checked against the LLM flags when known below).
    checked = model if model is not None or compare is not None else DEFAULT_MODEL
    options = model_options(encoder, no_discussion, opt, seed=seed, batch_size=batch_size, llm=llm, model=checked)
    if compare is not None and not (encoder or no_discussion or opt or llm.given()):
        from classify.evaluation.compare import load_run_metrics, options_of_run

        # No option given: the compared run's own (its spec too when --model is not given), so the
        # change comes from the gold labels; --batch-size only sets speed and is kept.
        prev = load_run_metrics(compare)["meta"]
        if model is None or model == prev.get("model"):
            options = replace(options_of_run(prev, seed)[0], batch_size=batch_size)
    common = dict(taxonomy=taxonomy, gold=gold, task=task.value, test=test, seed=seed, limit=limit, options=options)
    if llm.dry_run:
        for text in estimate_eval(model or DEFAULT_MODEL, **common):
            console.print(text)
        return
    bar = None
    spec = model
    if compare is None or model is not None:
        spec = model or DEFAULT_MODEL
    if spec is not None and uses_llm(spec):
        # LLM evaluations take minutes between folds: a bar over the records predicted.
        from classify.core.progress import progress_bar

        bar = progress_bar("predicting", "rec")

    def expected(n: int) -> None:
        if bar is not None:
            bar.total = n
            bar.refresh()

    try:
        run = run_eval(
            model,
            folds=folds,
            n_boot=n_boot,
            compare=compare,
            out_dir=out_dir or paths.evals_dir(),
            log=lambda m: (
                bar.write(m, file=sys.stderr) if bar is not None else err.print(m, markup=False, highlight=False)
            ),
            predicted=bar.update if bar is not None else None,
            expected=expected,
            **common,
        )
    finally:
        if bar is not None:
            bar.close()
    print_metrics(run.metrics, run.result.spec, run.out_dir)
    if compare is not None:
        print_comparison(run.metrics["comparison"])


def leaderboard_cmd(
    runs: Annotated[
        Optional[list[Path]],
        typer.Argument(
            help="Run folders, or folders holding them (default: evals/ of the project folder when it holds runs, "
            "else the shipped reference runs)."
        ),
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
        entries = collect(list(runs) if runs else paths.leaderboard_dirs(), latest_only=not all_runs)
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
    out_dir: EvalsDir = None,
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
        out_dir=out_dir or paths.evals_dir(),
        log=lambda m: err.print(m, markup=False, highlight=False),
    )
    console.print((out / "report.md").read_text(encoding="utf-8"), markup=False, highlight=False)
    console.print(f"wrote {out}")
