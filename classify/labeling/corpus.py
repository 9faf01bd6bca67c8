"""Corpus report over a labels file: the share of each category, corrected for the classifier's
errors (`classify.labeling.quantify`) beside the naive count, per library and overall, root-cause
groups, a symptom x root-cause cross table, a comparison with published shares, and the HTML page
(`classify.labeling.report_html`).

The correction needs the model's behaviour on gold: its gold profile (out-of-fold predictions,
calibration), rebuilt from the labels rows' `model`, `run_options` and `gold_hash`. Without one (a
labels file from elsewhere, a gold set that changed since the run), the report gives counts with
Wilson intervals and says so in its caveats.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binomtest

from classify.core.causeshown import NONE_SHOWN, shown_dim
from classify.core.errors import ClassifyError
from classify.core.records import atomic_write_text, read_rows
from classify.core.taxonomy import Taxonomy
from classify.labeling import quantify as qf

log = logging.getLogger("classify")

SMALL_N = 30  # below this many reports a library's shares get a small-sample warning
TINY_N = 5  # below this many a library's shares are not shown at all (n/a): an interval on 1-4 reports says nothing
STATUSES = ("auto", "review", "coded", "none_shown", "unrouted")
NO_GOLD = "no gold examples: cannot be estimated"
HUMAN_STATUSES = ("human", "coded", "coded_by_human")


class ReportError(ClassifyError):
    """A labels file or reference table the report cannot use."""


def share_ci(k: int, n: int) -> dict[str, float]:
    """Share k/n with a Wilson score 95% interval (sane at 0 and near 100%, unlike the normal one)."""
    if n == 0:
        return {"k": k, "n": n, "share": float("nan"), "lo": float("nan"), "hi": float("nan")}
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return {"k": k, "n": n, "share": k / n, "lo": float(ci.low), "hi": float(ci.high)}


def library_of(row: dict[str, Any]) -> str:
    repo = row.get("repo")
    if isinstance(repo, str) and "/" in repo:
        return repo.split("/", 1)[1]
    rid = str(row.get("id", ""))
    return rid.rsplit("-", 1)[0] if "-" in rid else "unknown"


def is_failure_report(row: dict[str, Any]) -> bool:
    return row.get("screening") in (None, "failure_report")


def is_human(row: dict[str, Any], dim: str) -> bool:
    """Coded by a person (review of `run --target-kappa` output): counted as is, never corrected."""
    return row.get(f"{dim}_status") in HUMAN_STATUSES or bool(row.get(f"{dim}_coded_by") or row.get("coded_by"))


def status_of(row: dict[str, Any], dim: str) -> str:
    """Where a row's label for `dim` comes from: `auto` (the model's label stands), `review` (the
    model's suggestion, awaiting a person), `coded` (a person), `none_shown` (root cause: the model
    is sure the thread shows none), `unrouted` (a run without --target-kappa: the model's label)."""
    if is_human(row, dim):
        return "coded"
    st = row.get(f"{dim}_status")
    return st if st in ("auto", "review", "none_shown") else "unrouted"


def label_of(row: dict[str, Any], dim: str) -> str | None:
    """The label a report counts with: its label, or for a row awaiting review the model's suggestion
    (what the corrected shares count too, through the row's probabilities)."""
    v = row.get(dim)
    if v is None and status_of(row, dim) == "review":
        v = row.get(f"{dim}_suggestion")
    return v if isinstance(v, str) else None


@dataclass
class Correction:
    """A model's measured behaviour per dimension, ready to correct a corpus's counts."""

    model: str
    profile: Any  # classify.evaluation.profile.GoldProfile
    gold_hash: str
    caveats: list[str] = field(default_factory=list)


def _proba_matrix(preds: list, classes: list[str]) -> np.ndarray | None:
    if not preds or any(p is None or p.proba is None for p in preds):
        return None
    return np.array([[float(p.proba.get(c, 0.0)) for c in classes] for p in preds])


def _prediction(row: dict[str, Any], dim: str):
    from classify.classifiers.base import Prediction

    proba = row.get(f"{dim}_proba")
    if isinstance(proba, str):  # CSV/Parquet keep nested objects as JSON text
        try:
            proba = json.loads(proba)
        except json.JSONDecodeError:
            proba = None
    label = row.get(dim)
    if not isinstance(proba, dict) and label is None:
        return None
    conf = row.get(f"{dim}_confidence")
    return Prediction(
        label=label,
        confidence=None if conf is None else float(conf),
        proba={str(k): float(v) for k, v in proba.items()} if isinstance(proba, dict) else None,
    )


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
        prof is not None
        and dim in prof.nullable
        and any(isinstance(r.get(f"{shown_dim(dim)}_proba"), dict) for r in lab)
    )
    classes = ids + [NONE_SHOWN] if selective else list(ids)
    beh: qf.Behaviour | None = None
    probabilistic = True
    if prof is not None:
        if selective:
            s = prof.scores(dim, cross_fit=True)
            P = _proba_matrix(s.predictions, classes)
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
            P = _proba_matrix(preds, classes)
            if P is None:
                P, probabilistic = qf.one_hot([p.label for p in preds], classes), False
        beh = qf.Behaviour(classes, P, y, folds, probabilistic=probabilistic)
    rows_P: list[np.ndarray] = []
    libs: list[str] = []
    human: list[tuple[str, int]] = []
    missing = n_none = 0
    auto_rows: list[dict[str, Any]] = []
    for r in lab:
        if is_human(r, dim):
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
        preds = [_prediction(r, dim) for r in auto_rows]
        cal = prof.calibrate(dim, preds)
        if selective:
            from classify.evaluation.profile import compose

            shown = prof.calibrate(shown_dim(dim), [_prediction(r, shown_dim(dim)) for r in auto_rows])
            cal = [compose(s, c) for s, c in zip(shown, cal)]
        for r, p in zip(auto_rows, cal):
            if p is None or p.proba is None:
                missing += 1
                continue
            rows_P.append(np.array([float(p.proba.get(c, 0.0)) for c in classes]))
            libs.append(library_of(r))
    else:
        for r in auto_rows:
            v = label_of(r, dim)
            if v in classes:
                rows_P.append(qf.one_hot([v], classes)[0])
                libs.append(library_of(r))
            elif v == NONE_SHOWN or status_of(r, dim) == "none_shown":
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
    lab = [r for r in rows if is_failure_report(r)]
    libs = sorted({library_of(r) for r in lab})
    out: dict[str, Any] = {
        "n_rows": len(rows),
        "n_failure_reports": len(lab),
        "n_screened_out": len(rows) - len(lab),
        "libraries": {lib: sum(1 for r in lab if library_of(r) == lib) for lib in libs},
        "models": sorted({str(r.get("model")) for r in rows if r.get("model")}),
        "taxonomies": sorted({str(r.get("taxonomy")) for r in rows if r.get("taxonomy")}),
        "corrected": correction is not None,
        "caveats": list(correction.caveats) if correction else [],
        "dimensions": {},
    }
    if correction is None:
        out["caveats"].append(
            "Shares are counts of the model's labels with Wilson intervals, not corrected for its errors "
            "(no gold profile of the model: see the warnings above the report)."
        )
    for d, dim in tax.dimensions.items():
        inp = _dimension_input(lab, tax, d, correction)
        k = len(inp.classes)
        status = Counter(status_of(r, d) for r in lab)
        split = {st: status.get(st, 0) for st in STATUSES}
        if split["review"]:
            out["caveats"].append(
                f"{d}: {split['review']} of {len(lab)} reports await review (their confidence is below the threshold "
                f"for the target kappa); the shares count the model's unreviewed suggestions for them"
                + (" through its probabilities." if correction else ".")
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
                        f"{d}: {method} (--method) erred more than counting on shifted gold "
                        f"({100 * sel.error:.1f} against {100 * sel.naive_error:.1f} points of total variation); "
                        f"the protocol would have chosen {min(sel.errors, key=sel.errors.__getitem__)}."
                    )
            est = qf.estimate_shares(
                inp.behaviour, sel.method, subsets, residuals=sel.residuals, n_boot=n_boot, seed=seed
            )
        if est is not None and inp.selective:
            keep = np.arange(k - 1)
            shown_est = {name: _renormalise(e, keep) for name, e in est.items()}
            scope = "reports that show a cause (the model's cause-shown decision composed with its cause)"
        else:
            shown_est = est
            scope = (
                "all failure reports"
                if d not in (correction.profile.nullable if correction else [])
                else (
                    "all failure reports: the labels carry no cause-shown decision, so every report counts as if it "
                    "showed a cause"
                )
            )
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
            entry: dict[str, Any] = {"scope": scope, "correction": how, "status": split}
            for sub in ["overall"] + libs:
                s = subsets[sub]
                counts = np.bincount(s.P.argmax(axis=1), minlength=k) if len(s.P) else np.zeros(k)
                counts = counts + s.human_counts(k)
                if inp.selective:
                    counts = counts[:-1]
                n = int(counts.sum())
                e = shown_est[sub] if shown_est is not None else None
                dist: dict[str, Any] = {
                    "n": n,
                    "n_human": int(s.human_counts(k)[: len(cats)].sum()),
                    "n_missing": inp.n_missing if sub == "overall" else None,
                    "shares": _table(inp.classes, names, rmat, e, counts, n, na),
                }
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
                if sub != "overall" and n < TINY_N:
                    dist["too_few"] = True
                    dist["warning"] = f"too few reports ({n}): shares not shown"
                elif sub != "overall" and n < SMALL_N:
                    dist["warning"] = f"small sample: {n} reports; shares are rough"
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
            la, lb = label_of(r, a), label_of(r, b)
            if la in ia and lb in ib:
                m[ia.index(la), ib.index(lb)] += 1
        if m.sum():
            out["crosstab"] = {
                "rows": a,
                "cols": b,
                "row_labels": ia,
                "col_labels": ib,
                "matrix": m.tolist(),
                "suggestions": any(status_of(r, x) == "review" for r in lab for x in (a, b)),
            }
    return out


