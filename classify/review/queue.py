"""Build the review queue: the items where a human decision would teach the most.

Sources, each adding a reason to an (issue id, dimension) item:
- eval runs (evals/<run>/predictions.jsonl): a model's out-of-fold label differs from gold;
- the same runs' out-of-fold probabilities, through cleanlab's find_label_issues: gold labels
  that look wrong given what the model learned from the other folds;
- `classify run` outputs on unlabeled data: two runs disagree, or a label's confidence is low;
- coders' notes (adjudication notes with `CODEBOOK:` proposals) that ask for a codebook change.

Order: an item's score is its strongest reason's weight (a confident disagreement weighs its
confidence; a likely mislabel 1 - p(gold label)), plus a bonus for independent reasons.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from classify.core import labelrow, screening
from classify.core.causeshown import NONE_SHOWN
from classify.core.gold import GoldSet
from classify.core.records import CORE_FIELDS, Record, RecordsError, read_records, read_rows
from classify.evaluation.runfolder import PREDICTIONS, RunFolder, prediction_status, read_run
from classify.review.schema import ModelView, Queue, QueueError, QueueItem, QueueMeta, Reason, ReasonKind

CODEBOOK_WEIGHT = 0.3  # a coder's note asks a codebook question; no model evidence behind it
EXTRA_KIND_BONUS = 0.25  # an item flagged for two different kinds of reason is worth more
EXTRA_SOURCE_BONUS = 0.05


def load_eval_run(path: str | Path) -> RunFolder:
    run = read_run(path, error=QueueError)
    if not (run.path / PREDICTIONS).exists():
        raise QueueError(f"{path}: not an eval run folder ({PREDICTIONS} missing)")
    run.predictions(error=QueueError)  # read (and checked) now; later calls return the same rows
    return run


def _check_eval_matches(run: RunFolder, gold: GoldSet) -> None:
    tax = gold.taxonomy
    fp = run.meta.get("taxonomy_fingerprint")
    if run.meta.get("taxonomy") != tax.label or (fp and fp != tax.fingerprint()):
        raise QueueError(
            f"{run.path}: evaluated against taxonomy {run.meta.get('taxonomy')} ({fp}), "
            f"but the queue uses {tax.label} ({tax.fingerprint()}); pass the run's --taxonomy (--task screening for a screening run) or evaluate again"
        )
    if run.meta.get("gold_hash") != gold.hash:
        raise QueueError(
            f"{run.path}: evaluated on gold {run.meta.get('gold')} (hash {run.meta.get('gold_hash')}), "
            f"but the gold given has hash {gold.hash}; pass the run's --gold or evaluate again"
        )
    unknown = sorted({str(r.get("id")) for r in run.predictions()} - set(gold.ids))
    if unknown:
        raise QueueError(f"{run.path}: {len(unknown)} predicted ids are not in the gold set: {unknown[:10]}")


def _fmt(c: float | None) -> str:
    return "?" if c is None else f"{c:.2f}"


def _eval_views(run: RunFolder, gold: GoldSet, dims: list[str], views, reasons) -> None:
    pos = {rid: i for i, rid in enumerate(gold.ids)}
    model = str(run.meta.get("model", run.name))
    for row in run.predictions():
        rid = str(row["id"])
        for d in dims:
            g = gold.labels[d][pos[rid]]
            label = row.get(d)
            conf = row.get(f"{d}_confidence")
            proba = row.get(f"{d}_proba") or None
            views[(rid, d)].append(
                ModelView(
                    source=run.name,
                    model=model,
                    label=label,
                    confidence=conf,
                    rationale=row.get(f"{d}_rationale"),
                    p_gold=(float(proba.get(g, 0.0)) if proba and g is not None else None),
                    status=prediction_status(row, d),
                )
            )
            if g is not None and label is not None and label != g:
                reasons[(rid, d)].append(
                    Reason(
                        kind="model_disagrees",
                        source=run.name,
                        weight=float(conf) if conf is not None else 0.5,
                        detail=f"{model} says {label} ({_fmt(conf)}), gold says {g}",
                    )
                )


def _cleanlab_reasons(run: RunFolder, gold: GoldSet, dims: list[str], reasons) -> int:
    """Gold labels cleanlab flags as likely wrong from the run's out-of-fold probabilities."""
    from cleanlab.filter import find_label_issues

    pos = {rid: i for i, rid in enumerate(gold.ids)}
    model = str(run.meta.get("model", run.name))
    n_flagged = 0
    for d in dims:
        classes = gold.taxonomy.dimensions[d].ids
        ids, labels, probs = [], [], []
        for row in run.predictions():
            g = gold.labels[d][pos[str(row["id"])]]
            proba = row.get(f"{d}_proba")
            if g is None or not isinstance(proba, dict):
                continue
            p = np.array([float(proba.get(c, 0.0)) for c in classes])
            if p.sum() <= 0:
                continue
            ids.append(str(row["id"]))
            labels.append(classes.index(g))
            probs.append(p / p.sum())
        if len(ids) < 10 or len(set(labels)) < 2:
            continue  # too little for cleanlab's per-class noise estimates
        P = np.vstack(probs)
        with warnings.catch_warnings():
            # rare categories: cleanlab warns it may miss issues there; the queue's other reasons cover them
            warnings.simplefilter("ignore", UserWarning)
            flagged = find_label_issues(
                np.array(labels),
                P,
                filter_by="prune_by_noise_rate",
                return_indices_ranked_by="self_confidence",
                n_jobs=1,
            )
        for i in flagged:
            q = float(P[i, labels[i]])
            best = classes[int(P[i].argmax())]
            reasons[(ids[i], d)].append(
                Reason(
                    kind="likely_mislabeled",
                    source=f"cleanlab:{run.name}",
                    weight=1.0 - q,
                    detail=f"cleanlab (on {model}'s out-of-fold probabilities): p(gold {classes[labels[i]]}) = {q:.2f}, "
                    f"most likely {best} ({P[i].max():.2f})",
                )
            )
            n_flagged += 1
    return n_flagged


