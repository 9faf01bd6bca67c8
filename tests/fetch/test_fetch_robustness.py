"""Issue #11 in fetching, against real local servers: endless pagination (item 13), a secondary
rate limit longer than --max-wait (13), URLs on other hosts (13), malformed issue items (9), and
outputs that are inputs (1), plus CSV outputs with formula cells (2)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from fetch_fixtures import FAST, TOKEN, gh, make_client, populate  # noqa: F401 (fixtures)
from github_server import Fault, LocalGitHub
from typer.testing import CliRunner

from classify.cli.fetch import fetch_app
from classify.core.records import read_rows
from classify.ingest import FetchError, RateLimitError, RetryPolicy, fetch_issue_refs, fetch_repo_issues
from classify.ingest.normalize import RefError

runner = CliRunner()


def _run(args, token=TOKEN):
    env = {"GITHUB_TOKEN": token or "", "GH_TOKEN": "", "GITHUB_API_URL": ""}
    return runner.invoke(fetch_app, [str(a) for a in args], env=env)


class EndlessGitHub(LocalGitHub):
    """A broken API: every issues page is empty and links a next page that was never asked for."""

    def _list_issues(self, repo, query):
        n = int(query.get("page", 1))
        nxt = f'<{self.base_url}/repositories/{repo.id}/issues?per_page=100&page={n + 1}>; rel="next"'
        return 200, {"link": nxt}, []


class RepeatingGitHub(LocalGitHub):
    """A broken API: every page repeats the first page's items and links a new next page."""

    def _list_issues(self, repo, query):
        status, headers, items = super()._list_issues(repo, {**query, "page": "1"})
        n = int(query.get("page", 1))
        headers = {"link": f'<{self.base_url}/repositories/{repo.id}/issues?per_page=5&page={n + 1}>; rel="next"'}
        return status, headers, items


class OddGitHub(LocalGitHub):
    """Serves issue lists and issues whose items are not what GitHub sends."""

    list_items: list = []
    single: object = None

    def _list_issues(self, repo, query):
        return 200, {}, self.list_items

    def handle(self, path, query, headers):
        if self.single is not None and path.endswith("/issues/1"):
            return 200, {}, self.single
        return super().handle(path, query, headers)


@pytest.mark.parametrize("server_cls", [EndlessGitHub, RepeatingGitHub])
def test_pagination_that_never_ends_is_stopped(make_client, server_cls):
    with server_cls(token=TOKEN) as server:
        populate(server.add_repo("o/r"))
        with pytest.raises(FetchError, match="pagination makes no progress: 3 pages in a row"):
            fetch_repo_issues(make_client(server), "o/r", per_page=5)
        assert len(server.requests_to("/issues?")) <= 5  # the first page, then three that add nothing


def test_page_cap(make_client, gh):
    client = make_client(gh)
    with pytest.raises(FetchError, match="did not end after 2 pages"):
        list(client.paginate("/repos/triton-lang/triton/issues", {"per_page": 5}, max_pages=2))
    assert len(list(client.paginate("/repos/triton-lang/triton/issues", {"per_page": 5}, max_pages=5))) == 5


def test_secondary_limit_longer_than_max_wait_stops(gh, make_client):
    # No Retry-After: GitHub says wait a minute, doubling. 0.2s, then 0.4s > max_wait 0.3s: stop.
    gh.faults.append(Fault.secondary(r"/issues\?", retry_after=None, times=10))
    policy = RetryPolicy(**{**FAST.__dict__, "max_wait": 0.3, "max_attempts": 6})
    client = make_client(gh, policy=policy)
    with pytest.raises(RateLimitError, match="more than the allowed wait of 0s"):
        fetch_repo_issues(client, "triton-lang/triton")
    assert len(gh.requests_to("/issues?")) == 2 and client.stats.waited_seconds == pytest.approx(0.2, abs=0.01)


def test_secondary_limit_within_max_wait_is_waited_out(gh, make_client):
    gh.faults.append(Fault.secondary(r"/issues\?", retry_after=None, times=2))
    client = make_client(gh)  # 0.2 + 0.4 s, within FAST's max_wait
    assert len(fetch_repo_issues(client, "triton-lang/triton").rows) == 18
    assert client.stats.waited_seconds == pytest.approx(0.6, abs=0.05)


def test_urls_on_other_hosts_are_refused_before_any_request(gh, make_client):
    client = make_client(gh)
    refs = ["https://gitlab.com/triton-lang/triton/issues/5", "https://github.com/triton-lang/triton/issues/6"]
    # The local API is not api.github.com: even github.com URLs are not its own unless configured.
    with pytest.raises(RefError, match=r"2 references are not on 127\.0\.0\.1: https://gitlab\.com/"):
        fetch_issue_refs(client, refs)
    assert gh.log == []
    # the public API's web host is github.com; other hosts only when configured
    with pytest.raises(RefError, match="1 references are not on 127.0.0.1, github.com: https://gitlab.com/"):
        fetch_issue_refs(client, refs, hosts=["github.com"])
    res = fetch_issue_refs(client, refs[1:] + ["triton-lang/triton#5"], hosts=["github.com"])
    assert [r["id"] for r in res.rows] == ["triton-6", "triton-5"]


