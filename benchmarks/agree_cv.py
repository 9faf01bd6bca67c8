"""Scratch cross-validation for issue 6 until `classify eval` lands: stratified 5-fold, seed 0.

Per dimension, on the records that have that label; root cause only on its labeled items.
Usage: python benchmarks/agree_cv.py SPEC [SPEC...] [--extra key=value ...]
"""
from __future__ import annotations

import sys
import time

import numpy as np
from sklearn.metrics import cohen_kappa_score
from sklearn.model_selection import StratifiedKFold

from classify.gold import load_gold
from classify.models import ModelOptions, make_classifier
from classify.paths import DEFAULT_GOLD
from classify.taxonomy import load_taxonomy


def top_kappa(y, p, conf, frac):
    order = np.argsort(-np.asarray(conf), kind="stable")[: max(1, int(round(frac * len(y))))]
    return cohen_kappa_score([y[i] for i in order], [p[i] for i in order])


def run(spec, extra):
    tax = load_taxonomy()
    gold = load_gold(DEFAULT_GOLD, tax)
    res = {}
    t_fit = t_pred = 0.0
    for dim in tax.dimension_ids:
        idx, ys = gold.labeled(dim)
        recs = [gold.records[i] for i in idx]
        y = np.array(ys)
        # StratifiedKFold needs >= n_splits members per class only for a warning; keep it.
        skf = StratifiedKFold(5, shuffle=True, random_state=0)
        pred = [None] * len(y)
        conf = [0.0] * len(y)
        grp = [None] * len(y)
        for tr, te in skf.split(np.zeros(len(y)), y):
            clf = make_classifier(spec, tax, ModelOptions(show_progress=False, extra=dict(extra)))
            t0 = time.perf_counter()
            clf.fit([recs[i] for i in tr], {dim: [ys[i] for i in tr]})
            t1 = time.perf_counter()
            out = clf.predict([recs[i] for i in te])[dim]
            t_pred += time.perf_counter() - t1
            t_fit += t1 - t0
            for j, p in zip(te, out):
                pred[j], conf[j], grp[j] = p.label, p.confidence, p.extra.get("group")
        k = cohen_kappa_score(y, pred)
        line = {"kappa": k, "acc": float(np.mean(np.array(pred) == y)),
                "k50": top_kappa(y, pred, conf, 0.5), "k70": top_kappa(y, pred, conf, 0.7)}
        d = tax.dimensions[dim]
        if d.groups:
            yg = [d.group_of(v) for v in y]
            pg = [g if g is not None else d.group_of(p) for g, p in zip(grp, pred)]
            line["group_kappa"] = cohen_kappa_score(yg, pg)
        res[dim] = line
    return res, t_fit, t_pred


if __name__ == "__main__":
    specs = [a for a in sys.argv[1:] if "=" not in a]
    extra = {}
    for a in sys.argv[1:]:
        if "=" in a:
            k, v = a.split("=", 1)
            try:
                v = float(v) if "." in v else int(v)
            except ValueError:
                pass
            extra[k] = v
    for spec in specs:
        res, tf, tp = run(spec, extra)
        s = " | ".join(
            f"{d}: k={r['kappa']:.3f} acc={r['acc']:.3f} k50={r['k50']:.3f} k70={r['k70']:.3f}"
            + (f" grp={r['group_kappa']:.3f}" if "group_kappa" in r else "")
            for d, r in res.items()
        )
        print(f"{spec} {extra or ''}: {s} | fit {tf:.1f}s pred {tp:.1f}s", flush=True)