def _load_label_run(path: Path, taxonomy_label: str, dims: list[str]) -> list[dict]:
    try:
        rows = read_rows(path)
    except RecordsError as e:
        raise QueueError(str(e)) from e
    other = sorted(
        {
            str(t)
            for r in rows
            for d in dims
            if d in r
            for t in [labelrow.dimension_taxonomy(r, d)]
            if t not in (None, taxonomy_label)
        }
    )
    if other:
        raise QueueError(f"{path}: labeled with taxonomy {', '.join(other)}, but the queue uses {taxonomy_label}")
    if not any(d in r for r in rows for d in dims):
        raise QueueError(
            f"{path}: no {', '.join(dims)} labels in it (labeled with another taxonomy? "
            f"screening labels come from `classify run --screen`)"
        )
    if any(not r.get("id") for r in rows):
        raise QueueError(f"{path}: rows without id")
    return rows


ROUTED_WEIGHT = 0.6  # a label the guarantee could not cover outranks a plain low-confidence flag
RARE_BONUS = 0.15  # a suggestion of a category gold rarely holds: a decision teaches more


def _routed_reason(row: dict, d: str, model: str, source: str, rarity: dict[str, dict[str, float]]) -> Reason:
    sug, conf = labelrow.suggestion(row, d), labelrow.confidence(row, d)
    routing = (row.get("routing") or {}).get(d) or {}
    shares = rarity.get(d) or {}
    share = shares.get(str(sug), 0.0) if shares else None  # None: no gold to tell rare from common
    rare = share is not None and share < 0.05
    weight = ROUTED_WEIGHT + 0.3 * (1.0 - float(conf if conf is not None else 0.0)) + (RARE_BONUS if rare else 0.0)
    target = routing.get("target_kappa")
    why = (
        f"below the threshold for kappa {target}"
        if routing.get("threshold") is not None
        else f"no confidence threshold reaches kappa {target} on gold"
    )
    return Reason(
        kind="routed",
        source=source,
        weight=round(weight, 4),
        detail=f"{model} suggests {sug} ({_fmt(conf)}): {why}"
        + (f" (a category {share:.0%} of gold holds)" if rare else ""),
    )


