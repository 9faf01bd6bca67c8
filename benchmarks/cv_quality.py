"""Better than chance from words alone: a quality floor on the full gold set, moved out of the suite.

5-fold cross-validation (seed 0) of `hier-tfidf-embed` with TF-IDF words only (`embed=false`: no
sentence encoder) on the shipped gold; every level (symptom, root cause, root-cause group) must reach
Cohen's kappa > 0.2 with the coders' labels, and no record may be predicted by a model that saw it.
The suite keeps a small version (tests/test_agree.py: the same spec and leak check on 150 records).

    python benchmarks/cv_quality.py [--model hier-tfidf-embed] [--opt embed=false] [--floor 0.2]

Exits 1 when a level is at or below the floor, or on a leak.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from classify.classifiers.base import ModelOptions
from classify.core.gold import load_gold
from classify.core.paths import DEFAULT_GOLD
from classify.core.taxonomy import load_taxonomy
from classify.evaluation.crossval import compute_metrics, cross_validate, train_test_leaks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="hier-tfidf-embed")
    ap.add_argument("--opt", action="append", default=None, help="key=value (JSON values), default embed=false")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--floor", type=float, default=0.2)
    args = ap.parse_args(argv)
    extra = {}
    for o in args.opt or ["embed=false"]:
        k, _, v = o.partition("=")
        try:
            extra[k] = json.loads(v)
        except json.JSONDecodeError:
            extra[k] = v
    tax = load_taxonomy()
    gold = load_gold(DEFAULT_GOLD, tax)
    t0 = time.perf_counter()
    res = cross_validate(args.model, gold, ModelOptions(show_progress=False, extra=extra), k=args.folds, seed=0)
    m = compute_metrics(res, n_boot=100)
    ok = not train_test_leaks(res)
    print(f"{args.model} {extra}: {args.folds}-fold CV on {len(gold)} gold records, {time.perf_counter() - t0:.0f} s")
    for name in ("symptom", "root_cause", "root_cause_group"):
        k = m["dimensions"][name]["kappa"]["kappa"]
        ok &= k > args.floor
        print(f"  {name}: kappa {k:.3f} ({'ok' if k > args.floor else 'AT OR BELOW'} floor {args.floor})")
    print("leaks: none" if not train_test_leaks(res) else f"leaks: {train_test_leaks(res)[:5]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
