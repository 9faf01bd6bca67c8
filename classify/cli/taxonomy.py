"""`classify taxonomy ...` and `classify gold ...`: inspect and validate codebooks and gold sets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from classify.cli.common import GoldPath, TaskOpt, TaxonomyPath, console, plural

taxonomy_app = typer.Typer(no_args_is_help=True, help="Inspect and validate codebooks.")
gold_app = typer.Typer(no_args_is_help=True, help="Inspect and validate gold sets.")


@taxonomy_app.command("show")
def taxonomy_show(
    taxonomy: TaxonomyPath = None,
    definitions: Annotated[bool, typer.Option("--definitions", "-d", help="Also print definitions.")] = False,
) -> None:
    """The codebook as a table: dimensions, groups, categories."""
    from classify.core.taxonomy import load_taxonomy

    tax = load_taxonomy(taxonomy)
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
def taxonomy_validate(path: Path) -> None:
    """Validate a codebook file; exit code 2 with the place and problem when it is malformed."""
    from classify.core.taxonomy import load_taxonomy

    tax = load_taxonomy(path)
    n = sum(len(d.categories) for d in tax.dimensions.values())
    console.print(f"ok: {tax.label}, {plural(len(tax.dimensions), 'dimension')}, {plural(n, 'category', 'categories')}")


@gold_app.command("stats")
def gold_stats(
    gold: GoldPath = None,
    taxonomy: TaxonomyPath = None,
    task: TaskOpt = "labels",
    n_boot: Annotated[int, typer.Option("--n-boot", min=100, help="Bootstrap resamples for the kappa CI.")] = 1000,
) -> None:
    """Gold size, label distribution per dimension, and coder agreement when coded twice."""
    from classify.core.goldfile import load_task
    from classify.evaluation.agreement import agreement_notes, gold_summary

    s = gold_summary(load_task(task, taxonomy, gold)[1], n_boot=n_boot)
    console.print(f"[bold]{s['path']}[/]: {s['n']} records, taxonomy {s['taxonomy']}, content hash {s['hash']}")
    for d, dim in s["dimensions"].items():
        t = Table(
            title=f"{d}: {dim['n']} labeled, {dim['n_missing']} without a label (left out of training/evaluation)"
        )
        t.add_column("category")
        if dim["has_groups"]:
            t.add_column("group")
        t.add_column("n", justify="right")
        t.add_column("%", justify="right")
        for c in dim["categories"]:
            t.add_row(
                *(
                    [c["id"]]
                    + ([c["group"]] if dim["has_groups"] else [])
                    + [str(c["n"]), f"{100 * c['n'] / max(dim['n'], 1):.1f}"]
                )
            )
        console.print(t)
    if s["coders"]:
        t = Table(title="Agreement between the gold set's two coding passes (Cohen's kappa, bootstrap 95% CI)")
        for col in ("dimension", "coders", "n", "kappa", "95% CI"):
            t.add_column(col)
        for name, a in s["coders"].items():
            t.add_row(
                name,
                " vs ".join(a["coders"]),
                f"{a['n']}{' (small)' if a['small'] else ''}",
                "n/a" if a["kappa"] is None else f"{a['kappa']:.3f}",
                "n/a" if a["lo"] is None else f"[{a['lo']:.3f}, {a['hi']:.3f}]",
            )
        console.print(t)
        if s["n_coded_twice"] < s["n"]:
            console.print(
                f"over the {s['n_coded_twice']} of {s['n']} records both passes coded (the others carry one pass)",
                highlight=False,
            )
        for line in agreement_notes(s["coders"]):
            console.print(line, highlight=False)
    else:
        console.print("no second coder in this gold set: coder agreement not available")


@gold_app.command("validate")
def gold_validate(gold: GoldPath = None, taxonomy: TaxonomyPath = None, task: TaskOpt = "labels") -> None:
    """Validate a gold file against a taxonomy (ids, labels)."""
    from classify.core.goldfile import load_task

    tax, g = load_task(task, taxonomy, gold)
    console.print(f"ok: {plural(len(g), 'record')} valid against {tax.label}")
