"""Feed decisions back: a new gold version and a new taxonomy version, never edits in place.

Every label that changes (or is confirmed) gets an entry in the item's `review_history`: old label,
new label, reason, reviewer, date. Merges and splits rewrite gold and coder labels alike; if any
label would be left without a category in the new codebook, nothing is written and the items are
listed. Everything is computed and validated in memory first, then both files are written.
The new gold keeps the input file's encoding (goldfile.py): a screening file stays
`failure_report: true/false`, and rows no decision touched keep their lines byte for byte.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import yaml

from classify.core import goldfile
from classify.core.errors import ClassifyError
from classify.core.gold import GoldSet, gold_from_records
from classify.core.records import RecordsError, to_record
from classify.core.taxonomy import Taxonomy, parse_taxonomy, taxonomy_from_text
from classify.core.writer import atomic_write_text
from classify.review.decisions import check_decisions
from classify.review.proposals import UNMAPPED, Change, ProposalError, apply_changes, collect_changes
from classify.review.queue import check_queue_matches
from classify.review.schema import Decision, Queue


class ApplyError(ClassifyError, ValueError):
    """The decisions cannot be applied; nothing was written."""


@dataclass
class ApplyPlan:
    gold_rows: list[dict]  # label-valued, one dimension field per taxonomy dimension
    taxonomy: Taxonomy  # the taxonomy the new gold is valid against (new version, or the old one)
    taxonomy_raw: dict | None  # the new codebook document, None when no proposal changed it
    changes: list[Change]
    changed: list[tuple[str, str, str | None, str | None, str]] = field(default_factory=list)  # id, dim, old, new, why
    confirmed: int = 0
    ambiguous: int = 0
    added: list[str] = field(default_factory=list)
    gold: GoldSet | None = None
    file_rows: list[dict] = field(default_factory=list)  # gold_rows in the input file's encoding: what is written
    source: Path | None = None  # the input gold file


def next_gold_path(gold_path: Path) -> Path:
    """gold/reports.jsonl -> gold/reports.v2.jsonl; reports.v2.jsonl -> reports.v3.jsonl."""
    m = re.match(r"^(.*)\.v(\d+)$", gold_path.stem)
    stem, n = (m.group(1), int(m.group(2))) if m else (gold_path.stem, 1)
    return gold_path.with_name(f"{stem}.v{n + 1}{gold_path.suffix}")


# A version becomes part of a file name (taxonomy-v<version>.yaml): no separators, no "..".
_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def check_version(version: str) -> str:
    """`version` if it can be a file-name part; ApplyError otherwise (`../x`, `a/b`, `..`, empty)."""
    if not _VERSION_RE.match(version) or ".." in version:
        raise ApplyError(
            f"taxonomy version {version!r} cannot be part of a file name (taxonomy-v<version>.yaml): "
            "use letters, digits, '.', '_', '+' or '-', starting with a letter or digit, and no '..'"
        )
    return version


def next_taxonomy_path(tax_path: Path, version: str) -> Path:
    """codebook/taxonomy-v1.yaml -> codebook/taxonomy-v2.yaml."""
    check_version(version)
    stem = re.sub(r"-v[^-]+$", "", tax_path.stem)
    return tax_path.with_name(f"{stem}-v{version}{tax_path.suffix}")


def _reason(d: Decision, item_reasons: Sequence[str]) -> str:
    why = {
        "keep": "gold label confirmed in review",
        "accept": f"model label accepted in review ({d.source or 'model'})",
        "set": "label set in review",
        "ambiguous": "marked ambiguous in review (label kept)",
    }[d.action]
    return f"{why}; queued for: {', '.join(item_reasons)}" if item_reasons else why


def _history(row: dict, entry: dict) -> None:
    row.setdefault("review_history", [])
    row["review_history"] = list(row["review_history"]) + [entry]


def plan_apply(
    queue: Queue,
    decisions: list[Decision],
    gold: GoldSet,
    when: str | None = None,
    new_version: str | None = None,
    release_note: str | None = None,
    based_on: dict | None = None,
) -> ApplyPlan:
    """Compute the new gold rows and codebook; raise ApplyError (nothing written) when they do not fit."""
    tax = gold.taxonomy
    when = when or date.today().isoformat()
    if new_version is not None:
        check_version(new_version)
    try:
        check_queue_matches(queue, gold)
    except ValueError as e:
        raise ApplyError(str(e)) from e
    eff = check_decisions(decisions, queue, tax)
    eff = [d for d in eff if d.action != "skip"]
    if not eff:
        raise ApplyError("nothing to apply: every decision is a skip")
    changes = collect_changes(eff)
    raw, remap = None, None
    new_tax = tax
    if changes:
        try:
            raw, remap = apply_changes(
                tax, changes, new_version=new_version, when=when, release_note=release_note, based_on=based_on
            )
        except ProposalError as e:
            raise ApplyError(str(e)) from e
        new_tax = parse_taxonomy(raw, "<new taxonomy>")

    rows = {r.id: copy.deepcopy(r.to_dict()) for r in gold.records}
    order = list(rows)
    index = queue.index()
    plan = ApplyPlan(gold_rows=[], taxonomy=new_tax, taxonomy_raw=raw, changes=changes)
    tax_label = new_tax.label
    for d in eff:
        it = index[d.key]
        kinds = sorted({r.kind for r in it.reasons})
        if not it.in_gold:
            if d.action not in ("accept", "set"):
                plan.ambiguous += d.action == "ambiguous"
                continue  # nothing to add: the decisions file keeps the record of it
            if d.id not in rows:
                rows[d.id] = {**copy.deepcopy(it.record), **{dim: None for dim in tax.dimension_ids}}
                order.append(d.id)
                plan.added.append(d.id)
        row = rows[d.id]
        old = row.get(d.dimension)
        new = d.label if d.changes_label else old
        row[d.dimension] = new
        entry = {
            "dimension": d.dimension,
            "old": old,
            "new": new,
            "action": d.action,
            "reason": _reason(d, kinds),
            "reviewer": d.reviewer,
            "date": d.decided_at[:10],
            "taxonomy": tax_label,
        }
        if d.note:
            entry["note"] = d.note
        if d.source:
            entry["source"] = d.source
        _history(row, entry)
        if old != new:
            plan.changed.append((d.id, d.dimension, old, new, d.action + (f" ({d.source})" if d.source else "")))
        elif d.action == "keep":
            plan.confirmed += 1
        elif d.action == "ambiguous":
            plan.ambiguous += 1

    if remap:
        _remap_rows(rows, order, remap, changes, new_tax, when, plan)

    plan.gold_rows = [rows[i] for i in order]
    try:
        plan.gold = gold_from_records([to_record(r) for r in plan.gold_rows], new_tax, "<new gold>")
    except RecordsError as e:  # a label the new codebook lacks that no remap covers
        raise ApplyError(f"the new gold would not validate against {new_tax.label}: {e}") from e
    # Written in the input's own encoding (screening: failure_report booleans), and read back the
    # way the loader will read the file: the labels must survive the round trip unchanged.
    try:
        plan.file_rows = goldfile.file_rows(plan.gold_rows, gold)
        again = goldfile.gold_from_rows(plan.file_rows, new_tax)
    except (ValueError, RecordsError) as e:
        raise ApplyError(f"the new gold cannot be written in the encoding of its input: {e}") from e
    if (again.ids, again.labels, again.coders) != (plan.gold.ids, plan.gold.labels, plan.gold.coders):
        raise ApplyError(f"the new gold would not read back with the labels decided (encoding of {gold.path})")
    plan.source = gold.path
    return plan


def _remap_rows(rows, order, remap, changes, new_tax, when, plan) -> None:
    reviewers: dict[tuple, list[str]] = {}
    for ch in changes:
        p = ch.proposal
        if p.kind in ("merge", "split"):
            reviewers[(p.dimension, p.kind, tuple(getattr(p, "categories", None) or [p.category]))] = ch.reviewers
    unmapped: list[str] = []
    for rid in order:
        row = rows[rid]
        for dim in remap.ops:
            old = row.get(dim)
            new = remap.label(dim, rid, old)
            if new is UNMAPPED:
                unmapped.append(f"{rid} (gold {dim}={old})")
            elif new != old:
                row[dim] = new
                why = remap.describe(dim, old)
                who = next((r for (dd, _, cats), r in reviewers.items() if dd == dim and old in cats), [])
                _history(
                    row,
                    {
                        "dimension": dim,
                        "old": old,
                        "new": new,
                        "action": "remap",
                        "reason": f"{why} in {new_tax.label}",
                        "reviewer": ", ".join(who) or "review",
                        "date": when,
                        "taxonomy": new_tax.label,
                    },
                )
                plan.changed.append((rid, dim, old, new, why))
            for ck in [k for k in row if k.startswith("coder_") and isinstance(row[k], dict)]:
                c = dict(row[ck])
                cold = c.get(dim)
                cnew = remap.label(dim, rid, cold)
                if cnew is UNMAPPED:
                    unmapped.append(f"{rid} ({ck} {dim}={cold})")
                elif cnew != cold:
                    c[dim] = cnew
                    row[ck] = c
    if unmapped:
        raise ApplyError(
            f"the proposals would leave {len(unmapped)} labels without a valid category in "
            f"{new_tax.label}; add these items to the split mapping: " + ", ".join(unmapped)
        )


def render_taxonomy(raw: dict, source: Path | None) -> str:
    head = (
        f"# Codebook {raw['name']} version {raw['version']}, written by `classify review apply`"
        + (f" from {source.name}" if source else "")
        + ".\n# What changed and which reviewed items motivated it: see `changelog` at the end.\n"
    )
    return head + yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, width=100)


def _marker(out_gold: Path) -> Path:
    return out_gold.with_name(f".{out_gold.name}.apply-pending")


def _pending(path: Path) -> Path:
    return path.with_name(f".pending-{path.name}")  # same suffix: written in the same format


def _digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def recover_interrupted(out_gold: Path) -> list[str]:
    """Undo what an apply killed mid-write (kill -9, power loss) left for `out_gold`: its temporary
    files, and a new codebook version renamed into place without its gold (the two are renamed last,
    codebook first, so only that can be left). The pending marker names what that apply wrote."""
    marker = _marker(out_gold)
    if not marker.exists():
        return []
    try:
        named = json.loads(marker.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        named = {}
    notes = []
    for p in (named.get("gold"), named.get("taxonomy")):
        if p:
            _remove(_pending(Path(p)))
    tax = named.get("taxonomy")
    if tax and not out_gold.exists() and Path(tax).exists():
        # only the file that apply wrote: one made since under that name (another apply, a hand edit) stays
        if _digest(Path(tax).read_bytes()) == named.get("taxonomy_sha256"):
            Path(tax).unlink()
            notes.append(f"removed {tax}: an interrupted apply wrote it without its gold {out_gold}")
    marker.unlink()
    return notes


def write_plan(plan: ApplyPlan, out_gold: Path, out_taxonomy: Path | None, source_taxonomy: Path | None) -> list[str]:
    """Write both new versions, or neither: each is written under a temporary name and both are
    renamed at the end, so a kill leaves nothing a retry trips on (recover_interrupted). Refuses to
    overwrite (a version, once written, is never edited). Returns notes on what was recovered."""
    targets = [out_gold] + ([out_taxonomy] if plan.taxonomy_raw is not None and out_taxonomy else [])
    if len(targets) == 2 and out_taxonomy is not None and out_gold.resolve() == out_taxonomy.resolve():
        raise ApplyError(f"--out-gold and --out-taxonomy are the same file ({out_gold}); give two paths")
    notes = recover_interrupted(out_gold)
    exists = [str(p) for p in targets if p.exists()]
    if exists:
        raise ApplyError(
            f"{', '.join(exists)} already exist; versions are never overwritten (pass another --out-gold/--out-taxonomy)"
        )
    text = None
    if plan.taxonomy_raw is not None:
        if out_taxonomy is None:
            raise ApplyError("the proposals change the codebook: give a path for the new taxonomy version")
        text = render_taxonomy(plan.taxonomy_raw, source_taxonomy)
        # round trip through the loader before writing: what is written must load
        taxonomy_from_text(text, out_taxonomy)
    marker = _marker(out_gold)
    atomic_write_text(
        marker,
        json.dumps(
            {
                "gold": str(out_gold),
                "taxonomy": str(out_taxonomy) if text is not None else None,
                "taxonomy_sha256": _digest(text.encode("utf-8")) if text is not None else None,
            }
        ),
    )
    renamed_taxonomy = False
    try:
        if text is not None and out_taxonomy is not None:
            atomic_write_text(_pending(out_taxonomy), text)
        goldfile.write_gold(_pending(out_gold), plan.file_rows or plan.gold_rows, plan.source)
        if text is not None and out_taxonomy is not None:
            os.replace(_pending(out_taxonomy), out_taxonomy)
            renamed_taxonomy = True
        os.replace(_pending(out_gold), out_gold)
    except BaseException:
        # the pair is written together or not at all: a lone taxonomy would block the retry
        for p in targets:
            _remove(_pending(p))
        if renamed_taxonomy and out_taxonomy is not None and not out_gold.exists():
            out_taxonomy.unlink(missing_ok=True)
        raise
    finally:
        if not any(_pending(p).exists() for p in targets):
            marker.unlink(missing_ok=True)
    return notes
