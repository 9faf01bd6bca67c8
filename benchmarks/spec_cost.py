"""What a spec costs: training on the whole gold set and labeling, per 1,000 records, and peak memory.

Each spec runs in a fresh process (so peak RSS is its own): load gold, fit on every gold report,
then label the unlabeled threads of data/ (resampled to --n records). Encoders keep their caches,
so by default a second run reads embeddings (and a setfit spec its tuned encoder) from the cache;
`--cold` gives each spec an empty cache dir, which is what a fresh machine pays.

    python benchmarks/spec_cost.py [--specs tfidf-embed,setfit] [--n 1000] [--cold]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import tempfile
import time


def _one(spec: str, n: int, cache: str | None, q) -> None:
    if cache:
        os.environ["CLASSIFY_CACHE_DIR"] = cache
    from classify import ModelOptions, load_gold, load_taxonomy, make_classifier, read_records
    from classify.core.paths import PROJECT_ROOT

    tax = load_taxonomy()
    gold = load_gold(PROJECT_ROOT / "gold" / "reports.jsonl", tax)
    pool = read_records(PROJECT_ROOT / "data" / "issues.jsonl")
    # Resampled with new titles so no text repeats (a repeat would be a cache hit, not labeling work).
    from dataclasses import replace

    recs = [replace(pool[i % len(pool)], id=f"x{i}", title=f"{pool[i % len(pool)].title} #{i}") for i in range(n)]
    clf = make_classifier(spec, tax, ModelOptions(show_progress=False))
    t0 = time.perf_counter()
    clf.fit(gold.records, gold.labels)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    clf.prepare(recs)
    clf.predict(recs)
    t_label = time.perf_counter() - t0
    clf.close()
    q.put(
        {
            "spec": spec,
            "n_gold": len(gold.records),
            "fit_s": round(t_fit, 1),
            "fit_s_per_1000": round(t_fit / len(gold.records) * 1000, 1),
            "label_s_per_1000": round(t_label / n * 1000, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", default="tfidf-embed,setfit")
    ap.add_argument("--n", type=int, default=1000, help="records to label")
    ap.add_argument("--cold", action="store_true", help="an empty cache per spec (a fresh machine)")
    a = ap.parse_args()
    print(f"load average: {os.getloadavg()[0]:.1f} (2-core machine: figures above ~2 are slowed by other work)")
    ctx = mp.get_context("spawn")
    for spec in a.specs.split(","):
        with tempfile.TemporaryDirectory() as d:
            q = ctx.Queue()
            p = ctx.Process(target=_one, args=(spec, a.n, d if a.cold else None, q))
            p.start()
            p.join()
            print(json.dumps(q.get() if p.exitcode == 0 else {"spec": spec, "failed": p.exitcode}))


if __name__ == "__main__":
    main()
