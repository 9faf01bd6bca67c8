"""The fetcher against a local GitHub API: pagination, PR skipping, retries, rate limits, ETags."""

from __future__ import annotations

import re
import time

import pytest
from fetch_fixtures import FAST, N_ITEMS, PRS, TOKEN, gh, make_client  # noqa: F401 (fixtures)
from github_server import Fault, LocalGitHub

from classify.core.records import read_records
from classify.ingest import FetchError, RateLimitError, RetryPolicy, fetch_issue_refs, fetch_repo_issues, write_fetched

ISSUES = [n for n in range(1, N_ITEMS + 1) if n not in PRS]
LIST = r"/issues\?"  # fault patterns: the issues list, and one page of it


def page(n: int) -> str:
    return rf"/issues\?.*\bpage={n}\b"


def list_requests(gh, n: int):
    return [
        r
        for r in gh.log
        if "/comments" not in r.path
        and r.path.split("?")[0].endswith("/issues")
        and re.search(rf"\bpage={n}\b", r.path)
    ]


def _numbers(rows):
    return [r["number"] for r in rows]


def test_pagination_is_complete_and_skips_pull_requests(gh, make_client):
    client = make_client(gh)
    pages = []
    res = fetch_repo_issues(client, "triton-lang/triton", per_page=5, progress=lambda n, prs: pages.append((n, prs)))
    assert _numbers(res.rows) == ISSUES  # every issue, oldest first, none twice
    assert len(res.skipped_prs) == len(PRS) and all("/pull/" in u for u in res.skipped_prs)
    # 23 items at 5 a page = 5 list pages, the later ones reached through GitHub's Link URLs.
    lists = [r.path for r in gh.log if r.path.split("?")[0].endswith("/issues")]
    assert len(lists) == 5
    assert all(p.startswith("/repositories/") for p in lists[1:])
    assert pages[-1] == (len(ISSUES), len(PRS))
    # Comments: only for issues that have some (3 and 5), never for pull requests; issue 3's
    # seven comments span two pages.
    comment_paths = [r.path for r in gh.log if "/comments" in r.path]
    assert len(comment_paths) == 3
    assert not any(f"/issues/{n}/comments" in p for p in comment_paths for n in PRS)
    row3 = next(r for r in res.rows if r["number"] == 3)
    assert all(f"comment {i} on issue 3" in row3["discussion"] for i in range(7))


def test_record_shape(gh, make_client, tmp_path):
    res = fetch_repo_issues(make_client(gh), "triton-lang/triton", per_page=100)
    rows = {r["number"]: r for r in res.rows}
    r5 = rows[5]
    assert r5["id"] == "triton-5" and r5["repo"] == "triton-lang/triton"
    assert r5["url"] == "https://github.com/triton-lang/triton/issues/5"
    assert r5["created_at"] == "2024-01-06T00:00:00Z" and r5["title"] == "Issue 5: kernel fails"
    # Each comment prefixed by author and date, in order, Windows line ends normalized.
    assert r5["discussion"] == (
        "maintainer (2024-01-06):\nWhich CUDA version?\n\n"
        "reporter (2024-01-06):\nCUDA 12.4,\non an H100\n\n"
        "github-actions[bot] (2024-03-01):\nThis issue is stale."
    )
    assert rows[6]["state"] == "closed" and rows[6]["labels"] == ["bug", "performance"]
    assert rows[6]["closed_at"] == "2024-01-10T00:00:00Z" and rows[6]["state_reason"] == "completed"
    assert rows[1]["state"] == "open" and rows[1]["closed_at"] is None and rows[1]["labels"] == []
    assert rows[9]["body"] == "" and rows[10]["body"] == "line one\nline two"
    for suffix in ("jsonl", "parquet", "csv"):
        out = tmp_path / f"triton.{suffix}"
        write_fetched(out, res.rows)
        recs = read_records(out)  # validates ids, text, duplicates
        assert [r.id for r in recs] == [f"triton-{n}" for n in ISSUES]
        back = {r.id: r for r in recs}["triton-6"]
        assert back.fields["labels"] == ["bug", "performance"] and back.number == 6
        assert back.text().startswith("Issue 6: kernel fails")


