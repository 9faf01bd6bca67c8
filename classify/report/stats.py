"""Corpus shares per dimension, group and library: the share of each category corrected for the
classifier's errors (`classify.report.quantify`) beside the count of labels, with intervals; and the
symptom x root-cause cross table. Coded labels count as they are; labels awaiting review count the
model's suggestion.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import binomtest

from classify.core import labelrow
from classify.core.causeshown import NONE_SHOWN, shown_dim
from classify.core.screening import DIM as SCREENING
from classify.core.taxonomy import Taxonomy
from classify.report import quantify as qf
from classify.report.correction import Correction, proba_matrix, row_prediction
from classify.report.labels import (
    ORIGINS,
    ReportError,
    awaits_review,
    counted_label,
    counts_as_failure_report,
    library_of,
    origin,
)

SMALL_N = 30  # below this many reports a library gets counts only: its own correction would swing
WEAK_KAPPA = 0.2  # below this kappa on gold ("slight" agreement) a correction rests on a model near chance
NO_GOLD = "no gold examples: cannot be estimated"
COUNTS_ONLY = f"under {SMALL_N} reports: counts only, no corrected estimate"


def share_ci(k: int, n: int) -> dict[str, float]:
    """Share k/n with a Wilson score 95% interval (sane at 0 and near 100%, unlike the normal one)."""
    if n == 0:
        return {"k": k, "n": n, "share": float("nan"), "lo": float("nan"), "hi": float("nan")}
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return {"k": k, "n": n, "share": k / n, "lo": float(ci.low), "hi": float(ci.high)}


@dataclass
class DimensionInput:
    """One dimension's quantification inputs: gold behaviour and the corpus rows' posteriors."""

    classes: list[str]
    behaviour: qf.Behaviour | None
    P: np.ndarray  # model-labeled rows, n x k
    libs: list[str]  # library of each row of P
    human: list[tuple[str, int]]  # (library, class index) of human-coded rows
    n_missing: int
    selective: bool  # classes end with none_shown (cause-shown decision composed in)
    n_none_shown: int = 0  # uncorrected: rows whose label or review suggestion is none_shown (not "missing")


def _dimension_input(lab: list[dict[str, Any]], tax: Taxonomy, dim: str, corr: Correction | None) -> DimensionInput:
    ids = tax.dimensions[dim].ids
    prof = corr.profile if corr else None
    selective = bool(
        prof is not None and dim in prof.nullable and any(labelrow.proba(r, shown_dim(dim)) is not None for r in lab)
    )
    classes = ids + [NONE_SHOWN] if selective else list(ids)
    beh: qf.Behaviour | None = None
    probabilistic = True
    if prof is not None:
        if selective:
            s = prof.scores(dim, cross_fit=True)
            P = proba_matrix(s.predictions, classes)
            y = np.array([classes.index(v) for v in s.y_true])
            folds = np.array(s.folds)
            if P is None:
                P, probabilistic = qf.one_hot(s.labels, classes), False
        else:
            idx, ys = prof.gold.labeled(dim)
            preds = prof.calibrate(dim, [prof.result.predictions[dim][i] for i in idx])
            keep = [j for j, p in enumerate(preds) if p is not None]
            preds = [preds[j] for j in keep]
            y = np.array([classes.index(ys[j]) for j in keep])
            folds = np.array([prof.result.folds[idx[j]] for j in keep])
            P = proba_matrix(preds, classes)
            if P is None:
                P, probabilistic = qf.one_hot([p.label for p in preds], classes), False
        beh = qf.Behaviour(classes, P, y, folds, probabilistic=probabilistic)
    rows_P: list[np.ndarray] = []
    libs: list[str] = []
    human: list[tuple[str, int]] = []
    missing = n_none = 0
    auto_rows: list[dict[str, Any]] = []
    for r in lab:
        if labelrow.is_coded(r, dim):
            v = r.get(dim)
            if v in ids:
                human.append((library_of(r), classes.index(v)))
            elif v is None and selective:
                human.append((library_of(r), classes.index(NONE_SHOWN)))
            else:
                missing += 1
            continue
        auto_rows.append(r)
    if prof is not None and probabilistic:
        preds = [row_prediction(r, dim) for r in auto_rows]
        cal = prof.calibrate(dim, preds)
        if selective:
            from classify.evaluation.profile import compose

            shown = prof.calibrate(shown_dim(dim), [row_prediction(r, shown_dim(dim)) for r in auto_rows])
            cal = [compose(s, c) for s, c in zip(shown, cal)]
        for r, p in zip(auto_rows, cal):
            if p is None or p.proba is None:
                missing += 1
                continue
            rows_P.append(np.array([float(p.proba.get(c, 0.0)) for c in classes]))
            libs.append(library_of(r))
    else:
        for r in auto_rows:
            v = counted_label(r, dim)
            if v in classes:
                rows_P.append(qf.one_hot([v], classes)[0])
                libs.append(library_of(r))
            elif v == NONE_SHOWN or origin(r, dim) == "none_shown":
                n_none += 1
            else:
                missing += 1
    P_c = np.array(rows_P) if rows_P else np.zeros((0, len(classes)))
    return DimensionInput(classes, beh, P_c, libs, human, missing, selective, n_none)


def _subsets(inp: DimensionInput, libs: list[str]) -> dict[str, qf.Subset]:
    k = len(inp.classes)
    out: dict[str, qf.Subset] = {}
    lib_arr = np.array(inp.libs)
    for name in ["overall"] + libs:
        mask = np.ones(len(inp.libs), bool) if name == "overall" else lib_arr == name
        h = np.zeros(k)
        for lib, c in inp.human:
            if name == "overall" or lib == name:
                h[c] += 1
        out[name] = qf.Subset(inp.P[mask] if len(inp.P) else np.zeros((0, k)), h)
    return out


def _entry(naive_k: int, n: int, est: float, lo: float, hi: float) -> dict[str, Any]:
    w = share_ci(naive_k, n)
    return {
        "k": naive_k,
        "n": n,
        "naive": w["share"],
        "naive_lo": w["lo"],
        "naive_hi": w["hi"],
        "estimate": est,
        "share": est,
        "lo": lo,
        "hi": hi,
    }


def _table(
    classes: list[str],
    cats: list[str],
    roll: np.ndarray,
    e: qf.ShareEstimate | None,
    counts: np.ndarray,
    n: int,
    no_gold: set[str] = frozenset(),  # type: ignore[assignment]
) -> dict[str, Any]:
    """Shares of `cats` (= columns of `roll`, a classes x cats 0/1 matrix) for one subset. A category
    in `no_gold` has no gold item: the model's error on it is unmeasured (it never learnt it), so its
    share is not estimated (null), never a certain 0."""
    shares: dict[str, Any] = {}
    naive_k = counts @ roll
    if e is not None and n:
        est = e.estimate @ roll
        reps = e.replicates @ roll if len(e.replicates) else np.zeros((0, len(cats)))
        lo, hi = qf.interval(reps)
    for j, c in enumerate(cats):
        if e is None or not n:
            w = share_ci(int(naive_k[j]), n)
            shares[c] = _entry(int(naive_k[j]), n, w["share"], w["lo"], w["hi"])
        else:
            shares[c] = _entry(int(naive_k[j]), n, float(est[j]), float(lo[j]), float(hi[j]))
        if c in no_gold and e is not None:
            shares[c].update(estimate=None, share=None, lo=None, hi=None, note=NO_GOLD)
    return shares


def _truncate(e: qf.ShareEstimate, keep: np.ndarray) -> qf.ShareEstimate:
    """The classes in `keep`, still as shares of all reports (none_shown dropped, not renormalised)."""
    return qf.ShareEstimate(e.naive[..., keep], e.estimate[..., keep], e.replicates[..., keep], e.n_auto, e.n_human)


def gold_kappa(b: qf.Behaviour) -> float | None:
    """Cohen's kappa of the model's out-of-fold labels on gold: what the correction rests on."""
    from sklearn.metrics import cohen_kappa_score

    if len(b.y) < 2 or len(set(b.y.tolist())) < 2:
        return None
    k = cohen_kappa_score(b.y, b.P.argmax(axis=1), labels=list(range(b.P.shape[1])))
    return None if np.isnan(k) else float(k)


def _renormalise(e: qf.ShareEstimate, keep: np.ndarray) -> qf.ShareEstimate:
    """Shares over the classes in `keep` only (root causes over reports that show one)."""

    def norm(v: np.ndarray) -> np.ndarray:
        s = v[..., keep].sum(axis=-1, keepdims=True)
        out = np.where(s > 0, v[..., keep] / np.where(s > 0, s, 1), np.nan)
        return out

    return qf.ShareEstimate(norm(e.naive), norm(e.estimate), norm(e.replicates), e.n_auto, e.n_human)


def corpus_stats(
    rows: list[dict[str, Any]],
    tax: Taxonomy,
    correction: Correction | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    protocol: str = "dirichlet",
    method: str | None = None,
) -> dict[str, Any]:
    """Shares per dimension (and group, and library), corrected with `correction` when given. The
    quantification method is chosen per dimension by `protocol` on shifted gold, unless `method`
    (one of quantify.METHODS) fixes it; the protocol's errors are reported either way."""
    if method is not None and method not in qf.METHODS:
        raise ReportError(f"unknown method {method!r}; known: {', '.join(qf.METHODS)}")
    lab = [r for r in rows if counts_as_failure_report(r)]
    libs = sorted({library_of(r) for r in lab})
    out: dict[str, Any] = {
        "n_rows": len(rows),
        "n_failure_reports": len(lab),
        "n_screened_out": len(rows) - len(lab),
        # of those, set aside on the screening model's suggestion, awaiting review
        "n_screened_out_review": sum(
            1 for r in rows if not counts_as_failure_report(r) and awaits_review(r, "screening")
        ),
        "libraries": {lib: sum(1 for r in lab if library_of(r) == lib) for lib in libs},
        "models": sorted({str(r.get("model")) for r in rows if r.get("model")}),
        "taxonomies": sorted({str(r.get("taxonomy")) for r in rows if r.get("taxonomy")}),
        "corrected": correction is not None,
        "screened": labelrow.was_screened(rows),
        # rows that carry no screening decision: all of them when unscreened, a few in a file put
        # together from a screened and an unscreened run (they count as failure reports unchecked)
        "n_unscreened": sum(1 for r in rows if SCREENING not in r),
        "caveats": list(correction.caveats) if correction else [],
        "weak_model": {},  # dimension -> the model's kappa on gold, where it barely beats chance
        "dimensions": {},
    }
    if out["screened"] and out["n_unscreened"]:
        out["caveats"].append(
            f"{out['n_unscreened']} of {len(rows)} threads carry no screening decision (a file joined from a "
            "screened and an unscreened run?): they count as failure reports, though some may be questions or requests."
        )
    if correction is None:
        out["caveats"].append(
            "Shares are counts of the model's labels with Wilson intervals, not corrected for its errors "
            "(no gold profile of the model: see the warnings above the report)."
        )
    for d, dim in tax.dimensions.items():
        inp = _dimension_input(lab, tax, d, correction)
        k = len(inp.classes)
        status = Counter(origin(r, d) for r in lab)
        split = {st: status.get(st, 0) for st in ORIGINS}
        if split["review"]:
            out["caveats"].append(
                f"{d}: {split['review']} of {len(lab)} reports await review (their confidence is below the threshold "
                f"for the target kappa); the shares count the model's suggestion for them"
                + (" (through its probabilities)" if correction else "")
                + ", not yet checked by a person."
            )
        # categories gold never holds: the model cannot predict them and no error on them was measured
        absent = (
            {c for i, c in enumerate(inp.classes) if c != NONE_SHOWN and not np.any(inp.behaviour.y == i)}
            if inp.behaviour is not None
            else set()
        )
        subsets = _subsets(inp, libs)
        est: dict[str, qf.ShareEstimate] | None = None
        shown_est: dict[str, qf.ShareEstimate] | None
        sel: qf.Selection | None = None
        if inp.behaviour is not None and len(inp.P):
            sel = qf.select_method(inp.behaviour, len(inp.P), protocol=protocol, seed=seed)
            if method is not None:
                try:
                    sel = sel.forced(method)
                except qf.QuantifyError as why:
                    raise ReportError(f"{d}: {why}") from None
                if sel.error > sel.naive_error:
                    out["caveats"].append(
                        f"{d}: {method} (--method) erred more than counting on shifted gold (it missed the true "
                        f"shares by {100 * sel.error:.1f} percentage points on average, counting by "
                        f"{100 * sel.naive_error:.1f}); the test on gold would have chosen "
                        f"{min(sel.errors, key=sel.errors.__getitem__)}."
                    )
            est = qf.estimate_shares(
                inp.behaviour, sel.method, subsets, residuals=sel.residuals, n_boot=n_boot, seed=seed
            )
        if inp.behaviour is not None:
            kap = gold_kappa(inp.behaviour)
            if kap is not None and kap < WEAK_KAPPA:
                out["weak_model"][d] = kap
        of_all: dict[str, qf.ShareEstimate] | None = None
        if est is not None and inp.selective:
            keep = np.arange(k - 1)
            shown_est = {name: _renormalise(e, keep) for name, e in est.items()}
            of_all = {name: _truncate(e, keep) for name, e in est.items()}
            scope = "reports that show a cause (the model's cause-shown decision composed with its cause)"
            denominator = "shown"
        elif est is None and inp.n_none_shown:
            shown_est = None
            scope = "reports that show a cause (the routed labels and suggestions that name one)"
            denominator = "shown"
        else:
            shown_est = est
            as_if = d in (correction.profile.nullable if correction else [])
            scope = (
                "all failure reports"
                if not as_if
                else (
                    "all failure reports: the labels carry no cause-shown decision, so every report counts as if it "
                    "showed a cause"
                )
            )
            denominator = "all_as_if_shown" if as_if else "all"
        cats = dim.ids
        roll = np.eye(len(cats))
        fields: list[tuple[str, list[str], np.ndarray]] = [(d, cats, roll)]
        if dim.groups:
            groups = list(dim.groups)
            g = np.zeros((len(cats), len(groups)))
            for i, c in enumerate(cats):
                grp = dim.group_of(c)
                if grp in groups:
                    g[i, groups.index(grp)] = 1
            fields.append((f"{d}_group", groups, g))
        for name, names, rmat in fields:
            how: dict[str, Any] = {"method": "none", "method_name": "count of labels (no correction)"}
            if sel is not None and inp.behaviour is not None:
                # the error on this field's own shares: for groups, measured on groups (a report moved
                # between two causes of one group is no error there), none_shown kept as its own column
                full = np.zeros((k, rmat.shape[1] + (1 if inp.selective else 0)))
                full[: rmat.shape[0], : rmat.shape[1]] = rmat
                if inp.selective:
                    full[-1, -1] = 1
                how = sel.as_dict(None if name == d else full)
                how["measured_on"] = "categories" if name == d else "groups"
                how["n_gold"] = len(inp.behaviour.y)
                how["n_boot"] = n_boot
            na = (
                set(absent)
                if name == d
                else {g for j, g in enumerate(names) if {c for c in cats if rmat[cats.index(c), j]} <= absent}
            )
            if inp.behaviour is not None and d in out["weak_model"]:
                how["gold_kappa"] = out["weak_model"][d]
            entry: dict[str, Any] = {"scope": scope, "denominator": denominator, "correction": how, "status": split}
            for sub in ["overall"] + libs:
                s = subsets[sub]
                counts_all = np.bincount(s.P.argmax(axis=1), minlength=k) if len(s.P) else np.zeros(k)
                counts_all = counts_all + s.human_counts(k)
                counts = counts_all[:-1] if inp.selective else counts_all
                n = int(counts.sum())
                small = sub != "overall" and n < SMALL_N
                # a library's own correction on a small sample swings (3 of 6 labels became 78%): counts only
                e = shown_est[sub] if shown_est is not None and not small else None
                dist: dict[str, Any] = {
                    "n": n,
                    "n_human": int(s.human_counts(k)[: len(cats)].sum()),
                    "n_missing": inp.n_missing if sub == "overall" else None,
                    "shares": _table(inp.classes, names, rmat, e, counts, n, na),
                }
                if small and shown_est is not None:  # corrected elsewhere: here the count, and no estimate
                    for sh in dist["shares"].values():
                        sh.update(estimate=None, share=None, lo=None, hi=None, note=COUNTS_ONLY)
                if sub == "overall" and denominator == "shown":
                    # the same shares over all failure reports, for published shares of all reports
                    n_all = int(counts_all.sum()) if of_all is not None else n + inp.n_none_shown
                    e_all = of_all[sub] if of_all is not None else None
                    dist["of_all"] = _table(inp.classes, names, rmat, e_all, counts, n_all, na)
                    dist["n_all"] = n_all
                if sub == "overall" and inp.n_none_shown:
                    dist["n_none_shown"] = inp.n_none_shown
                if inp.selective and est is not None:
                    ns = est[sub]
                    lo, hi = qf.interval(ns.replicates[:, -1:]) if len(ns.replicates) else (np.full(1, np.nan),) * 2
                    tot = len(s.P) + s.human_counts(k).sum()
                    dist["none_shown"] = {
                        "naive": float(ns.naive[-1]),
                        "estimate": float(ns.estimate[-1]),
                        "lo": float(lo[0]),
                        "hi": float(hi[0]),
                        "n": int(tot),
                    }
                if small:
                    dist["counts_only"] = True
                    dist["warning"] = (
                        f"{n} reports: counts only (under {SMALL_N}, a correction for the model's errors on this "
                        f"library alone swings too far to print)"
                    )
                if sub == "overall":
                    entry["overall"] = dist
                else:
                    entry.setdefault("by_library", {})[sub] = dist
            entry.setdefault("by_library", {})
            out["dimensions"][name] = entry
        if d in (correction.profile.nullable if correction else []) and not inp.selective:
            out["caveats"].append(
                f"{d}: shares are over all failure reports, as if each showed a cause; in gold most threads never "
                f"show one (the labels carry no cause-shown decision to exclude them)."
            )
        elif inp.selective:
            out["caveats"].append(f"{d}: shares are over the reports that show a cause; 'none shown' is given apart.")
    dims = tax.dimension_ids
    if len(dims) >= 2:
        a, b = dims[0], dims[1]
        ia, ib = tax.dimensions[a].ids, tax.dimensions[b].ids
        m = np.zeros((len(ia), len(ib)), dtype=int)
        for r in lab:
            la, lb = counted_label(r, a), counted_label(r, b)
            if la in ia and lb in ib:
                m[ia.index(la), ib.index(lb)] += 1
        if m.sum():
            out["crosstab"] = {
                "rows": a,
                "cols": b,
                "row_labels": ia,
                "col_labels": ib,
                "matrix": m.tolist(),
                "suggestions": any(origin(r, x) == "review" for r in lab for x in (a, b)),
            }
    return out
