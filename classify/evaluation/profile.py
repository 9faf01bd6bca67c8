"""A model's behaviour on gold, measured once and reused: out-of-fold predictions, the calibration
fitted on them, and the confidence thresholds that keep auto labels at a target kappa.

    prof = gold_profile("embed-logreg", gold, ModelOptions())      # cross-validates, or reads the cache
    prof.thresholds({"symptom": 0.87, "root_cause": 0.87})        # {dim: Threshold}
    prof.finalize(predictions)                                    # calibrate + compose new predictions

`classify eval`, `classify run --target-kappa` and the corpus report's quantification all read a model
through this one object, so they agree on what "calibrated" and "confident enough" mean. The
cross-validated predictions are cached per model, options, gold, taxonomy and split
(`<cache>/profiles/`); a damaged entry is recomputed with a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from classify.classifiers.base import ModelOptions, Prediction
from classify.core import paths
from classify.core.causeshown import NONE_SHOWN, SHOWN, nullable_dimensions, shown_dim, with_shown_dimensions
from classify.core.gold import GoldSet
from classify.core.writer import atomic_write_text
from classify.evaluation.calibration import (
    CalibrationFigures,
    apply_temperature,
    calibration_figures,
    fit_temperature,
)
from classify.evaluation.crossval import EvalResult, cross_validate
from classify.evaluation.thresholds import TARGETS, Threshold, search_thresholds

log = logging.getLogger("classify")

FORMAT = 1  # bump when the cached content changes meaning


def group_dim(dim: str) -> str:
    return f"{dim}_group"


def profile_key(spec: str, gold: GoldSet, options: ModelOptions, folds: int, seed: int) -> str:
    parts = {
        "format": FORMAT,
        "spec": spec,
        "options": options.run_meta(),
        "seed": options.seed,
        "gold": gold.hash,
        "taxonomy": gold.taxonomy.fingerprint(),
        "folds": folds,
        "split_seed": seed,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _pred_to_json(p: Prediction | None) -> dict | None:
    if p is None:
        return None
    return {"label": p.label, "confidence": p.confidence, "proba": p.proba, "status": p.status}


def _matrix(preds: Sequence[Prediction | None], classes: list[str]) -> np.ndarray | None:
    """Class-probability matrix of `preds`, or None when any prediction lacks probabilities."""
    if not preds or any(p is None or p.proba is None for p in preds):
        return None
    return np.array([[p.proba.get(c, 0.0) for c in classes] for p in preds if p is not None and p.proba is not None])


def _with_proba(p: Prediction, classes: list[str], row: np.ndarray) -> Prediction:
    b = int(row.argmax())
    return Prediction(
        label=classes[b],
        confidence=float(row[b]),
        proba={c: float(v) for c, v in zip(classes, row)},
        rationale=p.rationale,
        status=p.status,
        raw=p.raw,
        extra=p.extra,
    )


def _p_shown(p: Prediction) -> float | None:
    if p.proba is not None:
        return float(p.proba.get(SHOWN, 0.0))
    if p.label is None or p.confidence is None:
        return None
    return float(p.confidence) if p.label == SHOWN else 1.0 - float(p.confidence)


def compose(shown: Prediction | None, cause: Prediction | None) -> Prediction | None:
    """One prediction over the causes plus `none_shown`: P(c) = P(shown) * P(c | shown), and
    P(none_shown) = 1 - P(shown). Without class probabilities, the top cause's share only."""
    if shown is None or cause is None:
        return None
    ps = _p_shown(shown)
    if ps is None:
        return Prediction(label=None, status="invalid", raw=shown.raw)
    if cause.proba is not None:
        proba = {c: ps * v for c, v in cause.proba.items()}
        proba[NONE_SHOWN] = 1.0 - ps
    elif cause.label is not None and cause.confidence is not None:
        proba = {cause.label: ps * float(cause.confidence), NONE_SHOWN: 1.0 - ps}
    else:
        proba = {NONE_SHOWN: 1.0 - ps}
    label = max(proba, key=lambda c: proba[c])
    full = cause.proba is not None or shown.proba is not None
    return Prediction(
        label=label,
        confidence=proba[label],
        proba=proba if full and cause.proba is not None else None,
        rationale=cause.rationale,
        extra=cause.extra,
    )


@dataclass
class DimensionScores:
    """One selective dimension's out-of-fold predictions beside gold, calibrated."""

    dim: str
    y_true: list[str]
    predictions: list[Prediction]
    folds: list[int]
    calibrated: bool  # False when the model gives no class probabilities
    before: CalibrationFigures
    after: CalibrationFigures
    uncalibrated: list[Prediction] = field(default_factory=list)  # the same rows before calibration

    @property
    def labels(self) -> list[str | None]:
        return [p.label for p in self.predictions]

    @property
    def confidence(self) -> list[float | None]:
        return [p.confidence for p in self.predictions]


