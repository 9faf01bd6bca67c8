"""GitHub may send Retry-After as an HTTP date (RFC 9110); the fetcher waits for it like for seconds."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest
from fetch_fixtures import FAST, N_ITEMS, PRS, gh, make_client  # noqa: F401 (fixtures)
from github_server import SECONDARY_MESSAGE, Fault

from classify.ingest import RateLimitError, fetch_repo_issues

ISSUES = [n for n in range(1, N_ITEMS + 1) if n not in PRS]


def _date_fault(seconds_ahead: float) -> Fault:
    # Date header of the local server: its clock, which is ours; the header is whole seconds.
    return Fault(
        r"/issues\?",
        403,
        {"retry-after": formatdate(time.time() + seconds_ahead, usegmt=True)},
        {"message": SECONDARY_MESSAGE},
    )


def test_http_date_retry_after_is_honoured(gh, make_client):
    gh.faults.append(_date_fault(2))
    client = make_client(gh)
    res = fetch_repo_issues(client, "triton-lang/triton", per_page=100)
    assert [r["number"] for r in res.rows] == ISSUES
    hit, retry = gh.requests_to("/issues?")[:2]
    assert (hit.status, retry.status) == (403, 200)
    # Before, only digits counted: a date fell back to the 0.2 s secondary backoff of FAST.
    assert retry.t - hit.t >= 0.9
    assert client.stats.rate_limit_waits == 1


def test_http_date_beyond_max_wait_stops(gh, make_client):
    gh.faults.append(_date_fault(FAST.max_wait + 60))
    with pytest.raises(RateLimitError, match="more than the allowed wait"):
        fetch_repo_issues(make_client(gh), "triton-lang/triton", per_page=100)
    assert len(gh.requests_to("/issues?")) == 1
