"""`classify review ...`: build a queue, review it (terminal or spreadsheet), apply the decisions."""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from classify.cli.common import Task, console, fail
from classify.core import paths

review_app = typer.Typer(
    invoke_without_command=True,
    help="Review disagreements and feed the decisions back into new gold and taxonomy versions.",
)

DEFAULT_QUEUE = Path("review") / "queue.json"
QueuePath = Annotated[
    Path,
    typer.Option("--queue", "-q", help="Queue file (from `classify review build`), relative to the current folder."),
]
DecisionsPath = Annotated[
    Optional[Path],
    typer.Option("--decisions", "-d", help="Decisions JSONL (default: decisions.jsonl beside the queue)."),
]
Reviewer = Annotated[
    Optional[str],
    typer.Option("--reviewer", "-r", help="Your name for the history (default: $CLASSIFY_REVIEWER or your login)."),
]
QueueGold = Annotated[
    Optional[Path], typer.Option("--gold", "-g", help="Gold file (default: the one the queue was built from).")
]
QueueTaxonomy = Annotated[
    Optional[Path], typer.Option("--taxonomy", "-t", help="Codebook (default: the one the queue was built from).")
]


def _reviewer(name: str | None) -> str:
    if name:
        return name
    env = os.environ.get("CLASSIFY_REVIEWER")
    if env:
        return env
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "reviewer"


def _show(p: Path | str | None) -> str:
    """A path as the user would type it: relative to the current folder when inside it."""
    if p is None:
        return "-"
    p = Path(p)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _decisions_path(queue: Path, decisions: Path | None) -> Path:
    return decisions or queue.parent / "decisions.jsonl"


def _not_an_input(out: Path, inputs: list, flag: str) -> None:
    """An output that resolves to one of the command's inputs is refused before anything is written."""
    from classify.core.errors import UsageError
    from classify.core.paths import refuse_output_over_inputs

    try:
        refuse_output_over_inputs(out, inputs, flag=flag)
    except UsageError as e:
        fail(str(e))


def _queue_inputs(queue_path: Path) -> list:
    """The queue and the gold and codebook it was built from: what the review commands read."""
    from classify.review.schema import QueueError, load_queue

    try:
        q = load_queue(queue_path)
    except QueueError:
        return [queue_path]  # the command itself reports the broken queue
    return [queue_path, q.meta.gold_path, q.meta.taxonomy_path]


def _load(queue_path: Path, gold: Path | None, taxonomy: Path | None):
    """Queue, taxonomy and gold, checked to belong together."""
    from classify.core.goldfile import load_gold_for
    from classify.core.records import RecordsError
    from classify.core.taxonomy import TaxonomyError, load_taxonomy
    from classify.review.queue import check_queue_matches
    from classify.review.schema import QueueError, load_queue

    try:
        q = load_queue(queue_path)
        tax = load_taxonomy(taxonomy or q.meta.taxonomy_path)
        g = load_gold_for(gold or q.meta.gold_path, tax)
        check_queue_matches(q, g)
    except (QueueError, TaxonomyError, RecordsError) as e:
        fail(str(e))
    return q, tax, g


@review_app.callback()
def review_main(
    ctx: typer.Context,
    queue: QueuePath = DEFAULT_QUEUE,
    decisions: DecisionsPath = None,
    reviewer: Reviewer = None,
):
    """Without a sub-command: the interactive session on --queue (same as `classify review session`)."""
    if ctx.invoked_subcommand is None:
        session(queue=queue, decisions=decisions, reviewer=reviewer, gold=None, taxonomy=None, revisit_skipped=False)


