"""Compare an evaluation with an earlier run: kappa per dimension, then and now, and the change.

After a review round the gold labels (and maybe the categories) differ between the two runs, so
the comparison also says what differs: taxonomy, gold content, model and options, how many shared
items changed gold label and how many of those changes took the earlier run's own prediction
("accept the model's label", which flatters that model). Each change gets a paired bootstrap
interval over the items both runs evaluated (metrics.paired_delta_ci).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from classify.core.errors import ClassifyError
from classify.core.taxonomy import Taxonomy
from classify.evaluation.metrics import INVALID, paired_delta_ci
from classify.evaluation.runfolder import RunFolder, read_run


class CompareError(ClassifyError, ValueError):
    pass


def load_run(run_dir: str | Path) -> RunFolder:
    """The earlier run `--compare` names (its errors are CompareError)."""
    return read_run(run_dir, error=CompareError)


def _gold_labels(run: RunFolder) -> dict[str, dict[str, Any]]:
    return {str(r["id"]): {k[5:]: v for k, v in r.items() if k.startswith("gold_")} for r in run.predictions()}


def previous_folds(run_dir: str | Path, ids: list[str], k: int) -> tuple[list[int] | None, str]:
    """The earlier run's fold of each id, for a paired comparison (same split, only labels differ).

    Ids the earlier run did not evaluate get a fold from a hash of the id. None (and why) when the
    earlier run was not a k-fold cross-validation.
    """
    run = load_run(run_dir)
    old = run.meta
    if old.get("mode") != "cv" or (old.get("params") or {}).get("k") != k:
        return None, f"new folds: the earlier run is not a {k}-fold cross-validation"
    prev = {
        str(r["id"]): r["fold"]
        for r in run.predictions(error=CompareError)
        if isinstance(r.get("fold"), int) and 0 <= r["fold"] < k
    }
    if not prev:
        return None, "new folds: the earlier run has no per-record folds"
    folds, new = [], 0
    for i in ids:
        if i in prev:
            folds.append(prev[i])
        else:
            new += 1
            folds.append(int(hashlib.sha256(i.encode()).hexdigest(), 16) % k)
    return folds, f"folds of the earlier run reused ({len(ids) - new} records" + (
        f"; {new} new ones hashed to a fold)" if new else ")"
    )


def _pairs(
    old_rows: dict[str, dict[str, Any]],
    new_rows: dict[str, dict[str, Any]],
    d: str,
    to_group: Any,
) -> tuple[list[str], list[Any], list[Any], list[Any], list[Any]]:
    """Ids both runs evaluated with a gold label in `d`, and (old gold, old pred, new gold, new pred)."""

    def lab(v: Any) -> Any:
        if v is None or to_group is None:
            return v
        try:
            return to_group(v)
        except KeyError:  # a category the current taxonomy no longer has
            return f"{v} (removed)"

    ids, gb, pb, ga, pa = [], [], [], [], []
    for rid in sorted(set(old_rows) & set(new_rows)):
        o, n = old_rows[rid], new_rows[rid]
        if o.get(f"gold_{d}") is None or n.get(f"gold_{d}") is None:
            continue
        ids.append(rid)
        gb.append(lab(o[f"gold_{d}"]))
        pb.append(INVALID if o.get(d) is None else lab(o[d]))
        ga.append(lab(n[f"gold_{d}"]))
        pa.append(INVALID if n.get(d) is None else lab(n[d]))
    return ids, gb, pb, ga, pa


def compare_metrics(
    new: dict[str, Any],
    new_meta: dict[str, Any],
    run_dir: str | Path,
    new_gold: dict[str, dict[str, Any]] | None = None,
    *,
    new_predictions: list[dict[str, Any]] | None = None,
    taxonomy: Taxonomy | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The comparison block written into metrics.json and report.md.

    `new_gold`: id -> {dimension: gold label} of this evaluation, to count changed gold labels.
    `new_predictions` (this run's prediction rows, crossval.prediction_rows) adds per dimension the
    paired change on the items both runs evaluated (`paired`: n, delta, lo, hi) and counts gold
    changes that took the earlier run's prediction; `taxonomy` maps categories to groups for that.
    """
    old = load_run(run_dir)
    om = old.meta
    old_rows = {str(r["id"]): r for r in old.predictions(error=CompareError)}
    new_rows = {str(r["id"]): r for r in new_predictions} if new_predictions is not None else None
    dims = {}
    for name, rep in new["dimensions"].items():
        o = old.dimensions.get(name)
        k = rep["kappa"]
        row: dict[str, Any] = {"kappa": k["kappa"], "lo": k["lo"], "hi": k["hi"], "n": rep["n"]}
        if o is not None:
            ok = o["kappa"]
            row.update(
                previous_kappa=ok["kappa"],
                previous_lo=ok["lo"],
                previous_hi=ok["hi"],
                previous_n=o["n"],
                delta=None if k["kappa"] is None or ok["kappa"] is None else k["kappa"] - ok["kappa"],
            )
        if new_rows is not None and old_rows:
            d = rep.get("dimension", name)
            to_group = None
            if rep.get("level") == "group" and taxonomy is not None and d in taxonomy.dimensions:
                to_group = taxonomy.dimensions[d].group_of
            _, gb, pb, ga, pa = _pairs(old_rows, new_rows, d, to_group)
            row["paired"] = paired_delta_ci((gb, pb), (ga, pa), n_boot=n_boot, seed=seed)
        dims[name] = row
    out = {
        "previous_run": str(Path(run_dir)),
        "previous": {
            k: om.get(k)
            for k in (
                "model",
                "label",
                "options",
                "taxonomy",
                "taxonomy_fingerprint",
                "gold",
                "gold_hash",
                "n_gold",
                "created_at",
            )
        },
        "same_taxonomy": om.get("taxonomy_fingerprint") == new_meta.get("taxonomy_fingerprint"),
        "same_gold": om.get("gold_hash") == new_meta.get("gold_hash"),
        "same_model": om.get("model") == new_meta.get("model"),
        "dimensions": dims,
    }
    if "options" in new_meta:
        out["same_options"] = (om.get("options") or None) == new_meta["options"]
    if new_gold is not None:
        prev = _gold_labels(old)
        shared = set(prev) & set(new_gold)
        changed: dict[str, int] = {}
        to_model: dict[str, int] = {}
        for rid in shared:
            for d, v in new_gold[rid].items():
                if d in prev[rid] and prev[rid][d] != v:
                    changed[d] = changed.get(d, 0) + 1
                    # The new gold label is what the earlier run's model predicted: a reviewer accepted it.
                    if v is not None and old_rows.get(rid, {}).get(d) == v:
                        to_model[d] = to_model.get(d, 0) + 1
        out["shared_items"] = len(shared)
        out["gold_labels_changed"] = changed
        out["gold_changes_to_model_label"] = {d: to_model.get(d, 0) for d in changed}
    return out


