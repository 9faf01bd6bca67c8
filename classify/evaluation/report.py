"""Write an evaluation run to evals/<timestamp>-<model>/: metrics.json, report.md, predictions, PNGs."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from classify.core.writer import atomic_write_text, write_rows
from classify.evaluation.bygroup import group_column, render_by_group
from classify.evaluation.crossval import EvalResult, prediction_rows
from classify.evaluation.metrics import SMALL_N
from classify.evaluation.runfolder import METRICS, PREDICTIONS, REPORT
from classify.evaluation.testoverlap import render_test_overlap

# Under every table that may show n/a: what it means there.
NA_NOTE = (
    "n/a: undefined, not zero: kappa where gold (or both sides) holds a single category, so agreement "
    "beyond chance cannot be measured (a 97%-accurate slice of one gold class would score kappa 0); "
    "precision of a category never predicted; recall of a category with no gold item; selective rows "
    "of a model that gives no confidence to rank by."
)


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


def fmt_kappa(k: dict | None, digits: int = 3) -> str:
    """kappa [lo, hi] with n/a for an undefined kappa or interval (metrics.kappa_ci)."""
    if not k or k.get("kappa") is None:
        return "n/a"
    f = f".{digits}f"
    ci = "n/a" if k.get("lo") is None else f"{format(k['lo'], f)}, {format(k['hi'], f)}"
    return f"{format(k['kappa'], f)} [{ci}]"


def small_sample_dims(metrics: dict[str, Any]) -> list[str]:
    """Dimensions whose kappa rests on fewer than SMALL_N items (the interval is not to be trusted)."""
    return [name for name, rep in metrics["dimensions"].items() if 0 < rep["n"] < SMALL_N]


def small_sample_warning(metrics: dict[str, Any]) -> str | None:
    dims = small_sample_dims(metrics)
    if not dims:
        return None
    which = ", ".join(f"{d} (n={metrics['dimensions'][d]['n']})" for d in dims)
    return (
        f"small sample: {which}; below {SMALL_N} items kappa and its bootstrap interval are unstable "
        "(the interval can collapse to one point): do not read them as a measurement"
    )


def has_coders(doc: dict[str, Any]) -> bool:
    """Whether the gold labels come from coder passes (then the report speaks of coders); without
    them (labels from maintainers, say) it speaks of reference labels."""
    meta = doc.get("meta") or {}
    return bool(meta["gold_coders"]) if "gold_coders" in meta else bool(doc.get("coders"))


def codebook_note(provenance: dict[str, Any] | None) -> str | None:
    """What codebook text the model trained on, or None: a spec (or an ensemble member) whose
    provenance says `codebook_examples` adds one pseudo-example per category to its training data."""
    prov = provenance or {}
    who = [prov] + list(prov.get("members") or [])
    users = [p.get("member") or p.get("model") or "the model" for p in who if p.get("codebook_examples")]
    if not users:
        return None
    return (
        f"codebook text is training data ({', '.join(dict.fromkeys(map(str, users)))}): one pseudo-example per "
        "category (its name, definition and include cues) joins the training records of every dimension; "
        "`--opt codebook=false` turns it off"
    )


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
        # The coder passes the labels came from (empty: reference labels, e.g. from maintainers).
        "gold_coders": sorted(gold.coders),
        # Records actually predicted and scored (fewer than n_gold under --limit).
        "n_evaluated": sum(1 for f in res.folds if f != -2),
        "provenance": res.provenance,
        "codebook_training_text": codebook_note(res.provenance) is not None,
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
        atomic_write_text(tmp / METRICS, json.dumps(doc, indent=2, default=str) + "\n")
        rows = prediction_rows(res)
        if res.params.get("by"):
            rows = group_column(res, rows, res.params["by"])
        write_rows(tmp / PREDICTIONS, rows)
        pngs = draw_plots(metrics, tmp)
        atomic_write_text(tmp / REPORT, render_markdown(doc, pngs))
        tmp.replace(out)  # onto the empty folder unique_dir reserved
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        out.rmdir()
        raise
    return out


def confusion_figure(name: str, rep: dict[str, Any]) -> Any:
    """Counts and row shares side by side for one dimension (a matplotlib Figure; the caller closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from sklearn.metrics import ConfusionMatrixDisplay

    labels = rep["confusion"]["labels"]
    cm = np.array(rep["confusion"]["matrix"])
    rows = cm.sum(axis=1, keepdims=True)
    # Row-normalised: the share of each gold category predicted as each column (its recall on the
    # diagonal), so a rare category's errors are as visible as a common one's.
    norm = np.divide(cm, rows, out=np.zeros(cm.shape, dtype=float), where=rows > 0)
    size = max(4.5, 0.5 * len(labels) + 2.0)
    # Columns carry numbers, rows "number name": long category ids side by side under the columns
    # overlapped at any rotation; each row's number names its column in both panels.
    names = [f"{j + 1}  {lab}" for j, lab in enumerate(labels)]
    codes = [str(j + 1) for j in range(len(labels))]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(2 * size + 3, size))
    ConfusionMatrixDisplay(cm, display_labels=names).plot(ax=ax, colorbar=False, cmap="Blues")
    ConfusionMatrixDisplay(norm, display_labels=codes).plot(
        ax=ax2, colorbar=False, cmap="Blues", values_format=".2f", im_kw={"vmin": 0, "vmax": 1}
    )
    ax.set_xticks(range(len(labels)), codes, rotation=0)
    ax.set_title("counts", fontsize=9)
    ax2.set_title("share of each gold row (rows sum to 1; empty rows 0)", fontsize=9)
    for a in (ax, ax2):
        a.set_xlabel("predicted (column number = row number)")
        a.set_ylabel("gold")
        if len(labels) > 8:  # the cell values shrink with the cells
            for t in a.texts:
                t.set_fontsize(7)
    fig.suptitle(f"{name}: kappa {fmt_kappa(rep['kappa'], 2)}, n={rep['n']}")
    fig.tight_layout()
    return fig