def test_bulk_comments_match_per_issue_threads_with_fewer_requests(gh, make_client):
    repo = gh.repos["triton-lang/triton"]
    for n in range(24, 60):  # many issues with a comment or two: bulk is cheaper
        repo.add_issue(n, comments=[("u", f"first on {n}")] + ([("v", f"second on {n}")] if n % 2 else []))
    per_issue = fetch_repo_issues(make_client(gh), "triton-lang/triton", comments="per-issue")
    n_per_issue = len(gh.log)
    gh.log.clear()
    auto = fetch_repo_issues(make_client(gh), "triton-lang/triton")
    assert auto.rows == per_issue.rows
    paths = [r.path.split("?")[0] for r in gh.log]
    assert sum(p.endswith("/issues/comments") for p in paths) == 1  # 15 + 54 comments, one page of 100
    assert not any(re.search(r"/issues/\d+/comments$", p) for p in paths)
    assert len(gh.log) == 2 and n_per_issue == 1 + 2 + 36
    # A narrower listing cannot see every item's comment count: auto stays per issue.
    gh.log.clear()
    fetch_repo_issues(make_client(gh), "triton-lang/triton", state="open")
    assert not any(r.path.split("?")[0].endswith("/issues/comments") for r in gh.log)


def test_bulk_comments_cut_short_fall_back_per_issue(gh, make_client):
    gh.bulk_page_cap = 1  # the repository-wide listing stops after one page of 5
    res = fetch_repo_issues(make_client(gh), "triton-lang/triton", comments="bulk", per_page=5)
    full = fetch_repo_issues(make_client(gh), "triton-lang/triton", comments="per-issue", per_page=5)
    assert res.rows == full.rows
    bulk_paths = [r.path for r in gh.log if r.path.split("?")[0].endswith("/issues/comments")]
    assert len(bulk_paths) == 1
    # Issue 3's first 5 comments came in bulk, so its thread (and 5's) was refetched per issue.
    assert len(gh.requests_to("/issues/3/comments")) == 2 * 2


def test_skip_bot_comments(gh, make_client):
    res = fetch_repo_issues(make_client(gh), "triton-lang/triton", skip_bot_comments=True)
    r5 = next(r for r in res.rows if r["number"] == 5)
    assert "stale" not in r5["discussion"] and "Which CUDA version?" in r5["discussion"]


def test_state_since_and_limit_reach_the_api(gh, make_client):
    client = make_client(gh)
    closed = fetch_repo_issues(client, "triton-lang/triton", state="closed")
    assert _numbers(closed.rows) == [6]
    recent = fetch_repo_issues(client, "triton-lang/triton", since="2024-01-15")
    assert "since=2024-01-15T00%3A00%3A00Z" in gh.log[-1].path or any("since=2024-01-15T00" in r.path for r in gh.log)
    # Updated since Jan 15: items created from day 14 on, and issue 5 (a comment in March).
    assert _numbers(recent.rows) == [5] + [n for n in ISSUES if n >= 14]
    few = fetch_repo_issues(client, "triton-lang/triton", limit=4, per_page=2)
    assert _numbers(few.rows) == ISSUES[:4]
    with pytest.raises(ValueError, match="not a date"):
        fetch_repo_issues(client, "triton-lang/triton", since="last tuesday")


def test_502_once_is_retried(gh, make_client):
    gh.faults.append(Fault(page(2), 502, body="<html><body><h1>502 Bad Gateway</h1></body></html>"))
    client = make_client(gh)
    res = fetch_repo_issues(client, "triton-lang/triton", per_page=5)
    assert _numbers(res.rows) == ISSUES
    assert [r.status for r in list_requests(gh, 2)] == [502, 200]
    assert client.stats.retries == 1 and client.stats.rate_limit_waits == 0


def test_dropped_connection_is_retried(gh, make_client):
    gh.faults.append(Fault("/issues/3/comments", drop=True))
    client = make_client(gh)
    res = fetch_repo_issues(client, "triton-lang/triton", comments="per-issue")
    assert "comment 6 on issue 3" in next(r for r in res.rows if r["number"] == 3)["discussion"]
    assert client.stats.retries == 1
    assert [r.status for r in gh.requests_to("/issues/3/comments")][:2] == [-1, 200]


