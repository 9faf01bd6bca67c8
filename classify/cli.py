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
from rich.text import Text

from classify import paths
from classify.models import LLM_PREFIXES
from classify.cli_fetch import fetch_app

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Label issue reports against a taxonomy and measure agreement with coders.")
taxonomy_app = typer.Typer(no_args_is_help=True, help="Inspect and validate codebooks.")
gold_app = typer.Typer(no_args_is_help=True, help="Inspect and validate gold sets.")
app.add_typer(taxonomy_app, name="taxonomy")
app.add_typer(gold_app, name="gold")
app.add_typer(fetch_app, name="fetch")


def _mount_review() -> None:
    from classify.review.cli import review_app

    app.add_typer(review_app, name="review")


_mount_review()

# Logs and CI are not terminals: give tables room instead of rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

TaxonomyOpt = typer.Option(None, "--taxonomy", "-t", help="Codebook YAML (default: codebook/taxonomy-v1.yaml).")
GoldOpt = typer.Option(None, "--gold", "-g", help="Gold set JSONL/CSV/Parquet (default: gold/reports.jsonl).")
ModelOpt = typer.Option("embed-logreg", "--model", "-m", help="Model spec, e.g. embed-logreg, embed-knn, embed-centroid, openai:<model>, local:smollm2-135m.")
EncoderOpt = typer.Option(None, "--encoder", help="sentence-transformers model path or name (default: packaged all-MiniLM-L6-v2).")
NoDiscOpt = typer.Option(False, "--no-discussion", help="Encode title + body only (default: title + body + discussion).")
OptOpt = typer.Option([], "--opt", help="Model-specific option key=value (repeatable).")
FoldsOpt = typer.Option(5, "--folds", "-k", min=2, help="Cross-validation folds.")
BatchOpt = typer.Option(32, "--batch-size", min=1, help="Encoder batch size.")
# LLM models only (openai:<model>, local:<name>); everything else via --opt key=value (docs/llm.md).
BaseUrlOpt = typer.Option(None, "--base-url", help="LLM: OpenAI-compatible server, e.g. http://localhost:8000/v1.")
ApiKeyEnvOpt = typer.Option(None, "--api-key-env", help="LLM: environment variable holding the API key (default OPENAI_API_KEY).")
StrategyOpt = typer.Option(None, "--strategy", help="LLM: zero-shot (default) or few-shot.")
ShotsOpt = typer.Option(None, "--shots", min=1, help="LLM few-shot: examples per issue (default 4).")
RationaleOpt = typer.Option(None, "--rationale/--no-rationale", help="LLM: ask for a short rationale before the labels.")
SamplesOpt = typer.Option(None, "--samples", min=1, help="LLM: self-consistency samples per issue (confidence = vote share).")
ConcurrencyOpt = typer.Option(None, "--concurrency", min=1, help="LLM: requests in flight at once (default 4).")
DryRunOpt = typer.Option(False, "--dry-run", help="LLM: print the request count and estimated tokens/cost, send nothing.")


class CliError(Exception):
    pass


def _fail(msg: str) -> None:
    from rich.markup import escape

    # escape: messages quote user input such as `ensemble:a[embed=false]+b`, which rich would eat as a tag.
    err.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, markup=True)
    raise typer.Exit(2)


def _load_tax(path):
    from classify.taxonomy import TaxonomyError, load_taxonomy

    try:
        return load_taxonomy(path)
    except TaxonomyError as e:
        _fail(str(e))


def _load_gold(path, tax):
    from classify.records import RecordsError
    from classify.review.goldfile import load_gold_for

    try:
        # the taxonomy decides the reader: a screening codebook reads `failure_report` booleans
        return load_gold_for(path, tax)
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


def _uses_llm(model: str) -> bool:
    """An LLM spec, or an inline ensemble with an LLM member; a malformed member is a clean error."""
    from classify.ensemble import llm_members
    from classify.models import ModelSpecError

    try:
        return model.startswith(LLM_PREFIXES) or bool(llm_members(model))
    except ModelSpecError as e:  # the same clear error eval/run give later
        _fail(str(e))


