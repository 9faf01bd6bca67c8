"""`classify eval`, `classify leaderboard`, `classify learning-curve`: agreement with gold."""

from __future__ import annotations

import sys
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from classify.classifiers.names import DEFAULT_MODEL
from classify.cli.common import (
    BatchSize,
    EncoderName,
    Folds,
    GoldPath,
    LabelColumns,
    LLMFlags,
    ModelOpts,
    ModelSpec,
    NBoot,
    NoDiscussion,
    Seed,
    TaskOpt,
    TaxonomyPath,
    console,
    err,
    fail,
    model_options,
    with_label_columns,
    with_llm_flags,
)
from classify.core import paths
from classify.core.progress import Progress

if TYPE_CHECKING:
    from classify.evaluation.crossval import EvalResult

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
        f"(default: {DEFAULT_MODEL}; with --compare, the compared run's model and options).",
    ),
]


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


class TestOverlap(str, Enum):
    refuse = "refuse"
    drop_train = "drop-train"
    keep = "keep"


def print_metrics(metrics: dict[str, Any], spec: str, out_dir: Path | None, res: EvalResult | None = None) -> None:
    from classify.evaluation.report import codebook_note, fmt_kappa, has_coders, small_sample_warning

    meta = {"gold_coders": sorted(res.gold.coders)} if res is not None else {}
    coders_given = has_coders({"coders": metrics.get("coders"), "meta": meta})
    title = f"{spec}: agreement with gold" + ("" if coders_given else " (reference labels)")
    t = Table(title=Text(title))  # Text: a spec's [opts] are not markup
    cols = ["dimension", "n", "kappa [95% CI]", "acc", "macro-F1", "weighted-F1", "kappa @70% conf"]
    for col in cols + (["coders' kappa"] if coders_given else []):
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
            _f(rep.get("weighted_f1")),
            _f(sel70["kappa"]) if sel70 else "-",
        ] + ([f"{_f(c['kappa'])} (n={c['n']})" if c else "-"] if coders_given else [])
        na = na or any("n/a" in cell for cell in row)
        t.add_row(*row)
    console.print(t)
    if metrics.get("by_group"):
        print_by_group(metrics["by_group"])
    if metrics.get("test_overlap"):
        ov = metrics["test_overlap"]
        console.print(
            f"{ov['n_test_records']} test records repeat gold ({ov['policy']}); every match is listed in the report",
            highlight=False,
        )
    note = codebook_note(res.provenance if res is not None else None)
    if note:
        console.print(f"note: {note}", highlight=False)
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


