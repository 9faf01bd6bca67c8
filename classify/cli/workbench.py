"""`classify workbench ...`: the browser workbench for coding, agreement, adjudication and review."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from classify.cli.common import TaxonomyPath, console

workbench_app = typer.Typer(no_args_is_help=True, help="Code, adjudicate and review in the browser.")

ProjectDir = Annotated[Path, typer.Option("--project", "-p", help="Project folder (holds workbench.sqlite).")]


@workbench_app.command("serve")
def serve_cmd(
    project: ProjectDir,
    input: Annotated[
        Optional[Path], typer.Option("--input", "-i", help="Records to code: creates the project (new folders only).")
    ] = None,
    coders: Annotated[
        Optional[str], typer.Option("--coders", help="Coder names, comma-separated (new project).")
    ] = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; other than loopback needs coder tokens.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port.")] = 8765,
    taxonomy: TaxonomyPath = None,
    overlap: Annotated[
        Optional[float],
        typer.Option("--overlap", help="Share of items coded by two coders, 0..1 (new project; default 1: all)."),
    ] = None,
    show_suggestions: Annotated[
        bool,
        typer.Option(
            "--show-suggestions", help="Show model suggestions before a coder codes (new project; default: blind)."
        ),
    ] = False,
    queue: Annotated[
        Optional[Path], typer.Option("--queue", help="A review queue (`classify review build`) to open as a task.")
    ] = None,
) -> None:
    """Serve a project (created from --input when new) on http://HOST:PORT/."""
    from classify.workbench.server import ServeOptions, serve

    serve(
        ServeOptions(project, input, coders, host, port, taxonomy, overlap, show_suggestions, queue),
        say=console.print,
    )


@workbench_app.command("tokens")
def tokens_cmd(project: ProjectDir) -> None:
    """Make a new token for every coder (shown once, stored hashed); needed to serve beyond loopback."""
    from classify.workbench.server import make_tokens

    for coder, token in make_tokens(project).items():
        typer.echo(f"{coder}\t{token}")  # plain: a token must be copied exactly
    console.print("give each coder their token; it is not shown again (run this again to replace them all)")


@workbench_app.command("export")
def export_cmd(
    project: ProjectDir,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Gold file: .jsonl, .csv, .parquet or a .hf dataset folder.")
    ],
    force: Annotated[bool, typer.Option("--force", help="Replace --out when it exists.")] = False,
) -> None:
    """Write the settled items as gold (coder_a, coder_b, adjudication_note), as `classify gold validate` reads it."""
    from classify.workbench.server import export_project

    r = export_project(project, out, force)
    console.print(f"wrote {r.path}: {r.n} items, {r.adjudicated} adjudicated", highlight=False)
    for why, ids in r.open_items.items():
        console.print(
            f"left out {len(ids)} ({why}): {', '.join(ids[:8])}{' ...' if len(ids) > 8 else ''}", highlight=False
        )
    if r.unsettled:
        console.print(
            f"coder_a / coder_b left out of every row: {len(r.unsettled)} items both coders coded are not settled, "
            "and the coders' agreement over the settled ones alone would read high; adjudicate them and export again",
            highlight=False,
        )
    if r.queue:
        console.print(
            f"adjudications as review decisions: {r.queue} ({r.n_decisions} decisions, {r.n_proposals} codebook "
            f"proposals); `classify review apply --queue {r.queue}` writes the next gold and codebook versions",
            highlight=False,
        )
    if r.review_problem:
        console.print(
            f"warning: `classify review apply` will refuse the decisions beside the queue until they are fixed or "
            f"moved (they were kept, not dropped): {r.review_problem}",
            highlight=False,
        )
