"""What a refresh costs with ETags, against the local GitHub stand-in used by the tests.

    python benchmarks/fetch_refresh.py [--issues 600] [--latency 0.02]

Prints requests, rate-limit units (non-304 answers, which is what GitHub charges) and wall time
for a cold fetch, a refresh with the ETag cache, a refresh after one new comment, and a refresh
without the cache, with comments fetched per issue and in bulk (repository-wide listing). `--latency` adds a per-request server delay to mimic the network.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fetch"))

from github_server import LocalGitHub  # noqa: E402

from classify.ingest import GitHubClient, ResponseCache, fetch_repo_issues  # noqa: E402


def run(server: LocalGitHub, cache: Path | None, label: str, comments: str = "per-issue") -> list[dict]:
    n0 = len(server.log)
    store = ResponseCache(cache) if cache else None
    t0 = time.perf_counter()
    with GitHubClient(token="bench", base_url=server.base_url, cache=store) as gh:
        res = fetch_repo_issues(gh, "triton-lang/triton", comments=comments)
    dt = time.perf_counter() - t0
    if store:
        store.close()
    log = server.log[n0:]
    charged = sum(1 for r in log if r.status != 304)
    print(f"{label:<32} {len(res.rows):>6} issues {len(log):>6} requests {charged:>6} charged {dt:>7.2f} s")
    return res.rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--issues", type=int, default=600)
    ap.add_argument("--latency", type=float, default=0.02)
    a = ap.parse_args()
    with LocalGitHub(token="bench", latency=a.latency) as server, tempfile.TemporaryDirectory() as tmp:
        repo = server.add_repo("triton-lang/triton")
        for n in range(1, a.issues + 1):
            # Like the study's repositories: ~1 in 3 items are PRs, most issues have a few comments.
            comments = [(f"user{i}", f"comment {i} " + "details " * 40) for i in range(n % 5)]
            repo.add_issue(n, body="Traceback ...\n" * 20, pull=n % 3 == 0, comments=comments)
        print(f"{a.issues} items, per-request latency {a.latency * 1000:.0f} ms")
        for mode in ("per-issue", "bulk"):
            cache = Path(tmp) / f"etags-{mode}.sqlite"
            print(f"-- comments: {mode}")
            cold = run(server, cache, "cold fetch (fills ETag cache)", mode)
            warm = run(server, cache, "refresh, nothing changed", mode)
            assert warm == cold
            repo.add_comment(7, "maintainer", f"Fixed on main ({mode}).")
            run(server, cache, "refresh, one new comment", mode)
            run(server, None, "refresh without cache", mode)
            print(f"cache file: {cache.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
