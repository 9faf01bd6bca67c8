"""Benchmark: `classify run --model embed-logreg` vs a bare SentenceTransformer.encode, on real texts.

Input: N records (default 3,000) resampled with replacement from the real threads in
data/issues.jsonl, so text lengths follow the real distribution (long threads are truncated by
the encoder as in any run). Each copy gets a unique tag in its title so that nothing is cached.

Timed, on the same texts with the same model and batch size:
  bare        SentenceTransformer.encode of the input texts, model already loaded in-process
  cold run    `classify run` with an empty cache: start-up, encoding the gold set, training,
              encoding the input, writing (what a first run on a new machine costs)
  warm run    `classify run` with the gold's embeddings already cached (primed untimed): what
              every later run on new input costs
  cached run  the warm run again on the same input: must encode nothing and not load the model;
              the benchmark exits with status 1 if it encoded anything

Both ratios are printed: warm / bare (the pipeline's own overhead) and cold / bare (the same plus
the gold's own encoding, which a first run pays once). The CLI runs in a subprocess through a thin
wrapper that counts the texts the encoder actually ran and the model loads, so the figures say
what was computed, not only how long it took.

    python benchmarks/bench_embed.py [--n 3000] [--batch-size 32] [--backend torch|onnx|onnx-int8|model2vec]
    python benchmarks/bench_embed.py --compare-backends [--n 3000] [--backends torch,model2vec] [--repeat 2]

--compare-backends times a bare encode of the same texts with every backend in one process,
alternating the backends pass by pass (best pass kept; export/distillation on first use is timed
apart as load time) and prints texts/s and the ratio to torch.

Targets (issue #2): warm run <= 1.15 x bare encode; cached re-run of 1000 records < 5 s.
Below 3,000 records the figures are a smoke test, not a benchmark: start-up dominates.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MIN_N = 3000

# Runs the real CLI, counting what the encoder computed (texts through the model, model loads);
# the counts go to the JSON file named by BENCH_COUNTS when the command exits.
COUNTING_CLI = """
import atexit, json, os, sys
from classify.encoders.encoder import Encoder
counts = {"encoded": 0, "model_loads": 0}
raw, load = Encoder._encode_raw, Encoder.model
def _encode_raw(self, texts):
    counts["encoded"] += len(texts)
    return raw(self, texts)
def model(self):
    if self._model is None:
        counts["model_loads"] += 1
    return load(self)
