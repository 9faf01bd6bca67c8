"""Route each label: given alone by the model (`auto`) where its calibrated confidence passes the
threshold that keeps a target kappa (classify.evaluation.thresholds), else to people (`review`).

    router = make_router("embed-logreg", gold, options, {"symptom": 0.87, "root_cause": 0.87})
    router.fields(clf.predict(records))   # per record: <dim>, <dim>_status, <dim>_suggestion, ...

For a dimension gold leaves null (root cause), the model's "cause shown" decision is part of the
label: a confident "the thread shows no cause" is status `none_shown` (no label), a doubtful one is
`review`; a cause is never given where the model is not confident that one is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from classify.classifiers.base import (
    Classifier,
    ModelOptions,
    Prediction,
    make_classifier,
    uses_llm,
)
from classify.classifiers.foldmodels import FoldModels
from classify.core import labelrow
from classify.core.causeshown import NONE_SHOWN, shown_dim
from classify.core.errors import UsageError
from classify.core.gold import GoldSet
from classify.core.labelrow import Status
from classify.core.taxonomy import Taxonomy
from classify.evaluation.profile import GoldProfile, gold_profile, group_dim
from classify.evaluation.thresholds import Threshold, apply_threshold


def routable_dimensions(tax: Taxonomy) -> list[str]:
    """What `--target` may name: the taxonomy's dimensions, then the group level of those with groups
    (`root_cause_group`: a group can be sure where its category is not)."""
    return [*tax.dimension_ids, *(group_dim(d) for d, dim in tax.dimensions.items() if dim.groups)]


def parse_targets(target_kappa: float | None, per_dim: dict[str, float], dims: list[str]) -> dict[str, float]:
    """Targets per dimension: `--target-kappa` for every dimension, `--target dim=k` overriding one."""
    if target_kappa is not None and not 0 < target_kappa < 1:
        raise UsageError(f"--target-kappa must be between 0 and 1 (exclusive), got {target_kappa}")
    for d, k in per_dim.items():
        if d not in dims:
            raise UsageError(f"--target {d}={k}: unknown dimension {d!r} (known: {', '.join(dims)})")
    out: dict[str, float] = {d: target_kappa for d in dims if target_kappa is not None}
    out.update(per_dim)
    for d, k in out.items():
        if not 0 < k < 1:
            raise UsageError(f"--target {d}={k}: the target must be between 0 and 1 (exclusive)")
    return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


@dataclass
class Router:
    profile: GoldProfile
    thresholds: dict[str, Threshold]

    @property
    def training_gold(self) -> GoldSet:
        """Gold as the labeling model must be trained (with the `_shown` decisions)."""
        return self.profile.gold

    def labeling_model(self, spec: str, options: ModelOptions) -> Classifier:
        """The unfitted model to label new reports with (fit it on `training_gold`): the fold models
        for trained specs, one model for LLM specs (their fold "models" differ by examples only)."""
        g = self.training_gold
        if uses_llm(spec):
            return make_classifier(spec, g.taxonomy, options)
        return FoldModels(spec, g.taxonomy, options, list(self.profile.result.folds))

    def fields(self, preds: dict[str, list[Prediction]]) -> list[dict[str, Any]]:
        """Per record, the label fields of every dimension (raw probabilities kept for the corpus report)."""
        n = len(next(iter(preds.values()))) if preds else 0
        final = self.profile.finalize(preds)
        # A dimension without a target is labeled as a plain run labels it (the cause given as the model
        # sees it, its group that cause's group), so routing one dimension changes no other.
        plain = {d: self.profile.calibrate(d, preds[d]) for d in self.profile.base_dims if d in preds}
        for gd, d in self.profile.grouped.items():
            if d in plain:
                tdim = self.profile.gold.taxonomy.dimensions[d]
                plain[gd] = [_group_label(tdim, p) for p in plain[d]]
        answer = self._answers_without_confidence(preds, n)
        rows: list[dict[str, Any]] = [{} for _ in range(n)]
        for d, plist in final.items():
            th = self.thresholds.get(d)
            for i, p in enumerate(plist):
                row = rows[i]
                for part in self.profile.parts(d):
                    raw = preds[part][i]
                    row.update(
                        labelrow.answer_fields(
                            part,
                            proba=raw.proba,
                            rationale=raw.rationale,
                            invalid=raw.status != "ok",
                            raw=raw.raw,
                            with_confidence=False,
                        )
                    )
                ok = p is not None and p.status == "ok" and p.label is not None
                label = p.label if ok and p is not None else None
                conf = p.confidence if ok and p is not None else None
                if th is None:  # no target for this dimension: labeled as without routing
                    q = plain[d][i]
                    row[d] = q.label if q is not None else None
                    row[f"{d}_confidence"] = _r(q.confidence) if q is not None else None
                    continue
                auto = ok and apply_threshold(conf, th.threshold)
                status = (Status.NONE_SHOWN if label == NONE_SHOWN else Status.AUTO) if auto else Status.REVIEW
                row.update(
                    labelrow.routed_fields(
                        d,
                        label=label,
                        status=status,
                        suggestion=label if label is not None or d not in answer else answer[d][i],
                        confidence=conf,
                    )
                )
        return rows

    def _answers_without_confidence(self, preds: dict[str, list[Prediction]], n: int) -> dict[str, list[str | None]]:
        """Per selective dimension (and its groups), the model's own answer where its decision and cause
        were valid but carry no confidence to compose (an LLM without logprobs, one sample): the cause
        it named, or none_shown. Such a label goes to review; the reviewer still sees what it said."""
        out: dict[str, list[str | None]] = {}
        for d in self.profile.nullable:
            shown, cause = preds.get(shown_dim(d)), preds.get(d)
            if shown is None or cause is None:
                continue
            vals: list[str | None] = []
            for s, c in zip(shown, cause):
                if s is None or s.status != "ok" or s.label is None:
                    vals.append(None)
                elif s.label == NONE_SHOWN:
                    vals.append(NONE_SHOWN)
                else:
                    vals.append(c.label if c is not None and c.status == "ok" else None)
            out[d] = vals
        for gd, d in self.profile.grouped.items():
            if d in out:
                tdim = self.profile.gold.taxonomy.dimensions[d]
                out[gd] = [v if v in (None, NONE_SHOWN) else tdim.group_of(v) for v in out[d]]
        return out

    def provenance(self) -> dict[str, Any]:
        return {
            "routing": {
                d: {
                    "target_kappa": t.target,
                    "threshold": _r(t.threshold),
                    "gold_coverage": _r(t.coverage),
                    "expected_kappa": _r(t.kappa),
                    "kappa_lower_bound": _r(t.kappa_lo),
                    "method": t.method,
                }
                for d, t in self.thresholds.items()
            }
        }


def _group_label(tdim, p: Prediction | None) -> Prediction | None:
    if p is None or p.label is None:
        return p
    return Prediction(label=tdim.group_of(p.label), confidence=p.confidence)


def make_router(
    spec: str,
    gold: GoldSet,
    options: ModelOptions,
    targets: dict[str, float],
    *,
    folds: int = 5,
    progress: Callable[[int, int], None] | None = None,
) -> Router:
    """Thresholds for `targets` from `spec`'s gold profile (cross-validated once, then cached)."""
    prof = gold_profile(spec, gold, options, folds=folds, seed=options.seed, progress=progress)
    return Router(prof, prof.thresholds(targets))