@dataclass
class GoldProfile:
    spec: str
    gold: GoldSet  # with the `<dim>_shown` dimensions (classify.core.causeshown)
    result: EvalResult
    base_dims: list[str]  # the taxonomy's own dimensions, in order
    temperatures: dict[str, float | None] = field(default_factory=dict)
    from_cache: bool = False

    @property
    def nullable(self) -> list[str]:
        return [d for d in self.base_dims if shown_dim(d) in self.gold.taxonomy.dimensions]

    @property
    def grouped(self) -> dict[str, str]:
        """Group-level selective dimensions (`root_cause_group`) -> the dimension whose groups they are."""
        return {group_dim(d): d for d in self.base_dims if self.gold.taxonomy.dimensions[d].groups}

    @property
    def selective_dims(self) -> list[str]:
        """What a run can route: the taxonomy's dimensions, then their group levels."""
        return [*self.base_dims, *self.grouped]

    def parts(self, dim: str) -> list[str]:
        """The model dimensions whose predictions make up selective dimension `dim`."""
        if dim in self.grouped:
            return []  # derived from its dimension's prediction; no model output of its own
        return [shown_dim(dim), dim] if dim in self.nullable else [dim]

    def _to_group(self, dim: str, p: Prediction | None) -> Prediction | None:
        """A category-level prediction summed up to its groups (`none_shown` stays itself)."""
        if p is None or p.label is None:
            return p
        tdim = self.gold.taxonomy.dimensions[dim]

        def g(c: str) -> str:
            return c if c == NONE_SHOWN else str(tdim.group_of(c))

        if p.proba is None:
            return Prediction(label=g(p.label), confidence=p.confidence, status=p.status)
        proba: dict[str, float] = {}
        for c, v in p.proba.items():
            proba[g(c)] = proba.get(g(c), 0.0) + v
        label = max(proba, key=lambda c: proba[c])
        return Prediction(label=label, confidence=proba[label], proba=proba, status=p.status)

    def _fit_temperatures(self) -> None:
        for d in self.gold.taxonomy.dimension_ids:
            idx, y = self.gold.labeled(d)
            classes = self.gold.taxonomy.dimensions[d].ids
            preds = [self.result.predictions[d][i] for i in idx]
            P = _matrix(preds, classes)
            if P is None or not idx:
                self.temperatures[d] = None
                continue
            self.temperatures[d] = fit_temperature(P, np.array([classes.index(v) for v in y]))

    def calibrate(
        self, dim: str, preds: Sequence[Prediction | None], T: float | None = None
    ) -> list[Prediction | None]:
        """`preds` of `dim` with the temperature fitted on all out-of-fold predictions (or `T`)."""
        T = self.temperatures.get(dim) if T is None else T
        if T is None:
            return list(preds)
        classes = self.gold.taxonomy.dimensions[dim].ids
        out: list[Prediction | None] = []
        for p in preds:
            if p is None or p.proba is None:
                out.append(p)
                continue
            row = apply_temperature(np.array([[p.proba.get(c, 0.0) for c in classes]]), T)[0]
            out.append(_with_proba(p, classes, row))
        return out

    def finalize(self, predictions: dict[str, list[Prediction]]) -> dict[str, list[Prediction | None]]:
        """New records' predictions (from a model trained on all of gold) made comparable with the
        thresholds: calibrated, and each nullable dimension composed with its `_shown` decision."""
        cal = {d: self.calibrate(d, ps) for d, ps in predictions.items()}
        out: dict[str, list[Prediction | None]] = {}
        for d in self.base_dims:
            if d in self.nullable:
                out[d] = [compose(s, c) for s, c in zip(cal[shown_dim(d)], cal[d])]
            else:
                out[d] = cal[d]
        for gd, d in self.grouped.items():
            out[gd] = [self._to_group(d, p) for p in out[d]]
        return out

    def scores(self, dim: str, cross_fit: bool = True) -> DimensionScores:
        """Out-of-fold predictions of selective dimension `dim` (a base dimension; a nullable one is
        composed with its `_shown` decision and scored over every record, null gold as `none_shown`).

        `cross_fit` calibrates each fold with a temperature fitted on the other folds (honest figures
        for a report); False uses the one fitted on everything (what a run applies to new records).
        """
        res, g = self.result, self.gold
        folds = np.array(res.folds)
        if dim in self.grouped:
            base = self.scores(self.grouped[dim], cross_fit=cross_fit)
            tdim = g.taxonomy.dimensions[self.grouped[dim]]
            y_true = [y if y == NONE_SHOWN else str(tdim.group_of(y)) for y in base.y_true]
            after = [self._to_group(base.dim, p) for p in base.predictions]
            before = [self._to_group(base.dim, p) for p in base.uncalibrated]
            return DimensionScores(
                dim,
                y_true,
                after,  # type: ignore[arg-type]
                base.folds,
                base.calibrated,
                _figures(y_true, before),  # type: ignore[arg-type]
                _figures(y_true, after),  # type: ignore[arg-type]
                before,  # type: ignore[arg-type]
            )

        def calibrated(d: str) -> tuple[list[Prediction | None], bool]:
            preds = res.predictions[d]
            classes = g.taxonomy.dimensions[d].ids
            idx, y = g.labeled(d)
            P = _matrix([preds[i] for i in range(len(g)) if preds[i] is not None], classes)
            if P is None or self.temperatures.get(d) is None:
                return list(preds), False
            if len({res.folds[i] for i in range(len(g)) if preds[i] is not None}) < 2:
                return list(preds), False  # a held-out test set: no other fold to fit a temperature on
            if not cross_fit:
                return self.calibrate(d, preds), True
            rows = [i for i in range(len(g)) if preds[i] is not None]
            Pl = np.array([[preds[i].proba.get(c, 0.0) for c in classes] for i in rows])  # type: ignore[union-attr]
            # Fit per fold on the labeled rows of the other folds, apply to every row of the fold.
            out = list(preds)
            lab = set(idx)
            ys = {i: classes.index(v) for i, v in zip(idx, y)}
            for f in np.unique(folds[rows]):
                in_f = [j for j, i in enumerate(rows) if folds[i] == f]
                train = [j for j, i in enumerate(rows) if folds[i] != f and i in lab]
                if not train:
                    return self.calibrate(d, preds), True
                T = fit_temperature(Pl[train], np.array([ys[rows[j]] for j in train]))
                Pf = apply_temperature(Pl[in_f], T)
                for j, r in zip(in_f, Pf):
                    i = rows[j]
                    out[i] = _with_proba(preds[i], classes, r)  # type: ignore[arg-type]
            return out, True

        raw_preds = res.predictions[dim]
        if dim in self.nullable:
            shown, _ = calibrated(shown_dim(dim))
            cause, ok = calibrated(dim)
            preds = [compose(s, c) for s, c in zip(shown, cause)]
            raw = [compose(s, c) for s, c in zip(res.predictions[shown_dim(dim)], raw_preds)]
            truth = [y if y is not None else NONE_SHOWN for y in g.labels[dim]]
        else:
            preds, ok = calibrated(dim)
            raw = list(raw_preds)
            truth = list(g.labels[dim])  # type: ignore[arg-type]
        keep = [i for i in range(len(g)) if truth[i] is not None and preds[i] is not None]
        y_true = [str(truth[i]) for i in keep]
        p_after = [preds[i] for i in keep]
        p_before = [raw[i] for i in keep]
        return DimensionScores(
            dim,
            y_true,
            p_after,  # type: ignore[arg-type]
            [res.folds[i] for i in keep],
            ok,
            _figures(y_true, p_before),  # type: ignore[arg-type]
            _figures(y_true, p_after),  # type: ignore[arg-type]
            p_before,  # type: ignore[arg-type]
        )

    def thresholds(self, targets: dict[str, float], cross_fit: bool = False) -> dict[str, Threshold]:
        out = {}
        for d, target in targets.items():
            s = self.scores(d, cross_fit=cross_fit)
            out[d] = search_thresholds(s.y_true, s.labels, s.confidence, [target])[0]
        return out

    def selective_report(self, targets: Sequence[float] = TARGETS) -> dict:
        """Per selective dimension: calibration before/after and coverage at each target kappa (honest:
        cross-fitted calibration, thresholds searched on the out-of-fold predictions)."""
        out: dict[str, Any] = {}
        for d in self.selective_dims:
            s = self.scores(d, cross_fit=True)
            ths = search_thresholds(s.y_true, s.labels, s.confidence, targets)
            out[d] = {
                "n": len(s.y_true),
                "scope": "all records (null gold = none_shown)"
                if self.grouped.get(d, d) in self.nullable
                else "labeled records",
                "calibration": {
                    "method": "temperature scaling (cross-fitted)" if s.calibrated else "none (no class probabilities)",
                    "before": s.before.as_dict(),
                    "after": s.after.as_dict(),
                    "temperature": {x: self.temperatures.get(x) for x in self.parts(self.grouped.get(d, d))},
                },
                "coverage": {f"{t.target:.2f}": t.as_dict() for t in ths},
            }
        return out