def print_by_group(bg: dict[str, Any]) -> None:
    from classify.evaluation.report import fmt_kappa

    by = bg["field"]
    t = Table(title=Text(f"per {by}: {bg['design']}"))
    dims = list(bg["mean"])
    for col in [by, "n"] + [f"{d} kappa" for d in dims]:
        t.add_column(col)
    for g, rep in bg["groups"].items():
        t.add_row(
            g,
            str(rep["n"]),
            *[fmt_kappa(rep["dimensions"][d]["kappa"], 2) if d in rep["dimensions"] else "-" for d in dims],
        )
    t.add_row("mean", "", *[_f(bg["mean"][d]["kappa"]) for d in dims])
    worst = bg["worst"]
    t.add_row("worst", "", *[f"{_f(worst[d]['kappa'])} ({worst[d]['group']})" if d in worst else "n/a" for d in dims])
    console.print(t)
    for g, why in bg.get("skipped", {}).items():
        console.print(f"left out: {by} {g}: {why}", highlight=False)


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
    label_column: LabelColumns = None,
    taxonomy: TaxonomyPath = None,
    task: TaskOpt = "labels",
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
    by: Annotated[
        Optional[str],
        typer.Option(
            "--by",
            help="Evaluate per group of this record field (e.g. repo): one model per group, cross-validated inside "
            "it (or tested on its records of --test); reports each group, their mean and the pooled figures.",
        ),
    ] = None,
    leave_group_out: Annotated[
        bool,
        typer.Option(
            "--leave-group-out",
            help="With --by: predict each group with a model trained on all the other groups only (a source the "
            "model never saw); reports each group, the mean and the worst.",
        ),
    ] = False,
    test_overlap: Annotated[
        TestOverlap,
        typer.Option(
            "--test-overlap",
            help="--test records that repeat a gold record (same id or text): refuse (list them and stop), "
            "drop-train (train without those gold records) or keep (score them, with a warning).",
        ),
    ] = TestOverlap.refuse,
    *,
    llm: LLMFlags,
) -> None:
    """Cross-validated agreement with gold (or --test FILE, or per group with --by) -> evals/<timestamp>-<model>/."""
    from classify.classifiers.base import uses_llm
    from classify.evaluation.pipeline import estimate_eval, run_eval

    # Without --model, --compare takes the run's spec (checked against the LLM flags when known below).
    checked = model if model is not None or compare is not None else DEFAULT_MODEL
    options = model_options(encoder, no_discussion, opt, seed=seed, batch_size=batch_size, llm=llm, model=checked)
    if compare is not None and not (encoder or no_discussion or opt or llm.given()):
        from classify.evaluation.compare import load_run

        # No option given: the compared run's own (its spec too when --model is not given), so the
        # change comes from the gold labels; --batch-size only sets speed and is kept.
        prev = load_run(compare)
        if model is None or model == prev.meta.get("model"):
            options = replace(prev.options(seed)[0], batch_size=batch_size)
    gold, test = with_label_columns(gold, test, label_column)
    common = dict(taxonomy=taxonomy, gold=gold, task=task, test=test, seed=seed, limit=limit, options=options)
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
            progress=Progress(
                log=lambda m: (
                    bar.write(m, file=sys.stderr) if bar is not None else err.print(m, markup=False, highlight=False)
                ),
                labeled=bar.update if bar is not None else None,
                total=expected,
            ),
            by=by,
            leave_group_out=leave_group_out,
            test_overlap=test_overlap.value,
            **common,
        )
    finally:
        if bar is not None:
            bar.close()
    print_metrics(run.metrics, run.result.spec, run.out_dir, run.result)
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
        typer.Option("--out", "-o", help="Also write the table as markdown to this file."),
    ] = None,
    write: Annotated[
        bool,
        typer.Option("--write", help="Rewrite the committed table, evals/leaderboard.md, from these runs."),
    ] = False,
    all_runs: Annotated[
        bool, typer.Option("--all", help="Every run, not only the newest per model and options.")
    ] = False,
) -> None:
    """One table of evaluation runs: kappa [95% CI] per dimension, kappa on the 50% / 70% most confident, time."""
    from classify.core.writer import atomic_write_text
    from classify.evaluation.leaderboard import collect, column_widths, fit_columns, render_markdown, rows

    committed = paths.EVALS_DIR / "leaderboard.md"
    if out is not None and out.resolve() == committed.resolve():
        fail(f"--out {out}: that is the committed table; pass --write to rewrite it")
    try:
        entries = collect(list(runs) if runs else paths.leaderboard_dirs(), latest_only=not all_runs)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    if not entries:
        fail("no evaluation runs found; run `classify eval` first")
    header, body = rows(entries)
    cols, dropped = fit_columns(header, body, console.width)
    widths = column_widths(header, body)
    t = Table(title="Leaderboard (cross-validated on gold unless the run says otherwise)")
    for i in cols:  # full model names, folded; figures never cut
        t.add_column(header[i], overflow="fold", min_width=widths[i], max_width=None if i == 0 else widths[i])
    for r in body:
        t.add_row(*(r[i] for i in cols))
    console.print(t)
    if dropped:
        console.print(
            f"(left out to fit {console.width} columns: {', '.join(dropped)}; a wider terminal or --out FILE shows them)"
        )
    for path in [p for p in (out, committed if write else None) if p is not None]:
        atomic_write_text(path, render_markdown(entries))
        console.print(f"wrote {path}")


def learning_curve_cmd(
    model: ModelSpec = DEFAULT_MODEL,
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