def test_persistent_5xx_gives_up_after_max_attempts(gh, make_client):
    gh.faults.append(Fault(LIST, 503, body={"message": "Service Unavailable"}, times=99))
    client = make_client(gh)
    with pytest.raises(FetchError, match=r"HTTP 503.*gave up after 4 attempts") as e:
        fetch_repo_issues(client, "triton-lang/triton")
    assert len(gh.log) == FAST.max_attempts and e.value.status == 503
    assert client.stats.retries == FAST.max_attempts - 1


def test_secondary_limit_honours_retry_after(gh, make_client):
    gh.faults.append(Fault.secondary(page(2), retry_after=1))
    client = make_client(gh)
    res = fetch_repo_issues(client, "triton-lang/triton", per_page=5)
    assert _numbers(res.rows) == ISSUES
    hit, retry = list_requests(gh, 2)
    assert (hit.status, retry.status) == (403, 200)
    assert retry.t - hit.t >= 1.0
    assert client.stats.rate_limit_waits == 1 and client.stats.retries == 1


def test_secondary_limit_without_retry_after_backs_off_exponentially(gh, make_client):
    gh.faults.append(Fault.secondary(LIST, retry_after=None, times=2))
    client = make_client(gh)
    fetch_repo_issues(client, "triton-lang/triton", per_page=100)
    first, second, ok = gh.requests_to("/issues?")[:3]
    assert [first.status, second.status, ok.status] == [403, 403, 200]
    assert second.t - first.t >= FAST.secondary_wait
    assert ok.t - second.t >= 2 * FAST.secondary_wait
    assert client.stats.rate_limit_waits == 2


def test_primary_limit_waits_for_reset(gh, make_client):
    reset = int(time.time()) + 1
    gh.faults.append(Fault.primary(page(3), reset=reset, status=429))
    client = make_client(gh)
    res = fetch_repo_issues(client, "triton-lang/triton", per_page=5)
    assert _numbers(res.rows) == ISSUES
    hit, retry = list_requests(gh, 3)
    assert hit.status == 429 and retry.status == 200
    assert retry.t >= reset  # not a moment before GitHub's X-RateLimit-Reset
    assert client.stats.rate_limit_waits == 1


def test_exhausted_budget_pauses_before_the_next_request(gh, make_client):
    # A successful page with X-RateLimit-Remaining: 0: the next request must wait for the reset
    # (2 s ahead, so the reset is still in the future when page 2 is served).
    reset = int(time.time()) + 2
    gh.faults.append(Fault(page(2), None, headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}))
    client = make_client(gh)
    res = fetch_repo_issues(client, "triton-lang/triton", per_page=5)
    assert _numbers(res.rows) == ISSUES
    i = gh.log.index(list_requests(gh, 2)[0])
    assert gh.log[i].status == 200 and len(gh.log) > i + 1
    assert all(r.t >= reset for r in gh.log[i + 1 :])
    assert [r.status for r in gh.log].count(403) == 0 and client.stats.rate_limit_waits == 1


def test_too_long_rate_limit_wait_aborts_with_clear_error(gh, make_client):
    gh.faults.append(Fault.primary(LIST, reset=int(time.time()) + 3600))
    client = make_client(gh)
    t0 = time.time()
    with pytest.raises(RateLimitError, match=r"API rate limit exceeded.*run again later"):
        fetch_repo_issues(client, "triton-lang/triton")
    assert time.time() - t0 < 5 and len(gh.log) == 1


def test_plain_403_and_404_fail_at_once(gh, make_client):
    gh.faults.append(Fault(LIST, 403, body={"message": "Resource not accessible by personal access token"}))
    client = make_client(gh)
    with pytest.raises(FetchError, match="Resource not accessible") as e:
        fetch_repo_issues(client, "triton-lang/triton")
    assert e.value.status == 403 and len(gh.log) == 1
    with pytest.raises(FetchError, match="HTTP 404.*cannot see it"):
        fetch_repo_issues(client, "nobody/nothing")
    with pytest.raises(ValueError, match="not a repository"):
        fetch_repo_issues(client, "just-a-name")