def _figures(y_true: list[str], preds: list[Prediction]) -> CalibrationFigures:
    conf = np.array([np.nan if p.confidence is None else float(p.confidence) for p in preds], dtype=float)
    correct = np.array([p.label == y for p, y in zip(preds, y_true)])
    classes = sorted({c for p in preds if p.proba for c in p.proba} | set(y_true))
    if all(p.proba is not None for p in preds) and preds:
        P = np.array([[p.proba.get(c, 0.0) for c in classes] for p in preds if p.proba is not None])
        return calibration_figures(conf, correct, P, [classes.index(y) for y in y_true])
    return calibration_figures(conf, correct)


def derived_gold(gold: GoldSet, cause_shown: bool | None = None) -> GoldSet:
    """Gold as profiles see it: with a `<dim>_shown` decision for every nullable dimension.

    `cause_shown=None` means on, for every spec: trained specs learn the decision like any dimension,
    LLM specs are asked it right before the dimension in the same request (classify.classifiers.llm).
    `cause_shown=False` leaves gold as it is (the dimension is then routed on its own confidence).
    """
    if cause_shown is False:
        return gold
    return with_shown_dimensions(gold, nullable_dimensions(gold))


def _move_aside(path: Path, why: object) -> None:
    """A cache entry is rebuildable: set the damaged one aside (kept for a post-mortem) and go on."""
    n = 0
    while (aside := path.with_name(f"{path.name}.damaged{'-' + str(n) if n else ''}")).exists():
        n += 1
    log.warning("warning: profile cache %s is damaged (%s); moved to %s and recomputed", path, why, aside.name)
    path.rename(aside)


