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

The same functions serve Python users:

    from classify import load_taxonomy, load_gold, make_classifier, run_eval, label_file
"""

from typing import Any

__version__ = "0.1.0"

_API = {
    "load_taxonomy": "classify.core.taxonomy",
    "load_gold": "classify.core.gold",
    "load_task": "classify.core.goldfile",
    "read_records": "classify.core.records",
    "ClassifyError": "classify.core.errors",
    "make_classifier": "classify.classifiers.base",
    "known_specs": "classify.classifiers.base",
    "validate_options": "classify.classifiers.base",
    "options_schema": "classify.classifiers.base",
    "ModelOptions": "classify.classifiers.base",
    "run_eval": "classify.evaluation.pipeline",
    "label_file": "classify.labeling.pipeline",
}
__all__ = sorted(_API)


def __getattr__(name: str) -> Any:  # lazy: importing classify stays cheap
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'classify' has no attribute {name!r}")
