"""Evaluation: cross-validated agreement with gold, reports, comparisons, leaderboard, learning curves.

crossval        predictions on gold by models that never saw them (k-fold or a test file)
agreement       coders' kappa, group roll-up of category predictions
metrics         kappa with bootstrap CI, per-category scores, selective labeling
report          the run folder: metrics.json, report.md, predictions.jsonl, pictures
compare         an earlier run beside this one (same folds)
leaderboard     one table of run folders
learning_curve  kappa against gold size
pipeline        `run_eval`: what `classify eval` does, for Python users
"""

from typing import Any

__all__ = ["run_eval", "estimate_eval", "EvalRun"]


def __getattr__(name: str) -> Any:  # lazy: `classify --help` must not import scikit-learn
    if name in __all__:
        from classify.evaluation import pipeline

        return getattr(pipeline, name)
    raise AttributeError(name)