Encoder._encode_raw, Encoder.model = _encode_raw, model
atexit.register(lambda: open(os.environ["BENCH_COUNTS"], "w").write(json.dumps(counts)))
from classify.cli.main import main
sys.argv = ["classify", *sys.argv[1:]]
main()
"""


def resampled_records(n: int, seed: int = 0) -> list[dict]:
    """n real threads drawn with replacement from data/issues.jsonl, each made unique by a title tag."""
    from classify.core.paths import DEFAULT_INPUT
    from classify.core.records import read_records

    real = read_records(DEFAULT_INPUT)
    if not real:
        sys.exit(f"{DEFAULT_INPUT} holds no records to resample")
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = rng.choice(real)
        out.append({"id": f"bench-{i}", "title": f"[b{i}] {r.title}", "body": r.body, "discussion": r.discussion})
    return out


def run_cli(args: list[str], env: dict, tmp: Path) -> tuple[float, dict]:
    counts = tmp / f"counts-{time.monotonic_ns()}.json"
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-c", COUNTING_CLI, *args],
        env={**env, "BENCH_COUNTS": str(counts)},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"classify failed:\n{r.stderr[-3000:]}")
    return dt, json.loads(counts.read_text())


def compare_backends(a) -> None:
    """Bare encode of the same texts per backend, same process, alternating passes; best pass kept."""
    import numpy as np

    tmp = Path(tempfile.mkdtemp(prefix="bench-backends-"))
    os.environ.update({"CLASSIFY_CACHE_DIR": str(tmp / "cache"), "HF_HUB_OFFLINE": "1"})
    from classify.core.records import Record
    from classify.encoders.encoder import Encoder

    texts = [Record(**r).text(True) for r in resampled_records(a.n)]
    backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    if "torch" not in backends:
        backends.insert(0, "torch")  # the reference for the ratio
    models = {}
    for b in backends:
        enc = Encoder(batch_size=a.batch_size, show_progress=False, backend=b, use_cache=False)
        t0 = time.perf_counter()
        models[b] = enc.model()
        models[b].encode(texts[:8], batch_size=a.batch_size)  # warm-up
        print(f"{b:10s} loaded (export/quantize/distill on first use) in {time.perf_counter() - t0:5.1f} s", flush=True)
    best = {b: float("inf") for b in backends}
    vecs = {}
    for p in range(a.repeat):
        # alternate the order pass by pass, so neither a noisy neighbour nor a warm cache favours one
        for b in backends if p % 2 == 0 else backends[::-1]:
            t0 = time.perf_counter()
            vecs[b] = models[b].encode(texts, batch_size=a.batch_size, normalize_embeddings=True)
            best[b] = min(best[b], time.perf_counter() - t0)
    print(
        f"\n{a.n} real texts (resampled from data/issues.jsonl), batch size {a.batch_size}, best of {a.repeat} "
        f"passes (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    print(f"{'backend':10s} {'texts/s':>9s} {'x torch':>8s} {'min cos to torch':>17s}")
    for b in backends:
        if vecs[b].shape == vecs["torch"].shape:
            cos = f"{float(np.min(np.sum(vecs[b] * vecs['torch'], axis=1))):17.4f}"
        else:  # another vector space (model2vec: 256-d PCA axes)
            cos = f"{'n/a':>17s}"
        print(f"{b:10s} {a.n / best[b]:9.1f} {best['torch'] / best[b]:8.2f} {cos}")
    print("agreement (kappa) per backend: `classify eval --model embed-logreg --opt backend=B`, see docs/agreement.md")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=MIN_N, help=f"input records (default {MIN_N})")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--backend", default="torch")
    ap.add_argument(
        "--compare-backends", action="store_true", help="Time every backend (see --backends) on the same texts."
    )
    ap.add_argument(
        "--backends",
        default="torch,onnx,onnx-int8,model2vec",
        help="With --compare-backends: comma-separated backends (torch is always included).",
    )
    ap.add_argument(
        "--repeat", type=int, default=2, help="With --compare-backends: timed passes per backend (best kept)."
    )
    a = ap.parse_args()
    if a.n < 1 or a.batch_size < 1 or a.repeat < 1:
        ap.error("--n, --batch-size and --repeat must be at least 1")
    if a.n < MIN_N:
        print(f"note: n={a.n} < {MIN_N}: a smoke run, not a benchmark figure", flush=True)
    if a.compare_backends:
        compare_backends(a)
        return

    tmp = Path(tempfile.mkdtemp(prefix="bench-embed-"))
    base_env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cold_env = {**base_env, "CLASSIFY_CACHE_DIR": str(tmp / "cold-cache")}
    warm_env = {**base_env, "CLASSIFY_CACHE_DIR": str(tmp / "warm-cache")}
    os.environ.update(warm_env)  # the in-process priming below fills the warm run's cache

    from classify.core.gold import load_gold
    from classify.core.paths import DEFAULT_GOLD
    from classify.core.records import read_records
    from classify.core.taxonomy import load_taxonomy
    from classify.encoders.encoder import Encoder

    inp = tmp / "input.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in resampled_records(a.n)))
    texts = [r.text(True) for r in read_records(inp)]  # exactly what the pipeline encodes
    gold = load_gold(DEFAULT_GOLD, load_taxonomy())
    gold_texts = [r.text(True) for r in gold.records]
    chars = sorted(len(t) for t in texts)

    enc = Encoder(batch_size=a.batch_size, show_progress=False, backend=a.backend)
    model = enc.model()
    model.encode(texts[:8], batch_size=a.batch_size)  # warm-up
    t0 = time.perf_counter()
    model.encode(texts, batch_size=a.batch_size, normalize_embeddings=True)
    bare = time.perf_counter() - t0
    t0 = time.perf_counter()
    enc.encode(gold_texts)  # primes the warm run's cache; timed to show the gold's share
    gold_s = time.perf_counter() - t0
    enc.close()

    extra = ["--opt", f"backend={a.backend}"] if a.backend != "torch" else []
    common = ["run", "--model", "embed-logreg", "--input", str(inp), "--batch-size", str(a.batch_size), *extra]
    cold, cold_n = run_cli([*common, "--out", str(tmp / "cold.jsonl")], cold_env, tmp)
    warm, warm_n = run_cli([*common, "--out", str(tmp / "warm.jsonl")], warm_env, tmp)
    cached, cached_n = run_cli([*common, "--out", str(tmp / "cached.jsonl")], warm_env, tmp)

    print(
        f"records:        {a.n} real threads resampled from data/issues.jsonl (chars: median {chars[len(chars) // 2]}, "
        f"p90 {chars[int(0.9 * (len(chars) - 1))]}); backend {a.backend}, batch size {a.batch_size}; "
        f"gold {len(gold)} records; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"bare encode:    {bare:7.1f} s  ({a.n / bare:.1f} texts/s, model already loaded)")
    print(f"gold encode:    {gold_s:7.1f} s  (bare-equivalent share of a cold run; {len(gold)} texts)")
    print(f"cold run:       {cold:7.1f} s  encoded {cold_n['encoded']} texts, {cold_n['model_loads']} model load(s)")
    print(f"warm run:       {warm:7.1f} s  encoded {warm_n['encoded']} texts, {warm_n['model_loads']} model load(s)")
    print(
        f"cached re-run:  {cached:7.1f} s  encoded {cached_n['encoded']} texts, "
        f"{cached_n['model_loads']} model load(s)  (target < 5 s for 1000 records)"
    )
    print(f"ratio warm / bare:   {warm / bare:6.2f}   (target <= 1.15; the pipeline's own overhead)")
    print(f"ratio cold / bare:   {cold / bare:6.2f}   (includes encoding the gold set once)")
    if cold_n["encoded"] != a.n + len(set(gold_texts)) or warm_n["encoded"] != a.n:
        print(f"warning: expected the cold run to encode {a.n} + {len(set(gold_texts))} texts and the warm run {a.n}")
    if cached_n["encoded"] or cached_n["model_loads"]:
        sys.exit("FAIL: the cached re-run encoded texts or loaded the model; the embedding cache did not serve it")


if __name__ == "__main__":
    main()
