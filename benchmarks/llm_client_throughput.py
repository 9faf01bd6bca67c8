"""Benchmark: the LLM client's own cost, against fake servers with a fixed latency (issue 24).

1. Throughput at concurrency 8 / 32 / 128 over 1 and 4 endpoints (`--base-url` repeated). Each
   fake server (tests/fake_openai_server.py, in a process of its own so that it does not share
   the client's interpreter) answers every request after `--latency` seconds and serves requests
   in parallel. The ideal wall time is records / concurrency x latency; the client's overhead is
   how far above it a run lands (target: under 5 %). Labeling goes through the whole classifier
   path (prompt rendering, request, parsing, validation), cache off.
2. Prompt tokens per label with `samples=5`: one request with `n` (a server that returns n
   choices) against one request per sample (a server that ignores `n`, as llama-cpp-python does).

    python benchmarks/llm_client_throughput.py [--records 256] [--latency 0.2]

Figures depend on the machine's load: the load average is printed with them, and the client's
own CPU time per label, which depends on it much less (on a loaded 2-core machine the fake
servers and the client compete for the same cores, and wall times say more about that).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from classify.classifiers.base import ModelOptions, make_classifier  # noqa: E402
from classify.classifiers.llm.cache import LLMStore  # noqa: E402
from classify.classifiers.llm.pool import forget_capabilities  # noqa: E402
from classify.core.records import Record  # noqa: E402
from classify.core.taxonomy import load_taxonomy  # noqa: E402

SERVER = """
import sys
sys.path.insert(0, {tests!r})
from fake_openai_server import FakeOpenAI
from classify.core.taxonomy import load_taxonomy
tax = load_taxonomy()
with FakeOpenAI({{d: dim.ids for d, dim in tax.dimensions.items()}}, latency={latency}, n_mode={mode!r}) as f:
    print(f.base_url, flush=True)
    sys.stdin.read()
"""


class Servers:
    """`n` fake servers, each in its own process, stopped on exit."""

    def __init__(self, n: int, latency: float, mode: str = "support"):
        code = SERVER.format(tests=str(ROOT / "tests"), latency=latency, mode=mode)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
            )
            for _ in range(n)
        ]
        self.urls = [p.stdout.readline().strip() for p in self.procs]  # type: ignore[union-attr]

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.stdin.close()  # type: ignore[union-attr]
            p.wait(timeout=10)


def label(urls: list[str], records: list[Record], store: LLMStore, **extra):
    tax = load_taxonomy()
    opts = {"base_url": urls if len(urls) > 1 else urls[0], "cache": False, "timeout": 60.0, **extra}
    clf: Any = make_classifier("openai:fake-model", tax, ModelOptions(extra=opts)).fit([], {})
    clf._store = store
    t0, c0 = time.perf_counter(), time.process_time()
    out = clf.predict(records)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    bad = sum(p.status != "ok" for p in out[tax.dimension_ids[0]])
    return wall, cpu, clf.stats, bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=256)
    ap.add_argument("--latency", type=float, default=0.2, help="seconds each fake server takes per request")
    ap.add_argument("--concurrency", default="8,32,128")
    ap.add_argument("--endpoints", default="1,4")
    args = ap.parse_args()
    os.environ.setdefault("CLASSIFY_CACHE_DIR", tempfile.mkdtemp(prefix="classify-bench-"))
    records = [
        Record(id=f"t{i:05d}", title=f"t{i:05d} report {i}", body=f"kernel {i} fails") for i in range(args.records)
    ]
    print(f"load average {os.getloadavg()[0]:.1f}; {args.records} records; server latency {args.latency} s")
    print(
        f"{'endpoints':>9}  {'concurrency':>11}  {'wall s':>7}  {'ideal s':>7}  {'overhead':>8}  {'labels/s':>8}  "
        f"{'client CPU ms/label':>19}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n_ep in [int(x) for x in args.endpoints.split(",")]:
            with Servers(n_ep, args.latency) as servers:
                for conc in [int(x) for x in args.concurrency.split(",")]:
                    store = LLMStore(Path(tmp) / f"t{n_ep}-{conc}.sqlite")
                    wall, cpu, stats, bad = label(servers.urls, records, store, concurrency=conc)
                    store.close()
                    # the servers answer in parallel: only the client's in-flight limit bounds it
                    ideal = -(-args.records // conc) * args.latency
                    print(
                        f"{n_ep:>9}  {conc:>11}  {wall:>7.2f}  {ideal:>7.2f}  {wall / ideal - 1:>7.1%}  "
                        f"{args.records / wall:>8.1f}  {1000 * cpu / args.records:>19.1f}"
                        + (f"  ({bad} invalid)" if bad else "")
                    )
        print()
        print("samples=5, prompt tokens per label (fake server's count: characters / 4)")
        few = records[:16]
        for mode, what in (("support", "one request with n=5"), ("ignore", "five requests (server ignores n)")):
            forget_capabilities()
            with Servers(1, 0.0, mode) as servers:
                store = LLMStore(Path(tmp) / f"s-{mode}.sqlite")
                _, _, stats, _ = label(servers.urls, few, store, samples=5, concurrency=8)
                store.close()
            print(
                f"  {what:34} {stats.prompt_tokens / len(few):>8.0f} prompt tokens, {stats.requests / len(few):.1f} requests"
            )


if __name__ == "__main__":
    main()
