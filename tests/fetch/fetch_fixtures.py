"""Shared by the fetch tests: a token, fast retry bounds, a populated repository, and fixtures.

Not a conftest.py: the suite's tests import helpers with `from conftest import ...`, and a second
conftest module would shadow the top-level one. Test modules import the fixtures they use.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from github_server import T0, LocalGitHub, Repo

from classify.ingest import GitHubClient, ResponseCache, RetryPolicy

TOKEN = "ghp_TESTtoken0123456789abcdefSECRET"
# Real runs wait a minute on secondary limits and back off for seconds; tests keep it short.
FAST = RetryPolicy(
    max_attempts=4, backoff_initial=0.01, backoff_max=0.05, secondary_wait=0.2, max_wait=10, reset_margin=0.0, timeout=5
)

PRS = {4, 8, 12, 16, 20}
N_ITEMS = 23  # 18 issues + 5 pull requests


def populate(repo: Repo) -> Repo:
    """Items 1..23 of triton-lang/triton; every 4th is a pull request."""
    for n in range(1, N_ITEMS + 1):
        kw = {}
        if n == 3:
            kw["comments"] = [(f"user{i % 3}", f"comment {i} on issue 3") for i in range(7)]
        if n == 5:
            kw["comments"] = [("maintainer", "Which CUDA version?"), ("reporter", "CUDA 12.4,\r\non an H100")]
        if n == 6:
            kw.update(state="closed", labels=("bug", "performance"))
        if n == 9:
            kw["body"] = None
        if n == 10:
            kw["body"] = "line one\r\nline two\r\n"
        if n in PRS:
            kw.update(pull=True, comments=[("reviewer", "LGTM")])
        repo.add_issue(n, **kw)
    repo.add_comment(5, "github-actions[bot]", "This issue is stale.", when=T0 + timedelta(days=60), bot=True)
    return repo


@pytest.fixture
def gh():
    with LocalGitHub(token=TOKEN) as server:
        populate(server.add_repo("triton-lang/triton"))
        yield server


@pytest.fixture
def make_client(tmp_path):
    clients = []

    def make(
        server: LocalGitHub, cache: str | None = None, token: str | None = TOKEN, policy: RetryPolicy = FAST
    ) -> GitHubClient:
        store = ResponseCache(tmp_path / cache) if cache else None
        c = GitHubClient(token=token, base_url=server.base_url, cache=store, policy=policy)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()
        if c.cache is not None:
            c.cache.close()