def _llm_extra(model: str, dry_run: bool = False, **given) -> dict:
    """The LLM flags as ModelOptions.extra keys; an error when given for a non-LLM model."""
    given = {k: v for k, v in given.items() if v is not None}
    if not _uses_llm(model):
        if given or dry_run:
            flags = ", ".join("--" + {"k": "shots"}.get(k, k).replace("_", "-") for k in given) or "--dry-run"
            _fail(f"{flags}: only for LLM models (openai:<model>, local:<name>, or an ensemble with one), not {model!r}")
        return {}
    return given


def _llm_errors() -> tuple:
    """Exceptions an LLM run ends with that deserve a one-line message, not a traceback."""
    try:
        from classify.llm.client import LLMError
        from classify.llm.endpoint import EndpointError
        from classify.llm.server import LocalServerError
    except ImportError:
        return ()
    return (LLMError, LocalServerError, EndpointError)


def _dry_run(clf, gold, records, what: str) -> None:
    """Fit the LLM parts on gold (few-shot pools) and print what labeling `records` would send."""
    from classify.llm.estimate import dry_run_estimate, format_estimate

    # An ensemble sends requests through its LLM members only: one estimate each, and only they
    # are fitted (its trained members would encode and train for nothing).
    parts = [clf] if hasattr(clf, "plan") else [m for m in getattr(clf, "members", []) if hasattr(m, "plan")]
    for c in parts:
        try:
            c.fit(gold.records, gold.labels)
        except ValueError as e:
            _fail(str(e))
        console.print(format_estimate(dry_run_estimate(c, records)))
    if what:
        console.print(what)


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
    t = Table(title=Text(f"{spec}: agreement with gold"))  # Text: a spec's [opts] are not markup
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


def _print_comparison(c: dict):
    p = c["previous"]
    t = Table(title=f"kappa vs {c['previous_run']} ({p.get('model')}, {p.get('taxonomy')}, gold {p.get('gold_hash')})")
    for col in ("dimension", "kappa now", "n", "kappa before", "n", "change"):
        t.add_column(col)
    for name, r in c["dimensions"].items():
        before = f"{r['previous_kappa']:.3f}" if "previous_kappa" in r else "-"
        t.add_row(name, f"{r['kappa']:.3f}", str(r["n"]), before, str(r.get("previous_n", "-")),
                  f"{r['delta']:+.3f}" if "delta" in r else "-")
    console.print(t)
    changed = ", ".join(f"{d} {n}" for d, n in c.get("gold_labels_changed", {}).items()) or "none"
    console.print(f"same taxonomy: {c['same_taxonomy']}, same gold: {c['same_gold']}, same model: {c['same_model']}; "
                  f"gold labels changed on shared items: {changed}" + (f"; {c['folds']}" if c.get("folds") else ""),
                  highlight=False)


