"""How a long run reports progress to its caller: one object of optional callbacks, taken alike by
`run_eval` (classify.evaluation.pipeline) and `label_file` (classify.labeling.pipeline)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Progress:
    """Callbacks a caller may pass to watch a run (all optional)."""

    log: Callable[[str], None] | None = None  # one line of news: "training ...", "fold 2/5 done"
    encoded: Callable[[int], None] | None = None  # n more records encoded up front
    labeled: Callable[[int], None] | None = None  # n more records labeled by the model (or resumed)
    total: Callable[[int], None] | None = None  # how many records the run will label, once known

    def say(self, message: str) -> None:
        if self.log is not None:
            self.log(message)