# ---------------------------------------------------------------------------------------------
# the model's gold profile


def correction_for(
    rows: list[dict[str, Any]], tax: Taxonomy, gold_path: Path | None = None, *, seed: int = 0
) -> tuple[Correction | None, list[str]]:
    """The gold profile of the model that labeled `rows`, or None and the reasons why not."""
    from classify.core.goldfile import load_gold_for
    from classify.evaluation.profile import gold_profile, options_from_meta

    models = {str(r.get("model")) for r in rows if r.get("model")}
    if not models:
        return None, ["the labels carry no `model`: they cannot be corrected for a classifier's errors"]
    if len(models) > 1:
        return None, [f"the labels come from several models ({', '.join(sorted(models))}); run the report per model"]
    model = models.pop()
    metas = {json.dumps(r.get("run_options"), sort_keys=True) for r in rows if r.get("run_options") is not None}
    if not metas:
        return None, ["the labels carry no `run_options` (written before they were recorded): no gold profile"]
    if len(metas) > 1:
        return None, ["the labels were made with several option sets; run the report per run"]
    hashes = {str(r.get("gold_hash")) for r in rows if r.get("gold_hash")}
    gold = load_gold_for(gold_path, tax)
    if hashes and gold.hash not in hashes:
        return None, [
            f"the labels were made with gold {', '.join(sorted(hashes))} but {gold_path or 'the default gold'} is {gold.hash}: "
            f"the classifier's errors cannot be measured on the gold it was trained on (pass --gold)"
        ]
    has_proba = any(isinstance(r.get(f"{d}_proba"), dict) for r in rows for d in tax.dimension_ids)
    options = options_from_meta(json.loads(metas.pop()), seed)
    log.info("measuring %s on gold (out-of-fold, cached after the first time)", model)
    prof = gold_profile(model, gold, options, seed=seed)
    caveats = []
    if not has_proba:
        caveats.append(f"{model} gives no class probabilities: only count-based methods (CC, ACC) could be applied.")
    return Correction(model, prof, gold.hash, caveats), []


