"""What is recorded about one item, and the blind-coding rule that decides what counts.

The rule (docs/workbench.md, "Blind coding"): each coder's **first** code of an item is their
independent code. Agreement (kappa, alpha, confusion, the disagreement list) and the exported
`coder_a` / `coder_b` use first codes only. A coder may change their code later (a slip of the
key, a second thought, or after seeing the other's code or the model's suggestion): the change is
kept in the history and, when it differs from the first code, sends the item to adjudication; it
never replaces the first code in any figure. So kappa cannot rise by re-coding, and no second
thought is lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Code:
    coder: str
    labels: dict[str, str | None]
    note: str
    unsure: bool
    at: str
    seq: int = 0


@dataclass
class Adjudication:
    """An adjudicator's decision on a workbench item (final labels, note, codebook proposals);
    not to be confused with a review-queue decision (classify.review.schema.Decision)."""

    labels: dict[str, str | None]
    note: str
    proposals: list[dict]
    adjudicator: str
    at: str
    seq: int = 0


@dataclass
class ItemState:
    """One item: each coder's first code (`codes`) and latest code (`latest`), the latest decision."""

    id: str
    pos: int
    record: dict
    suggestion: dict | None
    assigned: list[str]
    codes: dict[str, Code] = field(default_factory=dict)  # first code per coder: what agreement and export use
    latest: dict[str, Code] = field(default_factory=dict)  # latest code per coder: what the coder sees as theirs
    decision: Adjudication | None = None

    def add(self, code: Code) -> None:
        """Codes arrive oldest first."""
        self.codes.setdefault(code.coder, code)
        self.latest[code.coder] = code

    @property
    def complete(self) -> bool:
        """Every assigned coder has coded the item."""
        return bool(self.assigned) and set(self.codes) >= set(self.assigned)

    def disagreeing(self, dims: Sequence[str]) -> list[str]:
        """Dimensions on which the first codes differ (every assigned coder having coded); "not
        shown" (null) against a named category is a difference."""
        if len(self.codes) < 2 or not self.complete:
            return []
        firsts = [self.codes[c] for c in self.assigned]
        return [d for d in dims if len({c.labels.get(d) for c in firsts}) > 1]

    def revised(self, dims: Sequence[str]) -> list[str]:
        """Coders whose latest code differs from their first one."""
        return [
            c
            for c in self.assigned
            if c in self.codes and any(self.latest[c].labels.get(d) != self.codes[c].labels.get(d) for d in dims)
        ]

    def unsure(self) -> list[str]:
        """Coders who marked the item unsure (first or latest code)."""
        return [c for c in self.assigned if c in self.codes and (self.codes[c].unsure or self.latest[c].unsure)]

    def reasons(self, dims: Sequence[str]) -> list[str]:
        """Why the item is for an adjudicator; empty when there is nothing to adjudicate (it is not
        fully coded, or its coders agree, kept their first code and were sure)."""
        if not self.complete:
            return []
        out = [f"{d} differs" for d in self.disagreeing(dims)]
        out += [f"{c} changed their code" for c in self.revised(dims)]
        out += [f"{c} unsure" for c in self.unsure()]
        return out

    def final(self, dims: Sequence[str]) -> dict[str, str | None] | None:
        """The item's labels when settled: every assigned coder coded and either an adjudicator
        decided, or the first codes agree and no coder changed theirs; None while open."""
        if not self.complete:
            return None
        if self.decision:
            return dict(self.decision.labels)
        if self.disagreeing(dims) or self.revised(dims):
            return None
        first = self.codes[self.assigned[0]]
        return {d: first.labels.get(d) for d in dims}

    def open_reason(self, dims: Sequence[str]) -> str:
        """Why `final` is None (for the export's list of items left out)."""
        missing = [c for c in self.assigned if c not in self.codes]
        if missing:
            return f"waiting for a code from {', '.join(missing)}"
        if self.disagreeing(dims):
            return "disagreement not adjudicated"
        return "code changed after coding, not adjudicated"
