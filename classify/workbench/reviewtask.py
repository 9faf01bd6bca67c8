"""The review queue (`classify review build`, including rows `classify run --target-kappa` marked
for review) as a workbench task. Decisions are checked and appended exactly as the terminal
session does (classify.review.decisions), to the decisions file beside the queue, so `classify
review apply` applies them; the project database keeps a copy in its history."""

from __future__ import annotations

from pathlib import Path

from classify.core.taxonomy import Taxonomy, load_taxonomy
from classify.core.timestamps import utc_timestamp
from classify.review.decisions import append_decision, check_decisions, effective, read_decisions
from classify.review.schema import ACTIONS, Decision, Queue, QueueItem, load_queue
from classify.workbench.project import NotFound, Project, ProjectError, check_note


class ReviewTask:
    def __init__(self, project: Project, queue_path: str | Path, decisions_path: str | Path | None = None):
        self.project = project
        self.queue_path = Path(queue_path)
        self.queue: Queue = load_queue(self.queue_path)
        self._loaded = self._stamp()
        if not self.queue.items:
            raise ProjectError(f"{self.queue_path}: the review queue is empty")
        # the codebook the queue was built with (check_decisions validates labels against it)
        self.taxonomy: Taxonomy = load_taxonomy(self.queue.meta.taxonomy_path or None)
        if self.taxonomy.fingerprint() != self.queue.meta.taxonomy_fingerprint:
            raise ProjectError(
                f"{self.queue_path}: built with {self.queue.meta.taxonomy} ({self.queue.meta.taxonomy_fingerprint}), "
                f"but {self.queue.meta.taxonomy_path} is now {self.taxonomy.label} ({self.taxonomy.fingerprint()}): "
                "build the queue again"
            )
        self.decisions_path = Path(decisions_path) if decisions_path else self.queue_path.parent / "decisions.jsonl"
        read_decisions(self.decisions_path)  # a broken decisions file is refused at start, not mid-session

    def _stamp(self) -> tuple[int, int, int]:
        st = self.queue_path.stat()
        return st.st_ino, st.st_mtime_ns, st.st_size  # a rewrite is a new file (atomic rename)

    def _check_queue_unchanged(self) -> None:
        """A queue rebuilt on disk (a re-export, `review build --force`) while this server runs: a decision
        on the old one would be stale for the new one, and `review apply` would refuse the whole file."""
        try:
            same = self._stamp() == self._loaded
        except OSError:
            same = False
        if not same:
            raise ProjectError(
                f"{self.queue_path} changed on disk since this server loaded it (re-exported or rebuilt): "
                "restart `classify workbench serve --queue ...` to review the new queue; nothing was saved"
            )

    def item(self, n: int) -> QueueItem:
        if not 1 <= n <= len(self.queue.items):
            raise NotFound(f"no review item {n} (the queue has {len(self.queue.items)})")
        return self.queue.items[n - 1]

    def decided(self) -> dict[tuple[str, str], Decision]:
        got, _ = read_decisions(self.decisions_path)
        return {d.key: d for d in effective(got, self.queue)}

    def decide(self, n: int, reviewer: str, action: str, label: str | None, note: str) -> Decision:
        self._check_queue_unchanged()
        it = self.item(n)
        if action not in ACTIONS:
            raise ProjectError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
        if action in ("keep", "ambiguous", "skip"):
            label = it.gold
        if action == "set" and label == "-":
            label = None  # "-": no label (e.g. the cause is not shown), as in the terminal session
        source = None
        if action == "accept":
            source = next((m.source for m in it.models if m.label == label), None)
        d = Decision(
            id=it.id,
            dimension=it.dimension,
            action=action,  # type: ignore[arg-type]
            label=label,
            gold=it.gold,
            source=source,
            note=check_note(note).strip(),
            reviewer=reviewer,
            decided_at=utc_timestamp(),
        )
        check_decisions([d], self.queue, self.taxonomy, source="review decision")
        append_decision(self.decisions_path, d)
        self.project.log_review(it.id, it.dimension, d.model_dump(mode="json"), reviewer)
        return d
