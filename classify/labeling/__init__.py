"""Labeling: bulk-label files with provenance, resumably, and count the corpus.

resumable  label records chunk by chunk with a checkpoint; an interrupted run continues
pipeline   `label_file`: what `classify run` does, for Python users
corpus     shares of categories over a labels file, per library (`classify report`)
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
