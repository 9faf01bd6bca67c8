"""Fixtures: a local GitHub API on 127.0.0.1 with a repository in GitHub's real shapes."""

from __future__ import annotations

import pytest
from fetch_fixtures import FAST, TOKEN, populate
from github_server import LocalGitHub

from classify.ingest import GitHubClient, ResponseCache, RetryPolicy


@pytest.fixture
def gh():
    with LocalGitHub(token=TOKEN) as server:
        populate(server.add_repo("triton-lang/triton"))
        yield server


@pytest.fixture
def make_client(tmp_path):
    clients = []

    def make(server: LocalGitHub, cache: str | None = None, token: str | None = TOKEN, policy: RetryPolicy = FAST) -> GitHubClient:
        store = ResponseCache(tmp_path / cache) if cache else None
        c = GitHubClient(token=token, base_url=server.base_url, cache=store, policy=policy)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()
        if c.cache is not None:
            c.cache.close()