@app.command("eval")
def eval_cmd(
    model: str = ModelOpt,
    gold: Optional[Path] = GoldOpt,
    taxonomy: Optional[Path] = TaxonomyOpt,
    task: str = typer.Option("labels", "--task", help="labels (symptom/root cause on gold/reports.jsonl) or screening (failure report or not, on gold/screening.jsonl)."),
    test: Optional[Path] = typer.Option(None, "--test", help="Evaluate on this labeled file instead of cross-validating (train on all of gold)."),
    folds: int = FoldsOpt,
    seed: int = typer.Option(0, help="Seed for folds and bootstrap."),
    limit: Optional[int] = typer.Option(None, help="Evaluate only this many gold records (seeded sample); training folds use all."),
    n_boot: int = typer.Option(1000, min=100, help="Bootstrap resamples for kappa CIs."),
    out_dir: Path = typer.Option(paths.EVALS_DIR, "--out-dir", help="Root folder for run reports."),
    encoder: Optional[str] = EncoderOpt,
    no_discussion: bool = NoDiscOpt,
    batch_size: int = BatchOpt,
    opt: list[str] = OptOpt,
    compare: Optional[Path] = typer.Option(None, "--compare", help="An earlier run folder (evals/<run>): report kappa then, now and the change."),
    base_url: Optional[str] = BaseUrlOpt,
    api_key_env: Optional[str] = ApiKeyEnvOpt,
    strategy: Optional[str] = StrategyOpt,
    shots: Optional[int] = ShotsOpt,
    rationale: Optional[bool] = RationaleOpt,
    samples: Optional[int] = SamplesOpt,
    concurrency: Optional[int] = ConcurrencyOpt,
    dry_run: bool = DryRunOpt,
):
    """Cross-validated agreement with gold (or --test FILE) -> evals/<timestamp>-<model>/."""
    from classify.evaluate import compute_metrics, cross_validate, evaluate_on_test, train_test_leaks
    from classify.models import ModelSpecError
    from classify.compare import CompareError, load_run_metrics
    from classify.report import write_eval

    if task not in ("labels", "screening"):
        _fail(f"--task must be labels or screening, not {task!r}")
    if compare is not None:
        try:
            load_run_metrics(compare)  # fail before spending minutes on the evaluation
        except CompareError as e:
            _fail(str(e))
    tax, g = _task_gold(task, taxonomy, gold)
    llm = _llm_extra(model, dry_run, base_url=base_url, api_key_env=api_key_env, strategy=strategy, k=shots,
                     rationale=rationale, samples=samples, concurrency=concurrency)
    options = _options(encoder, no_discussion, opt, seed=seed, batch_size=batch_size, **llm)
    if dry_run:
        import numpy as np

        from classify.models import make_classifier

        try:
            clf = make_classifier(model, tax, options)
        except (ModelSpecError, ValueError) as e:
            _fail(str(e))
        recs = _task_gold(task, taxonomy, test)[1].records if test else g.records
        if not test and limit is not None and limit < len(g):
            recs = [g.records[int(i)] for i in np.random.default_rng(seed).permutation(len(g))[:limit]]
        _dry_run(clf, g, recs, "" if test else "(few-shot examples here come from all of gold; cross-validation takes "
                 "them from the training folds: same request count, similar tokens)")
        return
    given_folds, folds_note = None, None
    if compare is not None and not test:
        from classify.compare import previous_folds

        # Same split as the earlier run: a kappa change then comes from the labels, not the folds.
        given_folds, folds_note = previous_folds(compare, g.ids, folds)
        err.print(folds_note)
    try:
        if test:
            res = evaluate_on_test(model, g, _task_gold(task, taxonomy, test)[1], options)
        else:
            err.print(f"{model}: {folds}-fold cross-validation on {len(g)} gold records", markup=False)
            res = cross_validate(model, g, options, k=folds, seed=seed, limit=limit,
                                 progress=lambda f, k: err.print(f"  fold {f}/{k} done"), folds=given_folds)
            leaks = train_test_leaks(res)
            if leaks:  # cannot happen by construction; refuse to report a leaky evaluation
                _fail(f"evaluation leak: {len(leaks)} records predicted by a model trained on them")
    except (ModelSpecError, ValueError, *_llm_errors()) as e:
        _fail(str(e))
    metrics = compute_metrics(res, n_boot=n_boot, seed=seed)
    if compare is not None:
        from classify.compare import compare_metrics

        new_meta = {"model": model, "taxonomy_fingerprint": res.gold.taxonomy.fingerprint(), "gold_hash": res.gold.hash}
        new_gold = {r.id: {d: res.gold.labels[d][i] for d in res.gold.taxonomy.dimension_ids}
                    for i, r in enumerate(res.gold.records)}
        metrics["comparison"] = compare_metrics(metrics, new_meta, compare, new_gold)
        metrics["comparison"]["folds"] = folds_note
    # Options name the run in `classify leaderboard` (same spec, other encoder = other row).
    out = write_eval(res, metrics, out_dir, extra_meta={"options": options.run_meta()})
    _print_metrics(metrics, model, out)
    if compare is not None:
        _print_comparison(metrics["comparison"])


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
    base_url: Optional[str] = BaseUrlOpt,
    api_key_env: Optional[str] = ApiKeyEnvOpt,
    strategy: Optional[str] = StrategyOpt,
    shots: Optional[int] = ShotsOpt,
    rationale: Optional[bool] = RationaleOpt,
    samples: Optional[int] = SamplesOpt,
    concurrency: Optional[int] = ConcurrencyOpt,
    dry_run: bool = DryRunOpt,
):
    """Train on gold and label every record of --input, with provenance on each row. Resumable."""
    from tqdm import tqdm

    from classify.models import ModelSpecError, make_classifier
    from classify.records import RecordsError, read_records
    from classify.run import (RunError, input_fingerprint, label_records, partial_path,
                              provenance_for, run_signature, strip_label_fields)

    t0 = time.perf_counter()
    tax = _load_tax(taxonomy)
    llm = _llm_extra(model, dry_run, base_url=base_url, api_key_env=api_key_env, strategy=strategy, k=shots,
                     rationale=rationale, samples=samples, concurrency=concurrency)
    if out.exists() and not force and not dry_run:
        _fail(f"{out} exists; pass --force to overwrite it")
    if force and not dry_run:
        partial_path(out).unlink(missing_ok=True)
    try:
        records = strip_label_fields(read_records(input), tax.dimension_ids)
    except RecordsError as e:
        _fail(str(e))
    g = _load_gold(gold, tax)
    options = _options(encoder, no_discussion, opt, seed=seed, progress=False, batch_size=batch_size, **llm)
    try:
        clf = make_classifier(model, tax, options)
    except (ModelSpecError, ValueError) as e:
        _fail(str(e))
    if dry_run:
        _dry_run(clf, g, records, "(--screen would send fewer: only records screened as failure reports)" if screen else "")
        return
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
    err.print(f"training {model} on {len(g)} gold records ({tax.label})", markup=False)
    clf.fit(g.records, g.labels)
    prov = provenance_for(clf, g)
    if screen:
        prov["screening_model"] = f"{screen_model} ({s_tax.label}, gold {s_gold.hash})"
        prov["screening_taxonomy"] = s_tax.label  # the screening labels' own taxonomy (review build --labels checks it)
    enc_bar = tqdm(total=len(records), desc="encoding", unit="rec", file=sys.stderr, delay=0.5)
    bar = tqdm(total=len(records), desc="labeling", unit="rec", file=sys.stderr)
    try:
        summary = label_records(clf, records, out, prov, sig, chunk_size=chunk_size, progress=bar.update,
                                screen=screen_fn, prepare_progress=enc_bar.update,
                                screen_prepare=getattr(s_clf, "prepare", None) if screen else None)
    except RunError as e:
        _fail(str(e))
    except _llm_errors() as e:
        _fail(f"{e}\n(finished chunks are kept in the checkpoint: the same command resumes; cached answers are not asked again)")
    finally:
        enc_bar.close()
        bar.close()
    summary.seconds = time.perf_counter() - t0
    inv = ", ".join(f"{d} {n}" for d, n in summary.invalid.items() if n) or "none"
    scr = f"; screened out as not failure reports: {summary.screened_out}" if screen else ""
    err.print(f"wrote {summary.total} rows to {out} ({summary.labeled} labeled now, {summary.resumed} resumed "
              f"from a checkpoint; invalid: {inv}{scr}) in {summary.seconds:.1f} s")
    st = getattr(clf, "stats", None)
    if st is not None and hasattr(st, "cache_hits"):
        err.print(f"LLM requests: {st.requests} sent ({st.retries} retries, {st.failed} given up), "
                  f"{st.cache_hits} answered from the cache; tokens in/out {st.prompt_tokens}/{st.completion_tokens}"
                  + (f"; structured output fallbacks: {'; '.join(st.fallbacks)}" if st.fallbacks else ""))


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


