"""Fetch issues with their comments from the GitHub REST API as record rows."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

from classify.ingest.client import FetchError, FetchStats, GitHubClient, Page
from classify.ingest.normalize import RefError, issue_id, parse_issue_ref, parse_repo, rest_issue_to_row

log = logging.getLogger("classify.fetch")
STATES = ("open", "closed", "all")
MAX_PER_PAGE = 100  # GitHub's cap


@dataclass
class FetchResult:
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped_prs: list[str] = field(default_factory=list)  # URLs of pull requests left out
    failures: list[tuple[str, str]] = field(default_factory=list)  # (issue reference, reason)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (issue URL, why) of listed items left out
    stats: FetchStats | None = None

    def skip(self, url: str, why: str) -> None:
        log.warning("skipped %s: %s", url, why)
        self.skipped.append((url, why))


def normalize_since(text: str) -> str:
    """`2024-05-01` or an ISO timestamp -> GitHub's `YYYY-MM-DDTHH:MM:SSZ` (UTC)."""
    s = text.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", s):
            dt = datetime.strptime(s, "%Y-%m-%d").replace(tzinfo=timezone.utc)
        else:
            dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=timezone.utc)
    except ValueError:
        raise ValueError(f"not a date: {text!r} (use YYYY-MM-DD or an ISO 8601 timestamp)") from None
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _objects(page: Page, what: str) -> list[dict]:
    """The items of a list page, each a JSON object; FetchError naming the URL and item otherwise."""
    for i, item in enumerate(page.data, 1):
        if not isinstance(item, dict):
            raise FetchError(f"GET {page.url}: {what} {i} of the page is not a JSON object ({type(item).__name__})")
    return page.data


def _check_issue(issue: Any, where: str) -> dict:
    """An issue object as the fetcher needs it: a JSON object with an integer `number` and its `html_url`."""
    if not isinstance(issue, dict):
        raise FetchError(f"{where}: not a JSON object ({type(issue).__name__})")
    number = issue.get("number")
    if isinstance(number, bool) or not isinstance(number, int):
        raise FetchError(f"{where}: no issue number (`number` is {number!r})")
    if not isinstance(issue.get("html_url"), str):
        raise FetchError(f"{where}: issue #{number} has no `html_url`")
    return issue


def fetch_comments(
    client: GitHubClient, owner: str, name: str, number: int, per_page: int = MAX_PER_PAGE
) -> list[dict]:
    comments: list[dict] = []
    for page in client.paginate(f"/repos/{owner}/{name}/issues/{number}/comments", {"per_page": per_page}):
        comments.extend(_objects(page, "comment"))
    return comments


def _row_for(client: GitHubClient, issue: dict, per_page: int, skip_bot_comments: bool) -> dict:
    owner, name, number, _ = parse_issue_ref(issue["html_url"])
    # The issue object carries its comment count: no request for threads without comments.
    comments = fetch_comments(client, owner, name, number, per_page) if issue.get("comments") else []
    return rest_issue_to_row(issue, comments, skip_bot_comments=skip_bot_comments)


