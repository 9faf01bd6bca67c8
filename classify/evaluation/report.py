"""Write an evaluation run to evals/<timestamp>-<model>/: metrics.json, report.md, predictions, PNGs."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from classify.core.records import atomic_write_text, write_rows
from classify.evaluation.crossval import EvalResult, prediction_rows


def run_dir_name(spec: str, when: datetime | None = None) -> str:
    """<UTC timestamp>-<spec with options>, e.g. 20261130-060933-local_smollm2-135m_strategy_few-shot_k_2."""
    when = when or datetime.now(timezone.utc)
    safe = re.sub(r"[^A-Za-z0-9.-]+", "_", spec.replace(" --", " ")).strip("_")
    return f"{when.strftime('%Y%m%d-%H%M%S')}-{safe[:90].rstrip('_')}"


def unique_dir(path: Path) -> Path:
    """Create `path`, or `path-2`, `path-3`... if a run in the same second took the name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        p = path if n == 1 else path.with_name(f"{path.name}-{n}")
        try:
            p.mkdir()
            return p
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: no free run folder name")


def _fmt_k(k: dict) -> str:
    return f"{k['kappa']:.3f} [{k['lo']:.3f}, {k['hi']:.3f}]"


def write_eval(res: EvalResult, metrics: dict[str, Any], out_root: Path, extra_meta: dict | None = None) -> Path:
    from classify.evaluation.leaderboard import run_label

    tax, gold = res.gold.taxonomy, res.gold
    meta = {
        "model": res.spec,
        "mode": res.mode,
        "params": res.params,
        "taxonomy": tax.label,
        "taxonomy_fingerprint": tax.fingerprint(),
        "gold": str(gold.path) if gold.path else None,
        "gold_hash": gold.hash,
        "n_gold": len(gold),
        "provenance": res.provenance,
        "seconds": round(res.seconds, 2),
        "seconds_per_1000": round(1000 * res.seconds / max(1, sum(1 for f in res.folds if f != -2)), 2),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **(extra_meta or {}),
    }
    # The folder and report name the options too (encoder, strategy, shots...), so two runs of one
    # spec with different settings are told apart without opening metrics.json.
    meta["label"] = run_label(meta)
    out = unique_dir(out_root / run_dir_name(meta["label"]))
    doc = {"meta": meta, **metrics}
    # Written into a hidden folder and renamed when complete: a run that dies half-way (disk full,
    # Ctrl-C) leaves no folder that `classify leaderboard` would list.
    tmp = out.parent / f".{out.name}.partial"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        atomic_write_text(tmp / "metrics.json", json.dumps(doc, indent=2, default=str) + "\n")
        write_rows(tmp / "predictions.jsonl", prediction_rows(res))
        pngs = draw_plots(metrics, tmp)
        atomic_write_text(tmp / "report.md", render_markdown(doc, pngs))
        tmp.replace(out)  # onto the empty folder unique_dir reserved
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        out.rmdir()
        raise
    return out