# ---------------------------------------------------------------------------------------------
# published shares


def load_reference(path: Path, tax: Taxonomy) -> dict[str, Any]:
    """A table of published shares (YAML): `source`, optional `taxonomy`, and `shares`, a list of
    {dimension, category, share, source?}; shares are fractions in [0, 1]."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path}: no such reference file") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: not a readable YAML file ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("shares"), list) or not doc["shares"]:
        raise ReportError(f"{path}: expected a mapping with a non-empty `shares` list")
    valid: dict[str, list[str]] = {}
    for d, dim in tax.dimensions.items():
        valid[d] = dim.ids
        if dim.groups:
            valid[f"{d}_group"] = list(dim.groups)
    out = []
    for i, entry in enumerate(doc["shares"], 1):
        where = f"{path}: shares entry {i}"
        if not isinstance(entry, dict):
            raise ReportError(f"{where}: expected a mapping with dimension, category, share")
        e: dict[str, Any] = entry
        unknown = set(e) - {"dimension", "category", "share", "source", "note"}
        if unknown:
            raise ReportError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        d, c, s = str(e.get("dimension")), e.get("category"), e.get("share")
        if d not in valid:
            raise ReportError(f"{where}: unknown dimension {d!r}; known: {', '.join(valid)}")
        if c not in valid[d]:
            raise ReportError(f"{where}: unknown {d} category {c!r}; known: {', '.join(valid[d])}")
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 <= s <= 1:
            hint = (
                "; it looks like a percentage: write 0.2733 for 27.33%" if isinstance(s, (int, float)) and s > 1 else ""
            )
            raise ReportError(f"{where}: share must be a fraction in [0, 1], got {s!r}{hint}")
        out.append(
            {
                "dimension": d,
                "category": c,
                "share": float(s),
                "source": str(e.get("source") or doc.get("source") or path.name),
                "note": e.get("note"),
            }
        )
    want = doc.get("taxonomy")
    warn = None
    if want and want != tax.label:
        warn = f"the reference is for taxonomy {want}, the labels for {tax.label}"
    return {"path": str(path), "source": doc.get("source"), "shares": out, "warning": warn}


def compare_reference(stats: dict[str, Any], ref: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for e in ref["shares"]:
        ours = stats["dimensions"][e["dimension"]]["overall"]["shares"][e["category"]]
        known = ours["lo"] is not None and not math.isnan(ours["lo"])
        inside = ours["lo"] <= e["share"] <= ours["hi"] if known else None
        rows.append(
            e
            | {
                "estimate": ours["estimate"],
                "naive": ours["naive"],
                "lo": ours["lo"],
                "hi": ours["hi"],
                "difference": ours["estimate"] - e["share"] if ours["estimate"] is not None else None,
                "inside": inside,
                "note": ours.get("note") or e.get("note"),
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------
# the report folder


def _examples(rows: list[dict[str, Any]], tax: Taxonomy, meta: dict[str, dict], per: int = 3) -> dict[str, dict]:
    """A few of the most confident examples per category, with confidence and link."""
    out: dict[str, dict[str, list[dict]]] = {}
    for d, dim in tax.dimensions.items():
        by: dict[str, list[dict]] = {c: [] for c in dim.ids}
        for r in rows:
            lab = label_of(r, d)
            if not is_failure_report(r) or lab not in by:
                continue
            m = meta.get(str(r.get("id")), {})
            by[lab].append(
                {
                    "id": r.get("id"),
                    "title": m.get("title") or r.get("title"),
                    "url": m.get("url") or r.get("url") or issue_url(r),
                    "confidence": r.get(f"{d}_confidence"),
                    "human": is_human(r, d),
                    "suggestion": status_of(r, d) == "review",
                }
            )
        for c in by:
            by[c].sort(key=lambda x: -(x["confidence"] if isinstance(x["confidence"], (int, float)) else 2.0))
            by[c] = by[c][:per]
        out[d] = by
    return out


def issue_url(r: dict[str, Any]) -> str | None:
    repo, rid = r.get("repo"), str(r.get("id", ""))
    num = r.get("number") or (rid.rsplit("-", 1)[1] if "-" in rid else None)
    if isinstance(repo, str) and repo.count("/") == 1 and num is not None and str(num).isdigit():
        return f"https://github.com/{repo}/issues/{num}"
    return None


def _screened(rows: list[dict[str, Any]], meta: dict[str, dict]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        if is_failure_report(r):
            continue
        m = meta.get(str(r.get("id")), {})
        out.append(
            {
                "id": r.get("id"),
                "title": m.get("title") or r.get("title"),
                "url": m.get("url") or r.get("url") or issue_url(r),
                "screening": r.get("screening"),
                "confidence": r.get("screening_confidence"),
            }
        )
    return out


def find_eval_run(model: str, gold_hash: str, dirs: list[Path]) -> dict[str, Any] | None:
    """The newest eval run of `model` on the same gold, as {path, dimensions: {dim: kappa...}}."""
    best: tuple[str, Path, dict] | None = None
    for base in dirs:
        if not base.is_dir():
            continue
        for mfile in base.glob("*/metrics.json"):
            try:
                m = json.loads(mfile.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            meta = m.get("meta") or {}
            if meta.get("model") != model or meta.get("gold_hash") != gold_hash or meta.get("mode") != "cv":
                continue
            key = str(meta.get("created_at") or mfile.parent.name)
            if best is None or key > best[0]:
                best = (key, mfile.parent, m)
    if best is None:
        return None
    _, path, m = best
    dims = {}
    for d, v in (m.get("dimensions") or {}).items():
        kap = v.get("kappa") or {}
        cov = None
        for row in v.get("selective") or []:
            if isinstance(row, dict) and (row.get("kappa") or 0) >= 0.8:
                cov = max(cov or 0, row.get("coverage") or 0)
        dims[d] = {"kappa": kap.get("kappa"), "lo": kap.get("lo"), "hi": kap.get("hi"), "coverage_at_0.80": cov}
    return {"path": str(path), "created_at": (m.get("meta") or {}).get("created_at"), "dimensions": dims}


def write_corpus_report(
    labels_path: Path,
    tax: Taxonomy,
    out: Path,
    input_path: Path | None = None,
    *,
    reference: Path | None = None,
    gold_path: Path | None = None,
    correct: bool = True,
    n_boot: int = 1000,
    seed: int = 0,
    eval_dirs: list[Path] | None = None,
    method: str | None = None,
) -> dict[str, Any]:
    import classify.labeling.report_html as report_html
    from classify.core import paths

    if n_boot < 0:
        raise ReportError(f"--bootstrap must be >= 0, got {n_boot}")
    method = method.strip().upper() if method is not None else None
    if method is not None and method not in qf.METHODS:
        raise ReportError(f"unknown --method {method!r}; known: {', '.join(qf.METHODS)}")
    if method is not None and not correct:
        raise ReportError("--method chooses how labels are corrected; it cannot be combined with --no-correct")
    ref = load_reference(reference, tax) if reference else None  # a bad reference fails before any work
    rows = read_rows(labels_path)
    if not rows:
        raise ReportError(f"{labels_path}: no rows to report on")
    bad = sorted({str(r.get("taxonomy")) for r in rows if r.get("taxonomy")} - {tax.label})
    if bad:
        raise ReportError(f"{labels_path}: labeled with taxonomy {', '.join(bad)}, but the report uses {tax.label}")
    meta: dict[str, dict] = {}
    if input_path:
        meta = {str(r.get("id")): r for r in read_rows(input_path)}
    correction, why = correction_for(rows, tax, gold_path, seed=seed) if correct else (None, ["--no-correct given"])
    if method is not None and correction is None:
        # counts would come out under a method the user fixed and never got
        raise ReportError(f"--method {method} cannot be applied: {'; '.join(why)}")
    stats = corpus_stats(rows, tax, correction, n_boot=n_boot, seed=seed, method=method)
    stats["warnings"] = why
    stats["model"] = correction.model if correction else (stats["models"][0] if len(stats["models"]) == 1 else None)
    stats["eval_run"] = None
    if stats["model"] and (correction or rows[0].get("gold_hash")):
        gh = correction.gold_hash if correction else str(rows[0].get("gold_hash"))
        stats["eval_run"] = find_eval_run(stats["model"], gh, eval_dirs or [paths.evals_dir(), paths.EVALS_DIR])
    if ref is not None:
        stats["reference"] = {
            "path": ref["path"],
            "source": ref["source"],
            "warning": ref["warning"],
            "rows": compare_reference(stats, ref),
        }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "corpus.json", json.dumps(stats, indent=2, default=_json_default) + "\n")
    figures = report_html.draw(stats, tax, out)
    page = report_html.render(stats, tax, figures, out, _examples(rows, tax, meta), _screened(rows, meta))
    atomic_write_text(out / "report.html", page)
    return stats


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    raise TypeError(type(o).__name__)


def category_names(tax: Taxonomy) -> dict[str, dict[str, str]]:
    """Display names: category ids to names, groups to the text before their description's dash."""
    out: dict[str, dict[str, str]] = {}
    for d, dim in tax.dimensions.items():
        out[d] = {c.id: c.name for c in dim.categories} | {NONE_SHOWN: "None shown"}
        if dim.groups:
            out[f"{d}_group"] = {g: desc.split(" - ", 1)[0].strip() or g for g, desc in dim.groups.items()}
    return out


def naive_count(rows: list[dict[str, Any]], dim: str) -> Counter:
    return Counter(r.get(dim) for r in rows if is_failure_report(r) and r.get(dim) is not None)
