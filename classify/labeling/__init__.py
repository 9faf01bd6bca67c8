"""Labeling: bulk-label files with provenance, resumably, and count the corpus.

resumable  label records chunk by chunk with a checkpoint; an interrupted run continues
routing    auto / review / none_shown by a target kappa (`run --target-kappa`)
pipeline   `label_file`: what `classify run` does, for Python users
merge      a routed run plus people's codes (`classify merge`)

The labels row these write is `classify.core.labelrow`'s; the corpus report is `classify.report`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers see; at run time the names load on first use
    from classify.labeling.pipeline import Progress, estimate_labeling, label_file

__all__ = ["label_file", "estimate_labeling", "Progress"]


def __getattr__(name: str) -> object:  # lazy: `classify --help` must not import scikit-learn
    if name in __all__:
        from classify.labeling import pipeline

        return getattr(pipeline, name)
    raise AttributeError(name)