def draw_plots(metrics: dict[str, Any], out: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from sklearn.metrics import ConfusionMatrixDisplay

    files = {}
    for name, rep in metrics["dimensions"].items():
        labels = rep["confusion"]["labels"]
        cm = np.array(rep["confusion"]["matrix"])
        size = max(5.0, 0.55 * len(labels) + 2.5)
        fig, ax = plt.subplots(figsize=(size + 1, size))
        ConfusionMatrixDisplay(cm, display_labels=labels).plot(ax=ax, xticks_rotation=60, colorbar=False, cmap="Blues")
        k = rep["kappa"]
        ax.set_title(f"{name}: kappa {k['kappa']:.2f} [{k['lo']:.2f}, {k['hi']:.2f}], n={rep['n']}")
        ax.set_xlabel("predicted")
        ax.set_ylabel("gold")
        fig.tight_layout()
        fn = f"confusion_{name}.png"
        fig.savefig(out / fn, dpi=110)
        plt.close(fig)
        files[f"confusion_{name}"] = fn

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for name, rep in metrics["dimensions"].items():
        xs = [r["coverage"] for r in rep["selective"]]
        ax.plot(xs, [r["kappa"] for r in rep["selective"]], marker="o", label=f"{name} kappa")
        ax.plot(xs, [r["accuracy"] for r in rep["selective"]], ls="--", alpha=0.6, label=f"{name} accuracy")
    for name, c in metrics.get("coders", {}).items():
        if name in metrics["dimensions"]:
            ax.axhline(c["kappa"], color="grey", lw=0.8, ls=":")
    ax.set_xlabel("% most confident predictions kept")
    ax.set_ylabel("agreement with gold")
    ax.set_ylim(0, 1.02)
    ax.set_title("Selective labeling (dotted: coders' kappa)")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(out / "selective.png", dpi=110)
    plt.close(fig)
    files["selective"] = "selective.png"
    if metrics.get("selective_labeling"):
        files["reliability"] = draw_reliability(metrics["selective_labeling"], out)
    return files


MIN_BIN = 5


def draw_reliability(sel: dict[str, Any], out: Path) -> str:
    """Reliability diagram: per confidence bin, accuracy against mean confidence, before and after
    calibration, one panel per dimension (the diagonal is perfect calibration)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sel), figsize=(4.6 * len(sel), 4.4), squeeze=False)
    for ax, (name, rep) in zip(axes[0], sel.items()):
        cal = rep["calibration"]
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":", label="perfect calibration")
        for key, style, label in (("before", "o--", "model's own"), ("after", "s-", "calibrated")):
            bins = [b for b in cal[key]["bins"] if b["n"] >= MIN_BIN]  # a 1-item bin is noise
            if not bins or (key == "after" and cal["method"].startswith("none")):
                continue
            ece = cal[key]["ece"]
            ax.plot(
                [b["confidence"] for b in bins],
                [b["accuracy"] for b in bins],
                style,
                label=f"{label} (ECE {ece:.3f})",
                alpha=0.85,
            )
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(f"confidence (mean per bin; bins of >= {MIN_BIN} items)")
        ax.set_ylabel("accuracy against gold")
        ax.set_title(f"{name} ({rep['scope']}, n={rep['n']})", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Reliability of the confidence, out-of-fold", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "reliability.png", dpi=110)
    plt.close(fig)
    return "reliability.png"


def _na(x: float | None, fmt: str = ".3f") -> str:
    return "n/a" if x is None else format(x, fmt)


def render_trust(sel: dict[str, Any], png: str | None) -> list[str]:
    """The report's "how much can the labels be trusted" section (see docs/trust.md)."""
    lines = [
        "## How much can the labels be trusted",
        "",
        "Coverage at target kappa: the share of reports the model may label alone (`classify run "
        "--target-kappa`) while those labels keep the target agreement with the coders, with 95% "
        "confidence (a one-sided Clopper-Pearson bound on their accuracy, on the kappa scale of the whole "
        "dimension; thresholds tested in a fixed order; docs/trust.md). Coverage has a Wilson 95% interval. "
        "n/a: no confidence threshold reaches the target.",
        "",
        "| dimension | scope | target kappa | coverage [95% CI] | kappa of auto labels (bound) | accuracy | "
        "in-slice kappa | threshold |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, rep in sel.items():
        for t, c in rep["coverage"].items():
            cov = (
                f"{c['coverage']:.1%} [{c['coverage_lo']:.1%}, {c['coverage_hi']:.1%}]"
                if c["threshold"] is not None
                else "0% (n/a)"
            )
            lines.append(
                f"| {name} | {rep['scope']} | {t} | {cov} | {_na(c['kappa'])} (>= {_na(c['kappa_lo'])}) | "
                f"{_na(c['accuracy'])} | {_na(c['slice_kappa'])} | {_na(c['threshold'], '.4f')} |"
            )
    lines += [
        "",
        "Calibration of the confidence, out-of-fold (lower is better; the calibrated figures use a temperature "
        "fitted on the other folds only):",
        "",
        "| dimension | method | ECE before | ECE after | Brier before | Brier after |",
        "|---|---|---|---|---|---|",
    ]
    for name, rep in sel.items():
        cal = rep["calibration"]
        lines.append(
            f"| {name} | {cal['method']} | {_na(cal['before']['ece'])} | {_na(cal['after']['ece'])} | "
            f"{_na(cal['before']['brier'])} | {_na(cal['after']['brier'])} |"
        )
    if png:
        lines += ["", f"![reliability diagram]({png})"]
    return lines + [""]


def render_markdown(doc: dict[str, Any], pngs: dict[str, str]) -> str:
    meta = doc["meta"]
    lines = [
        f"# Evaluation: `{meta['model']}`",
        "",
        *([f"- run: `{meta['label']}`"] if meta.get("label", meta["model"]) != meta["model"] else []),
        f"- mode: {meta['mode']} {json.dumps(meta['params'])}",
        f"- taxonomy: {meta['taxonomy']} ({meta['taxonomy_fingerprint']}); gold: {meta['gold']} "
        f"({meta['n_gold']} records, hash {meta['gold_hash']})",
        f"- time: {meta['seconds']} s ({meta['seconds_per_1000']} s per 1,000 records)",
        f"- created: {meta['created_at']}",
        "",
        "## Agreement with gold",
        "",
        "| dimension | n | left out (no gold label) | model kappa [95% CI] | accuracy | macro-F1 | invalid | coders' kappa [95% CI] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    coders = doc.get("coders", {})
    for name, rep in doc["dimensions"].items():
        c = coders.get(name)
        cs = f"{_fmt_k(c)} (n={c['n']}, {c['coders'][0]} vs {c['coders'][1]})" if c else "-"
        lines.append(
            f"| {name} | {rep['n']} | {rep['n_without_label']} | {_fmt_k(rep['kappa'])} | {rep['accuracy']:.3f} | "
            f"{rep['macro_f1']:.3f} | {rep['n_invalid']} | {cs} |"
        )
    lines += [
        "",
        "Coders' kappa is the agreement between the gold set's two independent coding passes on the items "
        "both labeled; it is what the model is compared with, not a ceiling it must stay under.",
        "",
    ]
    if doc.get("selective_labeling"):
        lines += render_trust(doc["selective_labeling"], pngs.get("reliability"))
    dups = doc.get("near_duplicates") or []
    if dups:
        lines += [
            "## Near-duplicate texts across the train/test boundary",
            "",
            f"{len(dups)} evaluated records have a training record of their own model with (nearly) the same "
            "title and body; agreement on them is flattered. Most similar first:",
            "",
            "| fold | evaluated id | training id | TF-IDF cosine | identical |",
            "|---|---|---|---|---|",
            *[
                f"| {d['fold']} | {d['id']} | {d['train_id']} | {d['similarity']:.3f} | {d['identical']} |"
                for d in dups[:50]
            ],
            "",
        ]
    if doc.get("comparison"):
        from classify.evaluation.compare import render_comparison

        lines += render_comparison(doc["comparison"])
    lines += [
        "## Selective labeling",
        "",
        "Agreement on the x% most confident predictions: how much could be auto-labeled at a given agreement.",
        "",
    ]
    names = list(doc["dimensions"])
    lines.append("| kept | " + " | ".join(f"{n} kappa | {n} acc" for n in names) + " |")
    lines.append("|---|" + "---|---|" * len(names))
    for j in range(len(doc["dimensions"][names[0]]["selective"])):
        cells = []
        for n in names:
            r = doc["dimensions"][n]["selective"][j]
            cells.append(f"{r['kappa']:.3f} | {r['accuracy']:.3f}")
        lines.append(f"| {doc['dimensions'][names[0]]['selective'][j]['coverage']}% | " + " | ".join(cells) + " |")
    lines += ["", f"![selective labeling]({pngs['selective']})", ""]
    for name, rep in doc["dimensions"].items():
        lines += [
            f"## {name}: per category",
            "",
            "| category | support | precision | recall | F1 | one-vs-rest kappa |",
            "|---|---|---|---|---|---|",
        ]
        for cat, s in rep["per_category"].items():
            lines.append(
                f"| {cat} | {s['support']} | {s['precision']:.2f} | {s['recall']:.2f} | {s['f1']:.2f} | {s['kappa_ovr']:.2f} |"
            )
        lines += ["", f"![confusion matrix {name}]({pngs[f'confusion_{name}']})", ""]
    return "\n".join(lines) + "\n"
