"""Spreadsheet round trip: export the queue to CSV, import the filled file as decisions.

One row per item. The reviewer fills `action` (keep, accept, set, ambiguous, skip; or k/a/s/?/n),
`label` (for set, '-' means no label; for accept, only needed when models disagree), `note`, and
optionally a proposal in the `proposal*` columns:

    proposal           proposal_category   proposal_text                    proposal_into / _mapping
    edit_definition    category            the new definition
    add_include        category            the cue
    add_exclude        category            the cue
    add_category       new id              its definition                   (proposal_name, proposal_group)
    merge              "a, b"              definition if `into` is new      into: target id
    split              category            one line per new id: "id: def"   into: "x, y"; mapping: "id=x, id=y"

Further proposals for the same item go in `more_proposals` as a JSON list of proposal objects (the
form the decisions file uses). Import checks every row against the queue and the codebook and
writes nothing if any row is wrong.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from classify.core.records import escape_formula, unescape_formula
from classify.core.taxonomy import Taxonomy
from classify.core.textio import read_text
from classify.core.timestamps import utc_timestamp
from classify.core.writer import atomic_write_text
from classify.review.decisions import DecisionsError, check_decisions, effective, read_decisions, write_decisions
from classify.review.schema import (
    Action,
    AddCategory,
    AddCue,
    Decision,
    EditDefinition,
    Merge,
    NewCategory,
    Proposal,
    Queue,
    Split,
    validation_message,
)

INFO_COLUMNS = [
    "rank",
    "id",
    "dimension",
    "score",
    "reasons",
    "gold",
    "coders",
    "models",
    "title",
    "url",
    "body",
    "discussion",
    "adjudication_note",
]
DECISION_COLUMNS = [
    "action",
    "label",
    "note",
    "proposal",
    "proposal_dimension",
    "proposal_category",
    "proposal_text",
    "proposal_into",
    "proposal_name",
    "proposal_group",
    "proposal_mapping",
    "more_proposals",
    "reviewer",
]
REQUIRED = ["id", "dimension", "gold", "action", "label", "note"]
ACTION_ALIASES: dict[str, Action] = {
    "k": "keep",
    "keep": "keep",
    "a": "accept",
    "accept": "accept",
    "s": "set",
    "set": "set",
    "?": "ambiguous",
    "ambiguous": "ambiguous",
    "n": "skip",
    "skip": "skip",
}
PROPOSAL_ALIASES = {
    "d": "edit_definition",
    "definition": "edit_definition",
    "edit_definition": "edit_definition",
    "i": "add_include",
    "include": "add_include",
    "add_include": "add_include",
    "e": "add_exclude",
    "exclude": "add_exclude",
    "add_exclude": "add_exclude",
    "c": "add_category",
    "category": "add_category",
    "add_category": "add_category",
    "m": "merge",
    "merge": "merge",
    "p": "split",
    "split": "split",
}
NO_LABEL = {"-", "null", "none"}
_PROPOSALS = TypeAdapter(list[Proposal])
CELL_MAX = 30000  # spreadsheet programs cap a cell at 32,767 characters


def _cell(text) -> str:
    text = "" if text is None else str(text)
    # A title or note starting with = + - @ would run as a formula in the reviewer's spreadsheet.
    return escape_formula(text if len(text) <= CELL_MAX else text[:CELL_MAX] + " ...")


def _split_list(text: str) -> list[str]:
    return [p.strip() for p in text.replace(";", ",").replace("\n", ",").split(",") if p.strip()]


def fields_from_proposal(p) -> dict[str, str]:
    if p is None:
        return {}
    f = {"proposal_dimension": p.dimension}
    if isinstance(p, EditDefinition):
        f.update(proposal="edit_definition", proposal_category=p.category, proposal_text=p.definition)
    elif isinstance(p, AddCue):
        f.update(proposal=f"add_{p.cue}", proposal_category=p.category, proposal_text=p.text)
    elif isinstance(p, AddCategory):
        c = p.category
        f.update(
            proposal="add_category",
            proposal_category=c.id,
            proposal_text=c.definition,
            proposal_name=c.name or "",
            proposal_group=c.group or "",
        )
    elif isinstance(p, Merge):
        f.update(
            proposal="merge",
            proposal_category=", ".join(p.categories),
            proposal_into=p.into,
            proposal_name=p.name or "",
            proposal_text=p.definition or "",
        )
    elif isinstance(p, Split):
        f.update(
            proposal="split",
            proposal_category=p.category,
            proposal_into=", ".join(c.id for c in p.into),
            proposal_text="\n".join(f"{c.id}: {c.definition}" for c in p.into),
            proposal_mapping=", ".join(f"{k}={v}" for k, v in p.mapping.items()),
        )
    return f


def proposal_from_fields(f: dict[str, str], dimension: str):
    """A proposal from the flat spreadsheet columns; ValueError/ValidationError when incomplete."""
    kind_raw = (f.get("proposal") or "").strip().lower()
    if not kind_raw:
        return None
    kind = PROPOSAL_ALIASES.get(kind_raw)
    if kind is None:
        raise ValueError(f"unknown proposal {kind_raw!r} (one of {sorted(set(PROPOSAL_ALIASES.values()))})")
    dim = (f.get("proposal_dimension") or "").strip() or dimension
    cat = (f.get("proposal_category") or "").strip()
    text = (f.get("proposal_text") or "").strip()
    into = (f.get("proposal_into") or "").strip()
    name = (f.get("proposal_name") or "").strip() or None
    group = (f.get("proposal_group") or "").strip() or None
    if kind == "edit_definition":
        return EditDefinition(dimension=dim, category=cat, definition=text)
    if kind in ("add_include", "add_exclude"):
        return AddCue(dimension=dim, category=cat, cue="include" if kind == "add_include" else "exclude", text=text)
    if kind == "add_category":
        return AddCategory(dimension=dim, category=NewCategory(id=cat, name=name, group=group, definition=text))
    if kind == "merge":
        return Merge(dimension=dim, categories=_split_list(cat), into=into, name=name, definition=text or None)
    # split: one "id: definition" line per new category
    ids = _split_list(into)
    defs = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            defs[k.strip()] = v.strip()
    missing = [i for i in ids if not defs.get(i)]
    if missing:
        raise ValueError(f"split: proposal_text needs a line 'id: definition' for {missing}")
    mapping = {}
    for part in _split_list(f.get("proposal_mapping") or ""):
        if "=" not in part:
            raise ValueError(f"split mapping entry {part!r} is not id=label")
        a, b = part.split("=", 1)
        mapping[a.strip()] = b.strip()
    return Split(
        dimension=dim, category=cat, into=[NewCategory(id=i, definition=defs[i]) for i in ids], mapping=mapping
    )


def export_csv(queue: Queue, path: str | Path, decisions: Sequence[Decision] = ()) -> int:
    """Write the queue as CSV, decision columns prefilled from earlier decisions."""
    last = {d.key: d for d in effective(list(decisions), queue)}
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=INFO_COLUMNS + DECISION_COLUMNS, extrasaction="ignore")
    w.writeheader()
    for rank, it in enumerate(queue.items, 1):
        r = it.record
        row = {
            "rank": rank,
            "id": it.id,
            "dimension": it.dimension,
            "score": f"{it.score:.3f}",
            "reasons": "\n".join(f"{x.kind}: {x.detail}" for x in it.reasons),
            "gold": it.gold or "",
            "coders": ", ".join(f"{c}={v}" for c, v in it.coders.items()),
            "models": "\n".join(
                f"{m.model} [{m.source}]: {m.label or '(none)'}"
                + (f" ({m.confidence:.2f})" if m.confidence is not None else "")
                + (f" - {m.rationale}" if m.rationale else "")
                for m in it.models
            ),
            "title": r.get("title") or "",
            "url": r.get("url") or "",
            "body": _cell(r.get("body")),
            "discussion": _cell(r.get("discussion")),
            "adjudication_note": it.adjudication_note or "",
        }
        d = last.get(it.key)
        if d is not None:
            row.update(
                action=d.action,
                label="-" if d.action == "set" and d.label is None else (d.label or ""),
                note=d.note,
                reviewer=d.reviewer,
                **fields_from_proposal(d.proposals[0] if d.proposals else None),
            )
            if len(d.proposals) > 1:
                row["more_proposals"] = json.dumps([p.model_dump(exclude_none=True) for p in d.proposals[1:]])
        w.writerow({k: _cell(v) for k, v in row.items()})
    # utf-8 with BOM so spreadsheet programs pick the right encoding
    atomic_write_text(path, "\ufeff" + buf.getvalue())
    return len(queue.items)


def read_csv_decisions(path: str | Path, queue: Queue, reviewer: str) -> list[Decision]:
    """Decisions from a filled sheet; DecisionsError listing every bad row (row numbers as the sheet shows them)."""
    path = Path(path)
    if not path.exists():
        raise DecisionsError(f"{path}: file not found")
    text = read_text(path, DecisionsError)  # invalid UTF-8: an error naming the line
    try:
        # Undo export's formula escaping (a reviewer's own cell starting with ' is undone the same way
        # a spreadsheet program would read it).
        rows = [
            {k: unescape_formula(v) if isinstance(v, str) else v for k, v in row.items()}
            for row in csv.DictReader(io.StringIO(text))
        ]
    except csv.Error as e:
        raise DecisionsError(f"{path}: not a readable CSV file: {e}") from e
    header = rows[0].keys() if rows else next(csv.reader(io.StringIO(text)), [])
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise DecisionsError(f"{path}: missing columns {missing}; export a sheet with `classify review export`")
    index = queue.index()
    problems: list[str] = []
    out: list[Decision] = []
    seen: dict[tuple, int] = {}
    for n, row in enumerate(rows, 2):  # row 1 is the header
        if None in row:
            problems.append(f"row {n}: more cells than columns")
            continue
        action_raw = (row.get("action") or "").strip().lower()
        if not action_raw:
            continue  # not decided yet
        rid, dim = (row.get("id") or "").strip(), (row.get("dimension") or "").strip()
        where = f"row {n} ({rid}/{dim})"
        action = ACTION_ALIASES.get(action_raw)
        if action is None:
            problems.append(f"{where}: unknown action {action_raw!r} (keep, accept, set, ambiguous, skip)")
            continue
        it = index.get((rid, dim))
        if it is None:
            problems.append(f"{where}: not in this queue (stale sheet, or from another queue)")
            continue
        if (rid, dim) in seen:
            problems.append(f"{where}: same item as row {seen[(rid, dim)]}")
            continue
        seen[(rid, dim)] = n
        sheet_gold = (row.get("gold") or "").strip() or None
        if sheet_gold != it.gold:
            problems.append(f"{where}: the sheet shows gold {sheet_gold!r}, the queue {it.gold!r} (stale sheet)")
            continue
        label_raw = (row.get("label") or "").strip()
        label = None
        if action == "set":
            if not label_raw:
                problems.append(f"{where}: set needs a label ('-' for no label)")
                continue
            label = None if label_raw.lower() in NO_LABEL else label_raw
        elif action == "accept":
            opts = it.model_labels()
            if label_raw:
                label = label_raw
            elif len(opts) == 1:
                label = opts[0]
            else:
                problems.append(f"{where}: accept: models give {opts or 'no label'}; put the accepted one in label")
                continue
        elif label_raw and label_raw != (it.gold or ""):
            problems.append(f"{where}: {action} takes no label (got {label_raw!r}); use set to change it")
            continue
        try:
            first = proposal_from_fields(row, dim)
            more = (row.get("more_proposals") or "").strip()
            proposals = ([first] if first else []) + (_PROPOSALS.validate_json(more) if more else [])
            out.append(
                Decision(
                    id=rid,
                    dimension=dim,
                    action=action,
                    label=label,
                    gold=it.gold,
                    source=", ".join(sorted({m.model for m in it.models if m.label == label}))
                    if action == "accept"
                    else None,
                    note=(row.get("note") or "").strip(),
                    proposals=proposals,
                    reviewer=(row.get("reviewer") or "").strip() or reviewer,
                    decided_at=utc_timestamp(),
                )
            )
        except ValidationError as e:
            problems.append(f"{where}: {validation_message(e)}")
        except ValueError as e:
            problems.append(f"{where}: {e}")
    if problems:
        raise DecisionsError(
            f"{path}: rejected, nothing changed. {len(problems)} problem(s): "
            + "; ".join(problems[:15])
            + (f"; ... (+{len(problems) - 15} more)" if len(problems) > 15 else "")
        )
    return out


def _same(a: Decision, b: Decision) -> bool:
    return a.model_dump(exclude={"decided_at", "reviewer"}) == b.model_dump(exclude={"decided_at", "reviewer"})


def import_csv(
    path: str | Path, queue: Queue, taxonomy: Taxonomy, decisions_path: str | Path, reviewer: str, replace: bool = False
) -> tuple[int, int]:
    """Merge a filled sheet into the decisions file. Returns (new or changed decisions, unchanged)."""
    imported = read_csv_decisions(path, queue, reviewer)
    existing = [] if replace else read_decisions(decisions_path)[0]
    last = {d.key: d for d in existing}
    fresh = [d for d in imported if not (d.key in last and _same(d, last[d.key]))]
    combined = existing + fresh
    check_decisions(combined, queue, taxonomy, str(path))
    write_decisions(decisions_path, combined)
    return len(fresh), len(imported) - len(fresh)
