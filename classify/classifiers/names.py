"""Spec names without importing any classifier: the entry-point group the families register under,
and the names it declares. `classify models` lists these; importing the classifiers themselves pulls in
scikit-learn (every Classifier is a scikit-learn estimator), and torch for some."""

from __future__ import annotations

from importlib.metadata import entry_points

ENTRY_POINT_GROUP = "classify.classifiers"


def declared_spec_names() -> list[str]:
    """The spec names installed packages (this one included) declare, loaded or not."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


# The spec `classify run` and `classify eval` use without --model: the strongest measured to keep the whole main
# job (scripts/main.sh) under 15 minutes on a fresh 2-core machine (docs/results.md, "The default").
# `classify models` names the strongest regardless of time.
DEFAULT_MODEL = "tfidf-embed"
# Screening (is a thread a failure report at all?) is a separate, easier decision; the cheap frozen encoder serves it.
DEFAULT_SCREEN_MODEL = "embed-logreg"
