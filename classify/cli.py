"""The `classify` command line. Heavy libraries are imported inside the commands that need them."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from classify import paths

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Label issue reports against a taxonomy and measure agreement with coders.")
taxonomy_app = typer.Typer(no_args_is_help=True, help="Inspect and validate codebooks.")
gold_app = typer.Typer(no_args_is_help=True, help="Inspect and validate gold sets.")
app.add_typer(taxonomy_app, name="taxonomy")
app.add_typer(gold_app, name="gold")

# Logs and CI are not terminals: give tables room instead of rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

TaxonomyOpt = typer.Option(None, "--taxonomy", "-t", help="Codebook YAML (default: codebook/taxonomy-v1.yaml).")
GoldOpt = typer.Option(None, "--gold", "-g", help="Gold set JSONL/CSV/Parquet (default: gold/reports.jsonl).")
ModelOpt = typer.Option("embed-logreg", "--model", "-m", help="Model spec, e.g. embed-logreg, embed-knn, embed-centroid.")
EncoderOpt = typer.Option(None, "--encoder", help="sentence-transformers model path or name (default: packaged all-MiniLM-L6-v2).")
NoDiscOpt = typer.Option(False, "--no-discussion", help="Encode title + body only (default: title + body + discussion).")
OptOpt = typer.Option([], "--opt", help="Model-specific option key=value (repeatable).")
BatchOpt = typer.Option(32, "--batch-size", min=1, help="Encoder batch size.")


class CliError(Exception):
    pass


def _fail(msg: str) -> None:
    err.print(f"[bold red]error:[/] {msg}", highlight=False, markup=True)
    raise typer.Exit(2)


def _load_tax(path):
    from classify.taxonomy import TaxonomyError, load_taxonomy

    try:
        return load_taxonomy(path)
    except TaxonomyError as e:
        _fail(str(e))


def _load_gold(path, tax):
    from classify.gold import load_gold
    from classify.records import RecordsError

    try:
        return load_gold(path or paths.DEFAULT_GOLD, tax)
    except RecordsError as e:
        _fail(str(e))


def _task_gold(task: str, taxonomy, gold):
    """Taxonomy and gold set for a task; screening reads `failure_report` booleans as labels."""
    if task == "screening":
        from classify.records import RecordsError
        from classify.screening import load_screening_gold, screening_taxonomy
        from classify.taxonomy import TaxonomyError

        try:
            tax = screening_taxonomy(taxonomy)
            return tax, load_screening_gold(gold, tax)
        except (RecordsError, TaxonomyError) as e:
            _fail(str(e))
    tax = _load_tax(taxonomy)
    return tax, _load_gold(gold, tax)


def _parse_opts(opts: list[str]) -> dict:
    out = {}
    for o in opts:
        if "=" not in o:
            _fail(f"--opt expects key=value, got {o!r}")
        k, v = o.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def _options(encoder, no_discussion, opts, seed=0, progress=True, batch_size=32, **extra):
    from classify.models import ModelOptions

    merged = {**_parse_opts(opts), **{k: v for k, v in extra.items() if v is not None}}
    return ModelOptions(encoder=encoder, include_discussion=not no_discussion, seed=seed, show_progress=progress,
                        batch_size=batch_size, extra=merged)


@taxonomy_app.command("show")
def taxonomy_show(taxonomy: Optional[Path] = TaxonomyOpt, definitions: bool = typer.Option(False, "--definitions", "-d", help="Also print definitions.")):
    """The codebook as a table: dimensions, groups, categories."""
    tax = _load_tax(taxonomy)
    console.print(f"[bold]{tax.name}[/] version {tax.version}  ({tax.path})")
    for dim in tax.dimensions.values():
        t = Table(title=f"{dim.id}: {dim.question}", show_lines=definitions)
        t.add_column("id")
        t.add_column("name")
        if dim.groups:
            t.add_column("group")
        t.add_column("cues (include / exclude)")
        if definitions:
            t.add_column("definition")
        for c in dim.categories:
            cells = [c.id, c.name] + ([c.group or ""] if dim.groups else []) + [f"{len(c.include)} / {len(c.exclude)}"]
            if definitions:
                cells.append(c.definition)
            t.add_row(*cells)
        console.print(t)


@taxonomy_app.command("validate")
def taxonomy_validate(path: Path):
    """Validate a codebook file; exit code 2 with the place and problem when it is malformed."""
    tax = _load_tax(path)
    n = sum(len(d.categories) for d in tax.dimensions.values())
    console.print(f"ok: {tax.label}, {len(tax.dimensions)} dimensions, {n} categories")


@gold_app.command("stats")
def gold_stats(gold: Optional[Path] = GoldOpt, taxonomy: Optional[Path] = TaxonomyOpt, n_boot: int = typer.Option(1000, help="Bootstrap resamples for the kappa CI.")):
    """Gold size, label distribution per dimension, and coder agreement when coded twice."""
    from collections import Counter

    from classify.evaluate import coder_agreement

    tax = _load_tax(taxonomy)
    g = _load_gold(gold, tax)
    console.print(f"[bold]{g.path}[/]: {len(g)} records, taxonomy {tax.label}, content hash {g.hash}")
    for d, dim in tax.dimensions.items():
        counts = Counter(y for y in g.labels[d] if y is not None)
        n = sum(counts.values())
        t = Table(title=f"{d}: {n} labeled, {g.n_missing(d)} without a label (left out of training/evaluation)")
        t.add_column("category")
        if dim.groups:
            t.add_column("group")
        t.add_column("n", justify="right")
        t.add_column("%", justify="right")
        for c in dim.categories:
            cells = [c.id] + ([c.group] if dim.groups else []) + [str(counts.get(c.id, 0)), f"{100 * counts.get(c.id, 0) / max(n, 1):.1f}"]
            t.add_row(*cells)
        console.print(t)
    agree = coder_agreement(g, n_boot=n_boot)
    if agree:
        t = Table(title="Agreement between the gold set's two coding passes (Cohen's kappa, bootstrap 95% CI)")
        for col in ("dimension", "coders", "n", "kappa", "95% CI"):
            t.add_column(col)
        for name, a in agree.items():
            t.add_row(name, " vs ".join(a["coders"]), str(a["n"]), f"{a['kappa']:.3f}", f"[{a['lo']:.3f}, {a['hi']:.3f}]")
        console.print(t)
    else:
        console.print("no second coder in this gold set: coder agreement not available")


@gold_app.command("validate")
def gold_validate(gold: Optional[Path] = GoldOpt, taxonomy: Optional[Path] = TaxonomyOpt):
    """Validate a gold file against a taxonomy (ids, labels)."""
    tax = _load_tax(taxonomy)
    g = _load_gold(gold, tax)
    console.print(f"ok: {len(g)} records valid against {tax.label}")


@app.command("models")
def models_list():
    """List the model specs this installation knows."""
    from classify.models import known_specs

    for s in known_specs():
        console.print(s + ("<model>" if s.endswith(":") else ""))


def _print_metrics(metrics: dict, spec: str, out_dir: Path | None):
    t = Table(title=f"{spec}: agreement with gold")
    for col in ("dimension", "n", "kappa [95% CI]", "acc", "macro-F1", "kappa @70% conf", "coders' kappa"):
        t.add_column(col)
    for name, rep in metrics["dimensions"].items():
        k = rep["kappa"]
        c = metrics.get("coders", {}).get(name)
        sel70 = next((r for r in rep["selective"] if r["coverage"] == 70), None)
        t.add_row(
            name, str(rep["n"]), f"{k['kappa']:.3f} [{k['lo']:.3f}, {k['hi']:.3f}]", f"{rep['accuracy']:.3f}",
            f"{rep['macro_f1']:.3f}", f"{sel70['kappa']:.3f}" if sel70 else "-",
            f"{c['kappa']:.3f} (n={c['n']})" if c else "-",
        )
    console.print(t)
    if out_dir:
        console.print(f"report: {out_dir}/report.md")


@app.command("eval")
def eval_cmd(
    model: str = ModelOpt,
    gold: Optional[Path] = GoldOpt,
    taxonomy: Optional[Path] = TaxonomyOpt,
    task: str = typer.Option("labels", "--task", help="labels (symptom/root cause on gold/reports.jsonl) or screening (failure report or not, on gold/screening.jsonl)."),
    test: Optional[Path] = typer.Option(None, "--test", help="Evaluate on this labeled file instead of cross-validating (train on all of gold)."),
    folds: int = typer.Option(5, "--folds", "-k", min=2, help="Cross-validation folds."),
    seed: int = typer.Option(0, help="Seed for folds and bootstrap."),
    limit: Optional[int] = typer.Option(None, help="Evaluate only this many gold records (seeded sample); training folds use all."),
    n_boot: int = typer.Option(1000, min=100, help="Bootstrap resamples for kappa CIs."),
    out_dir: Path = typer.Option(paths.EVALS_DIR, "--out-dir", help="Root folder for run reports."),
    encoder: Optional[str] = EncoderOpt,
    no_discussion: bool = NoDiscOpt,
    batch_size: int = BatchOpt,
    opt: list[str] = OptOpt,
):
    """Cross-validated agreement with gold (or --test FILE) -> evals/<timestamp>-<model>/."""
    from classify.evaluate import compute_metrics, cross_validate, evaluate_on_test, train_test_leaks
    from classify.models import ModelSpecError
    from classify.report import write_eval

    if task not in ("labels", "screening"):
        _fail(f"--task must be labels or screening, not {task!r}")
    tax, g = _task_gold(task, taxonomy, gold)
    options = _options(encoder, no_discussion, opt, seed=seed, batch_size=batch_size)
    try:
        if test:
            res = evaluate_on_test(model, g, _task_gold(task, taxonomy, test)[1], options)
        else:
            err.print(f"{model}: {folds}-fold cross-validation on {len(g)} gold records")
            res = cross_validate(model, g, options, k=folds, seed=seed, limit=limit,
                                 progress=lambda f, k: err.print(f"  fold {f}/{k} done"))
            leaks = train_test_leaks(res)
            if leaks:  # cannot happen by construction; refuse to report a leaky evaluation
                _fail(f"evaluation leak: {len(leaks)} records predicted by a model trained on them")
    except (ModelSpecError, ValueError) as e:
        _fail(str(e))
    metrics = compute_metrics(res, n_boot=n_boot, seed=seed)
    # Options name the run in `classify leaderboard` (same spec, other encoder = other row).
    run_opts = {"encoder": encoder, "include_discussion": not no_discussion, "extra": options.extra}
    out = write_eval(res, metrics, out_dir, extra_meta={"options": run_opts})
    _print_metrics(metrics, model, out)


@app.command("run")
def run_cmd(
    model: str = ModelOpt,
    input: Path = typer.Option(paths.DEFAULT_INPUT, "--input", "-i", help="Records to label (JSONL/CSV/Parquet)."),
    out: Path = typer.Option(Path("labels.jsonl"), "--out", "-o", help="Output file; format by extension (.jsonl default, .csv, .parquet)."),
    gold: Optional[Path] = GoldOpt,
    taxonomy: Optional[Path] = TaxonomyOpt,
    force: bool = typer.Option(False, "--force", help="Overwrite an existing output and discard any checkpoint."),
    chunk_size: int = typer.Option(256, min=1, help="Records per checkpointed chunk."),
    screen: bool = typer.Option(False, "--screen", help="Screen first (trained on gold/screening.jsonl); label only failure reports."),
    screen_model: str = typer.Option("embed-logreg", "--screen-model", help="Model spec for screening."),
    seed: int = typer.Option(0),
    encoder: Optional[str] = EncoderOpt,
    no_discussion: bool = NoDiscOpt,
    batch_size: int = BatchOpt,
    opt: list[str] = OptOpt,
):
    """Train on gold and label every record of --input, with provenance on each row. Resumable."""
    from tqdm import tqdm

    from classify.models import ModelSpecError, make_classifier
    from classify.records import RecordsError, read_records
    from classify.run import (RunError, input_fingerprint, label_records, partial_path,
                              provenance_for, run_signature, strip_label_fields)

    t0 = time.perf_counter()
    tax = _load_tax(taxonomy)
    if out.exists() and not force:
        _fail(f"{out} exists; pass --force to overwrite it")
    if force:
        partial_path(out).unlink(missing_ok=True)
    try:
        records = strip_label_fields(read_records(input), tax.dimension_ids)
    except RecordsError as e:
        _fail(str(e))
    g = _load_gold(gold, tax)
    options = _options(encoder, no_discussion, opt, seed=seed, progress=False, batch_size=batch_size)
    try:
        clf = make_classifier(model, tax, options)
    except ModelSpecError as e:
        _fail(str(e))
    sig_parts = {"model": model, "options": options.__dict__, "taxonomy": tax.fingerprint(),
                 "gold": g.hash, "input": input_fingerprint(input)}
    screen_fn = None
    if screen:
        s_tax, s_gold = _task_gold("screening", None, None)
        s_clf = make_classifier(screen_model, s_tax, options)
        err.print(f"training screening model {screen_model} on {len(s_gold)} screening records")
        s_clf.fit(s_gold.records, s_gold.labels)
        screen_fn = lambda recs: s_clf.predict(recs)["screening"]  # noqa: E731
        sig_parts["screen"] = {"model": screen_model, "gold": s_gold.hash, "taxonomy": s_tax.fingerprint()}
    sig = run_signature(sig_parts)
    err.print(f"training {model} on {len(g)} gold records ({tax.label})")
    clf.fit(g.records, g.labels)
    prov = provenance_for(clf, g)
    if screen:
        prov["screening_model"] = f"{screen_model} ({s_tax.label}, gold {s_gold.hash})"
    enc_bar = tqdm(total=len(records), desc="encoding", unit="rec", file=sys.stderr, delay=0.5)
    bar = tqdm(total=len(records), desc="labeling", unit="rec", file=sys.stderr)
    try:
        summary = label_records(clf, records, out, prov, sig, chunk_size=chunk_size, progress=bar.update,
                                screen=screen_fn, prepare_progress=enc_bar.update)
    except RunError as e:
        _fail(str(e))
    finally:
        enc_bar.close()
        bar.close()
    summary.seconds = time.perf_counter() - t0
    inv = ", ".join(f"{d} {n}" for d, n in summary.invalid.items() if n) or "none"
    scr = f"; screened out as not failure reports: {summary.screened_out}" if screen else ""
    err.print(f"wrote {summary.total} rows to {out} ({summary.labeled} labeled now, {summary.resumed} resumed "
              f"from a checkpoint; invalid: {inv}{scr}) in {summary.seconds:.1f} s")


@app.command("report")
def report_cmd(
    labels: Path = typer.Argument(..., help="A labels file written by `classify run`."),
    taxonomy: Optional[Path] = TaxonomyOpt,
    input: Optional[Path] = typer.Option(None, "--input", "-i", help="The labeled input, to show example titles."),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", help="Folder for corpus.json, PNGs and report.html (default: <labels>.report/)."),
):
    """Distribution of symptoms and root causes (and groups) with 95% intervals, per library and overall."""
    from classify.corpus import write_corpus_report
    from classify.records import RecordsError

    tax = _load_tax(taxonomy)
    out = out_dir or labels.with_name(labels.stem + ".report")
    try:
        stats = write_corpus_report(labels, tax, out, input)
    except RecordsError as e:
        _fail(str(e))
    console.print(f"{stats['n_rows']} rows, {stats['n_failure_reports']} failure reports, "
                  f"{stats['n_screened_out']} screened out; libraries: {stats['libraries']}")
    for name, d in stats["dimensions"].items():
        t = Table(title=f"{name} (n={d['overall']['n']}, no label: {d['overall']['n_missing']})")
        for col in ("category", "n", "share", "95% CI"):
            t.add_column(col)
        for cat, sh in d["overall"]["shares"].items():
            t.add_row(cat, str(sh["k"]), f"{100 * sh['share']:.2f}%" if sh["n"] else "-",
                      f"[{100 * sh['lo']:.1f}, {100 * sh['hi']:.1f}]" if sh["n"] else "-")
        console.print(t)
    console.print(f"report: {out}/report.html")


@app.command("leaderboard")
def leaderboard_cmd(
    runs: Optional[list[Path]] = typer.Argument(None, help="Run folders, or folders holding them (default: evals/)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Also write the table as markdown here (e.g. evals/leaderboard.md)."),
    all_runs: bool = typer.Option(False, "--all", help="Every run, not only the newest per model and options."),
):
    """One table of evaluation runs: kappa [95% CI] per dimension, kappa on the 50% / 70% most confident, time."""
    from classify.leaderboard import collect, render_markdown, rows
    from classify.records import atomic_write_text

    try:
        entries = collect(list(runs) if runs else [paths.EVALS_DIR], latest_only=not all_runs)
    except (FileNotFoundError, ValueError) as e:
        _fail(str(e))
    if not entries:
        _fail("no evaluation runs found; run `classify eval` first")
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


def main():
    app()


if __name__ == "__main__":
    main()
