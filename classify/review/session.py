"""The interactive review session: one item at a time, a keystroke or two per decision.

Each decision is appended to the decisions file (fsynced) as soon as it is made, so quitting, a
closed terminal or a kill loses at most the item on screen; started again, the session continues
with the first undecided item. In a real terminal a choice is one keystroke; when input is piped
(scripts, tests) each choice is one line, so the session can be driven from a file.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from classify.core.taxonomy import Taxonomy
from classify.core.timestamps import utc_timestamp
from classify.review.decisions import (
    DecisionsError,
    append_decision,
    check_decisions,
    effective,
    read_decisions,
    write_decisions,
)
from classify.review.proposals import new_category_ids
from classify.review.schema import (
    Action,
    AddCategory,
    AddCue,
    Decision,
    EditDefinition,
    Merge,
    NewCategory,
    Queue,
    QueueItem,
    Split,
    validation_message,
)

BODY_CHARS, DISC_CHARS, NOTE_CHARS = 1500, 800, 600
ACTION_KEYS: dict[str, Action] = {"k": "keep", "a": "accept", "s": "set", "?": "ambiguous", "n": "skip"}
HELP = (
    "[bold]\\[k][/]eep gold  [bold]\\[a][/]ccept model label  [bold]\\[s][/]et label  [bold]\\[?][/] ambiguous  "
    "[bold]\\[n][/] skip  [bold]\\[f][/]ull text  [bold]\\[q][/]uit"
)
PROPOSAL_HELP = (
    "{what}? [bold]\\[Enter][/] none  [bold]\\[d][/]efinition  [bold]\\[i][/]nclude cue  "
    "[bold]\\[e][/]xclude cue  [bold]\\[c][/]ategory (new)  [bold]\\[m][/]erge  [bold]\\[p][/] split"
)


class _Back(enum.Enum):
    BACK = enum.auto()


BACK: Final = _Back.BACK  # the reviewer backed out of a prompt: show the item again


class EndOfInput(Exception):
    """The input stream ended (or the reviewer pressed Ctrl-C/Ctrl-D): stop, decisions are saved."""


class Terminal:
    """Reads choices and text. `key_fn`/`line_fn` can be injected; by default a real terminal gives
    single keystrokes (click.getchar) and anything else (a pipe, CliRunner input) gives lines."""

    def __init__(
        self,
        console: Console,
        key_fn: Callable[[], str] | None = None,
        line_fn: Callable[[], str] | None = None,
        single_key: bool | None = None,
    ):
        self.console = console
        self._key_fn = key_fn
        self._line_fn = line_fn or self._readline
        if single_key is None:
            single_key = key_fn is not None or (sys.stdin is not None and sys.stdin.isatty())
        self.single_key = single_key

    @staticmethod
    def _readline() -> str:
        line = sys.stdin.readline()  # sys.stdin looked up per call: CliRunner swaps it
        if line == "":
            raise EndOfInput
        return line.rstrip("\r\n")

    def key(self, prompt: str) -> str:
        self.console.print(prompt + " ", end="", highlight=False)
        if not self.single_key:
            return self._echo(self._line_fn()).strip().lower()
        import click

        ch = (self._key_fn or click.getchar)()
        if ch in ("\x03", "\x04"):
            raise EndOfInput
        ch = "" if ch in ("\r", "\n") else ch
        self.console.print(ch, highlight=False)
        return ch.lower()

    def line(self, prompt: str, default: str = "") -> str:
        if prompt:
            shown = f"{prompt} \\[{escape(default)}]" if default else prompt
            self.console.print(shown + ": ", end="", highlight=False)
        text = (self._echo(self._line_fn()) if not self.single_key else self._line_fn()).strip()
        return text or default

    def _echo(self, text: str) -> str:
        # piped input is not echoed by a terminal: print it so a transcript reads like a session
        self.console.print(escape(text), highlight=False)
        return text


@dataclass
class SessionResult:
    decided: int  # decisions made in this session
    remaining: int  # items still undecided (skips count as decided unless revisiting)
    total: int
    stopped: bool  # the reviewer quit or input ended before the queue was done


def _short(text: str, n: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= n else text[:n].rstrip() + f" ... [{len(text) - n} more chars, f: full text]"


def show_item(console: Console, it: QueueItem, pos: int, total: int, full: bool = False) -> None:
    r = it.record
    console.rule(f"[{pos}/{total}] {it.id} . {it.dimension} . priority {it.score:.2f}")
    for rs in it.reasons:
        # a codebook note is printed in full below with the adjudication note
        n = 10**6 if full else (160 if rs.kind == "codebook_note" and it.adjudication_note else NOTE_CHARS)
        console.print(f"  reason: [bold]{rs.kind}[/] - {escape(_short(rs.detail, n))}", highlight=False)
    console.print(f"[bold]{escape(r.get('title') or '')}[/]  {escape(r.get('url') or '')}", highlight=False)
    console.print(
        escape(r.get("body") or "") if full else escape(_short(r.get("body") or "", BODY_CHARS)), highlight=False
    )
    if r.get("discussion"):
        disc = r["discussion"] if full else _short(r["discussion"], DISC_CHARS)
        console.print(f"[italic]discussion:[/] {escape(disc)}", highlight=False)
    gold = it.gold if it.in_gold else "(not a gold item)"
    coders = "  ".join(f"{c}={v}" for c, v in it.coders.items())
    console.print(f"gold {it.dimension}: [bold]{gold}[/]" + (f"   coders: {coders}" if coders else ""), highlight=False)
    if it.adjudication_note:
        note = it.adjudication_note if full else _short(it.adjudication_note, NOTE_CHARS)
        console.print(f"[italic]adjudication note:[/] {escape(note)}", highlight=False)
    for j, m in enumerate(it.models, 1):
        conf = "?" if m.confidence is None else f"{m.confidence:.2f}"
        pg = f", p(gold)={m.p_gold:.2f}" if m.p_gold is not None else ""
        lab = m.label if m.label is not None else f"(no label: {m.status})"
        console.print(
            f"  model {j}: {escape(m.model)} [{escape(m.source)}] -> [bold]{lab}[/] ({conf}{pg})", highlight=False
        )
        if m.rationale:
            console.print(
                f"      rationale: {escape(m.rationale if full else _short(m.rationale, NOTE_CHARS))}", highlight=False
            )


class Session:
    def __init__(
        self, queue: Queue, taxonomy: Taxonomy, decisions_path: Path, reviewer: str, term: Terminal, console: Console
    ):
        self.queue, self.tax, self.path, self.reviewer = queue, taxonomy, Path(decisions_path), reviewer
        self.term, self.console = term, console
        self.decisions: list[Decision] = []

    # -------------------------------------------------------------- labels

    def labels(self, dim: str) -> list[str]:
        extra = sorted(new_category_ids(self.decisions).get(dim, set()) - set(self.tax.dimensions[dim].ids))
        return self.tax.dimensions[dim].ids + extra

    def ask_label(self, it: QueueItem) -> tuple[str | Literal[_Back.BACK] | None, AddCategory | None]:
        """A label by number or id ('-': no label); an unknown id may be created as a new category."""
        labels = self.labels(it.dimension)
        self.console.print("  " + "  ".join(f"{i}) {c}" for i, c in enumerate(labels, 1)), highlight=False)
        while True:
            ans = self.term.line(f"{it.dimension} label (number or id, '-' for no label, Enter: back)")
            if ans == "":
                return BACK, None
            if ans == "-":
                return None, None
            if ans.isdigit() and 1 <= int(ans) <= len(labels):
                return labels[int(ans) - 1], None
            if ans in labels:
                return ans, None
            if ans and self.term.key(f"  {ans!r} is not a category: propose it as a new category? \\[y/n]") == "y":
                prop = self.ask_new_category(it.dimension, ans)
                if prop is not None:
                    return ans, prop
            self.console.print("  not a label; try again", highlight=False)

    # -------------------------------------------------------------- proposals

    def ask_new_category(self, dim: str, cid: str | None = None):
        d = self.tax.dimensions[dim]
        cid = cid or self.term.line("new category id")
        name = self.term.line("name", cid.replace("_", " ").capitalize())
        group = None
        if d.groups:
            group = self.term.line(f"group ({', '.join(d.groups)})", next(iter(d.groups)))
        definition = self.term.line("definition")
        include = [t for t in [self.term.line("an include cue (Enter: none)")] if t]
        return AddCategory(
            dimension=dim, category=NewCategory(id=cid, name=name, group=group, definition=definition, include=include)
        )

    def ask_proposal(self, it: QueueItem, label: str | None, first: bool = True):
        dim = it.dimension
        default = label or it.gold or ""
        k = self.term.key(PROPOSAL_HELP.format(what="taxonomy proposal" if first else "another proposal"))
        if k in ("", "x"):
            return None
        if k == "d":
            cat = self.term.line("category", default)
            return EditDefinition(dimension=dim, category=cat, definition=self.term.line("new definition"))
        if k in ("i", "e"):
            cat = self.term.line("category", default)
            return AddCue(
                dimension=dim,
                category=cat,
                cue="include" if k == "i" else "exclude",
                text=self.term.line(f"{'include' if k == 'i' else 'exclude'} cue"),
            )
        if k == "c":
            return self.ask_new_category(dim)
        if k == "m":
            pair = ",".join(dict.fromkeys(x for x in (it.gold, label) if x))
            cats = [
                c.strip() for c in self.term.line("categories to merge (comma-separated)", pair).split(",") if c.strip()
            ]
            into = self.term.line("merge into", cats[0] if cats else "")
            name = definition = None
            if into not in cats:
                name = self.term.line("name of the merged category", into.replace("_", " ").capitalize())
                definition = self.term.line("definition of the merged category")
            return Merge(dimension=dim, categories=cats, into=into, name=name, definition=definition)
        if k == "p":
            cat = self.term.line("category to split", it.gold or default)
            ids = [c.strip() for c in self.term.line("new categories (comma-separated ids)").split(",") if c.strip()]
            new_cats = [NewCategory(id=c, definition=self.term.line(f"definition of {c}")) for c in ids]
            mapping = {}
            if it.in_gold and it.gold == cat:
                mapping[it.id] = self.term.line(f"new label of {it.id}", ids[0] if ids else "")
            more = self.term.line("other items: id=label, ... (Enter: none; apply lists any left out)")
            for part in filter(None, (p.strip() for p in more.split(","))):
                if "=" not in part:
                    raise ValueError(f"mapping entry {part!r} is not id=label")
                a, b = part.split("=", 1)
                mapping[a.strip()] = b.strip()
            return Split(dimension=dim, category=cat, into=new_cats, mapping=mapping)
        raise ValueError(f"unknown proposal key {k!r}")

    # -------------------------------------------------------------- one item

    def decide(self, it: QueueItem, pos: int, total: int) -> Decision | None:
        """Ask until a valid decision is made; None means quit."""
        full = False
        while True:
            show_item(self.console, it, pos, total, full)
            k = self.term.key(HELP)
            if k == "q":
                return None
            if k == "f":
                full = True
                continue
            action = ACTION_KEYS.get(k)
            if action is None:
                self.console.print(f"  unknown key {k!r}", highlight=False)
                continue
            label, source, proposals = None, None, []
            if action == "keep" and not it.in_gold:
                self.console.print("  this item has no gold label: accept a model's label or set one", highlight=False)
                continue
            if action == "accept":
                opts = it.model_labels()
                if not opts:
                    self.console.print("  no model gave a label", highlight=False)
                    continue
                label = opts[0]
                if len(opts) > 1:
                    self.console.print("  " + "  ".join(f"{i}) {o}" for i, o in enumerate(opts, 1)), highlight=False)
                    ch = self.term.key("  which label?")
                    if not (ch.isdigit() and 1 <= int(ch) <= len(opts)):
                        self.console.print("  not one of the choices", highlight=False)
                        continue
                    label = opts[int(ch) - 1]
                source = ", ".join(sorted({m.model for m in it.models if m.label == label}))
            elif action == "set":
                answer, prop = self.ask_label(it)
                if answer is BACK:
                    continue
                label = answer
                proposals += [prop] if prop is not None else []

            # Called within this iteration only, so the loop variables it reads are this item's.
            def decision(props) -> Decision:
                return Decision(
                    id=it.id,
                    dimension=it.dimension,
                    action=action,  # noqa: B023
                    gold=it.gold,
                    label=label if action in ("accept", "set") else None,  # noqa: B023
                    source=source,  # noqa: B023
                    note=note,  # noqa: B023
                    proposals=props,
                    reviewer=self.reviewer,
                    decided_at=utc_timestamp(),
                )

            note = ""
            if action != "skip":
                note = self.term.line("note (Enter: none)")
                while True:  # any number of proposals, each checked against the codebook as it is made
                    try:
                        prop = self.ask_proposal(it, label, first=not proposals)
                        if prop is None:
                            break
                        check_decisions(
                            self.decisions + [decision(proposals + [prop])], self.queue, self.tax, "this proposal"
                        )
                        proposals.append(prop)
                        self.console.print(f"  proposal noted: {escape(prop.describe())}", highlight=False)
                    except (ValidationError, ValueError) as e:
                        msg = validation_message(e) if isinstance(e, ValidationError) else str(e)
                        self.console.print(f"  [red]proposal not recorded:[/] {escape(msg)}", highlight=False)
            try:
                d = decision(proposals)
                check_decisions(self.decisions + [d], self.queue, self.tax, "this decision")
            except ValidationError as e:
                self.console.print(f"  [red]not recorded:[/] {escape(validation_message(e))}", highlight=False)
                continue
            except DecisionsError as e:
                self.console.print(f"  [red]not recorded:[/] {escape(str(e))}", highlight=False)
                continue
            return d

    # -------------------------------------------------------------- the loop

    def run(self, revisit_skipped: bool = False) -> SessionResult:
        existing, torn = read_decisions(self.path, drop_torn_tail=True)
        check_decisions(existing, self.queue, self.tax, str(self.path))  # refuse to build on a bad file
        if torn:
            write_decisions(self.path, existing)
            self.console.print(f"[yellow]dropped a torn last line of {self.path} (interrupted write)[/]")
        self.decisions = list(existing)
        done = {d.key for d in effective(existing, self.queue) if not (revisit_skipped and d.action == "skip")}
        pending = [it for it in self.queue.items if it.key not in done]
        total = len(self.queue.items)
        if existing:
            self.console.print(f"resuming: {len(done)} of {total} items decided, {len(pending)} to go", highlight=False)
        made = 0
        for it in pending:
            pos = self.queue.items.index(it) + 1
            try:
                d = self.decide(it, pos, total)
            except (EndOfInput, KeyboardInterrupt):  # Ctrl-C at a text prompt: stop like q
                self.console.print()
                d = None
            if d is None:
                return SessionResult(made, len(pending) - made, total, True)
            append_decision(self.path, d)
            self.decisions.append(d)
            made += 1
            self.console.print(
                f"  saved: {d.action}"
                + (f" {d.label}" if d.label else "")
                + (f" + {len(d.proposals)} taxonomy proposal(s)" if d.proposals else ""),
                highlight=False,
            )
        return SessionResult(made, 0, total, False)