def _pages(n: int, per_page: int) -> int:
    return -(-n // per_page)


def fetch_repo_comments(
    client: GitHubClient, owner: str, name: str, per_page: int = MAX_PER_PAGE
) -> dict[int, list[dict]]:
    """Every issue and PR comment of a repository, grouped by issue number (oldest first)."""
    by_number: dict[int, list[dict]] = {}
    params = {"sort": "created", "direction": "asc", "per_page": per_page}
    for page in client.paginate(f"/repos/{owner}/{name}/issues/comments", params):
        for c in _objects(page, "comment"):
            m = re.search(r"/issues/(\d+)$", c["issue_url"]) if isinstance(c.get("issue_url"), str) else None
            if m:
                by_number.setdefault(int(m.group(1)), []).append(c)
    return by_number


def fetch_repo_issues(
    client: GitHubClient,
    repo: str,
    *,
    state: str = "all",
    since: str | None = None,
    limit: int | None = None,
    per_page: int = MAX_PER_PAGE,
    skip_bot_comments: bool = False,
    comments: str = "auto",
    progress: Callable[[int, int], None] | None = None,
) -> FetchResult:
    """All issues of `repo` (oldest first) with their comments; pull requests are skipped.

    `since` keeps issues *updated* at or after that time (GitHub's semantics), which is what a
    refresh wants. `progress(issues_so_far, prs_skipped)` is called after every list page.

    comments: "per-issue" asks each issue with comments for its thread; "bulk" pages through the
    repository-wide comments endpoint (100 comments a request, PR comments included);
    "auto" takes bulk when a full listing (state all, no since/limit) shows it needs fewer
    requests, since the list gives every item's comment count. Any issue whose bulk comments
    come up short (a capped listing, comments deleted meanwhile) is fetched per issue.
    """
    if state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, got {state!r}")
    if comments not in ("auto", "bulk", "per-issue"):
        raise ValueError(f"comments must be auto, bulk or per-issue, got {comments!r}")
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise ValueError(f"per_page must be 1..{MAX_PER_PAGE}, got {per_page}")
    owner, name = parse_repo(repo)
    params = {"state": state, "sort": "created", "direction": "asc", "per_page": per_page}
    if since:
        params["since"] = normalize_since(since)
    result = FetchResult(stats=client.stats)
    # An issue can appear twice if the listing shifts while we page; keep its later copy once.
    issues: dict[int, dict] = {}
    all_comments = 0  # comments on every listed item, pull requests included
    complete = True
    expected: tuple[str, str] | None = None  # the repository the listing is of, lower case
    for page in client.paginate(f"/repos/{owner}/{name}/issues", params):
        for i, item in enumerate(page.data, 1):
            _check_issue(item, f"GET {page.url}: item {i}")
            url = item["html_url"]
            try:
                item_owner, item_name, _, _ = parse_issue_ref(url)
                if isinstance(item.get("comments"), bool) or not isinstance(item.get("comments") or 0, int):
                    raise RefError(f"comments is {item['comments']!r}, not a count")
                if "pull_request" not in item:
                    rest_issue_to_row(item, [])  # every field of the right type, before its comments are fetched
            except RefError as e:
                result.skip(url, str(e))
                continue
            named = (item_owner.lower(), item_name.lower())
            if expected is None:
                # A renamed repository answers through a redirect, its items named by the new name.
                expected = named if page.redirected else (owner.lower(), name.lower())
            if named != expected:
                # Stored under that repository's id, it would pass for one of its issues.
                result.skip(
                    url, f"the listing of {owner}/{name} names {item_owner}/{item_name}, not {'/'.join(expected)}"
                )
                continue
            all_comments += item.get("comments") or 0
            # The issues endpoint lists pull requests too; they carry a `pull_request` key.
            if "pull_request" in item:
                result.skipped_prs.append(item.get("html_url", ""))
                continue
            issues[item["number"]] = item
            if limit is not None and len(issues) >= limit:
                complete = False
                break
        if progress:
            progress(len(issues), len(result.skipped_prs))
        if not complete:
            break

    per_issue_cost = sum(_pages(it.get("comments") or 0, per_page) for it in issues.values())
    bulk_cost = _pages(all_comments, per_page)
    full_listing = complete and state == "all" and not since
    use_bulk = comments == "bulk" or (comments == "auto" and full_listing and bulk_cost < per_issue_cost)
    bulk: dict[int, list[dict]] = {}
    if use_bulk and per_issue_cost:
        log.info("%s/%s: comments in bulk (%d requests instead of %d)", owner, name, bulk_cost, per_issue_cost)
        bulk = fetch_repo_comments(client, owner, name, per_page)
    for i, (n, issue) in enumerate(issues.items(), 1):
        if i % 200 == 0:
            log.info("%s/%s: comments for %d of %d issues", owner, name, i, len(issues))
        want = issue.get("comments") or 0
        if not want:
            thread = []
        elif use_bulk and len(bulk.get(n, [])) >= want:
            thread = bulk[n]
        else:
            if use_bulk:
                log.info(
                    "%s/%s#%d: %d of %d comments in bulk; fetching its thread",
                    owner,
                    name,
                    n,
                    len(bulk.get(n, [])),
                    want,
                )
            thread = fetch_comments(client, owner, name, n, per_page)
        try:
            result.rows.append(rest_issue_to_row(issue, thread, skip_bot_comments=skip_bot_comments))
        except RefError as e:  # a malformed comment
            result.skip(issue["html_url"], str(e))
    return result


def fetch_issue_refs(
    client: GitHubClient,
    refs: Iterable[str | tuple[str, dict[str, Any]]],
    *,
    per_page: int = MAX_PER_PAGE,
    skip_bot_comments: bool = False,
    progress: Callable[[int, int], None] | None = None,
    hosts: Iterable[str] = (),
) -> FetchResult:
    """Fetch single issues by URL (or `owner/name#N`), each optionally with extra fields to carry.

    URLs must be on the web host of the client's API (github.com for api.github.com, else the
    --base-url host) or on one of `hosts`; any other host is refused before the first request.

    Extra fields (e.g. labels from a gold spreadsheet) are merged into the fetched row; GitHub's
    values win for the record's core text fields. Missing or deleted issues and pull requests are
    reported in the result, not raised; anything else (bad token, rate limit) aborts.
    """
    result = FetchResult(stats=client.stats)
    items = [(r, {}) if isinstance(r, str) else r for r in refs]
    allowed = web_hosts(client.base_url, hosts)
    foreign = [r for r, _ in items if _host(r) not in (None, *allowed)]
    if foreign:
        # Only owner/name/number is taken from a URL: one on another host would silently fetch
        # a different issue from the API's host.
        raise RefError(
            f"{len(foreign)} references are not on {', '.join(sorted(allowed))}: {', '.join(foreign[:5])}"
            + (" ..." if len(foreign) > 5 else "")
            + " (GitHub Enterprise: --base-url https://HOST/api/v3; another web host for this API: --host)"
        )
    by_id: dict[str, int] = {}  # requested and canonical ids -> index in result.rows
    extras: list[dict[str, Any]] = []
    overridden: set[str] = set()

    def duplicate(key: str, ref: str, extra: dict) -> bool:
        if key not in by_id:
            return False
        prev = extras[by_id[key]]
        clash = sorted(k for k in set(prev) | set(extra) if k != "url" and prev.get(k) != extra.get(k))
        if clash:
            result.failures.append((ref, f"same issue listed twice with different values for {clash}"))
        else:
            log.warning("%s: same issue listed twice; kept once", ref)
        return True

    for i, (ref, extra) in enumerate(items, 1):
        try:
            owner, name, number, is_pr = parse_issue_ref(ref)
        except ValueError as e:
            result.failures.append((ref, str(e)))
            continue
        if is_pr:
            result.skipped_prs.append(ref)
            continue
        rid = issue_id(name, number)
        if duplicate(rid, ref, extra):
            continue
        try:
            page = client.get_json(client.url(f"/repos/{owner}/{name}/issues/{number}"))
        except FetchError as e:
            if e.status in (404, 410):
                result.failures.append((ref, str(e)))
                continue
            raise
        issue = _check_issue(page.data, f"GET {page.url}")
        if "pull_request" in issue:
            result.skipped_prs.append(ref)
            continue
        try:
            row = _row_for(client, issue, per_page, skip_bot_comments)
        except RefError as e:  # a field of the wrong type: that issue fails, the others go on
            result.failures.append((ref, str(e)))
            continue
        # A renamed or transferred repository redirects: the canonical id may differ from the URL's.
        if row["id"] != rid:
            if duplicate(row["id"], ref, extra):
                continue
            row["requested_url"] = ref
        for k, v in extra.items():
            if k in _GITHUB_OWNED:
                continue
            if k in row:
                overridden.add(k)
            row[k] = v
        by_id[rid] = by_id[row["id"]] = len(result.rows)
        extras.append(extra)
        result.rows.append(row)
        if progress:
            progress(i, len(items))
    if overridden:
        log.warning("input columns %s replace the fields of the same name fetched from GitHub", sorted(overridden))
    return result


def web_hosts(base_url: str, extra: Iterable[str] = ()) -> set[str]:
    """The hosts whose issue URLs this API serves: github.com (and www., api.) for api.github.com,
    else the API's own host (GitHub Enterprise serves web and API on one host), plus `extra`."""
    host = (urlsplit(base_url).hostname or "").lower()
    own = {"github.com", "www.github.com", "api.github.com"} if host == "api.github.com" else {host}
    return own | {h.strip().lower() for h in extra if h.strip()}


def _host(ref: str) -> str | None:
    """The host of a URL reference; None for `owner/name#N`, which names no host."""
    ref = ref.strip()
    return (urlsplit(ref).hostname or "").lower() if "://" in ref else None


# Fields whose value comes from GitHub even when the input spreadsheet has a column of that name.
_GITHUB_OWNED = {"id", "repo", "number", "url", "title", "body", "discussion", "created_at", "source"}