def _run_views(
    runs: dict[str, list[dict]], dims, views, reasons, min_confidence: float, gold: GoldSet | None = None
) -> None:
    rarity: dict[str, dict[str, float]] = {}
    if gold is not None:
        for d in dims:
            labels = gold.labels.get(d, [])
            # none_shown (a null gold label) counts as what it is: often the commonest answer
            rarity[d] = {str(c if c is not None else NONE_SHOWN): n / len(labels) for c, n in Counter(labels).items()}
    by_run: dict[str, dict[str, dict]] = {name: {str(r["id"]): r for r in rows} for name, rows in runs.items()}
    for name, rows in by_run.items():
        for rid, row in rows.items():
            for d in dims:
                if d not in row:
                    continue
                # `<dim>_model`: the dimension was labeled by another model (run --screen's screening_model)
                model = labelrow.dimension_model(row, d) or name
                label, conf = row.get(d), row.get(f"{d}_confidence")
                routed = labelrow.status(row, d)
                status = "invalid" if labelrow.is_invalid(row, d) and label is None else "ok"
                if routed in labelrow.ROUTED:  # a routed run: the model's label is its suggestion
                    label = labelrow.suggestion(row, d)
                    if label == NONE_SHOWN:
                        label = None  # "no cause shown" is not a category a reviewer can accept
                    if routed is labelrow.Status.REVIEW:
                        reasons[(rid, d)].append(_routed_reason(row, d, model, name, rarity))
                    status = "ok"
                views[(rid, d)].append(
                    ModelView(
                        source=name,
                        model=model,
                        label=label,
                        confidence=conf,
                        rationale=row.get(f"{d}_rationale"),
                        status=status,
                    )
                )
                if label is None and status != "ok":  # an invalid answer
                    reasons[(rid, d)].append(
                        Reason(
                            kind="low_confidence",
                            source=name,
                            weight=0.5,
                            detail=f"{model} gave no valid {d} label ({status})",
                        )
                    )
                elif label is not None and conf is not None and conf < min_confidence:
                    reasons[(rid, d)].append(
                        Reason(
                            kind="low_confidence",
                            source=name,
                            weight=0.5 * (1.0 - float(conf)),
                            detail=f"{model} says {label} with confidence {conf:.2f} < {min_confidence}",
                        )
                    )
    names = list(by_run)
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            ra, rb = by_run[names[a]], by_run[names[b]]
            for rid in sorted(set(ra) & set(rb)):
                for d in dims:
                    la, lb = ra[rid].get(d), rb[rid].get(d)
                    if la is None or lb is None or la == lb:
                        continue
                    ca, cb = ra[rid].get(f"{d}_confidence"), rb[rid].get(f"{d}_confidence")
                    w = min(c if c is not None else 0.5 for c in (ca, cb))
                    ma = labelrow.dimension_model(ra[rid], d) or names[a]
                    mb = labelrow.dimension_model(rb[rid], d) or names[b]
                    reasons[(rid, d)].append(
                        Reason(
                            kind="models_disagree",
                            source=f"{names[a]} vs {names[b]}",
                            weight=float(w),
                            detail=f"{ma} says {la} ({_fmt(ca)}), {mb} says {lb} ({_fmt(cb)})",
                        )
                    )


def codebook_part(note: str | None) -> str | None:
    if not note or "CODEBOOK:" not in note:
        return None
    return note.split("CODEBOOK:", 1)[1].strip()


# Category ids that are also everyday words: "some other configuration" is not about the screening
# category `other`, so these never name a dimension on their own.
GENERIC_IDS = frozenset({"other", "others", "none", "unknown", "unclear", "misc"})
# Words notes use for a dimension besides its ids. The coders' notes call screening "a failure
# report" in prose and give its verdict as a bare true/false (the only boolean they code), e.g.
# "is a request (false)", "leave the thread false".
NOTE_PHRASES: dict[str, tuple[str, ...]] = {
    screening.DIM: (r"(?i)\bfailure[ -]reports?\b", r"(?<![\w=])(?:true|false)(?![\w=])"),
}


def note_dimensions(text: str, taxonomy) -> list[str]:
    """Dimensions a codebook proposal concerns: those it names, or whose categories it names."""
    out = []
    for d, dim in taxonomy.dimensions.items():
        names = [n for n in [d] + dim.ids if n not in GENERIC_IDS]
        pats = [rf"(?<![a-z_]){re.escape(n)}(?![a-z_])" for n in names] + list(NOTE_PHRASES.get(d, ()))
        if any(re.search(p, text) for p in pats):
            out.append(d)
    return out


def _note_reasons(path: Path, gold: GoldSet, dims, reasons, notes_by_id: dict[str, str]) -> int:
    try:
        rows = read_rows(path)
    except RecordsError as e:
        raise QueueError(str(e)) from e
    in_gold = set(gold.ids)
    n = 0
    for row in rows:
        rid = str(row.get("id"))
        note = row.get("note") or row.get("adjudication_note")
        if note and rid in in_gold:
            notes_by_id[rid] = note
        text = codebook_part(note)
        if rid not in in_gold or not text:
            continue  # notes on threads not in this gold set (the reports gold holds failure reports only)
        for d in note_dimensions(text, gold.taxonomy):
            if d in dims:
                reasons[(rid, d)].append(
                    Reason(kind="codebook_note", source=path.name, weight=CODEBOOK_WEIGHT, detail=text)
                )
                n += 1
    return n


def score(reasons: list[Reason]) -> float:
    kinds = {r.kind for r in reasons}
    return round(
        max(r.weight for r in reasons)
        + EXTRA_KIND_BONUS * (len(kinds) - 1)
        + EXTRA_SOURCE_BONUS * (len(reasons) - len(kinds)),
        4,
    )


def record_view(r: Record) -> dict:
    return {k: getattr(r, k) for k in CORE_FIELDS}


