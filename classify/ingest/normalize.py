"""Turn GitHub issue JSON (REST API or `gh` CLI exports) into our record rows.

Row shape (readable by classify.core.records.read_records):
    id           `<repo name, lower case>-<number>`, as in gold/reports.jsonl (`deepgemm-19`)
    repo         `owner/name` as GitHub spells it
    number, url (the issue's web page), title, body
    discussion   the comments, each as "author (YYYY-MM-DD):\\n<text>", blank-line separated
    created_at   GitHub's ISO timestamp
    state, state_reason, labels (names), closed_at, updated_at, author, source   extra fields
"""

from __future__ import annotations

import re
from typing import Any

from classify.core.errors import ClassifyError

# https://github.com/o/n/issues/1, .../pull/1 (any host: GitHub Enterprise too), api URLs, and o/n#1.
_WEB_URL = re.compile(r"^https?://[^/\s]+/(?:repos/)?([\w.-]+)/([\w.-]+)/(issues|pull|pulls)/(\d+)/?(?:[?#].*)?$")
_SHORT_REF = re.compile(r"^([\w.-]+)/([\w.-]+)#(\d+)$")
_REPO = re.compile(r"^([\w.-]+)/([\w.-]+)$")


class RefError(ClassifyError, ValueError):
    pass


def issue_id(repo_name: str, number: int) -> str:
    return f"{repo_name.lower()}-{int(number)}"


def parse_repo(text: str) -> tuple[str, str]:
    """`owner/name` or `https://github.com/owner/name[.git]` -> (owner, name)."""
    s = text.strip().rstrip("/")
    s = re.sub(r"^https?://[^/]+/", "", s)
    s = re.sub(r"\.git$", "", s)
    m = _REPO.match(s)
    if not m:
        raise RefError(f"not a repository: {text!r} (expected OWNER/NAME)")
    return m.group(1), m.group(2)


def parse_issue_ref(text: str) -> tuple[str, str, int, bool]:
    """An issue URL or `owner/name#N` -> (owner, name, number, is_pull_request_url)."""
    s = text.strip()
    m = _WEB_URL.match(s)
    if m:
        return m.group(1), m.group(2), int(m.group(4)), m.group(3) != "issues"
    m = _SHORT_REF.match(s)
    if m:
        return m.group(1), m.group(2), int(m.group(3)), False
    raise RefError(f"not an issue URL: {text!r} (expected https://github.com/OWNER/NAME/issues/N or OWNER/NAME#N)")


def _text(v: Any) -> str:
    # GitHub bodies carry Windows line ends; one convention keeps text hashes (caches) stable.
    return str(v or "").replace("\r\n", "\n").replace("\r", "\n").strip()


def format_comment(author: str, created_at: str | None, body: str) -> str:
    date = (created_at or "")[:10] or "unknown date"
    return f"{author} ({date}):\n{body}"


def join_discussion(comments: list[tuple[str, str | None, str]]) -> str:
    return "\n\n".join(format_comment(a, d, b) for a, d, b in comments if b)


def _login(user: Any) -> str:
    # Deleted accounts come back as null users; GitHub shows them as "ghost".
    return (user or {}).get("login") or "ghost"


def rest_issue_to_row(
    issue: dict[str, Any], comments: list[dict[str, Any]], skip_bot_comments: bool = False
) -> dict[str, Any]:
    """A REST `issue` object plus its REST `comment` objects -> one row."""
    owner, name, number, _ = parse_issue_ref(issue["html_url"])
    kept = [
        (_login(c.get("user")), c.get("created_at"), _text(c.get("body")))
        for c in comments
        if not (skip_bot_comments and (c.get("user") or {}).get("type") == "Bot")
    ]
    return {
        "id": issue_id(name, number),
        "repo": f"{owner}/{name}",
        "number": number,
        "url": issue["html_url"],
        "title": _text(issue.get("title")),
        "body": _text(issue.get("body")),
        "discussion": join_discussion(kept),
        "created_at": issue.get("created_at"),
        "state": issue.get("state"),
        "state_reason": issue.get("state_reason"),
        "labels": [lb["name"] if isinstance(lb, dict) else str(lb) for lb in issue.get("labels") or []],
        "closed_at": issue.get("closed_at"),
        "updated_at": issue.get("updated_at"),
        "author": _login(issue.get("user")),
        "source": "github-api",
    }


def gh_cli_issue_to_row(
    item: dict[str, Any], repo: str | None = None, skip_bot_comments: bool = False
) -> dict[str, Any]:
    """One object of `gh issue list/view --json ...` output -> one row.

    gh uses camelCase keys, upper-case states and nests authors as {"login": ...}. The repo comes
    from the issue URL, else from `repo` (an export without `url`).
    """
    number = item.get("number")
    if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
        raise RefError(f"`number` {number!r} is not an integer")
    if item.get("url"):
        owner, name, number, _ = parse_issue_ref(item["url"])
    elif repo and number is not None:
        owner, name = parse_repo(repo)
    else:
        raise RefError(
            "gh export item without `url` (and no --repo given, or no `number`): export with --json url,number,..."
        )
    comments = item.get("comments") or []
    if not isinstance(comments, list):  # `--json comments` gives a list; anything else is a count or garbage
        comments = []
    kept = [
        (_login(c.get("author")), c.get("createdAt"), _text(c.get("body")))
        for c in comments
        if not (
            skip_bot_comments and ((c.get("author") or {}).get("is_bot") or _login(c.get("author")).endswith("[bot]"))
        )
    ]
    state = item.get("state")
    reason = item.get("stateReason")
    return {
        "id": issue_id(name, number),
        "repo": f"{owner}/{name}",
        "number": int(number),
        "url": item.get("url") or f"https://github.com/{owner}/{name}/issues/{number}",
        "title": _text(item.get("title")),
        "body": _text(item.get("body")),
        "discussion": join_discussion(kept),
        "created_at": item.get("createdAt"),
        "state": state.lower() if isinstance(state, str) else state,
        "state_reason": reason.lower() if isinstance(reason, str) and reason else None,
        "labels": [lb["name"] if isinstance(lb, dict) else str(lb) for lb in item.get("labels") or []],
        "closed_at": item.get("closedAt"),
        "updated_at": item.get("updatedAt"),
        "author": _login(item.get("author")) if "author" in item else None,
        "source": "gh-json",
    }