def _cache_path(key: str) -> Path:
    d = paths.cache_dir() / "profiles"
    if d.exists() and not d.is_dir():
        _move_aside(d, "not a folder")
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{key}.json"


def _number(x: Any) -> float | None:
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"not a number: {x!r}")
    return float(x)


def _pred_from_json(d: Any) -> Prediction | None:
    if d is None:
        return None
    if not isinstance(d, dict) or not isinstance(d.get("status"), str):
        raise ValueError("a prediction that is not an object with a status")
    label, proba = d.get("label"), d.get("proba")
    if label is not None and not isinstance(label, str):
        raise ValueError(f"label {label!r} is not text")
    if proba is not None:
        if not isinstance(proba, dict):
            raise ValueError("probabilities that are not an object")
        proba = {str(c): float(_number(v) or 0.0) for c, v in proba.items()}
    return Prediction(label=label, confidence=_number(d.get("confidence")), proba=proba, status=d["status"])


def _load_cached(key: str, gold: GoldSet) -> dict | None:
    path = _cache_path(key)
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or doc.get("key") != key or doc.get("ids") != gold.ids:
            raise ValueError("content does not match its key")
        preds = {d: [_pred_from_json(x) for x in v] for d, v in doc["predictions"].items()}
        if set(preds) != set(gold.taxonomy.dimension_ids) or any(len(v) != len(gold) for v in preds.values()):
            raise ValueError("dimensions or lengths differ")
        folds = doc["folds"]
        if len(folds) != len(gold) or any(isinstance(f, bool) or not isinstance(f, int) for f in folds):
            raise ValueError("folds do not match the gold set")
        return {"predictions": preds, "folds": folds, "provenance": doc.get("provenance", {})}
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as e:  # UnicodeDecodeError is a ValueError
        _move_aside(path, e)
        return None


def store_profile(key: str, res: EvalResult) -> None:
    doc = {
        "key": key,
        "spec": res.spec,
        "ids": res.gold.ids,
        "folds": res.folds,
        "provenance": res.provenance,
        "predictions": {d: [_pred_to_json(p) for p in ps] for d, ps in res.predictions.items()},
    }
    try:
        atomic_write_text(_cache_path(key), json.dumps(doc))
    except OSError as e:  # a cache that cannot be written costs time next run, nothing else
        log.warning("warning: could not write the profile cache (%s); the next run cross-validates again", e)


def profile_from_result(res: EvalResult, base_dims: list[str], from_cache: bool = False) -> GoldProfile:
    prof = GoldProfile(res.spec, res.gold, res, base_dims, from_cache=from_cache)
    prof._fit_temperatures()
    return prof


def gold_profile(
    spec: str,
    gold: GoldSet,
    options: ModelOptions | None = None,
    *,
    folds: int = 5,
    seed: int = 0,
    use_cache: bool = True,
    cause_shown: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> GoldProfile:
    """The profile of `spec` on `gold` (a plain gold set: the `_shown` dimensions are added here)."""
    options = options or ModelOptions(seed=seed)
    base_dims = gold.taxonomy.dimension_ids
    g = derived_gold(gold, cause_shown)
    key = profile_key(spec, g, options, folds, seed)
    cached = _load_cached(key, g) if use_cache else None
    if cached is not None:
        res = EvalResult(spec, g, cached["predictions"], cached["folds"], {}, cached["provenance"], 0.0, "cv")
        return profile_from_result(res, base_dims, from_cache=True)
    res = cross_validate(spec, g, options, k=folds, seed=seed, progress=progress)
    store_profile(key, res)
    return profile_from_result(res, base_dims)
