"""Typed shapes of the review files: the queue, one decision, taxonomy proposals.

The queue is one JSON document (meta + items). Decisions are JSONL, one decision per line, a later
line for the same (id, dimension) replacing an earlier one, so a session can append after every
item and a reviewer can change their mind.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from classify.core.errors import ClassifyError
from classify.core.textio import read_text
from classify.core.writer import atomic_write_text

ReasonKind = Literal[
    "model_disagrees",
    "likely_mislabeled",
    "models_disagree",
    "low_confidence",
    "codebook_note",
    "routed",  # `classify run --target-kappa` left the label to people (<dim>_status: review)
    "coders_disagree",  # two coders in the workbench disagreed (adjudicated there)
]
Action = Literal["keep", "accept", "set", "ambiguous", "skip"]
ACTIONS: tuple[str, ...] = ("keep", "accept", "set", "ambiguous", "skip")


class QueueError(ClassifyError, ValueError):
    """A queue file is missing, malformed, or was built from other gold/taxonomy files."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- queue


class ModelView(_Strict):
    """One model's opinion on one item."""

    source: str  # where it comes from: eval run folder or labels file name
    model: str
    label: str | None
    confidence: float | None = None
    rationale: str | None = None
    p_gold: float | None = None  # probability the model gave the gold label (when it has probabilities)
    status: str = "ok"


class Reason(_Strict):
    kind: ReasonKind
    source: str
    weight: float  # 0..1: how much a decision on this item is expected to teach, for this reason
    detail: str


class QueueItem(_Strict):
    id: str
    dimension: str
    in_gold: bool
    gold: str | None  # the gold label at build time (None: no label, or not a gold item)
    coders: dict[str, str | None] = Field(default_factory=dict)
    adjudication_note: str | None = None
    reasons: list[Reason]
    models: list[ModelView] = Field(default_factory=list)
    score: float
    record: dict  # id, title, body, discussion, repo, number, url, created_at: shown, and used to add new gold items

    @property
    def key(self) -> tuple[str, str]:
        return (self.id, self.dimension)

    def model_labels(self) -> list[str]:
        """Distinct valid labels the models gave, most confident first."""
        seen: dict[str, float] = {}
        for m in self.models:
            if m.label is not None:
                seen[m.label] = max(seen.get(m.label, -1.0), m.confidence if m.confidence is not None else 0.0)
        return sorted(seen, key=lambda k: -seen[k])


class QueueMeta(_Strict):
    created_at: str
    taxonomy: str  # name@version
    taxonomy_path: str
    taxonomy_fingerprint: str
    gold_path: str
    gold_hash: str
    sources: list[dict]
    params: dict


class Queue(_Strict):
    meta: QueueMeta
    items: list[QueueItem]

    def index(self) -> dict[tuple[str, str], QueueItem]:
        return {it.key: it for it in self.items}

    def fingerprint(self) -> str:
        """Identity of the questions asked (items and the gold labels they showed)."""
        rows = [[it.id, it.dimension, it.gold] for it in self.items]
        return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:12]


def save_queue(queue: Queue, path: str | Path) -> None:
    atomic_write_text(path, queue.model_dump_json(indent=1) + "\n")


def load_queue(path: str | Path) -> Queue:
    path = Path(path)
    if not path.exists():
        raise QueueError(f"{path}: queue file not found (build one with `classify review build`)")
    try:
        return Queue.model_validate_json(read_text(path, QueueError))
    except ValidationError as e:
        raise QueueError(f"{path}: not a review queue: {_errors(e)}") from e


# ---------------------------------------------------------------- taxonomy proposals


class NewCategory(_Strict):
    id: str
    name: str | None = None
    definition: str
    group: str | None = None
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


class _Proposal(_Strict):
    dimension: str

    def describe(self) -> str:  # one line for changelogs and the terminal
        raise NotImplementedError


class EditDefinition(_Proposal):
    kind: Literal["edit_definition"] = "edit_definition"
    category: str
    definition: str = Field(min_length=1)

    def describe(self) -> str:
        return f"{self.dimension}.{self.category}: new definition"


class AddCue(_Proposal):
    kind: Literal["add_cue"] = "add_cue"
    category: str
    cue: Literal["include", "exclude"]
    text: str = Field(min_length=1)

    def describe(self) -> str:
        return f"{self.dimension}.{self.category}: add {self.cue} cue {self.text!r}"


class AddCategory(_Proposal):
    kind: Literal["add_category"] = "add_category"
    category: NewCategory

    def describe(self) -> str:
        g = f" (group {self.category.group})" if self.category.group else ""
        return f"{self.dimension}: add category {self.category.id}{g}"


class Merge(_Proposal):
    kind: Literal["merge"] = "merge"
    categories: list[str] = Field(min_length=2)
    into: str  # one of `categories` (kept) or a new id (then name/definition are required)
    name: str | None = None
    definition: str | None = None

    @model_validator(mode="after")
    def _check(self):
        if len(set(self.categories)) != len(self.categories):
            raise ValueError("merge lists a category twice")
        if self.into not in self.categories and not self.definition:
            raise ValueError(f"merge into a new category {self.into!r} needs a definition")
        return self

    def describe(self) -> str:
        return f"{self.dimension}: merge {' + '.join(self.categories)} -> {self.into}"


class Split(_Proposal):
    kind: Literal["split"] = "split"
    category: str
    into: list[NewCategory] = Field(min_length=2)
    # item id -> new label, for every item whose label (gold or a coder's) is the split category
    mapping: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self):
        ids = [c.id for c in self.into]
        if len(set(ids)) != len(ids):
            raise ValueError("split lists a new category twice")
        bad = sorted({v for v in self.mapping.values() if v not in ids})
        if bad:
            raise ValueError(f"split mapping uses labels that are not among the new categories {ids}: {bad}")
        return self

    def describe(self) -> str:
        return f"{self.dimension}: split {self.category} -> {' + '.join(c.id for c in self.into)}"


Proposal = Annotated[Union[EditDefinition, AddCue, AddCategory, Merge, Split], Field(discriminator="kind")]


# ---------------------------------------------------------------- decisions


class Decision(_Strict):
    id: str
    dimension: str
    action: Action
    # resulting label: accept/set give it (set may give None: "no label", e.g. cause not shown);
    # keep/ambiguous leave the gold label, skip changes nothing
    label: str | None = None
    gold: str | None = None  # the gold label the reviewer saw; a different one now means stale
    source: str | None = None  # for accept: the model whose label was taken
    note: str = ""
    proposals: list[Proposal] = Field(default_factory=list)  # taxonomy changes this item motivates
    reviewer: str = Field(min_length=1)
    decided_at: str

    @field_validator("id", "dimension")
    @classmethod
    def _nonempty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v

    @model_validator(mode="after")
    def _check(self):
        if self.action == "accept" and self.label is None:
            raise ValueError("accept needs the accepted label")
        if self.action in ("keep", "ambiguous", "skip") and self.label not in (None, self.gold):
            raise ValueError(f"{self.action} does not take a label (got {self.label!r})")
        return self

    @property
    def key(self) -> tuple[str, str]:
        return (self.id, self.dimension)

    @property
    def changes_label(self) -> bool:
        return self.action in ("accept", "set")


def _errors(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    more = f" (+{len(e.errors()) - 5} more)" if len(e.errors()) > 5 else ""
    return "; ".join(parts) + more


def validation_message(e: ValidationError) -> str:
    return _errors(e)
