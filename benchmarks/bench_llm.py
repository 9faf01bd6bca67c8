"""Benchmark: the local llama.cpp server (SmolLM2-135M GGUF) labeling issues, three set-ups:

  naive   naive layout (issue first, then the codebook), concurrency 1
  c1      cache-friendly layout (codebook first, issue last), concurrency 1
  c4      cache-friendly layout, concurrency 4

run for several passes (default 3) in alternating order (pass 1: naive, c1, c4; pass 2: c4, c1,
naive; ...), so that a noisy neighbour or a warm machine does not favour the set-up that always
runs first or last; medians over passes are compared. Then the last c4 run is repeated on its
store: every answer must come from the response cache (the benchmark exits with status 1 if any
request is made).

Every run starts with an empty response cache, so every label is computed by the server.
llama.cpp reuses the key/value cache of the longest common prefix with the previous prompt: with
the codebook first, only the issue is evaluated after the first request. So that every run
starts in the same state, each is preceded by one untimed warm-up request in its own layout (an
issue outside the timed set); its latency is printed as the one-off cost of a cold prompt.

Repair re-asks (an invalid answer sent back with the error) are off by default (--repair-retries
0): a re-ask is a second request for the same label and would make a set-up that answers worse
look slower, or with the re-ask's prompt cached, faster. With them on, the requests made per label
are printed beside the timings.

    python benchmarks/bench_llm.py [--n 6] [--passes 3] [--max-chars 1500] [--threads N] [--repair-retries 0]

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


SETUPS = {  # name -> (label, classifier options)
    "naive": ("naive layout (issue first), conc. 1", {"layout": "naive", "concurrency": 1}),
    "c1": ("cache-friendly (codebook first), conc. 1", {"concurrency": 1}),
    "c4": ("cache-friendly, conc. 4", {"concurrency": 4}),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=6, help="issues per run (default 6)")
    ap.add_argument(
        "--passes", type=int, default=3, help="passes over the three set-ups, alternating order (default 3)"
    )
    ap.add_argument("--max-chars", type=int, default=1500, help="issue text budget in characters (default 1500)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: up to 4)")
    ap.add_argument("--repair-retries", type=int, default=0, help="re-asks after an invalid answer (default 0: off)")
    args = ap.parse_args()
    if args.n < 1 or args.passes < 1 or args.repair_retries < 0:
        ap.error("--n and --passes must be at least 1, --repair-retries at least 0")

    tmp = Path(tempfile.mkdtemp(prefix="bench-llm-"))
    os.environ["CLASSIFY_CACHE_DIR"] = str(tmp)  # private caches: nothing from earlier runs

    from classify.classifiers.base import ModelOptions, make_classifier
    from classify.classifiers.llm.cache import LLMStore, list_logs
    from classify.classifiers.llm.server import resolve_local_model, shared_server, stop_all
    from classify.core.gold import load_gold
    from classify.core.paths import DEFAULT_GOLD
    from classify.core.taxonomy import load_taxonomy

    tax = load_taxonomy()
    gold = load_gold(DEFAULT_GOLD, tax)
    if args.n >= len(gold):
        ap.error(f"--n must be below the gold size ({len(gold)}): one record is kept for the warm-up")
    records = gold.records[: args.n]
    warmup = [gold.records[args.n]]
    base = {
        "max_chars": args.max_chars,
        "n_ctx": 8192,
        "repair_retries": args.repair_retries,
        **({"n_threads": args.threads} if args.threads else {}),
    }

    t0 = time.perf_counter()
    server = shared_server(resolve_local_model("smollm2-135m"), "smollm2-135m", n_ctx=8192, n_threads=args.threads)
    print(
        f"llama.cpp server up in {time.perf_counter() - t0:.1f} s at {server.base_url} "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs); repair re-asks: {args.repair_retries}",
        flush=True,
    )

    tick = os.sysconf("SC_CLK_TCK")

    def server_cpu() -> float:
        """CPU seconds (user + system, all threads) the llama.cpp server has used so far."""
        with open(f"/proc/{server.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    def run(name: str, store: LLMStore, warm: bool = True) -> dict:
        label, extra = SETUPS[name]
        clf = make_classifier("local:smollm2-135m", tax, ModelOptions(extra={**base, **extra}))
        clf.fit(gold.records, gold.labels)
        if warm:
            clf._store = LLMStore(tmp / f"warmup-{time.monotonic_ns()}.sqlite")
            t = time.perf_counter()
            clf.predict(warmup)
            print(
                f"   warm-up request ({extra.get('layout', 'cache-friendly')} layout): {time.perf_counter() - t:.1f} s",
                flush=True,
            )
            clf.stats.requests = clf.stats.prompt_tokens = 0
        clf._store = store
        start_id = max([r["id"] for r in list_logs(1, store.path)] or [0])
        cpu0, t = server_cpu(), time.perf_counter()
        out = clf.predict(records)
        wall = time.perf_counter() - t
        cpu = server_cpu() - cpu0
        rows = sorted(
            (r for r in list_logs(10_000, store.path) if r["id"] > start_id and r["outcome"] == "ok"),
            key=lambda r: r["id"],
        )
        lat = [r["latency_ms"] / 1000 for r in rows]
        invalid = sum(1 for d in out for p in out[d] if p.status != "ok")
        res = {
            "name": name,
            "wall": wall,
            "cpu": cpu,
            "requests": clf.stats.requests,
            "invalid": invalid,
            "mean": statistics.mean(lat) if lat else None,
            "prompt_tokens": clf.stats.prompt_tokens // max(1, clf.stats.requests),
        }
        mean = f"{res['mean']:.1f} s" if res["mean"] is not None else "-"
        print(
            f"{label:42} {wall / len(records):6.1f} s/label, server CPU {cpu / len(records):5.1f} s/label, "
            f"requests {res['requests']:2} ({res['requests'] / len(records):.2f}/label), mean latency {mean:>7}, "
            f"prompt ~{res['prompt_tokens']} tok, invalid dims {invalid} (load {os.getloadavg()[0]:.1f})",
            flush=True,
        )
        return res

    results: dict[str, list[dict]] = {name: [] for name in SETUPS}
    try:
        for p in range(args.passes):
            order = list(SETUPS) if p % 2 == 0 else list(SETUPS)[::-1]
            print(f"pass {p + 1}/{args.passes}: {', '.join(order)}", flush=True)
            for name in order:
                store = LLMStore(tmp / f"{name}-{p}.sqlite")
                results[name].append({**run(name, store), "store": store})
        last_c4 = results["c4"][-1]["store"]
        print("cached re-run of the last c4 run:", flush=True)
        cached = run("c4", last_c4, warm=False)
    finally:
        stop_all()

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name]) / args.n

    print()
    print(
        f"medians over {args.passes} pass(es), n={args.n} issues, max_chars={args.max_chars}, "
        f"repair re-asks {args.repair_retries}:"
    )
    for name, (label, _) in SETUPS.items():
        walls = [r["wall"] / args.n for r in results[name]]
        reqs = sum(r["requests"] for r in results[name]) / (args.n * args.passes)
        print(
            f"  {label:42} {med(name, 'wall'):6.1f} s/label (range {min(walls):.1f}-{max(walls):.1f}), "
            f"server CPU {med(name, 'cpu'):5.1f} s/label, {reqs:.2f} requests/label"
        )
    print(
        f"cache-friendly vs naive, per label (conc. 1): {med('naive', 'wall') / med('c1', 'wall'):.1f}x faster in wall "
        f"time, {med('naive', 'cpu') / max(med('c1', 'cpu'), 1e-9):.1f}x less server CPU (target >= 4x)"
    )
    print(
        f"concurrency 4 vs 1 (cache-friendly):          {med('c1', 'wall') / med('c4', 'wall'):.2f}x in wall time, "
        f"{med('c1', 'cpu') / max(med('c4', 'cpu'), 1e-9):.2f}x in server CPU"
    )
    print(f"cached re-run: requests made: {cached['requests']}, {args.n / max(cached['wall'], 1e-9):.0f} labels/s")
    print(
        "(the server evaluates one request at a time, so concurrency mainly overlaps client work; with "
        "concurrency, request latency includes the wait in the server's queue; shared machine: figures are noisy)"
    )
    if cached["requests"]:
        sys.exit(f"FAIL: the cached re-run made {cached['requests']} requests; the response cache did not serve it")


if __name__ == "__main__":
    main()
