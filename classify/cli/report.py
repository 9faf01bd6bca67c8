"""`classify report`: corpus shares of a labels file, corrected for the model's errors, with the
HTML report and an optional comparison with published shares."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from classify.cli.common import GoldPath, Seed, TaxonomyPath, console, err


def _pct(v: float | None) -> str:
    return "-" if v is None or math.isnan(v) else f"{100 * v:.2f}%"


def report_cmd(
    labels: Annotated[Path, typer.Argument(help="A labels file written by `classify run`.")],
    taxonomy: TaxonomyPath = None,
    gold: GoldPath = None,
    input: Annotated[
        Optional[Path], typer.Option("--input", "-i", help="The labeled input, for example titles and links.")
    ] = None,
    out_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--out-dir",
            help="Folder for corpus.json, PNGs and report.html (default: beside the labels, named after them without "
            "the extension: labels.jsonl -> labels.report/).",
        ),
    ] = None,
    reference: Annotated[
        Optional[Path],
        typer.Option(
            "--reference",
            help="Published shares to compare with (YAML: dimension, category, share, source), e.g. references/seed-study.yaml.",
        ),
    ] = None,
    bootstrap: Annotated[
        int, typer.Option("--bootstrap", min=0, help="Bootstrap resamples of gold and corpus for the intervals.")
    ] = 1000,
    no_correct: Annotated[
        bool, typer.Option("--no-correct", help="Count labels only (Wilson intervals); skip the gold profile.")
    ] = False,
    method: Annotated[
        Optional[str],
        typer.Option(
            "--method",
            help="Quantification method for every dimension: CC, PCC, ACC, PACC or EMQ (default: chosen per "
            "dimension on shifted gold). The chosen method's measured error is reported either way.",
        ),
    ] = None,
    seed: Seed = 0,
) -> None:
    """Shares of symptoms and root causes (and groups), corrected for the model's errors on gold,
    beside the counts, per library and overall; report.html for reading and citing."""
    from classify.core.taxonomy import load_taxonomy
    from classify.report import write_corpus_report

    tax = load_taxonomy(taxonomy)
    out = out_dir or labels.with_name(labels.stem + ".report")
    stats = write_corpus_report(
        labels,
        tax,
        out,
        input,
        reference=reference,
        gold_path=gold,
        correct=not no_correct,
        n_boot=bootstrap,
        seed=seed,
        method=method,
    )
    from classify.report.methods import plain_method
    from classify.report.stats import WEAK_KAPPA

    for w in stats.get("warnings") or []:
        err.print(f"warning: {w}", markup=False, highlight=False)
    if not stats.get("screened", True):
        err.print(
            "warning: these labels were not screened: every thread counts as a failure report, though questions "
            "and requests may be among them (label with `classify run --screen`)",
            markup=False,
            highlight=False,
        )
    elif stats.get("n_unscreened"):
        err.print(
            f"warning: {stats['n_unscreened']} of {stats['n_rows']} rows were never screened: they count as failure "
            "reports unchecked (label them with `classify run --screen`)",
            markup=False,
            highlight=False,
        )
    for d, k in (stats.get("weak_model") or {}).items():
        err.print(
            f"warning: {d}: the model's kappa on gold is {k:.2f} (under {WEAK_KAPPA}: it barely beats chance); "
            f"its {'corrected shares' if stats.get('corrected') else 'label counts'} say little",
            markup=False,
            highlight=False,
        )
    ref = stats.get("reference")
    if ref and ref.get("warning"):
        err.print(f"warning: {ref['warning']}", markup=False, highlight=False)
    screened = (
        f"{stats['n_failure_reports']} failure reports, {stats['n_screened_out']} screened out"
        + (f" ({stats['n_screened_out_review']} awaiting review)" if stats.get("n_screened_out_review") else "")
        + (f", {stats['n_unscreened']} never screened" if stats.get("n_unscreened") else "")
        if stats.get("screened", True)
        else "not screened"
    )
    console.print(f"{stats['n_rows']} rows, {screened}; libraries: {stats['libraries']}")
    for name, d in stats["dimensions"].items():
        c = d["correction"]
        on = " on groups" if c.get("measured_on") == "groups" else ""
        how = (
            f"corrected: {plain_method(c['method'])} ({c['method']}{', --method' if c.get('chosen_by') == 'user' else ''}); "
            f"on shifted gold it missed the true shares by {100 * c['error']:.1f} percentage points{on} on average, "
            f"counting labels by {100 * c['naive_error']:.1f}"
            if c["method"] != "none"
            else "counts of labels"
        )
        st = d.get("status") or {}
        if st.get("review"):
            how += f"; {st['review']} await review (counted with the model's suggestion, not yet checked by people)"
        t = Table(title=f"{name}: {how}; n={d['overall']['n']}")
        for col in ("category", "count", "count share", "estimate", "95% interval"):
            t.add_column(col)
        for cat, sh in d["overall"]["shares"].items():
            if sh["estimate"] is None:  # e.g. a category gold never holds
                t.add_row(cat, str(sh["k"]), _pct(sh["naive"]), "n/a", sh.get("note") or "")
                continue
            t.add_row(
                cat, str(sh["k"]), _pct(sh["naive"]), _pct(sh["estimate"]), f"{_pct(sh['lo'])} - {_pct(sh['hi'])}"
            )
        console.print(t)
    if ref:
        t = Table(title=f"published shares ({ref['source'] or ref['path']})")
        for col in ("dimension", "category", "published", "ours [95%]", "difference [95%]", "what it tells"):
            t.add_column(col)
        for r in ref["rows"]:
            diff = "n/a"
            if r["difference"] is not None:
                diff = f"{100 * r['difference']:+.1f} pts"
                if r["difference_lo"] is not None:
                    diff += f" [{100 * r['difference_lo']:+.1f}, {100 * r['difference_hi']:+.1f}]"
            t.add_row(
                r["dimension"],
                r["category"],
                _pct(r["share"]),
                f"{_pct(r['estimate'])} [{_pct(r['lo'])} - {_pct(r['hi'])}]",
                diff,
                r["verdict"],
            )
        console.print(t)
        console.print(ref["summary"])
    console.print(f"report: {out}/report.html")