@review_app.command("build")
def build(
    eval_runs: Annotated[
        list[Path], typer.Option("--eval", "-e", help="Eval run folder (evals/<run>); repeatable.")
    ] = [],
    labels: Annotated[
        list[Path], typer.Option("--labels", "-l", help="`classify run` output on unlabeled data; repeatable.")
    ] = [],
    inputs: Annotated[
        list[Path],
        typer.Option(
            "--input",
            "-i",
            help=f"Records the --labels files were made from (default: data/issues.jsonl {paths.DEFAULTS_NOTE}).",
        ),
    ] = [],
    notes: Annotated[
        Optional[Path],
        typer.Option(
            "--notes",
            help="Adjudication notes (JSONL with id + note, e.g. gold/adjudication.jsonl): queue items whose note has a CODEBOOK: proposal.",
        ),
    ] = None,
    task: Annotated[
        Optional[Task],
        typer.Option(
            "--task",
            help="labels (default) or screening: shorthand for -t codebook/screening-v1.yaml, as in `classify eval --task screening`.",
        ),
    ] = None,
    gold: Annotated[
        Optional[Path],
        typer.Option(
            "--gold",
            "-g",
            help="Gold set (default: the taxonomy's: gold/reports.jsonl, or gold/screening.jsonl for a screening taxonomy "
            f"{paths.DEFAULTS_NOTE}).",
        ),
    ] = None,
    taxonomy: Annotated[
        Optional[Path],
        typer.Option(
            "--taxonomy",
            "-t",
            help="Codebook (default: codebook/taxonomy-v1.yaml; with --task screening codebook/screening-v1.yaml "
            f"{paths.DEFAULTS_NOTE}).",
        ),
    ] = None,
    dimension: Annotated[
        list[str], typer.Option("--dimension", help="Only these dimensions (repeatable; default all).")
    ] = [],
    min_confidence: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="--labels: queue labels below this confidence.")
    ] = 0.5,
    no_cleanlab: Annotated[
        bool, typer.Option("--no-cleanlab", help="Skip cleanlab's likely-mislabeled check on eval runs.")
    ] = False,
    max_items: Annotated[Optional[int], typer.Option(min=1, help="Keep only the top N items.")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Queue file to write.")] = DEFAULT_QUEUE,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite an existing queue (decisions made on it may become stale).")
    ] = False,
):
    """Collect the items worth a human look, each with its reasons, most instructive first."""
    from classify.core.goldfile import is_screening, load_gold_for
    from classify.core.records import RecordsError
    from classify.core.taxonomy import TaxonomyError, load_taxonomy
    from classify.review.queue import build_queue
    from classify.review.schema import QueueError, save_queue

    try:
        # The taxonomy decides how gold is read (goldfile.py); --task only picks the default codebook.
        tax = load_taxonomy(taxonomy or (paths.default_screening_taxonomy() if task == "screening" else None))
        if task is not None and is_screening(tax) != (task == "screening"):
            fail(
                f"--task {task} does not fit {tax.path} ({tax.label}): "
                + (
                    "a screening taxonomy has the dimension 'screening' with the category 'failure_report'"
                    if task == "screening"
                    else "it is a screening taxonomy; use --task screening"
                )
            )
        g = load_gold_for(gold, tax)
        if labels and not inputs:
            inputs = [paths.default_input()]
        _not_an_input(out, [g.path, tax.path, notes, *eval_runs, *labels, *inputs], "--out")
        if out.exists() and not force:
            fail(f"{out} exists; decisions may refer to it. Pass --force to replace it, or --out another file")
        q, counts = build_queue(
            g, eval_runs, labels, inputs, notes, dimension or None, min_confidence, not no_cleanlab, max_items
        )
    except (QueueError, TaxonomyError, RecordsError) as e:
        fail(str(e))
    save_queue(q, out)
    console.print(
        f"wrote {out}: {len(q.items)} items ({tax.label}, gold {g.hash}); reasons: "
        + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"),
        highlight=False,
    )
    t = Table(
        title="first items, most urgent first",
        caption="priority: the weight of the item's strongest reason to look again, plus a bonus for each "
        "further kind of reason (docs/review.md)",
    )
    for c in ("#", "id", "dimension", "priority", "gold label", "reasons"):
        t.add_column(c)
    for i, it in enumerate(q.items[:10], 1):
        t.add_row(
            str(i),
            it.id,
            it.dimension,
            f"{it.score:.2f}",
            it.gold if it.gold is not None else ("not shown" if it.in_gold else "not in gold"),
            ", ".join(sorted({r.kind.replace("_", " ") for r in it.reasons})),
        )
    console.print(t)


