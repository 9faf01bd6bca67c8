"""Turn reviewers' taxonomy proposals into a new codebook version and a label remapping.

Identical proposals made on several items become one change naming all of them; conflicting ones
(two different definitions for one category) are refused. Merges and splits also give a remapping
that apply() uses on every gold and coder label, so labels and codebook change together.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date

from classify.core.errors import ClassifyError
from classify.core.taxonomy import Taxonomy, TaxonomyError, parse_taxonomy
from classify.review.schema import AddCategory, AddCue, Decision, EditDefinition, Merge, Proposal, Split

UNMAPPED = object()  # a split category label on an item its mapping does not cover


class ProposalError(ClassifyError, ValueError):
    """A proposal cannot be applied (unknown category, conflict, or it breaks the codebook)."""


@dataclass
class Change:
    proposal: Proposal  # one of the schema proposal models
    items: list[str] = field(default_factory=list)  # "id/dimension" of the items that motivated it
    notes: list[str] = field(default_factory=list)
    reviewers: list[str] = field(default_factory=list)

    def add_source(self, d: Decision) -> None:
        key = f"{d.id}/{d.dimension}"
        if key not in self.items:
            self.items.append(key)
        if d.note and d.note not in self.notes:
            self.notes.append(d.note)
        if d.reviewer not in self.reviewers:
            self.reviewers.append(d.reviewer)


def _identity(p) -> tuple:
    """What makes two proposals the same change (a split's mapping is merged, not compared)."""
    if isinstance(p, Split):
        return ("split", p.dimension, p.category)
    if isinstance(p, EditDefinition):
        return ("edit_definition", p.dimension, p.category)
    if isinstance(p, AddCategory):
        return ("add_category", p.dimension, p.category.id)
    return (p.kind, repr(p.model_dump()))


def collect_changes(decisions: Iterable[Decision]) -> list[Change]:
    """One change per distinct proposal, in the order first proposed, with every motivating item."""
    changes: dict[tuple, Change] = {}
    for d in decisions:
        if d.action == "skip":
            continue
        for p in d.proposals:
            _collect_one(changes, d, p)
    return list(changes.values())


def _collect_one(changes: dict, d: Decision, p) -> None:
    key = _identity(p)
    if key not in changes:
        changes[key] = Change(proposal=p.model_copy(deep=True))
    else:
        ch = changes[key]
        prev = ch.proposal
        if isinstance(p, Split):
            if [c.model_dump() for c in p.into] != [c.model_dump() for c in prev.into]:
                raise ProposalError(
                    f"conflicting splits of {p.dimension}.{p.category} proposed on {', '.join(ch.items)} "
                    f"and {d.id}/{d.dimension}: the new categories differ"
                )
            clash = {
                k: (prev.mapping[k], v) for k, v in p.mapping.items() if k in prev.mapping and prev.mapping[k] != v
            }
            if clash:
                raise ProposalError(f"conflicting split mappings for {p.dimension}.{p.category}: {clash}")
            prev.mapping.update(p.mapping)
        elif p.model_dump() != prev.model_dump():
            raise ProposalError(
                f"conflicting proposals ({p.describe()}) on {', '.join(ch.items)} and "
                f"{d.id}/{d.dimension}: they differ; keep one"
            )
    changes[key].add_source(d)


def new_category_ids(decisions: Iterable[Decision]) -> dict[str, set[str]]:
    """Labels that proposals in these decisions create, per dimension (valid labels for decisions)."""
    out: dict[str, set[str]] = {}
    for p in (p for d in decisions for p in d.proposals):
        if isinstance(p, AddCategory):
            out.setdefault(p.dimension, set()).add(p.category.id)
        elif isinstance(p, Split):
            out.setdefault(p.dimension, set()).update(c.id for c in p.into)
        elif isinstance(p, Merge):
            out.setdefault(p.dimension, set()).add(p.into)
    return out


# ---------------------------------------------------------------- remapping


@dataclass
class Remap:
    """Label rewrites from merges and splits, in the order they were applied."""

    ops: dict[str, list[tuple]] = field(
        default_factory=dict
    )  # dimension -> [("merge", set, into) | ("split", cat, mapping)]

    def __bool__(self) -> bool:
        return any(self.ops.values())

    def label(self, dim: str, item_id: str, label):
        """The label after all merges/splits; UNMAPPED when a split's mapping does not cover the item."""
        if label is None:
            return None
        for op in self.ops.get(dim, []):
            if op[0] == "merge" and label in op[1]:
                label = op[2]
            elif op[0] == "split" and label == op[1]:
                label = op[2].get(item_id, UNMAPPED)
                if label is UNMAPPED:
                    return UNMAPPED
        return label

    def describe(self, dim: str, label) -> str | None:
        for op in self.ops.get(dim, []):
            if op[0] == "merge" and label in op[1]:
                return f"merge {' + '.join(sorted(op[1]))} -> {op[2]}"
            if op[0] == "split" and label == op[1]:
                return f"split {op[1]} -> {' + '.join(sorted(set(op[2].values())))}"
        return None


# ---------------------------------------------------------------- codebook edits


def _dim(raw: dict, ch: Change) -> dict:
    p = ch.proposal
    dims = raw["dimensions"]
    if p.dimension not in dims:
        raise ProposalError(f"{p.describe()} (from {', '.join(ch.items)}): no dimension {p.dimension!r}")
    return dims[p.dimension]


def _find(dim_raw: dict, cid: str, ch: Change) -> dict:
    for c in dim_raw["categories"]:
        if c.get("id") == cid:
            return c
    known = ", ".join(c.get("id") for c in dim_raw["categories"])
    raise ProposalError(
        f"{ch.proposal.describe()} (from {', '.join(ch.items)}): no category {cid!r} "
        f"(the codebook at this point has: {known})"
    )


def _new_cat(nc, group_default: str | None) -> dict:
    out = {"id": nc.id}
    group = nc.group or group_default
    if group:
        out["group"] = group
    out["name"] = nc.name or nc.id.replace("_", " ").capitalize()
    out["definition"] = nc.definition
    out["include"] = list(nc.include)
    out["exclude"] = list(nc.exclude)
    return out


def _rewrite_refs(dim_raw: dict, old: Iterable[str], new: str) -> None:
    """Cues that point at a merged-away category ('(build_failure)') now point at its successor."""
    pats = [re.compile(rf"(?<![a-z_]){re.escape(o)}(?![a-z_])") for o in old if o != new]
    for c in dim_raw["categories"]:
        for key in ("include", "exclude"):
            if c.get(key):
                texts = []
                for t in c[key]:
                    for pat in pats:
                        t = pat.sub(new, t)
                    texts.append(t)
                c[key] = texts


def _apply_one(raw: dict, ch: Change, remap: Remap) -> None:
    p = ch.proposal
    dim_raw = _dim(raw, ch)
    cats = dim_raw["categories"]
    ids = [c.get("id") for c in cats]
    if isinstance(p, EditDefinition):
        _find(dim_raw, p.category, ch)["definition"] = p.definition
    elif isinstance(p, AddCue):
        c = _find(dim_raw, p.category, ch)
        cues = list(c.get(p.cue) or [])
        if p.text not in cues:
            cues.append(p.text)
        c[p.cue] = cues
    elif isinstance(p, AddCategory):
        nc = p.category
        if nc.id in ids:
            raise ProposalError(f"{p.describe()} (from {', '.join(ch.items)}): {nc.id!r} already exists")
        groups = dim_raw.get("groups") or {}
        if groups and nc.group not in groups:
            raise ProposalError(f"{p.describe()} (from {', '.join(ch.items)}): needs a group, one of {sorted(groups)}")
        new = _new_cat(nc, None)
        # place it after the last category of its group, so the file reads group by group
        at = max((i for i, c in enumerate(cats) if c.get("group") == nc.group), default=len(cats) - 1) + 1
        cats.insert(at, new)
    elif isinstance(p, Merge):
        olds = [_find(dim_raw, cid, ch) for cid in p.categories]
        if p.into not in p.categories and p.into in ids:
            raise ProposalError(
                f"{p.describe()} (from {', '.join(ch.items)}): {p.into!r} already exists and is "
                f"not among the merged categories"
            )
        base = next((c for c in olds if c["id"] == p.into), None)
        merged = (
            copy.deepcopy(base)
            if base
            else {
                "id": p.into,
                **({"group": olds[0]["group"]} if "group" in olds[0] else {}),
                "name": p.name or p.into.replace("_", " ").capitalize(),
                "definition": p.definition,
            }
        )
        if p.name:
            merged["name"] = p.name
        if p.definition:
            merged["definition"] = p.definition
        for key in ("include", "exclude"):
            seen: list[str] = []
            for c in ([base] if base else []) + [c for c in olds if c is not base]:
                for t in c.get(key) or []:
                    if t not in seen:
                        seen.append(t)
            merged[key] = seen
        first = min(ids.index(cid) for cid in p.categories)
        dim_raw["categories"] = [c for c in cats if c.get("id") not in p.categories]
        dim_raw["categories"].insert(first, merged)
        _rewrite_refs(dim_raw, p.categories, p.into)
        remap.ops.setdefault(p.dimension, []).append(("merge", set(p.categories), p.into))
    elif isinstance(p, Split):
        old = _find(dim_raw, p.category, ch)
        clash = [c.id for c in p.into if c.id in ids and c.id != p.category]
        if clash:
            raise ProposalError(f"{p.describe()} (from {', '.join(ch.items)}): {clash} already exist")
        at = ids.index(p.category)
        news = [_new_cat(c, old.get("group")) for c in p.into]
        dim_raw["categories"] = cats[:at] + news + cats[at + 1 :]
        remap.ops.setdefault(p.dimension, []).append(("split", p.category, dict(p.mapping)))
    else:  # pragma: no cover - the schema admits no other kind
        raise ProposalError(f"unknown proposal {p!r}")


def bump_version(version: str) -> str:
    try:
        return str(int(version) + 1)
    except ValueError:
        raise ProposalError(f"taxonomy version {version!r} is not a number; pass --version for the new one") from None


def apply_changes(
    taxonomy: Taxonomy,
    changes: list[Change],
    new_version: str | None = None,
    when: str | None = None,
    release_note: str | None = None,
    based_on: dict | None = None,
) -> tuple[dict, Remap]:
    """The new codebook document (version bumped, changelog extended) and the label remapping."""
    raw = copy.deepcopy(taxonomy.raw)
    remap = Remap()
    for ch in changes:
        _apply_one(raw, ch, remap)
    version = new_version or bump_version(taxonomy.version)
    when = when or date.today().isoformat()
    raw["version"] = int(version) if version.isdigit() else version
    log = list(raw.get("changelog") or [])
    release = {
        "version": raw["version"],
        "date": when,
        "change": "release",
        "summary": f"{taxonomy.name} {taxonomy.version} -> {version}: {len(changes)} change(s) from review",
    }
    if release_note:
        release["note"] = release_note
    if based_on:
        release.update(based_on)
    log.append(release)
    for ch in changes:
        p = ch.proposal
        entry = {
            "version": raw["version"],
            "date": when,
            "change": p.kind,
            "dimension": p.dimension,
            "summary": p.describe(),
            "items": list(ch.items),
            "reviewers": list(ch.reviewers),
        }
        if ch.notes:
            entry["notes"] = list(ch.notes)
        entry["proposal"] = p.model_dump(exclude={"kind", "dimension"}, exclude_none=True)
        log.append(entry)
    raw["changelog"] = log
    try:
        parse_taxonomy(raw, "<new taxonomy>")
    except TaxonomyError as e:
        raise ProposalError(f"the proposals would make an invalid codebook: {e}") from e
    return raw, remap