def test_urls_command_refuses_other_hosts(gh, tmp_path):
    out = tmp_path / "o.jsonl"
    r = _run(["urls", "-o", out, "https://evil.example/o/r/issues/1", "--base-url", gh.base_url])
    assert r.exit_code == 2 and "not on 127.0.0.1" in r.output and not out.exists()
    assert gh.log == []


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["not an object"], r"item 1: not a JSON object \(str\)"),
        ([{"title": "no number", "html_url": "https://github.com/o/r/issues/1"}], "item 1: no issue number"),
        ([{"number": "1", "html_url": "https://github.com/o/r/issues/1"}], r"no issue number \(`number` is '1'\)"),
        ([{"number": 1}], "issue #1 has no `html_url`"),
    ],
)
def test_malformed_issue_items_are_clear_errors(make_client, items, message):
    with OddGitHub(token=TOKEN) as server:
        server.add_repo("o/r")
        server.list_items = items
        with pytest.raises(FetchError, match=message):
            fetch_repo_issues(make_client(server), "o/r")


def test_malformed_single_issue_is_a_clear_error(make_client):
    with OddGitHub(token=TOKEN) as server:
        server.add_repo("o/r").add_issue(1)
        server.single = ["an", "array"]
        with pytest.raises(FetchError, match=r"/issues/1: not a JSON object \(list\)"):
            fetch_issue_refs(make_client(server), ["o/r#1"])


def test_malformed_item_through_the_cli_is_one_line(tmp_path):
    with OddGitHub(token=TOKEN) as server:
        server.add_repo("o/r")
        server.list_items = [{"title": "x"}]
        r = _run(["github", "--repo", "o/r", "-o", tmp_path / "o.jsonl", "--base-url", server.base_url])
    assert r.exit_code == 2 and "no issue number" in r.output and "Traceback" not in r.output


# ---------------------------------------------------------------- item 1: outputs over inputs


def test_import_output_that_is_the_input_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table = tmp_path / "t.csv"
    table.write_text("url,title\nhttps://github.com/o/r/issues/1,t\n")
    export = tmp_path / "gh.json"
    export.write_text(json.dumps([{"number": 1, "url": "https://github.com/o/r/issues/1", "title": "t"}]))
    before = (table.read_bytes(), export.read_bytes())
    for args in (
        ["csv", table, "-o", "./t.csv"],
        ["csv", table, "-o", table, "--overwrite"],
        ["gh-json", export, "-o", "sub/../gh.json"],
        ["urls", "--from", table, "-o", table, "--host", "github.com"],
    ):
        r = _run(args)
        assert r.exit_code == 2 and "is one of the inputs" in r.output, (args, r.output)
    assert (table.read_bytes(), export.read_bytes()) == before


def test_cache_file_over_output_or_input_is_refused(gh, tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text("")
    r = _run(["github", "--repo", "triton-lang/triton", "-o", out, "--cache-file", out, "--base-url", gh.base_url])
    assert r.exit_code == 2 and "--cache-file" in r.output and "is one of the inputs" in r.output
    r = _run(["github", "--repo", "triton-lang/triton", "-o", out, "--cache-file", "x.sqlite", "--no-cache"])
    assert r.exit_code == 2 and "--no-cache" in r.output
    assert gh.log == [] and out.read_text() == ""


# ---------------------------------------------------------------- item 2: CSV outputs


def test_fetched_csv_neutralises_formulas_and_merges_back_exactly(gh, tmp_path):
    gh.repos["triton-lang/triton"].items[1]["title"] = '=HYPERLINK("http://evil","x")'
    out = tmp_path / "o.csv"
    args = ["github", "--repo", "triton-lang/triton", "-o", out, "--base-url", gh.base_url, "--no-cache"]
    assert _run(args).exit_code == 0
    cells = [c for row in csv.reader(io.StringIO(out.read_text(encoding="utf-8"))) for c in row]
    assert "'" + '=HYPERLINK("http://evil","x")' in cells
    assert not [c for c in cells if c[:1] in ("=", "+", "@")]
    assert read_rows(out)[0]["title"] == '=HYPERLINK("http://evil","x")'
    r = _run(args)  # a refresh merges into the CSV: nothing looks changed
    assert r.exit_code == 0 and "0 updated, 18 unchanged" in r.output, r.output