@review_app.command("session")
def session(
    queue: QueuePath = DEFAULT_QUEUE,
    decisions: DecisionsPath = None,
    reviewer: Reviewer = None,
    gold: QueueGold = None,
    taxonomy: QueueTaxonomy = None,
    revisit_skipped: Annotated[bool, typer.Option("--revisit-skipped", help="Show skipped items again.")] = False,
):
    """Review the queue one item at a time; every decision is saved at once, so you can stop anywhere."""
    from classify.review.decisions import DecisionsError
    from classify.review.session import Session, Terminal

    q, tax, g = _load(queue, gold, taxonomy)
    path = _decisions_path(queue, decisions)
    _not_an_input(path, [queue, g.path, tax.path], "--decisions")
    s = Session(q, tax, path, _reviewer(reviewer), Terminal(console), console)
    try:
        res = s.run(revisit_skipped=revisit_skipped)
    except DecisionsError as e:
        fail(f"{e}\nFix or move the decisions file before resuming.")
    state = "stopped" if res.stopped else "queue done"
    console.print(
        f"{state}: {res.decided} decisions saved to {path} in this session; {res.remaining} items left "
        f"of {res.total}" + (" (run the same command to continue)" if res.remaining else ""),
        highlight=False,
    )


@review_app.command("status")
def status(queue: QueuePath = DEFAULT_QUEUE, decisions: DecisionsPath = None):
    """How far the review is: decisions per action, proposals made."""
    from collections import Counter

    from classify.review.decisions import DecisionsError, check_decisions, read_decisions

    q, tax, _ = _load(queue, None, None)
    path = _decisions_path(queue, decisions)
    try:
        eff = check_decisions(read_decisions(path)[0], q, tax, str(path))
    except DecisionsError as e:
        fail(str(e))
    c = Counter(d.action for d in eff)
    console.print(
        f"{queue}: {len(q.items)} items, {len(eff)} decided ("
        + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
        + f"), {sum(1 for d in eff if d.proposals)} "
        f"with a taxonomy proposal",
        highlight=False,
    )


@review_app.command("export")
def export(
    queue: QueuePath = DEFAULT_QUEUE,
    decisions: DecisionsPath = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="CSV file to write.")] = Path("review") / "queue.csv",
):
    """The queue as a CSV sheet (decisions so far filled in) for review in a spreadsheet."""
    from classify.review.decisions import DecisionsError, read_decisions
    from classify.review.schema import QueueError, load_queue
    from classify.review.sheet import export_csv

    try:
        q = load_queue(queue)
        existing = read_decisions(_decisions_path(queue, decisions))[0]
    except (QueueError, DecisionsError) as e:
        fail(str(e))
    _not_an_input(out, [*_queue_inputs(queue), _decisions_path(queue, decisions)], "--out")
    n = export_csv(q, out, existing)
    console.print(
        f"wrote {out}: {n} rows; fill action/label/note (and proposal* columns), then `classify review import {out}`",
        highlight=False,
    )


@review_app.command("import")
def import_(
    sheet: Annotated[Path, typer.Argument(help="The filled CSV sheet.")],
    queue: QueuePath = DEFAULT_QUEUE,
    decisions: DecisionsPath = None,
    reviewer: Reviewer = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace the decisions file instead of adding to it.")
    ] = False,
):
    """Read a filled sheet into the decisions file; a sheet with any bad row changes nothing."""
    from classify.review.decisions import DecisionsError
    from classify.review.sheet import import_csv

    q, tax, g = _load(queue, None, None)
    path = _decisions_path(queue, decisions)
    _not_an_input(path, [sheet, queue, g.path, tax.path], "--decisions")
    try:
        new, same = import_csv(sheet, q, tax, path, _reviewer(reviewer), replace=replace)
    except DecisionsError as e:
        fail(str(e))
    console.print(f"imported {sheet}: {new} new or changed decisions, {same} unchanged -> {path}", highlight=False)


