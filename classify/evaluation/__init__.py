"""Evaluation: cross-validated agreement with gold, reports, comparisons, leaderboard, learning curves.

crossval        predictions on gold by models that never saw them (k-fold or a test file)
leaks           leak checks: what each fold's fit() received, a test file repeating gold, near-duplicates
agreement       coders' kappa, group roll-up of category predictions
metrics         kappa with bootstrap CI, per-category scores, selective labeling; compute_metrics, Score
report          the run folder: metrics.json, report.md, predictions.jsonl, pictures
compare         an earlier run beside this one (same folds)
leaderboard     one table of run folders
learning_curve  kappa against gold size
pipeline        `run_eval`: what `classify eval` does, for Python users
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers see; at run time the names load on first use
    from classify.evaluation.pipeline import EvalRun, estimate_eval, run_eval

__all__ = ["run_eval", "estimate_eval", "EvalRun"]


def __getattr__(name: str) -> object:  # lazy: `classify --help` must not import scikit-learn
    if name in __all__:
        from classify.evaluation import pipeline

        return getattr(pipeline, name)
    raise AttributeError(name)
