"""Spec names without importing any classifier: the entry-point group the families register under,
and the names it declares. `classify models` lists these; importing the classifiers themselves pulls in
scikit-learn (every Classifier is a scikit-learn estimator), and torch for some."""

from __future__ import annotations

from importlib.metadata import entry_points

ENTRY_POINT_GROUP = "classify.classifiers"


def declared_spec_names() -> list[str]:
    """The spec names installed packages (this one included) declare, loaded or not."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})
