"""Compare an evaluation with an earlier run: kappa per dimension, then and now, and the change.

After a review round the gold labels (and maybe the categories) differ between the two runs, so
the comparison also says what differs: taxonomy, gold content, and how many shared items changed
gold label.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from classify.core.errors import ClassifyError
from classify.core.records import read_rows
from classify.core.textio import read_text


class CompareError(ClassifyError, ValueError):
    pass


def load_run_metrics(run_dir: str | Path) -> dict[str, Any]:
    run_dir = Path(run_dir)
    f = run_dir / "metrics.json" if run_dir.is_dir() else run_dir
    if not f.exists():
        raise CompareError(f"{run_dir}: no metrics.json (give an evals/<run> folder)")
    try:
        doc = json.loads(read_text(f, CompareError))
    except json.JSONDecodeError as e:
        raise CompareError(f"{f}: not JSON: {e}") from e
    if "dimensions" not in doc or "meta" not in doc:
        raise CompareError(f"{f}: not an eval metrics file (needs meta and dimensions)")
    return doc


def _predictions(run_dir: str | Path) -> list[dict[str, Any]]:
    """The earlier run's predictions.jsonl rows ([] if it has none); malformed lines are an error."""
    pf = Path(run_dir) / "predictions.jsonl"
    return [r for r in read_rows(pf) if r.get("id") is not None] if pf.exists() else []


def _gold_labels(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    return {str(r["id"]): {k[5:]: v for k, v in r.items() if k.startswith("gold_")} for r in _predictions(run_dir)}


def previous_folds(run_dir: str | Path, ids: list[str], k: int) -> tuple[list[int] | None, str]:
    """The earlier run's fold of each id, for a paired comparison (same split, only labels differ).

    Ids the earlier run did not evaluate get a fold from a hash of the id. None (and why) when the
    earlier run was not a k-fold cross-validation.
    """
    old = load_run_metrics(run_dir)["meta"]
    if old.get("mode") != "cv" or (old.get("params") or {}).get("k") != k:
        return None, f"new folds: the earlier run is not a {k}-fold cross-validation"
    prev = {
        str(r["id"]): r["fold"] for r in _predictions(run_dir) if isinstance(r.get("fold"), int) and 0 <= r["fold"] < k
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


def compare_metrics(
    new: dict[str, Any],
    new_meta: dict[str, Any],
    run_dir: str | Path,
    new_gold: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The comparison block written into metrics.json and report.md.

    `new_gold`: id -> {dimension: gold label} of this evaluation, to count changed gold labels.
    """
    old = load_run_metrics(run_dir)
    om = old["meta"]
    dims = {}
    for name, rep in new["dimensions"].items():
        o = old["dimensions"].get(name)
        k = rep["kappa"]
        row = {"kappa": k["kappa"], "lo": k["lo"], "hi": k["hi"], "n": rep["n"]}
        if o is not None:
            ok = o["kappa"]
            row.update(
                previous_kappa=ok["kappa"],
                previous_lo=ok["lo"],
                previous_hi=ok["hi"],
                previous_n=o["n"],
                delta=k["kappa"] - ok["kappa"],
            )
        dims[name] = row
    out = {
        "previous_run": str(Path(run_dir)),
        "previous": {
            k: om.get(k)
            for k in ("model", "taxonomy", "taxonomy_fingerprint", "gold", "gold_hash", "n_gold", "created_at")
        },
        "same_taxonomy": om.get("taxonomy_fingerprint") == new_meta.get("taxonomy_fingerprint"),
        "same_gold": om.get("gold_hash") == new_meta.get("gold_hash"),
        "same_model": om.get("model") == new_meta.get("model"),
        "dimensions": dims,
    }
    if new_gold is not None:
        prev = _gold_labels(run_dir)
        shared = set(prev) & set(new_gold)
        changed: dict[str, int] = {}
        for rid in shared:
            for d, v in new_gold[rid].items():
                if d in prev[rid] and prev[rid][d] != v:
                    changed[d] = changed.get(d, 0) + 1
        out["shared_items"] = len(shared)
        out["gold_labels_changed"] = changed
    return out


def render_comparison(c: dict[str, Any]) -> list[str]:
    p = c["previous"]
    lines = [
        "## Compared with an earlier run",
        "",
        f"- previous run: `{c['previous_run']}` ({p.get('model')}, taxonomy {p.get('taxonomy')}, gold hash {p.get('gold_hash')}, "
        f"{p.get('n_gold')} records)",
        f"- same taxonomy: {'yes' if c['same_taxonomy'] else 'no'}; same gold: {'yes' if c['same_gold'] else 'no'}; "
        f"same model: {'yes' if c['same_model'] else 'no'}",
    ]
    if c.get("folds"):
        lines.append(f"- {c['folds']}")
    if "gold_labels_changed" in c:
        ch = ", ".join(f"{d} {n}" for d, n in c["gold_labels_changed"].items()) or "none"
        lines.append(f"- {c['shared_items']} items in both runs; gold labels changed between them: {ch}")
    lines += [
        "",
        "| dimension | kappa now [95% CI] | n | kappa before [95% CI] | n | change |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in c["dimensions"].items():
        now = f"{r['kappa']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"
        if "previous_kappa" in r:
            before = f"{r['previous_kappa']:.3f} [{r['previous_lo']:.3f}, {r['previous_hi']:.3f}]"
            lines.append(f"| {name} | {now} | {r['n']} | {before} | {r['previous_n']} | {r['delta']:+.3f} |")
        else:
            lines.append(f"| {name} | {now} | {r['n']} | - | - | - |")
    lines += [
        "",
        "When gold labels or categories changed, part of a kappa change is the new labels, not the model: "
        "compare on the same model to see what the review changed.",
        "",
    ]
    return lines