@app.command("logs")
def logs_cmd(
    count: int = typer.Option(20, "--count", "-n", min=1, help="How many recent requests."),
    run_id: Optional[str] = typer.Option(None, "--run", help="Only this run id."),
    as_json: bool = typer.Option(False, "--json", help="JSON lines with messages and responses."),
):
    """Recent LLM requests (newest first): outcome, HTTP status, tokens, latency. From the cache dir's llm.sqlite."""
    from classify.llm.cache import default_db_path, format_logs, list_logs

    rows = list_logs(count, run_id=run_id, full=as_json)
    if as_json:
        for r in rows:
            console.print_json(json.dumps(r, ensure_ascii=False, default=str))
    else:
        console.print(format_logs(rows), highlight=False, markup=False, soft_wrap=True)
        console.print(f"({default_db_path()})", highlight=False)


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


@app.command("learning-curve")
def learning_curve_cmd(
    model: str = ModelOpt,
    gold: Optional[Path] = GoldOpt,
    taxonomy: Optional[Path] = TaxonomyOpt,
    fractions: str = typer.Option("0.2,0.4,0.6,0.8,1", "--fractions", help="Training fractions per fold, comma-separated."),
    target: list[str] = typer.Option([], "--target", help="dimension=kappa to estimate the gold size for, e.g. symptom=0.85 "
                                     "(repeatable; default: the coders' kappa per dimension)."),
    folds: int = FoldsOpt,
    seed: int = typer.Option(0, help="Seed for folds, training samples and bootstrap."),
    n_boot: int = typer.Option(500, min=100, help="Bootstrap resamples for kappa CIs."),
    repeats: int = typer.Option(1, "--repeats", min=1, help="Training samples drawn per fraction below 1, averaged (steadier curve, x time)."),
    out_dir: Path = typer.Option(paths.EVALS_DIR, "--out-dir", help="Root folder for the report."),
    encoder: Optional[str] = EncoderOpt,
    no_discussion: bool = NoDiscOpt,
    batch_size: int = BatchOpt,
    opt: list[str] = OptOpt,
):
    """Cross-validated kappa vs gold size, and a rough estimate of the gold needed for a target kappa."""
    from classify.evaluate import _dims_with_groups
    from classify.learning_curve import extrapolate, learning_curve, parse_fractions, write_curve
    from classify.models import ModelSpecError

    if _uses_llm(model):
        # k folds x every fraction of full LLM runs, for a curve of few-shot pools: refuse.
        _fail("learning-curve trains models on gold; LLM specs (and ensembles with one) learn only from "
              "few-shot examples (use eval --shots)")
    try:
        fr = parse_fractions(fractions)
    except ValueError as e:
        _fail(str(e))
    tax, g = _task_gold("labels", taxonomy, gold)
    names = [name for name, _, _ in _dims_with_groups(g)]  # the names metrics and curves use
    targets: dict[str, float] = {}
    for t in target:
        name, _, val = t.partition("=")
        if name not in names:
            _fail(f"--target {t!r}: unknown dimension {name!r}; one of {', '.join(names)}")
        try:
            targets[name] = float(val)
        except ValueError:
            _fail(f"--target {t!r}: expected dimension=kappa, e.g. symptom=0.85")
    options = _options(encoder, no_discussion, opt, seed=seed, batch_size=batch_size)
    err.print(f"{model}: learning curve, {folds}-fold CV on {len(g)} gold records at fractions {', '.join(f'{f:g}' for f in fr)}",
              markup=False)
    try:
        curve = learning_curve(model, g, options, fr, k=folds, seed=seed, n_boot=n_boot, progress=err.print,
                               repeats=repeats)
    except (ModelSpecError, ValueError) as e:
        _fail(str(e))
    extra = extrapolate(curve, targets or dict(curve["coders"]), folds)
    out = write_curve(curve, extra, out_dir)
    console.print((out / "report.md").read_text(encoding="utf-8"), markup=False, highlight=False)
    console.print(f"wrote {out}")


def main():
    app()


if __name__ == "__main__":
    main()
