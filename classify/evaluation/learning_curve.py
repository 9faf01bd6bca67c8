"""Learning curves: cross-validated kappa against the number of gold records trained on.

Answers the question a coding team asks before coding more reports: does agreement still grow
with more gold, and roughly how much more would reach a target? Every point is the same k-fold
cross-validation as `classify eval` (same folds, same metrics), with each fold's model trained on
a nested, seeded fraction of its training records.

The extrapolation fits kappa(n) = a - b * n^(-c) (a saturating power law, the usual shape of
learning curves) with scipy's curve_fit. With a handful of noisy points it is a rough guide: the
report prints the fitted plateau `a` beside every estimate, and says "not reached" when a target
lies above it.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, overload

import numpy as np

from classify.classifiers.base import ModelOptions
from classify.core.errors import UsageError
from classify.core.gold import GoldSet
from classify.core.writer import atomic_write_text
from classify.evaluation.crossval import assign_folds, cross_validate
from classify.evaluation.leaks import train_test_leaks
from classify.evaluation.metrics import compute_metrics
from classify.evaluation.report import run_dir_name, unique_dir

DEFAULT_FRACTIONS = (0.2, 0.4, 0.6, 0.8, 1.0)
MAX_EXTRAPOLATION = 10  # estimates beyond this multiple of today's gold are printed as a bound only


def parse_fractions(text: str) -> list[float]:
    try:
        fr = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--fractions: expected comma-separated numbers in (0, 1], got {text!r}") from None
    if len(fr) < 2 or any(not 0 < f <= 1 for f in fr):
        raise UsageError(f"--fractions: need at least two distinct values in (0, 1], got {text!r}")
    return fr


@dataclass
class CurveFit:
    a: float  # plateau: the kappa this model approaches with unlimited gold of this kind
    b: float
    c: float

    @overload
    def kappa_at(self, n: float) -> float: ...
    @overload
    def kappa_at(self, n: np.ndarray) -> np.ndarray: ...
    def kappa_at(self, n: float | np.ndarray) -> float | np.ndarray:
        return self.a - self.b * n ** (-self.c)

    def n_for(self, target: float) -> float:
        """Training records per fold needed for `target` (inf when the plateau is below it)."""
        if target >= self.a:
            return math.inf
        if self.b <= 0:
            return 0.0
        try:
            return (self.b / (self.a - target)) ** (1 / self.c)
        except OverflowError:  # a target a hair under the plateau with a flat curve: out of reach
            return math.inf


def fit_curve(n_train: list[float], kappas: list[float]) -> CurveFit | None:
    """Least-squares saturating power law through the points; None if it cannot be fitted."""
    from scipy.optimize import curve_fit

    x, y = np.asarray(n_train, dtype=float), np.asarray(kappas, dtype=float)
    ok = np.isfinite(y) & (x > 0)
    x, y = x[ok], y[ok]
    if len(x) < 3:
        return None

    def f(n, a, b, c):
        return a - b * n ** (-c)

    # Kappa cannot exceed 1; c is kept in a range real learning curves take (0.05 .. 2).
    p0 = (min(1.0, max(y) + 0.05), 1.0, 0.5)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (a, b, c), _ = curve_fit(f, x, y, p0=p0, bounds=([-1.0, 0.0, 0.05], [1.0, 1e6, 2.0]), maxfev=20000)
    except (RuntimeError, ValueError):
        return None
    return CurveFit(float(a), float(b), float(c))


def learning_curve(
    spec: str,
    gold: GoldSet,
    options: ModelOptions | None = None,
    fractions: list[float] | tuple[float, ...] = DEFAULT_FRACTIONS,
    k: int = 5,
    seed: int = 0,
    n_boot: int = 500,
    progress: Callable[[str], None] | None = None,
    repeats: int = 1,
) -> dict[str, Any]:
    """Kappa with CI per dimension (and root-cause group) at each training fraction, same folds.

    `repeats` > 1 draws that many training samples per fraction below 1 (same folds, other sample
    seeds) and reports the mean kappa and mean CI bounds, with `sd` the spread between draws: one
    draw of a small sample moves kappa by several hundredths, enough to swing the fitted plateau.
    """
    if repeats < 1:
        raise UsageError(f"repeats must be at least 1, got {repeats}")
    folds = assign_folds(gold, k, seed)
    points = []
    for frac in sorted(fractions):
        t0 = time.perf_counter()
        draws: list[dict[str, dict[str, float]]] = []
        n_records = []
        for r in range(repeats if frac < 1 else 1):
            try:
                res = cross_validate(
                    spec, gold, options, k=k, seed=seed, folds=folds, train_fraction=frac, sample_seed=seed + 1000 * r
                )
            except ValueError as e:  # e.g. too few records at a small fraction for the model to train
                raise UsageError(f"at training fraction {frac:g}: {e}") from e
            if train_test_leaks(res):  # impossible by construction; never report a leaky curve
                raise RuntimeError("learning curve: a record was predicted by a model trained on it")
            metrics = compute_metrics(res, n_boot=n_boot, seed=seed)
            draw = {}
            for name, rep in metrics["dimensions"].items():
                # Records with a label in this dimension that each fold trained on, averaged over folds.
                d = rep["dimension"]
                labeled = {gold.ids[i] for i, y in enumerate(gold.labels[d]) if y is not None}
                n_train = float(np.mean([len(ids & labeled) for ids in res.train_ids.values()]))
                if rep["kappa"]["lo"] is None:  # one gold class in the dimension: no curve to fit
                    raise UsageError(
                        f"{name}: kappa is undefined on this gold set (one category only, n={rep['n']}); "
                        "a learning curve needs at least two"
                    )
                draw[name] = {"n_train": n_train, **{key: rep["kappa"][key] for key in ("kappa", "lo", "hi", "n")}}
            draws.append(draw)
            n_records.append(float(np.mean([len(ids) for ids in res.train_ids.values()])))
        dims = {
            name: {key: float(np.mean([dr[name][key] for dr in draws])) for key in draws[0][name]} for name in draws[0]
        }
        for name in dims:
            dims[name]["n"] = int(draws[0][name]["n"])
            dims[name]["sd"] = float(np.std([dr[name]["kappa"] for dr in draws]))
            dims[name]["draws"] = len(draws)
        points.append(
            {
                "fraction": frac,
                "n_train_records": float(np.mean(n_records)),
                "seconds": round(time.perf_counter() - t0, 2),
                "dimensions": dims,
            }
        )
        if progress:
            progress(f"  fraction {frac:g}: " + ", ".join(f"{n} {v['kappa']:.3f}" for n, v in dims.items()))
    coders = {name: c["kappa"] for name, c in metrics.get("coders", {}).items()}
    run_opts = (options or ModelOptions(seed=seed)).run_meta()
    from classify.evaluation.leaderboard import run_label

    return {
        "model": spec,
        "label": run_label({"model": spec, "options": run_opts}),
        "options": run_opts,
        "k": k,
        "seed": seed,
        "repeats": repeats,
        "n_gold": len(gold),
        "points": points,
        "coders": coders,
        "provenance": res.provenance,
    }


def extrapolate(curve: dict[str, Any], targets: dict[str, float], k: int) -> dict[str, Any]:
    """Per dimension: the fitted curve, and the gold size that would reach each target.

    A fold trains on (k-1)/k of the gold set, so the gold size for n training records is
    n * k / (k-1); for a labeled subset (root cause), it is scaled by the labeled share too.
    """
    out: dict[str, Any] = {}
    names = list(curve["points"][0]["dimensions"])
    for name in names:
        ns = [p["dimensions"][name]["n_train"] for p in curve["points"]]
        ks = [p["dimensions"][name]["kappa"] for p in curve["points"]]
        fit = fit_curve(ns, ks)
        labeled_share = curve["points"][-1]["dimensions"][name]["n"] / curve["n_gold"]
        entry: dict[str, Any] = {"fit": None if fit is None else {"a": fit.a, "b": fit.b, "c": fit.c}}
        target = targets.get(name)
        if target is not None:
            entry["target"] = target
            if fit is not None:
                n_needed = fit.n_for(target)
                entry["gold_needed"] = (
                    None if math.isinf(n_needed) else int(math.ceil(n_needed * k / (k - 1) / max(labeled_share, 1e-9)))
                )
        out[name] = entry
    return out


def write_curve(curve: dict[str, Any], extra: dict[str, Any], out_root: Path) -> Path:
    out = unique_dir(out_root / run_dir_name(f"learning-curve-{curve.get('label', curve['model'])}"))
    doc = {**curve, "extrapolation": extra, "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    # curve.json, not metrics.json: the leaderboard reads metrics.json and must not list this folder.
    atomic_write_text(out / "curve.json", json.dumps(doc, indent=2, default=str) + "\n")
    draw_curve(doc, out / "learning_curve.png")
    atomic_write_text(out / "report.md", render_markdown(doc))
    return out


def draw_curve(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    names = list(doc["points"][0]["dimensions"])
    for i, name in enumerate(names):
        color = f"C{i}"
        ns = [p["dimensions"][name]["n_train"] for p in doc["points"]]
        ks = [p["dimensions"][name]["kappa"] for p in doc["points"]]
        lo = [p["dimensions"][name]["lo"] for p in doc["points"]]
        hi = [p["dimensions"][name]["hi"] for p in doc["points"]]
        # A percentile bootstrap interval need not contain the estimate: clip, matplotlib refuses < 0.
        yerr = [np.clip(np.subtract(ks, lo), 0, None), np.clip(np.subtract(hi, ks), 0, None)]
        ax.errorbar(ns, ks, yerr=yerr, marker="o", capsize=3, color=color, label=name)
        fit = doc["extrapolation"].get(name, {}).get("fit")
        if fit:
            xs = np.linspace(min(ns), max(ns) * 4, 100)
            ax.plot(xs, CurveFit(**fit).kappa_at(xs), ls="--", lw=1, color=color, alpha=0.7)
        if name in doc.get("coders", {}):
            ax.axhline(doc["coders"][name], color=color, lw=0.8, ls=":")
    ax.set_xlabel("labeled training records per fold")
    ax.set_ylabel("Cohen's kappa vs gold (95% CI)")
    ax.set_ylim(min(0.0, ax.get_ylim()[0]), 1.02)
    ax.set_title(
        f"Learning curve: {doc.get('label', doc['model'])}\n(dashed: fit, extrapolated to 4x; dotted: coders)",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render_markdown(doc: dict[str, Any]) -> str:
    names = list(doc["points"][0]["dimensions"])
    lines = [
        f"# Learning curve: `{doc.get('label', doc['model'])}`",
        "",
        f"{doc['k']}-fold cross-validation on {doc['n_gold']} gold records, the same folds at every point; "
        "each fold's model trains on a nested, seeded fraction of its training records. "
        "Kappa with a bootstrap 95% CI; `n` is labeled training records per fold (root cause: only the "
        "records with a root cause)."
        + (
            f" Below fraction 1, each point averages {doc.get('repeats', 1)} training samples (kappa, CI bounds); "
            "`sd` is the spread of kappa between them."
            if doc.get("repeats", 1) > 1
            else ""
        ),
        "",
        "| fraction | " + " | ".join(f"{n} n | {n} kappa [95% CI]" for n in names) + " | seconds |",
        "|---|" + "---|---|" * len(names) + "---|",
    ]
    for p in doc["points"]:
        cells = []
        for n in names:
            v = p["dimensions"][n]
            sd = f" sd {v['sd']:.3f}" if v.get("draws", 1) > 1 else ""
            cells += [f"{v['n_train']:.0f}", f"{v['kappa']:.3f} [{v['lo']:.3f}, {v['hi']:.3f}]{sd}"]
        lines.append(f"| {p['fraction']:g} | " + " | ".join(cells) + f" | {p['seconds']:.0f} |")
    lines += [
        "",
        "## Extrapolation (rough)",
        "",
        "Fit: kappa(n) = a - b * n^(-c); `a` is the plateau with unlimited gold of this kind. "
        "Gold needed counts all gold records (labeled and not) at today's labeled share, for "
        f"{doc['k']}-fold training. A handful of noisy points: read it as an order of magnitude.",
        "",
        "| dimension | plateau a | kappa now | coders | target | gold records needed |",
        "|---|---|---|---|---|---|",
    ]
    for n in names:
        e = doc["extrapolation"].get(n, {})
        fit = e.get("fit")
        now = doc["points"][-1]["dimensions"][n]["kappa"]
        coders = doc.get("coders", {}).get(n)
        target = e.get("target")
        if target is None:
            need = "-"
        elif now >= target:
            need = "reached at today's size"
        elif fit is None:
            need = "no fit"
        elif e.get("gold_needed") is None:
            need = "not reached (plateau below target)"
        elif e["gold_needed"] > MAX_EXTRAPOLATION * doc["n_gold"]:
            # Past ~10x the data a curve fitted on today's points says nothing dependable.
            need = f"more than {MAX_EXTRAPOLATION}x today's gold (> {MAX_EXTRAPOLATION * doc['n_gold']:,})"
        else:
            need = f"~{e['gold_needed']:,}"
        # a at its upper bound: the points show no saturation yet, so the estimate rests on the slope alone.
        plateau = (f"{fit['a']:.3f}" + (" (bound: no saturation seen)" if fit["a"] >= 0.999 else "")) if fit else "-"
        lines.append(f"| {n} | {plateau} | {now:.3f} | ")
        lines[-1] += f"{coders:.3f} | " if coders is not None else "- | "
        lines[-1] += f"{target:.3f} | {need} |" if target is not None else f"- | {need} |"
    lines += ["", "![learning curve](learning_curve.png)", ""]
    return "\n".join(lines)


def run_learning_curve(
    model: str,
    *,
    taxonomy: str | Path | None = None,
    gold: str | Path | None = None,
    fractions: str | list[float] = "0.2,0.4,0.6,0.8,1",
    targets: list[str] | dict[str, float] | None = None,
    folds: int = 5,
    seed: int = 0,
    n_boot: int = 500,
    repeats: int = 1,
    options: ModelOptions | None = None,
    out_dir: str | Path = "evals",
    log: Callable[[str], None] | None = None,
) -> Path:
    """`classify learning-curve`: the curve, the gold-size estimates for `targets` (`dim=kappa`
    strings or a dict; default the coders' kappa per dimension), written to a run folder (returned)."""
    from classify.classifiers.base import uses_llm, validate_options
    from classify.core.goldfile import load_task
    from classify.evaluation.agreement import dims_with_groups

    if uses_llm(model):
        # k folds x every fraction of full LLM runs, for a curve of few-shot pools: refuse.
        raise UsageError(
            "learning-curve trains models on gold; LLM specs (and ensembles with one) learn only from "
            "few-shot examples (use eval --shots)"
        )
    fr = parse_fractions(fractions) if isinstance(fractions, str) else sorted(set(fractions))
    tax, g = load_task("labels", taxonomy, gold)
    options = options or ModelOptions(seed=seed)
    validate_options(model, tax, options)  # a bad spec or option fails before any training
    names = [name for name, _, _ in dims_with_groups(g)]  # the names metrics and curves use
    wanted: dict[str, float] = {}
    for t in targets.items() if isinstance(targets, dict) else [tuple(x.partition("=")[::2]) for x in targets or []]:
        name, val = t
        if name not in names:
            raise UsageError(f"--target {name}={val}: unknown dimension {name!r}; one of {', '.join(names)}")
        try:
            wanted[name] = float(val)
        except ValueError:
            raise UsageError(f"--target {name}={val}: expected dimension=kappa, e.g. symptom=0.85") from None
    if log:
        log(
            f"{model}: learning curve, {folds}-fold CV on {len(g)} gold records at fractions "
            f"{', '.join(f'{f:g}' for f in fr)}"
        )
    curve = learning_curve(model, g, options, fr, k=folds, seed=seed, n_boot=n_boot, progress=log, repeats=repeats)
    extra = extrapolate(curve, wanted or dict(curve["coders"]), folds)
    return write_curve(curve, extra, Path(out_dir))
