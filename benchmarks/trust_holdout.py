"""Does `classify run --target-kappa` keep its promise on reports its thresholds never saw?

Gold is split (stratified by symptom and "cause shown", seeded) into a development part (default 70%)
and a held-back part. On the development part only: the model's gold profile (5-fold cross-validation),
the thresholds for the target, and the labeling model. The held-back reports are then labeled and
routed exactly as `classify run --target-kappa` routes, and compared with their gold labels:

  auto share          share of held-back reports whose label was given alone (auto, or none_shown)
  accuracy / kappa    of those auto labels against gold; kappa on the dimension's scale (the guarantee's
                      measure: (accuracy - pe) / (1 - pe), pe from the development profile) and Cohen's
                      kappa inside the auto slice (n/a when one class is left)
  promised            the development bound the thresholds were chosen with

Root cause is scored over every held-back report: a null gold cause is the "none_shown" label.

    python benchmarks/trust_holdout.py [--model embed-logreg] [--target 0.87] [--splits 3] [--holdout 0.3]
    python benchmarks/trust_holdout.py --split appended [--first 407]   (held back: the records appended
        to gold later, with other shares: the closest gold has to "reports the project has never seen")
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from classify.classifiers.base import ModelOptions
from classify.core.causeshown import NONE_SHOWN
from classify.core.gold import GoldSet
from classify.core.goldfile import load_task
from classify.evaluation.holdout import split_first, split_gold
from classify.evaluation.thresholds import chance_agreement, slice_kappa, to_kappa
from classify.labeling.routing import make_router


def one_split(
    spec: str, gold: GoldSet, target: float, how: str, holdout: float, first: int, seed: int
) -> dict[str, dict]:
    dev, held = split_gold(gold, holdout, seed) if how == "random" else split_first(gold, first)
    options = ModelOptions(seed=0, show_progress=False)
    dims = gold.taxonomy.dimension_ids
    router = make_router(spec, dev, options, {d: target for d in dims})
    train = router.training_gold
    with router.labeling_model(spec, options) as clf:
        clf.fit(train.records, train.labels)
        rows = router.fields(clf.predict(held.records))
    out = {}
    for d in dims:
        truth = [y if y is not None else NONE_SHOWN for y in held.labels[d]]
        scores = router.profile.scores(d, cross_fit=False)
        pe = chance_agreement(scores.y_true, scores.labels)
        auto = [i for i, r in enumerate(rows) if r[f"{d}_status"] in ("auto", NONE_SHOWN)]
        yt = [truth[i] for i in auto]
        yp = [rows[i][f"{d}_suggestion"] for i in auto]
        acc = float(np.mean([a == b for a, b in zip(yt, yp)])) if auto else None
        th = router.thresholds[d]
        out[d] = {
            "n": len(rows),
            "auto": len(auto) / len(rows),
            "none_shown": sum(r[f"{d}_status"] == NONE_SHOWN for r in rows) / len(rows),
            "accuracy": acc,
            "kappa_scale": None if acc is None else to_kappa(acc, pe),
            "slice_kappa": slice_kappa(yt, yp) if auto else None,
            "promised": th.kappa_lo,
            "dev_coverage": th.coverage,
        }
    return out


def fmt(x: float | None, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="embed-logreg")
    ap.add_argument("--target", type=float, default=0.87)
    ap.add_argument("--split", choices=("random", "appended"), default="random")
    ap.add_argument("--first", type=int, default=407, help="--split appended: development = the first N records")
    ap.add_argument("--splits", type=int, default=3, help="--split random: how many seeded splits")
    ap.add_argument("--holdout", type=float, default=0.3)
    a = ap.parse_args()
    _, gold = load_task("labels", None, None)
    held = (
        f"{a.splits} splits, {a.holdout:.0%} of {len(gold)} gold reports held back"
        if a.split == "random"
        else f"the {len(gold) - a.first} gold reports after the first {a.first} held back"
    )
    print(f"{a.model}: target kappa {a.target}; {held}")
    t0 = time.perf_counter()
    seeds = range(a.splits) if a.split == "random" else [0]
    results = [one_split(a.model, gold, a.target, a.split, a.holdout, a.first, seed) for seed in seeds]
    for d in results[0]:
        print(f"\n{d}:")
        print(
            "  split  auto  (none shown)  accuracy  kappa(dim scale)  in-slice kappa  promised(dev bound)  dev coverage"
        )
        for s, res in enumerate(results):
            r = res[d]
            print(
                f"  {s:5d}  {r['auto']:5.1%}  ({r['none_shown']:5.1%})     {fmt(r['accuracy'])}     "
                f"{fmt(r['kappa_scale'])}             {fmt(r['slice_kappa'])}           {fmt(r['promised'])}"
                f"                {r['dev_coverage']:.1%}"
            )
        autos = [res[d]["auto"] for res in results]
        ks = [res[d]["kappa_scale"] for res in results if res[d]["kappa_scale"] is not None]
        print(
            f"  mean auto share {np.mean(autos):.1%}; kappa of auto labels (dim scale) "
            f"{fmt(float(np.mean(ks)) if ks else None)}; splits below target: "
            f"{sum(k < a.target for k in ks)}/{len(ks)}"
        )
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
