"""Benchmark: kill a Ray worker, then the driver, in the middle of `classify run --engine ray` (issue 24).

On N synthetic records (benchmarks/scale.py's: real texts resampled, new ids), `tfidf-logreg`:

1. a worker killed: once a few parts are written, SIGKILL one of the run's Ray actor processes (a
   `ray::` process under the driver whose title names the labeling actor). The run must finish by
   itself, and its output hold every input id exactly once, in input order.
2. the driver killed: once a few parts are written, SIGKILL the `classify run` process (what is left
   of the local Ray it started is then ended by pid), count the finished parts and the ids they hold,
   and run the same command again. It must report those ids as resumed, label only the rest, and
   write every id exactly once.

    python benchmarks/ray_kill.py [--n 20000] [--chunk-size 64]

Prints what happened at each step; exits with status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import synthetic  # noqa: E402

from classify.core import labelparts  # noqa: E402


def command(inp: Path, out: Path, chunk_size: int) -> list[str]:
    return [
        sys.executable, "-m", "classify.cli.main", "run", "--model", "tfidf-logreg", "-i", str(inp), "-o", str(out),
        "--engine", "ray", "--chunk-size", str(chunk_size),
    ]  # fmt: skip


def wait_for_parts(folder: Path, p: subprocess.Popen, n: int, timeout: float = 600) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = len(labelparts.parts(folder)) if folder.is_dir() else 0
        if got >= n:
            return got
        if p.poll() is not None:
            sys.exit(f"the run ended (status {p.returncode}) before {n} parts were written; give a larger --n")
        time.sleep(0.2)
    sys.exit(f"no {n} parts after {timeout:.0f} s")


def labeling_actor(driver: psutil.Process) -> psutil.Process | None:
    """One of the driver's Ray actor processes that label batches (their title names MapBatches/_Labeler)."""
    for proc in driver.children(recursive=True):
        try:
            title = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if title.startswith("ray::") and ("_Labeler" in title or "MapBatches" in title or "MapWorker" in title):
            return proc
    return None


def check_output(out: Path, ids: list[str]) -> bool:
    got = [json.loads(line)["id"] for line in out.open(encoding="utf-8")]
    once = len(got) == len(set(got)) and set(got) == set(ids)
    print(f"  output: {len(got)} rows, {len(set(got))} distinct ids of {len(ids)}; every id exactly once: {once}; "
          f"in input order: {got == ids}")  # fmt: skip
    return once and got == ids


def worker_killed(inp: Path, d: Path, ids: list[str], chunk_size: int, env: dict) -> bool:
    print("1. a Ray worker killed mid-run")
    out = d / "worker.jsonl"
    t0 = time.perf_counter()
    p = subprocess.Popen(command(inp, out, chunk_size), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    n = wait_for_parts(out.with_name(out.name + ".parts"), p, 3)
    victim = labeling_actor(psutil.Process(p.pid))
    if victim is None:
        p.kill()
        sys.exit("no labeling actor process found under the driver")
    title = " ".join(victim.cmdline())
    victim.send_signal(signal.SIGKILL)
    print(f"  {n} parts written at {time.perf_counter() - t0:.1f} s; SIGKILL pid {victim.pid} ({title[:60]})")
    _, err = p.communicate()
    print(f"  run ended with status {p.returncode} after {time.perf_counter() - t0:.1f} s")
    if p.returncode != 0:
        print(err.decode()[-2000:])
        return False
    return check_output(out, ids)


def driver_killed(inp: Path, d: Path, ids: list[str], chunk_size: int, env: dict) -> bool:
    print("2. the driver killed mid-run, then the same command again")
    out = d / "driver.jsonl"
    folder = out.with_name(out.name + ".parts")
    cmd = command(inp, out, chunk_size)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    n_kill = wait_for_parts(folder, p, 5)
    tree = psutil.Process(p.pid).children(recursive=True)  # the local Ray it started
    p.send_signal(signal.SIGKILL)
    p.wait()
    t_kill = time.perf_counter() - t0
    time.sleep(3)
    left = [q for q in tree if q.is_running() and q.status() != psutil.STATUS_ZOMBIE]
    names = sorted({(" ".join(q.cmdline()) or q.name()).split()[0].rsplit("/", 1)[-1][:40] for q in left})
    for q in left:
        q.kill()
    psutil.wait_procs(left, timeout=10)
    parts = labelparts.parts(folder)
    done = sum(len(labelparts.part_ids(x)) for x in parts)
    print(f"  SIGKILL driver at {t_kill:.1f} s with {n_kill} parts written; {len(left)} of its {len(tree)} Ray "
          f"processes still ran 3 s later and were ended ({', '.join(names)}); {len(parts)} finished parts hold {done} ids")  # fmt: skip
    t1 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    print(f"  the same command again: status {r.returncode} after {time.perf_counter() - t1:.1f} s")
    m = re.search(r"\((\d+) labeled now, (\d+) resumed", r.stderr)
    if r.returncode != 0 or m is None:
        print(r.stderr[-2000:])
        return False
    labeled, resumed = int(m.group(1)), int(m.group(2))
    ok = resumed == done and labeled == len(ids) - done
    print(f"  it reports {resumed} resumed (the finished parts' ids: {resumed == done}), {labeled} labeled now "
          f"(the rest: {labeled == len(ids) - done}); parts folder removed: {not folder.exists()}")  # fmt: skip
    return check_output(out, ids) and ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--chunk-size", type=int, default=64, help="batches of 4 x this many records, one part each")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="classify-raykill-") as tmp:
        d = Path(tmp)
        inp = d / "in.jsonl"
        synthetic(args.n, inp)
        ids = [json.loads(line)["id"] for line in inp.open(encoding="utf-8")]
        env = {**os.environ, "CLASSIFY_CACHE_DIR": str(d / "cache")}
        print(f"{args.n} synthetic records, tfidf-logreg, batches of {4 * args.chunk_size}, cpus {os.cpu_count()}, "
              f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
        ok = worker_killed(inp, d, ids, args.chunk_size, env)
        ok = driver_killed(inp, d, ids, args.chunk_size, env) and ok
        print(f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}; all checks passed: {ok}")
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
