"""Adjudication and export: settled items become a gold file in the shipped gold's format, and the
adjudication decisions become a review queue + decisions file, so that codebook proposals go
through the review loop's own apply step (`classify review apply`: new gold version with per-item
history, new codebook version with changelog) instead of a second implementation of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from classify.core.gold import gold_from_records, load_gold
from classify.core.paths import refuse_output_over_inputs
from classify.core.records import CORE_FIELDS, to_record
from classify.core.taxonomy import Taxonomy, load_taxonomy
from classify.core.timestamps import utc_timestamp
from classify.core.writer import atomic_write_text, write_rows
from classify.review.decisions import DecisionsError, check_decisions, read_decisions, write_decisions
from classify.review.proposals import Change, ProposalError, apply_changes
from classify.review.schema import Decision as ReviewDecision
from classify.review.schema import Proposal, Queue, QueueItem, QueueMeta, Reason, save_queue, validation_message
from classify.workbench.items import ItemState
from classify.workbench.project import LabelError, Project, ProjectError

_PROPOSAL = TypeAdapter(Proposal)
CODER_KEYS = "ab"  # the shipped gold names its two passes coder_a and coder_b


def check_proposals(proposals: Any, tax: Taxonomy) -> list[dict]:
    """Codebook proposals in the review loop's schema, each checked to fit the codebook."""
    if not isinstance(proposals, list):
        raise LabelError("proposals must be a list", {})
    out = []
    for i, p in enumerate(proposals):
        try:
            prop = _PROPOSAL.validate_python(p)
        except ValidationError as e:
            raise LabelError(f"proposal {i + 1}: {validation_message(e)}", {}) from None
        if prop.dimension not in tax.dimensions:
            raise LabelError(f"proposal {i + 1}: unknown dimension {prop.dimension!r}", {})
        try:
            apply_changes(tax, [Change(proposal=prop)])  # dry run: does it fit this codebook?
        except ProposalError as e:
            raise LabelError(f"proposal {i + 1}: {e}", {}) from None
        out.append(prop.model_dump(mode="json"))
    return out


@dataclass
class ExportResult:
    path: Path
    n: int
    adjudicated: int
    open_items: dict[str, list[str]] = field(default_factory=dict)  # why -> ids left out
    queue: Path | None = None
    n_decisions: int = 0
    n_proposals: int = 0
    # items both coders coded that are not settled: while any is, coder_a / coder_b are left out of
    # every row (the file's coders' agreement would leave out exactly the disagreements and read high)
    unsettled: list[str] = field(default_factory=list)
    # why `classify review apply` will refuse the decisions file (decisions kept from the review folder
    # that the new queue makes stale); None when it will take it
    review_problem: str | None = None


def _coder_fields(st: ItemState) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, name in zip(CODER_KEYS, st.assigned):
        out[f"coder_{key}"] = dict(st.codes[name].labels)
    return out


def _note(st: ItemState) -> str | None:
    if not st.decision:
        return None
    note = st.decision.note
    if st.decision.proposals:
        described = "; ".join(_PROPOSAL.validate_python(p).describe() for p in st.decision.proposals)
        note += f" CODEBOOK: {described}"
    return note


def gold_rows(project: Project) -> tuple[list[dict], dict[str, list[str]], list[ItemState], list[str]]:
    """Rows of every settled item in the shipped gold's format, why the others are left out, the
    adjudicated items, and the unsettled items every assigned coder coded. While there is one, the
    rows carry no coder passes: the open items are the disagreements (or changed codes), and
    `gold stats` / eval over the passes of the settled items only would report a kappa near 1."""
    dims = project.dims
    states = project.states()
    unsettled = [st.id for st in states if st.complete and len(st.assigned) > 1 and st.final(dims) is None]
    rows, adjudicated = [], []
    open_items: dict[str, list[str]] = {}
    for st in states:
        final = st.final(dims)
        if final is None:
            open_items.setdefault(st.open_reason(dims), []).append(st.id)
            continue
        row = {k: st.record.get(k) for k in CORE_FIELDS}
        row.update(final)
        if not unsettled:
            row.update(_coder_fields(st))
        note = _note(st)
        if note:
            row["adjudication_note"] = note
            adjudicated.append(st)
        row["coded_by"] = {k: n for k, n in zip(CODER_KEYS, st.assigned)}
        rows.append(row)
    return rows, open_items, adjudicated, unsettled


def check_out(project: Project, out: Path, force: bool = False) -> None:
    """Refuse to write over the project itself, the files it was made from, or (without `force`)
    anything that exists."""
    meta = project.meta()
    db = Project.path_of(project.folder)
    mine = [db, *(db.with_name(db.name + sfx) for sfx in ("-wal", "-shm", "-journal"))]
    try:
        refuse_output_over_inputs(
            out, [*mine, meta.get("input") or None, meta.get("taxonomy_path") or None], flag="--out", error=ProjectError
        )
    except ProjectError as e:
        raise ProjectError(f"{e}; the project was made from it or lives in it") from None
    if out.exists() and not force:
        raise ProjectError(f"--out {out} exists; pass --force to replace it, or --out another file")