def test_etag_refresh_costs_304s_and_reuses_stored_data(gh, make_client):
    first = make_client(gh, cache="etags.sqlite")
    res1 = fetch_repo_issues(first, "triton-lang/triton", per_page=5)
    n_first = len(gh.log)
    assert first.stats.not_modified == 0 and len(first.cache) == n_first

    refresh = make_client(gh, cache="etags.sqlite")
    res2 = fetch_repo_issues(refresh, "triton-lang/triton", per_page=5)
    again = gh.log[n_first:]
    assert res2.rows == res1.rows
    assert len(again) == n_first and all(r.headers.get("if-none-match") for r in again)
    assert {r.status for r in again} == {304}
    assert refresh.stats.not_modified == refresh.stats.requests == n_first

    # A new comment on issue 7: its list page changes (updated_at) and its comments are fetched.
    gh.repos["triton-lang/triton"].add_comment(7, "maintainer", "Fixed in 3.1.")
    third = make_client(gh, cache="etags.sqlite")
    res3 = fetch_repo_issues(third, "triton-lang/triton", per_page=5)
    assert "maintainer" in next(r for r in res3.rows if r["number"] == 7)["discussion"]
    changed = [r for r in gh.log[n_first * 2 :] if r.status == 200]
    assert len(changed) == 2  # the list page holding issue 7, and its new comments
    assert third.stats.not_modified == third.stats.requests - 2


@pytest.mark.parametrize("link_on_304", [True, False])
def test_refresh_finds_items_past_a_full_last_page(gh, make_client, link_on_304):
    # 23 items at 23 a page: the only page is full. A new issue starts page 2 while page 1's
    # body (and ETag) stays the same, so only the Link header can tell there is more.
    gh.link_on_304 = link_on_304
    fetch_repo_issues(make_client(gh, cache="etags.sqlite"), "triton-lang/triton", per_page=23, comments="per-issue")
    gh.repos["triton-lang/triton"].add_issue(24, "A new one")
    n = len(gh.log)
    res = fetch_repo_issues(
        make_client(gh, cache="etags.sqlite"), "triton-lang/triton", per_page=23, comments="per-issue"
    )
    assert _numbers(res.rows) == ISSUES + [24]
    first_page = [
        r.status
        for r in gh.log[n:]
        if r.path.split("?")[0].endswith("/issues") and "page=" not in r.path.replace("per_page", "")
    ]
    # With the Link header on the 304 no full request is needed; without it, page 1 is asked again.
    assert first_page == ([304] if link_on_304 else [304, 200])


def test_token_is_sent_but_never_leaked(gh, make_client, tmp_path):
    client = make_client(gh, cache="etags.sqlite")
    res = fetch_repo_issues(client, "triton-lang/triton")
    assert {r.headers.get("authorization") for r in gh.log} == {f"Bearer {TOKEN}"}
    out = tmp_path / "out.jsonl"
    write_fetched(out, res.rows)
    files = [f for f in tmp_path.rglob("*") if f.is_file()]  # output, cache and its WAL
    assert len(files) >= 2 and all(TOKEN.encode() not in f.read_bytes() for f in files)
    assert TOKEN not in repr(client)


def test_token_echoed_by_server_is_redacted(make_client):
    with LocalGitHub(token=TOKEN, echo_auth_in_errors=True) as server:
        server.add_repo("o/r").add_issue(1)
        wrong = "ghp_WRONGtoken_also_secret_42"
        client = make_client(server, token=wrong)
        with pytest.raises(FetchError) as e:
            fetch_repo_issues(client, "o/r")
        assert e.value.status == 401 and "Bad credentials" in str(e.value) and "check GITHUB_TOKEN" in str(e.value)
        assert "[redacted]" in str(e.value) and wrong not in str(e.value) and TOKEN not in str(e.value)
        assert len(server.log) == 1  # 401 is not retried


