"""Issue 21, items 8-12, against the local GitHub server: a server that trickles, redirects in a
loop, nests JSON 3,000 deep, sends malformed fields or another repository's items, or asks for a
wait of 1e308 seconds. Each gives a retry or one line naming the URL, never a traceback."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from fetch_fixtures import FAST, TOKEN, gh, make_client  # noqa: F401 (fixtures)
from github_server import Fault, LocalGitHub
from typer.testing import CliRunner

from classify.cli.fetch import fetch_app
from classify.ingest import FetchError, RateLimitError, fetch_repo_issues
from classify.ingest.normalize import RefError, parse_issue_ref, parse_repo

runner = CliRunner()
SHORT = replace(FAST, deadline=1.0)


def _run(server, *args):
    env = {"GITHUB_TOKEN": TOKEN, "GH_TOKEN": "", "GITHUB_API_URL": ""}
    return runner.invoke(fetch_app, ["github", "--base-url", server.base_url, *map(str, args)], env=env)


def test_trickling_answer_hits_the_total_deadline_and_is_retried(gh, make_client):
    # one byte every 0.2 s: each read is quick, so only a total deadline stops it
    gh.faults.append(Fault(r"/issues\?", 200, body={"message": "x" * 200}, trickle=0.2))
    client = make_client(gh, policy=SHORT)
    t0 = time.monotonic()
    res = fetch_repo_issues(client, "triton-lang/triton", comments="per-issue")
    assert time.monotonic() - t0 < 6
    assert len(res.rows) == 18 and client.stats.retries >= 1


def test_trickling_every_time_gives_up_with_one_line(gh, make_client):
    gh.faults.append(Fault(r"/issues\?", 200, body={"message": "x" * 200}, trickle=0.2, times=10))
    client = make_client(gh, policy=SHORT)
    with pytest.raises(FetchError, match=r"no complete answer within 1s .*gave up after 4 attempts"):
        fetch_repo_issues(client, "triton-lang/triton")


def test_redirect_loop_is_one_line_naming_the_url(gh, tmp_path):
    gh.faults.append(Fault(r"/issues\?", 302, headers={"location": "/repos/triton-lang/triton/issues?a=1"}, times=99))
    r = _run(gh, "--repo", "triton-lang/triton", "-o", tmp_path / "out.jsonl")
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "redirects in a loop" in r.output and f"{gh.base_url}/repos/triton-lang/triton/issues" in r.output
    assert "please report" not in r.output


def test_deeply_nested_answer_names_the_url(gh, tmp_path):
    gh.faults.append(Fault(r"/issues\?", 200, body='{"a":' + "[" * 3000 + "]" * 3000 + "}", times=9))
    r = _run(gh, "--repo", "triton-lang/triton", "-o", tmp_path / "out.jsonl")
    assert r.exit_code == 2 and "Traceback" not in r.output and "RecursionError" not in r.output
    assert "nested deeper than 200 levels" in r.output and "/repos/triton-lang/triton/issues" in r.output
    assert len(gh.requests_to("/issues?")) == 1  # not retried: the same answer would come again


def test_deeply_nested_error_body_does_not_crash(gh, make_client):
    gh.faults.append(Fault(r"/issues\?", 500, body='{"message":' + "[" * 3000, times=9))
    with pytest.raises(FetchError, match="HTTP 500"):
        fetch_repo_issues(make_client(gh), "triton-lang/triton")


def test_huge_retry_after_is_capped_and_said_so(gh, make_client):
    gh.faults.append(Fault.secondary(r"/issues\?", retry_after=None))
    gh.faults[-1].headers = {"retry-after": "1e308"}
    with pytest.raises(RateLimitError) as e:
        fetch_repo_issues(make_client(gh), "triton-lang/triton")
    msg = str(e.value)
    assert "7 days or more (the server's figure, capped)" in msg and len(msg) < 600 and "0000000" not in msg


def test_absurd_ratelimit_reset_is_capped(gh, make_client):
    gh.faults.append(Fault.primary(r"/issues\?", reset=0))
    gh.faults[-1].headers["x-ratelimit-reset"] = "9" * 5000  # too long for int() and for a float
    with pytest.raises(RateLimitError, match="capped"):
        fetch_repo_issues(make_client(gh), "triton-lang/triton")


@pytest.mark.parametrize("repo", ["a/..", "../b", "a/.", "./.", "a/b/c"])
def test_repository_names_that_are_path_steps_are_refused(repo):
    with pytest.raises(RefError, match="not a repository"):
        parse_repo(repo)


def test_issue_refs_with_path_steps_are_refused():
    with pytest.raises(RefError):
        parse_issue_ref("https://github.com/a/../issues/1")
    with pytest.raises(RefError):
        parse_issue_ref("../..#3")


def test_dotdot_repo_through_the_cli_sends_no_request(gh, tmp_path):
    r = _run(gh, "--repo", "a/..", "-o", tmp_path / "out.jsonl")
    assert r.exit_code == 2 and "not a repository" in r.output and not gh.log


class MixedGitHub(LocalGitHub):
    """A listing that carries items of another repository and items with malformed fields."""

    def _list_issues(self, repo, query):
        status, headers, items = super()._list_issues(repo, query)
        if query.get("page", "1") == "1":
            foreign = dict(items[0], number=77, html_url="https://github.com/evil/other/issues/77", id=999)
            labels = dict(items[1], number=78, html_url=items[1]["html_url"].replace("/2", "/78"), labels="bug", id=998)
            title = dict(
                items[1], number=79, html_url=items[1]["html_url"].replace("/2", "/79"), title={"a": 1}, id=997
            )
            items = [*items, foreign, labels, title]
        return status, headers, items


@pytest.fixture
def mixed():
    with MixedGitHub(token=TOKEN) as server:
        repo = server.add_repo("triton-lang/triton")
        for n in (1, 2, 3):
            repo.add_issue(n, labels=("bug",) if n == 2 else ())
        yield server


def test_foreign_and_malformed_items_are_skipped_with_warnings(mixed, make_client, caplog):
    res = fetch_repo_issues(make_client(mixed), "triton-lang/triton")
    assert sorted(r["id"] for r in res.rows) == ["triton-1", "triton-2", "triton-3"]
    assert next(r for r in res.rows if r["id"] == "triton-2")["labels"] == ["bug"]
    text = caplog.text
    assert "https://github.com/evil/other/issues/77" in text and "not triton-lang/triton" in text
    assert "issues/78" in text and "labels is text, not a list" in text
    assert "issues/79" in text and "title is an object, not text" in text
    assert len(res.skipped) == 3


def test_foreign_items_through_the_cli(mixed, tmp_path):
    out = tmp_path / "out.jsonl"
    r = _run(mixed, "--repo", "triton-lang/triton", "-o", out)
    assert r.exit_code == 0, r.output
    assert "skipped" in r.output and "evil/other" in r.output
    assert "other-77" not in out.read_text() and "['b', 'u', 'g']" not in out.read_text()


def test_gzip_bomb_is_bounded(gh, make_client):
    import gzip

    from classify.ingest.client import MAX_ANSWER_BYTES

    bomb = gzip.compress(b"[" + b" " * (MAX_ANSWER_BYTES + 1000) + b"]", compresslevel=9)
    assert len(bomb) < 200_000
    gh.faults.append(Fault(r"/issues\?", 200, headers={"content-encoding": "gzip"}, body=bomb, times=9))
    with pytest.raises(FetchError, match=r"/repos/triton-lang/triton/issues\?.*: the answer is larger than 64 MB"):
        fetch_repo_issues(make_client(gh), "triton-lang/triton")


def test_next_link_with_a_bad_port_names_the_url(gh, make_client):
    gh.faults.append(Fault(r"/issues\?", None, headers={"link": '<http://127.0.0.1:99999/x?page=2>; rel="next"'}))
    with pytest.raises(FetchError, match=r"refusing to request http://127.0.0.1:99999/x\?page=2"):
        fetch_repo_issues(make_client(gh), "triton-lang/triton")


def test_damaged_cache_entry_is_fetched_again(gh, make_client, tmp_path):
    import sqlite3

    client = make_client(gh, cache="etags.sqlite")
    fetch_repo_issues(client, "triton-lang/triton", comments="per-issue")
    db = sqlite3.connect(tmp_path / "etags.sqlite")
    db.execute("UPDATE responses SET body = ?", ("{not json" + "[" * 3000,))
    db.commit()
    db.close()
    again = make_client(gh, cache="etags.sqlite")
    res = fetch_repo_issues(again, "triton-lang/triton", comments="per-issue")
    assert len(res.rows) == 18 and again.stats.not_modified == 0
