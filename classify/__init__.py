"""classify: label issue reports against a research taxonomy and measure agreement with coders.

The package is laid out by pipeline step; dependencies point one way:

    core         taxonomy, records, gold sets, screening, paths, storage, errors
    encoders     sentence encoders (torch, ONNX, model2vec, packaged weights, fine-tuning)
    classifiers  the Classifier interface and registry; scikit-learn heads, ensembles, llm/
    evaluation   cross-validation, metrics, reports, comparison, leaderboard, learning curves
    labeling     bulk labeling with checkpoints and provenance; corpus shares
    ingest       fetch issues from GitHub or import exports
    review       the review queue and its decisions, back into gold and the codebook
    cli          the `classify` command (parses, calls one function here, prints)

The same functions serve Python users (docs/python-api.md):

    from classify import load_taxonomy, load_gold, make_classifier, run_eval, label_file
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:  # what type checkers see; at run time the names load on first use (below)
    from classify.classifiers.base import (
        Classifier,
        ModelOptions,
        NotFittedError,
        Prediction,
        known_specs,
        make_classifier,
        options_schema,
        register,
        validate_options,
    )
    from classify.core.errors import ClassifyError
    from classify.core.gold import GoldSet, load_gold
    from classify.core.goldfile import load_task
    from classify.core.progress import Progress
    from classify.core.records import read_records
    from classify.core.taxonomy import load_taxonomy
    from classify.evaluation.metrics import Score
    from classify.evaluation.pipeline import EvalRun, run_eval
    from classify.labeling.pipeline import label_file

# name -> the module that defines it. Lazy: `import classify` stays cheap (no scikit-learn, no torch).
_API = {
    "load_taxonomy": "classify.core.taxonomy",
    "load_gold": "classify.core.gold",
    "GoldSet": "classify.core.gold",
    "load_task": "classify.core.goldfile",
    "read_records": "classify.core.records",
    "ClassifyError": "classify.core.errors",
    "Progress": "classify.core.progress",
    "Classifier": "classify.classifiers.base",
    "Prediction": "classify.classifiers.base",
    "NotFittedError": "classify.classifiers.base",
    "register": "classify.classifiers.base",
    "make_classifier": "classify.classifiers.base",
    "known_specs": "classify.classifiers.base",
    "validate_options": "classify.classifiers.base",
    "options_schema": "classify.classifiers.base",
    "ModelOptions": "classify.classifiers.base",
    "run_eval": "classify.evaluation.pipeline",
    "EvalRun": "classify.evaluation.pipeline",
    "Score": "classify.evaluation.metrics",
    "label_file": "classify.labeling.pipeline",
}
__all__ = [  # the names of _API (tests/test_api.py checks that each resolves)
    "Classifier",
    "ClassifyError",
    "EvalRun",
    "GoldSet",
    "ModelOptions",
    "NotFittedError",
    "Prediction",
    "Progress",
    "Score",
    "known_specs",
    "label_file",
    "load_gold",
    "load_task",
    "load_taxonomy",
    "make_classifier",
    "options_schema",
    "read_records",
    "register",
    "run_eval",
    "validate_options",
]


def __getattr__(name: str) -> object:
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value  # found directly next time
        return value
    raise AttributeError(f"module 'classify' has no attribute {name!r}")