def build_queue(
    gold: GoldSet,
    evals: Sequence[Path] = (),
    runs: Sequence[Path] = (),
    inputs: Sequence[Path] = (),
    notes: Path | None = None,
    dimensions: list[str] | None = None,
    min_confidence: float = 0.5,
    use_cleanlab: bool = True,
    max_items: int | None = None,
) -> tuple[Queue, dict[ReasonKind, int]]:
    """The queue and the number of reasons of each kind (for the summary line)."""
    tax = gold.taxonomy
    dims = dimensions or tax.dimension_ids
    for d in dims:
        if d not in tax.dimensions:
            raise QueueError(f"unknown dimension {d!r} (taxonomy {tax.label} has {tax.dimension_ids})")
    if not (evals or runs or notes):
        raise QueueError("nothing to review: give at least one --eval run, --labels file or --notes file")
    views: dict[tuple[str, str], list[ModelView]] = defaultdict(list)
    reasons: dict[tuple[str, str], list[Reason]] = defaultdict(list)
    sources: list[dict] = []

    for p in evals:
        run = load_eval_run(p)
        _check_eval_matches(run, gold)
        _eval_views(run, gold, dims, views, reasons)
        n_cl = _cleanlab_reasons(run, gold, dims, reasons) if use_cleanlab else 0
        sources.append(
            {
                "kind": "eval",
                "path": str(Path(p).resolve()),
                "model": run.meta.get("model"),
                "created_at": run.meta.get("created_at"),
                "cleanlab_flags": n_cl,
            }
        )

    records: dict[str, Record] = {r.id: r for r in gold.records}
    if runs:
        for p in inputs:
            try:
                for r in read_records(p):
                    records.setdefault(r.id, r)
            except RecordsError as e:
                raise QueueError(str(e)) from e
        loaded = {}
        for p in runs:
            name = Path(p).name if Path(p).name not in loaded else str(p)
            loaded[name] = _load_label_run(Path(p), tax.label, dims)
            missing = sorted({str(r["id"]) for r in loaded[name]} - set(records))
            if missing:
                raise QueueError(
                    f"{p}: {len(missing)} labeled ids have no text in the gold set or --input files "
                    f"({', '.join(map(str, inputs)) or 'none given'}): {missing[:10]}"
                )
            sources.append(
                {
                    "kind": "labels",
                    "path": str(Path(p).resolve()),
                    "models": sorted(
                        {str(labelrow.dimension_model(r, d)) for r in loaded[name] for d in dims if d in r}
                    ),
                }
            )
        _run_views(loaded, dims, views, reasons, min_confidence, gold)

    # gold files without their own adjudication notes (screening) show the --notes file's
    notes_by_id: dict[str, str] = {}
    if notes:
        _note_reasons(Path(notes), gold, dims, reasons, notes_by_id)
        sources.append({"kind": "notes", "path": str(Path(notes).resolve())})

    pos = {rid: i for i, rid in enumerate(gold.ids)}
    items = []
    for (rid, d), rs in reasons.items():
        i = pos.get(rid)
        rec = records[rid]
        items.append(
            QueueItem(
                id=rid,
                dimension=d,
                in_gold=i is not None,
                gold=gold.labels[d][i] if i is not None else None,
                coders={c: gold.coders[c][d][i] for c in gold.coders} if i is not None else {},
                adjudication_note=(
                    (rec.fields.get("adjudication_note") or notes_by_id.get(rid)) if i is not None else None
                ),
                reasons=rs,
                models=views.get((rid, d), []),
                score=score(rs),
                record=record_view(rec),
            )
        )
    counts = dict(Counter(r.kind for rs in reasons.values() for r in rs))
    items.sort(key=lambda it: (-it.score, it.id, it.dimension))
    if max_items is not None:
        items = items[:max_items]
    meta = QueueMeta(
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        taxonomy=tax.label,
        taxonomy_path=str(tax.path.resolve()) if tax.path else "",
        taxonomy_fingerprint=tax.fingerprint(),
        gold_path=str(gold.path.resolve()) if gold.path else "",
        gold_hash=gold.hash,
        sources=sources,
        params={"dimensions": dims, "min_confidence": min_confidence, "cleanlab": use_cleanlab, "max_items": max_items},
    )
    return Queue(meta=meta, items=items), counts


def check_queue_matches(queue: Queue, gold: GoldSet) -> None:
    """A queue is only valid for the gold content and taxonomy it was built from."""
    tax = gold.taxonomy
    if queue.meta.taxonomy_fingerprint != tax.fingerprint():
        raise QueueError(
            f"the queue was built with taxonomy {queue.meta.taxonomy} ({queue.meta.taxonomy_fingerprint}); "
            f"{tax.path} is {tax.label} ({tax.fingerprint()}): build the queue again"
        )
    if queue.meta.gold_hash != gold.hash:
        raise QueueError(
            f"the queue was built from gold with hash {queue.meta.gold_hash}; {gold.path} now has hash "
            f"{gold.hash} (labels or texts changed since): build the queue again"
        )