def _ci(k: float | None, lo: float | None, hi: float | None) -> str:
    if k is None:
        return "n/a"
    return f"{k:.3f} [" + ("n/a" if lo is None else f"{lo:.3f}, {hi:.3f}") + "]"


def paired_text(p: dict[str, Any] | None) -> str:
    """The paired change as `+0.012 [-0.010, +0.030] (n=400)`, or n/a."""
    if not p or p.get("delta") is None:
        return f"n/a (n={p['n']})" if p else "-"
    ci = "n/a" if p.get("lo") is None else f"{p['lo']:+.3f}, {p['hi']:+.3f}"
    return f"{p['delta']:+.3f} [{ci}] (n={p['n']})"


def changes_text(c: dict[str, Any]) -> str:
    """'symptom 12 (5 to the earlier model's label), root_cause 3 (0 ...)', or 'none'."""
    to_model = c.get("gold_changes_to_model_label") or {}
    parts = []
    for d, n in c.get("gold_labels_changed", {}).items():
        m = to_model.get(d)
        parts.append(f"{d} {n}" + (f" ({m} to the earlier run's prediction)" if m is not None else ""))
    return ", ".join(parts) or "none"


def render_comparison(c: dict[str, Any]) -> list[str]:
    p = c["previous"]
    lines = [
        "## Compared with an earlier run",
        "",
        f"- previous run: `{c['previous_run']}` ({p.get('label') or p.get('model')}, taxonomy {p.get('taxonomy')}, "
        f"gold hash {p.get('gold_hash')}, {p.get('n_gold')} records)",
        f"- same taxonomy: {'yes' if c['same_taxonomy'] else 'no'}; same gold: {'yes' if c['same_gold'] else 'no'}; "
        f"same model: {'yes' if c['same_model'] else 'no'}"
        + (f"; same options: {'yes' if c['same_options'] else 'no'}" if "same_options" in c else ""),
    ]
    if c.get("folds"):
        lines.append(f"- {c['folds']}")
    if "gold_labels_changed" in c:
        lines.append(f"- {c['shared_items']} items in both runs; gold labels changed between them: {changes_text(c)}")
        if any((c.get("gold_changes_to_model_label") or {}).values()):
            lines.append(
                "- a gold label changed to the earlier run's own prediction (a reviewer accepted the model's label) "
                "raises that model's kappa by construction: read its part of the change with care"
            )
    lines += [
        "",
        "| dimension | kappa now [95% CI] | n | kappa before [95% CI] | n | change | paired change [95% CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in c["dimensions"].items():
        now = _ci(r["kappa"], r["lo"], r["hi"])
        paired = paired_text(r.get("paired"))
        if "previous_kappa" in r:
            before = _ci(r["previous_kappa"], r["previous_lo"], r["previous_hi"])
            delta = "n/a" if r["delta"] is None else f"{r['delta']:+.3f}"
            lines.append(f"| {name} | {now} | {r['n']} | {before} | {r['previous_n']} | {delta} | {paired} |")
        else:
            lines.append(f"| {name} | {now} | {r['n']} | - | - | - | {paired} |")
    lines += [
        "",
        "Paired change: kappa now minus kappa before on the items both runs evaluated, with a bootstrap interval "
        "that resamples those items once for both runs (an interval that excludes 0 is a change beyond resampling "
        "noise). When gold labels or categories changed, part of a kappa change is the new labels, not the model: "
        "compare on the same model to see what the review changed.",
        "",
    ]
    return lines
