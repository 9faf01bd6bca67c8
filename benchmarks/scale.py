"""Benchmark: `classify run` on N synthetic records, local engine vs `--engine ray` (issue 24).

Input: N records resampled with replacement from the real texts of data/issues.jsonl and
gold/reports.jsonl, each with a new id (and the id in its title, so no two texts are the same).
Each engine runs `classify run` in a subprocess with a fresh cache folder; the benchmark prints the
wall time, rows/s and the peak RSS of the run (ru_maxrss of the run's own finished process tree,
measured by a wrapper process per run: for the Ray engine the largest single process, driver or
worker, not their sum), and the load average before and after (other work on the machine slows a
run), then checks that both engines wrote the same rows (order aside; `labeled_at` aside, and null
the same as absent, as a Parquet part reads back).

    python benchmarks/scale.py [--n 10000] [--model tfidf-logreg] [--engines local,ray] [--chunk-size 256]
    python benchmarks/scale.py --n 100000,1000000 --engines local     # is peak memory flat in N?

Exits with status 1 when the engines' rows differ. Below ~5,000 records Ray's start-up (a few
seconds, more on a loaded machine) dominates its figure. 1M records are a ~1.4 GB input file.
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


def synthetic(n: int, path: Path, seed: int = 0) -> None:
    texts = []
    for src in (ROOT / "data" / "issues.jsonl", ROOT / "gold" / "reports.jsonl"):
        for line in src.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            texts.append({k: r.get(k) for k in ("repo", "title", "body", "discussion") if r.get(k) is not None})
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            r = dict(rng.choice(texts))
            r["id"] = f"syn-{i}"
            r["title"] = f"[{i}] {r.get('title', '')}"
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


# Runs the command and prints the peak RSS (kB) of its process tree: ru_maxrss of a process's children is
# the largest child it ever waited for, so each run gets a wrapper of its own.
WRAPPER = (
    "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)"
)


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def measured_code() -> str:
    """The classify package the runs import: `python -m` puts the working folder first on the path, so
    it is that folder's checkout (then PYTHONPATH's), whatever this script's own checkout."""
    probe = [sys.executable, "-c", "import classify; print(classify.__file__)"]
    return subprocess.run(probe, capture_output=True, text=True).stdout.strip()


def run(engine: str, model: str, inp: Path, out: Path, chunk_size: int, cache: Path) -> dict:
    cmd = [sys.executable, "-m", "classify.cli.main", "run", "--model", model, "-i", str(inp), "-o", str(out)]
    cmd += ["--chunk-size", str(chunk_size), "--engine", engine]
    env = {**os.environ, "CLASSIFY_CACHE_DIR": str(cache)}
    load_before = load()
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{engine}: classify run failed ({p.returncode}):\n{p.stderr[-2000:]}")
    peak_kb = int(p.stderr.strip().splitlines()[-1])
    return {"engine": engine, "wall_s": wall, "peak_rss_mb": peak_kb / 1024, "load": f"{load_before} -> {load()}"}


def rows(path: Path) -> dict[str, dict]:
    out = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            out[r["id"]] = {k: v for k, v in r.items() if v is not None and k != "labeled_at"}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="10000", help="records; several, comma-separated, for one run each")
    ap.add_argument("--model", default="tfidf-logreg")
    ap.add_argument("--engines", default="local,ray")
    ap.add_argument("--chunk-size", type=int, default=256)
    args = ap.parse_args()
    differ = False
    for n in (int(x) for x in args.n.split(",")):
        with tempfile.TemporaryDirectory(prefix="classify-scale-") as tmp:
            d = Path(tmp)
            inp = d / "in.jsonl"
            synthetic(n, inp)
            print(
                f"{n} synthetic records ({inp.stat().st_size / 1e6:.1f} MB), model {args.model}, cpus {os.cpu_count()}"
            )
            print(f"  code measured: {measured_code()}")
            results, outs = [], {}
            for engine in args.engines.split(","):
                outs[engine] = d / f"{engine}.jsonl"
                r = run(engine, args.model, inp, outs[engine], args.chunk_size, d / f"cache-{engine}")
                results.append(r)
                print(
                    f"  {engine:5s}  wall {r['wall_s']:7.1f} s  {n / r['wall_s']:8.0f} rows/s  "
                    f"peak RSS {r['peak_rss_mb']:.0f} MB  ({r['load']})",
                    flush=True,
                )
            if len(outs) == 2:
                a, b = (rows(p) for p in outs.values())
                same = a == b
                print(f"  rows identical between engines (order aside): {same} ({len(a)} vs {len(b)})")
                print(f"  ray / local wall time: {results[1]['wall_s'] / results[0]['wall_s']:.2f}x")
                differ |= not same
    if differ:
        sys.exit(1)


if __name__ == "__main__":
    main()