def draw_plots(metrics: dict[str, Any], out: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    files = {}
    for name, rep in metrics["dimensions"].items():
        if not rep["confusion"]["labels"]:
            continue  # no item with a gold label in this dimension (a small --limit sample)
        fig = confusion_figure(name, rep)
        fn = f"confusion_{name}.png"
        fig.savefig(out / fn, dpi=110)
        plt.close(fig)
        files[f"confusion_{name}"] = fn

    # The legend goes beside the axes, never over the curves; each dimension keeps one colour for its
    # kappa, its accuracy and its coders' line, and the coders' lines are named in the legend.
    fig, ax = plt.subplots(figsize=(8.6, 4.4))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    coders = metrics.get("coders", {})
    for j, (name, rep) in enumerate(metrics["dimensions"].items()):
        if not rep.get("has_confidence", True) or not rep["n"]:
            continue  # no confidence to rank by: nothing to plot (the report says n/a)
        colour = colours[j % len(colours)]
        xs = [r["coverage"] for r in rep["selective"]]
        ys = [np.nan if r["kappa"] is None else r["kappa"] for r in rep["selective"]]
        acc = [np.nan if r["accuracy"] is None else r["accuracy"] for r in rep["selective"]]
        ax.plot(xs, ys, marker="o", color=colour, label=f"{name} kappa")
        ax.plot(xs, acc, ls="--", alpha=0.6, color=colour, label=f"{name} accuracy")
        c = coders.get(name)
        if c and c.get("kappa") is not None:
            ax.axhline(c["kappa"], color=colour, lw=0.9, ls=":", label=f"{name}: coders' kappa {c['kappa']:.2f}")
    ax.set_xlabel("% most confident predictions kept")
    ax.set_ylabel("agreement with gold")
    ax.set_ylim(0, 1.02)
    ax.set_title("Selective labeling" + (" (dotted: the coders' own kappa)" if coders else ""))
    if ax.lines:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.text(0.5, 0.5, "no confidences to rank by", ha="center", va="center", transform=ax.transAxes)
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


def render_trust(sel: dict[str, Any], png: str | None, ref: str = "the coders") -> list[str]:
    """The report's "how much can the labels be trusted" section (see docs/trust.md)."""
    lines = [
        "## How much can the labels be trusted",
        "",
        "Coverage at target kappa: the share of reports the model may label alone (`classify run "
        f"--target-kappa`) while those labels keep the target agreement with {ref}, with 95% "
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
        *(
            [f"- evaluated: {meta['n_evaluated']} of the {meta['n_gold']} gold records (seeded sample, --limit)"]
            if meta.get("n_evaluated") is not None and meta["n_evaluated"] != meta["n_gold"]
            else []
        ),
        f"- taxonomy: {meta['taxonomy']} ({meta['taxonomy_fingerprint']}); gold: {meta['gold']} "
        f"({meta['n_gold']} records, hash {meta['gold_hash']})",
        f"- time: {meta['seconds']} s ({meta['seconds_per_1000']} s per 1,000 records)",
        f"- created: {meta['created_at']}",
        *([f"- {note}"] if (note := codebook_note(meta.get("provenance"))) else []),
        *([f"- design: {doc['by_group']['design']} (the tables below pool every group's predictions)"]
          if doc.get("by_group") else []),
        "",
        "## Agreement with gold",
        "",
    ]  # fmt: skip
    coders_given = has_coders(doc)
    coders = doc.get("coders", {})
    head = ["dimension", "n", "left out (no gold label)", "model kappa [95% CI]", "accuracy", "macro-F1"]
    head += ["weighted-F1", "invalid"] + (["coders' kappa [95% CI]"] if coders_given else [])
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, rep in doc["dimensions"].items():
        c = coders.get(name)
        cells = [
            name,
            f"{rep['n']}{' (small)' if 0 < rep['n'] < SMALL_N else ''}",
            str(rep["n_without_label"]),
            fmt_kappa(rep["kappa"]),
            _na(rep["accuracy"]),
            _na(rep["macro_f1"]),
            _na(rep.get("weighted_f1")),
            str(rep["n_invalid"]),
        ]
        if coders_given:
            cells.append(f"{fmt_kappa(c)} (n={c['n']}, {c['coders'][0]} vs {c['coders'][1]})" if c else "-")
        lines.append("| " + " | ".join(cells) + " |")
    warn = small_sample_warning(doc)
    lines += [
        "",
        *([f"**Warning, {warn}.**", ""] if warn else []),
        NA_NOTE,
        "",
        "Macro-F1 averages the categories' F1 with equal weight; weighted-F1 weighs each by its gold support "
        "(the figure most published issue-classification baselines report).",
        "",
        (
            "Coders' kappa is the agreement between the gold set's two independent coding passes on the items "
            "both labeled; it is what the model is compared with, not a ceiling it must stay under."
            if coders_given
            else "Reference labels: the gold file holds one set of labels (from the maintainers, say) and no "
            "independent passes to measure human agreement with; every figure is agreement with the reference "
            "labels."
        ),
        "",
    ]
    if doc.get("by_group"):
        lines += render_by_group(doc["by_group"])
    if doc.get("test_overlap"):
        lines += render_test_overlap(doc["test_overlap"])
    if doc.get("selective_labeling"):
        lines += render_trust(
            doc["selective_labeling"], pngs.get("reliability"), "the coders" if coders_given else "the reference labels"
        )
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
            cells.append(f"{_na(r['kappa'])} | {_na(r['accuracy'])}")
        lines.append(f"| {doc['dimensions'][names[0]]['selective'][j]['coverage']}% | " + " | ".join(cells) + " |")
    no_conf = [n for n in names if not doc["dimensions"][n].get("has_confidence", True) and doc["dimensions"][n]["n"]]
    if no_conf:
        lines += [
            "",
            f"No confidences to rank by for {', '.join(no_conf)} (the model gives none, or the same for every "
            "item): the rows below 100% are n/a.",
        ]
    lines += ["", f"![selective labeling]({pngs['selective']})", ""]
    for name, rep in doc["dimensions"].items():
        lines += [
            f"## {name}: per category",
            "",
            "| category | support | precision | recall | F1 | one-vs-rest kappa |",
            "|---|---|---|---|---|---|",
        ]
        for cat, c in rep["per_category"].items():
            lines.append(
                f"| {cat} | {c['support']} | {_na(c['precision'], '.2f')} | {_na(c['recall'], '.2f')} | "
                f"{_na(c['f1'], '.2f')} | {_na(c['kappa_ovr'], '.2f')} |"
            )
        lines += ["", "n/a: see the note under the agreement table.", ""]
        if f"confusion_{name}" in pngs:
            lines += [
                f"![confusion matrix {name}: counts, and each gold row's share]({pngs[f'confusion_{name}']})",
                "",
            ]
    return "\n".join(lines) + "\n"
