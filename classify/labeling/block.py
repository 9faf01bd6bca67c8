"""Label one block of records: records + a fitted run -> label rows. No file I/O, no global state.

Every engine calls this and only this to make rows: the resumable local loop
(classify.labeling.resumable) per checkpointed chunk, the Ray engine (classify.labeling.rayengine) per
batch on each worker. Rows are therefore the same whichever engine runs them (routing, screening and
provenance included): the engines differ only in how they read records and store rows.

    run = FittedRun(clf, provenance, dims=tax.dimension_ids)
    rows = label_block(run, records)

(The models themselves may keep caches: an encoder's embedding cache, an LLM's answer cache. Those
are the models' own, keyed by content, and change no row.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from classify.classifiers.base import Classifier, Prediction
from classify.core import labelrow, screening
from classify.core.records import CORE_FIELDS, Record

DEFAULT_KEEP = ("title", "url")  # input fields copied to every row, so a spot-check needs no join

# Turns a block's predictions ({dim: [Prediction per record]}) into label fields per record; the
# default is `default_fields`, `classify run --target-kappa` routes (classify.labeling.routing).
FieldsFn = Callable[[dict[str, list[Prediction]]], list[dict[str, Any]]]


def label_fields(preds: dict[str, Prediction]) -> dict[str, Any]:
    """One record's label fields, from its prediction per dimension."""
    row: dict[str, Any] = {}
    for d, p in preds.items():
        row[d] = p.label
        row.update(
            labelrow.answer_fields(
                d,
                confidence=p.confidence,
                proba=p.proba,
                rationale=p.rationale,
                invalid=p.status != "ok",
                raw=p.raw,
                extra=p.extra,
            )
        )
    return row


def default_fields(preds: dict[str, list[Prediction]]) -> list[dict[str, Any]]:
    n = len(next(iter(preds.values()))) if preds else 0
    return [label_fields({d: preds[d][i] for d in preds}) for i in range(n)]


@dataclass
class FittedRun:
    """Everything a block needs: the fitted labeling model, the optional screening step, how
    predictions become fields (plain or routed), the provenance every row carries, and which input
    fields are kept. Picklable once its models are closed (the Ray engine ships it to workers)."""

    clf: Classifier
    provenance: dict[str, Any]
    dims: list[str]  # the label fields a screened-out row holds empty
    keep: tuple[str, ...] = DEFAULT_KEEP
    fields: FieldsFn = default_fields
    screen: Callable[[list[Record]], list[Prediction]] | None = None
    screen_prepare: Callable[..., None] | None = None
    screen_fields: Callable[[list[Prediction]], list[dict[str, Any]]] | None = None
    routed: bool = False

    def prepare(self, records: list[Record], progress: Callable[[int], None] | None = None) -> None:
        """One encoding pass over a block (length-sorted: little padding). With screening it is the
        screening model's: it reads every record, and with the same encoder the labeling model then
        finds the kept ones cached; the labeling model's would also encode records screened out."""
        prepare = self.clf.prepare if self.screen is None else self.screen_prepare
        if prepare is not None:
            prepare(records, progress=progress)


def label_block(run: FittedRun, records: list[Record], *, prepared: bool = False) -> list[dict[str, Any]]:
    """One row per record, in order. `prepared`: the caller already ran `run.prepare` on a block
    holding these records (the local loop encodes 4 checkpointed chunks at once)."""
    if not records:
        return []
    if not prepared:
        run.prepare(records)
    if run.screen is None:
        return [
            {**_base(r, run.keep), **f, **run.provenance} for r, f in zip(records, run.fields(run.clf.predict(records)))
        ]
    decisions = run.screen(records)
    if run.screen_fields is None:
        decided = [
            {"screening": d.label, **labelrow.answer_fields("screening", confidence=d.confidence)} for d in decisions
        ]
        kept = [i for i, d in enumerate(decisions) if d.label == screening.PASS]
    else:  # routed: a doubtful screening decision is reviewed, and its record labeled for the reviewer
        decided = run.screen_fields(decisions)
        kept = [
            i
            for i, f in enumerate(decided)
            if labelrow.suggestion(f, "screening") == screening.PASS
            or labelrow.status(f, "screening") is labelrow.Status.REVIEW
        ]
    labeled = run.fields(run.clf.predict([records[i] for i in kept])) if kept else []
    by_i = dict(zip(kept, labeled))
    rows = []
    for i, r in enumerate(records):
        row = {**_base(r, run.keep), **decided[i]}
        if i in by_i:
            row.update(by_i[i])
        else:  # screened out: no symptom or root cause
            row.update(labelrow.screened_out_fields(run.dims, say_why=run.routed))
        row.update(run.provenance)
        rows.append(row)
    return rows


def _base(r: Record, keep: tuple[str, ...]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": r.id, "repo": r.repo}
    for k in keep:
        row[k] = getattr(r, k) if k in CORE_FIELDS else r.fields.get(k)
    return row