def test_links_to_another_host_are_refused(gh, make_client):
    gh.faults.append(Fault(LIST, None, headers={"link": '<http://169.254.169.254/latest/?page=2>; rel="next"'}))
    with pytest.raises(FetchError, match="refusing to request http://169.254.169.254"):
        fetch_repo_issues(make_client(gh), "triton-lang/triton")


def test_fetch_by_urls_carries_spreadsheet_columns(gh, make_client):
    gh.add_repo("bitsandbytes-foundation/bitsandbytes").add_issue(
        1002, "bnb fails on Colab", comments=[("Titus", "Upgrade to 0.42.")]
    )
    gh.renames["timdettmers/bitsandbytes"] = "bitsandbytes-foundation/bitsandbytes"
    refs = [
        ("https://github.com/triton-lang/triton/issues/5", {"symptom": "crash", "root_cause": None}),
        ("https://github.com/TimDettmers/bitsandbytes/issues/1002", {"symptom": "deployment_failure"}),  # renamed repo
        ("https://github.com/triton-lang/triton/pull/8", {"symptom": "crash"}),  # a pull request URL
        ("https://github.com/triton-lang/triton/issues/12", {}),  # a PR behind an issues URL
        ("https://github.com/triton-lang/triton/issues/999", {}),  # missing
        ("triton-lang/triton#6", {"symptom": "wrong_output", "title": "spreadsheet title"}),
        (
            "https://github.com/triton-lang/triton/issues/6",
            {"symptom": "wrong_output", "title": "spreadsheet title"},
        ),  # duplicate, same values
        (
            "https://github.com/triton-lang/triton/issues/5#issuecomment-1",
            {"symptom": "hang"},
        ),  # duplicate, conflicting
        ("not a url", {}),
    ]
    client = make_client(gh)
    res = fetch_issue_refs(client, refs, hosts=["github.com"])  # the local API stands in for api.github.com
    rows = {r["id"]: r for r in res.rows}
    assert list(rows) == ["triton-5", "bitsandbytes-1002", "triton-6"]
    assert rows["triton-5"]["symptom"] == "crash" and "root_cause" in rows["triton-5"]
    assert "maintainer (2024-01-06)" in rows["triton-5"]["discussion"]
    bnb = rows["bitsandbytes-1002"]
    assert bnb["repo"] == "bitsandbytes-foundation/bitsandbytes" and bnb["symptom"] == "deployment_failure"
    assert (
        bnb["url"] == "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/1002"
        and "Titus" in bnb["discussion"]
    )
    assert rows["triton-6"]["title"] == "Issue 6: kernel fails"  # GitHub's text wins over the sheet's
    assert res.skipped_prs == [
        "https://github.com/triton-lang/triton/pull/8",
        "https://github.com/triton-lang/triton/issues/12",
    ]
    failed = dict(res.failures)
    assert set(failed) == {
        "https://github.com/triton-lang/triton/issues/999",
        "https://github.com/triton-lang/triton/issues/5#issuecomment-1",
        "not a url",
    }
    assert "404" in failed["https://github.com/triton-lang/triton/issues/999"]
    assert "different values for ['symptom']" in failed["https://github.com/triton-lang/triton/issues/5#issuecomment-1"]
    assert len(gh.requests_to("/issues/6")) == 1  # the duplicate was not fetched again


def test_fetch_by_urls_aborts_on_auth_errors(make_client):
    with LocalGitHub(token=TOKEN) as server:
        server.add_repo("o/r").add_issue(1)
        with pytest.raises(FetchError, match="401"):
            fetch_issue_refs(
                make_client(server, token="ghp_wrong"),
                ["https://github.com/o/r/issues/1", "o/r#2"],
                hosts=["github.com"],
            )
        assert len(server.log) == 1


def test_unauthenticated_client_sends_no_authorization(make_client):
    with LocalGitHub(token=None) as server:
        server.add_repo("o/r").add_issue(1)
        res = fetch_repo_issues(make_client(server, token=None), "o/r")
        assert _numbers(res.rows) == [1] and "authorization" not in server.log[0].headers


def test_policy_defaults_follow_github_guidance():
    p = RetryPolicy()
    assert p.secondary_wait >= 60 and p.max_wait >= 3600 and p.max_attempts >= 3