@review_app.command("apply")
def apply(
    queue: QueuePath = DEFAULT_QUEUE,
    decisions: DecisionsPath = None,
    gold: QueueGold = None,
    taxonomy: QueueTaxonomy = None,
    out_gold: Annotated[
        Optional[Path], typer.Option("--out-gold", help="New gold file (default: <gold>.v<N+1>.jsonl beside it).")
    ] = None,
    out_taxonomy: Annotated[
        Optional[Path],
        typer.Option("--out-taxonomy", help="New codebook (default: taxonomy-v<version>.yaml beside it)."),
    ] = None,
    version: Annotated[
        Optional[str], typer.Option("--version", help="New taxonomy version (default: current + 1).")
    ] = None,
    note: Annotated[
        Optional[str], typer.Option("--note", help="A note for this version's changelog release entry.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check and show what would change; write nothing.")
    ] = False,
):
    """Write a new gold version (with per-item history) and, if proposals were made, a new taxonomy version."""
    from classify.core.goldfile import is_screening
    from classify.review.apply import ApplyError, next_gold_path, next_taxonomy_path, plan_apply, write_plan
    from classify.review.decisions import DecisionsError, read_decisions

    q, tax, g = _load(queue, gold, taxonomy)
    path = _decisions_path(queue, decisions)
    gold_path = Path(_show(g.path))
    out_gold = out_gold or next_gold_path(gold_path)
    try:
        decs, _ = read_decisions(path)
        if not decs:
            fail(f"{path}: no decisions to apply")
        based_on = {"previous": _show(tax.path), "gold": _show(out_gold), "decisions": _show(path)}
        plan = plan_apply(q, decs, g, new_version=version, release_note=note, based_on=based_on)
    except (DecisionsError, ApplyError) as e:
        fail(str(e))
    if plan.taxonomy_raw is None:
        unused = [f for f, v in (("--version", version), ("--out-taxonomy", out_taxonomy), ("--note", note)) if v]
        if unused:
            fail(f"{', '.join(unused)}: no decision proposes a codebook change, so no taxonomy version is written")
    new_tax_path = None
    if plan.taxonomy_raw is not None:
        new_tax_path = out_taxonomy or next_taxonomy_path(Path(_show(tax.path)), plan.taxonomy.version)
    t = Table(title=f"label changes ({len(plan.changed)})")
    for c in ("id", "dimension", "old", "new", "why"):
        t.add_column(c)
    for rid, dim, old, new, why in plan.changed:
        t.add_row(rid, dim, str(old), str(new), why)
    console.print(t)
    for ch in plan.changes:
        console.print(f"taxonomy: {ch.proposal.describe()}  <- {', '.join(ch.items)}", highlight=False)
    console.print(
        f"{plan.confirmed} gold labels confirmed, {plan.ambiguous} marked ambiguous, {len(plan.added)} new items added",
        highlight=False,
    )
    if dry_run:
        console.print("dry run: nothing written", highlight=False)
        return
    try:
        for note in write_plan(plan, out_gold, new_tax_path, tax.path):
            console.print(f"[yellow]{note}[/]", highlight=False)
    except ApplyError as e:
        fail(str(e))
    tax_arg = new_tax_path or _show(tax.path)
    task_arg = "--task screening " if is_screening(tax) else ""
    console.print(
        f"wrote {out_gold} ({len(plan.gold_rows)} records, valid against {plan.taxonomy.label})"
        + (f" and {new_tax_path} ({plan.taxonomy.label})" if new_tax_path else "")
        + f"\nre-evaluate: classify eval {task_arg}-g {out_gold} -t {tax_arg} --compare <previous eval run>",
        highlight=False,
    )