def export(project: Project, out: str | Path, force: bool = False) -> ExportResult:
    """Write the settled items as gold (`.jsonl`, `.csv`, `.parquet` or a `.hf` dataset folder),
    validated against the project's codebook first; the adjudications as a review queue beside it."""
    out = Path(out)
    check_out(project, out, force)
    rows, open_items, adjudicated, unsettled = gold_rows(project)
    if not rows:
        waiting = "; ".join(f"{why}: {len(ids)}" for why, ids in open_items.items())
        raise ProjectError(f"nothing to export: no item is settled yet ({waiting})")
    # validated in memory the way `classify gold validate` will read the file
    gold_from_records([to_record(json.loads(json.dumps(r))) for r in rows], project.taxonomy, "<export>")
    if adjudicated:
        read_decisions(review_folder(out) / "decisions.jsonl")  # a broken file is refused before anything is written
    write_rows(out, rows)
    res = ExportResult(out, len(rows), len(adjudicated), open_items, unsettled=unsettled)
    if adjudicated:
        res.queue, res.n_decisions, res.n_proposals, res.review_problem = _write_review(project, out, adjudicated)
    return res


def review_folder(out: Path) -> Path:
    """`<name>-review/` beside the gold file: the adjudications as a review queue and decisions."""
    return out.with_name(out.name.split(".")[0] + "-review")


def _taxonomy_file(project: Project, folder: Path) -> Path:
    """The codebook file the review queue names: the project's own when unchanged, else a copy."""
    tax = project.taxonomy
    if tax.path and tax.path.exists():
        try:
            if load_taxonomy(tax.path).fingerprint() == tax.fingerprint():
                return tax.path.resolve()
        except Exception:  # an edited file that no longer loads: use the project's copy
            pass
    copy = folder / f"taxonomy-v{tax.version}.yaml"
    atomic_write_text(copy, project.meta()["taxonomy_text"])
    return copy.resolve()


def _write_review(project: Project, out: Path, adjudicated: list[ItemState]) -> tuple[Path, int, int, str | None]:
    """Queue + decisions for `classify review apply`: one `keep` per adjudicated (item, dimension),
    carrying the adjudicator, note and proposals; and why apply would refuse the merged decisions."""
    folder = review_folder(out)
    folder.mkdir(parents=True, exist_ok=True)
    tax_path = _taxonomy_file(project, folder)
    gold = load_gold(out, project.taxonomy)  # the file just written, as apply will read it
    pos = {rid: i for i, rid in enumerate(gold.ids)}
    items, decisions = [], []
    n_props = 0
    for st in adjudicated:
        assert st.decision is not None
        i = pos[st.id]
        by_dim: dict[str, list] = {}
        for p in st.decision.proposals:
            by_dim.setdefault(p["dimension"], []).append(p)
        dims = [d for d in project.dims if d in st.disagreeing(project.dims) or d in by_dim] or project.dims[:1]
        for d in dims:
            reasons = [
                Reason(kind="codebook_note", source="workbench", weight=0.3, detail=p_desc)
                for p_desc in (_PROPOSAL.validate_python(p).describe() for p in by_dim.get(d, []))
            ]
            items.append(
                QueueItem(
                    id=st.id,
                    dimension=d,
                    in_gold=True,
                    gold=gold.labels[d][i],
                    coders={c: gold.coders[c][d][i] for c in gold.coders},
                    adjudication_note=_note(st),
                    reasons=reasons,
                    score=0.3 if reasons else 0.0,
                    record={k: st.record.get(k) for k in CORE_FIELDS},
                )
            )
            decisions.append(
                ReviewDecision(
                    id=st.id,
                    dimension=d,
                    action="keep",
                    gold=gold.labels[d][i],
                    note=st.decision.note,
                    proposals=[_PROPOSAL.validate_python(p) for p in by_dim.get(d, [])],
                    reviewer=st.decision.adjudicator,
                    decided_at=st.decision.at,
                )
            )
            n_props += len(by_dim.get(d, []))
    tax = project.taxonomy
    meta = QueueMeta(
        created_at=utc_timestamp(),
        taxonomy=tax.label,
        taxonomy_path=str(tax_path),
        taxonomy_fingerprint=tax.fingerprint(),
        gold_path=str(out.resolve()),
        gold_hash=gold.hash,
        sources=[{"kind": "workbench", "path": str(project.folder.resolve())}],
        params={"adjudications": len(adjudicated)},
    )
    queue_path = folder / "queue.json"
    queue = Queue(meta=meta, items=items)
    save_queue(queue, queue_path)
    merge_decisions(folder / "decisions.jsonl", decisions, project.adjudication_keys())
    try:  # a decision kept from the folder may be stale now (its item re-adjudicated): say so now, not at apply
        check_decisions(read_decisions(folder / "decisions.jsonl")[0], queue, tax, str(folder / "decisions.jsonl"))
        problem = None
    except DecisionsError as e:
        problem = str(e)
    return queue_path, len(decisions), n_props, problem


def merge_decisions(path: Path, decisions: list[ReviewDecision], ours: set[tuple[str, str, str, str]]) -> None:
    """Write the adjudications into the decisions file beside the queue, keeping every decision
    already there that the workbench did not write (made in `classify review session`, a sheet or
    the workbench's review task since the last export), after them so that they still count:
    nothing decided is ever overwritten by a re-export. `ours`: (item, adjudicator, time, note) of
    every adjudication the project holds; only a `keep` can be one of them."""
    have, _ = read_decisions(path)
    kept = [d for d in have if d.action != "keep" or (d.id, d.reviewer, d.decided_at, d.note) not in ours]
    write_decisions(path, decisions + kept)
