"""Benchmark: the local llama.cpp server (SmolLM2-135M GGUF) labeling issues, in one run:

  1. naive layout (issue first, then the codebook), concurrency 1
  2. cache-friendly layout (codebook first, issue last), concurrency 1
  3. cache-friendly layout, concurrency 4
  4. the run of 3 again: every answer from the response cache (requests made: 0)

Each of 1-3 starts with an empty response cache, so every label is computed by the server.
llama.cpp reuses the key/value cache of the longest common prefix with the previous prompt: with
the codebook first, only the issue is evaluated after the first request. So that every phase
starts in the same state, each is preceded by one untimed warm-up request in its own layout (an
issue outside the timed set); its latency is printed as the one-off cost of a cold prompt.

    python benchmarks/bench_llm.py [--n 6] [--max-chars 1500] [--threads N]

Target (issue #3): cache-friendly >= 4x faster per label than naive on the same server.
Wall-clock figures are noisy on a shared machine (the load average is printed with them), so
the server process's CPU seconds per label are printed too: they hardly depend on other jobs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=6, help="issues per phase (default 6)")
    ap.add_argument("--max-chars", type=int, default=1500, help="issue text budget in characters (default 1500)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: up to 4)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-llm-"))
    os.environ["CLASSIFY_CACHE_DIR"] = str(tmp)  # private caches: nothing from earlier runs

    from classify.core.gold import load_gold
    from classify.classifiers.llm.cache import LLMStore, list_logs
    from classify.classifiers.llm.server import resolve_local_model, shared_server, stop_all
    from classify.classifiers.base import ModelOptions, make_classifier
    from classify.core.paths import DEFAULT_GOLD
    from classify.core.taxonomy import load_taxonomy

    tax = load_taxonomy()
    gold = load_gold(DEFAULT_GOLD, tax)
    records = gold.records[: args.n]
    warmup = [gold.records[args.n]]
    base = {"max_chars": args.max_chars, "n_ctx": 8192, **({"n_threads": args.threads} if args.threads else {})}

    t0 = time.perf_counter()
    server = shared_server(resolve_local_model("smollm2-135m"), "smollm2-135m", n_ctx=8192, n_threads=args.threads)
    print(f"llama.cpp server up in {time.perf_counter() - t0:.1f} s at {server.base_url} "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)", flush=True)

    tick = os.sysconf("SC_CLK_TCK")

    def server_cpu() -> float:
        """CPU seconds (user + system, all threads) the llama.cpp server has used so far."""
        with open(f"/proc/{server.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    def phase(name: str, store: LLMStore, warm: bool = True, **extra) -> dict:
        clf = make_classifier("local:smollm2-135m", tax, ModelOptions(extra={**base, **extra}))
        clf.fit(gold.records, gold.labels)
        if warm:
            clf._store = LLMStore(tmp / f"warmup-{time.monotonic_ns()}.sqlite")
            t = time.perf_counter()
            clf.predict(warmup)
            print(f"   warm-up request ({extra.get('layout', 'cache-friendly')} layout): {time.perf_counter() - t:.1f} s",
                  flush=True)
            clf.stats.requests = clf.stats.prompt_tokens = 0
        clf._store = store
        start_id = max([r["id"] for r in list_logs(1, store.path)] or [0])
        cpu0, t = server_cpu(), time.perf_counter()
        out = clf.predict(records)
        wall = time.perf_counter() - t
        cpu = server_cpu() - cpu0
        rows = sorted((r for r in list_logs(10_000, store.path) if r["id"] > start_id and r["outcome"] == "ok"),
                      key=lambda r: r["id"])
        lat = [r["latency_ms"] / 1000 for r in rows]
        invalid = sum(1 for d in out for p in out[d] if p.status != "ok")
        res = {
            "name": name, "wall": wall, "cpu": cpu, "labels_per_s": len(records) / wall, "requests": clf.stats.requests,
            "mean": statistics.mean(lat) if lat else None,
            "prompt_tokens": clf.stats.prompt_tokens // max(1, clf.stats.requests), "invalid": invalid,
        }
        mean = f"{res['mean']:.1f} s" if res["mean"] is not None else "-"
        print(f"{name:44} {res['labels_per_s']:8.3f} labels/s  ({wall / len(records):6.1f} s/label, "
              f"server CPU {cpu / len(records):5.1f} s/label)  "
              f"requests made: {res['requests']:2}  mean request latency {mean:>7}  prompt ~{res['prompt_tokens']} tok  "
              f"invalid dims {invalid}  (load {os.getloadavg()[0]:.1f})", flush=True)
        return res

    try:
        naive = phase("1. naive layout (issue first), conc. 1", LLMStore(tmp / "naive.sqlite"), layout="naive", concurrency=1)
        friendly = phase("2. cache-friendly (codebook first), conc. 1", LLMStore(tmp / "c1.sqlite"), concurrency=1)
        store4 = LLMStore(tmp / "c4.sqlite")
        conc4 = phase("3. cache-friendly, conc. 4", store4, concurrency=4)
        cached = phase("4. cached re-run of 3", store4, warm=False, concurrency=4)
    finally:
        stop_all()
    per_label = lambda r: r["wall"] / args.n  # noqa: E731
    print()
    print(f"cache-friendly vs naive, per label (conc. 1): {per_label(naive) / per_label(friendly):.1f}x faster in wall time, "
          f"{naive['cpu'] / max(friendly['cpu'], 1e-9):.1f}x less server CPU (target >= 4x)")
    print(f"concurrency 4 vs 1 (cache-friendly):          {per_label(friendly) / per_label(conc4):.2f}x in wall time, "
          f"{friendly['cpu'] / max(conc4['cpu'], 1e-9):.2f}x in server CPU")
    print(f"cached re-run: requests made: {cached['requests']}, {cached['labels_per_s']:.0f} labels/s")
    print(f"(n={args.n} issues, max_chars={args.max_chars}; the server evaluates one request at a time, so "
          f"concurrency mainly overlaps client work; with concurrency, request latency includes the wait in the "
          f"server's queue; shared machine: figures are noisy)")


if __name__ == "__main__":
    main()
