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
from classify.core.records import kind_of

# https://github.com/o/n/issues/1, .../pull/1 (any host: GitHub Enterprise too), api URLs, and o/n#1.
_WEB_URL = re.compile(r"^https?://[^/\s]+/(?:repos/)?([\w.-]+)/([\w.-]+)/(issues|pull|pulls)/(\d+)/?(?:[?#].*)?$")
_SHORT_REF = re.compile(r"^([\w.-]+)/([\w.-]+)#(\d+)$")
_REPO = re.compile(r"^([\w.-]+)/([\w.-]+)$")


class RefError(ClassifyError, ValueError):
    pass


def _names(owner: str, name: str, text: str) -> tuple[str, str]:
    # `..` and `.` match the name pattern, but would make a request path step up (`/repos/a/..`).
    if set(owner) <= {"."} or set(name) <= {"."}:
        raise RefError(f"not a repository: {text!r} (expected OWNER/NAME)")
    return owner, name


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
    return _names(m.group(1), m.group(2), text)


def parse_issue_ref(text: str) -> tuple[str, str, int, bool]:
    """An issue URL or `owner/name#N` -> (owner, name, number, is_pull_request_url)."""
    s = text.strip()
    m = _WEB_URL.match(s)
    if m:
        return (*_names(m.group(1), m.group(2), text), int(m.group(4)), m.group(3) != "issues")
    m = _SHORT_REF.match(s)
    if m:
        return (*_names(m.group(1), m.group(2), text), int(m.group(3)), False)
    raise RefError(f"not an issue URL: {text!r} (expected https://github.com/OWNER/NAME/issues/N or OWNER/NAME#N)")


def _text(v: Any, what: str) -> str:
    """A text field; anything else is refused by name (`str()` would make `{'a': 1}` a title)."""
    if v is None:
        return ""
    if not isinstance(v, str):
        raise RefError(f"{what} is {kind_of(v)}, not text")
    # GitHub bodies carry Windows line ends; one convention keeps text hashes (caches) stable.
    return v.replace("\r\n", "\n").replace("\r", "\n").strip()


def _optional_text(item: dict[str, Any], key: str) -> str | None:
    """A field that is text or absent (timestamps, state)."""
    v = item.get(key)
    if v is not None and not isinstance(v, str):
        raise RefError(f"{key} is {kind_of(v)}, not text")
    return v


def _labels(v: Any) -> list[str]:
    """Label names from a list of label objects (REST, gh) or names; `"bug"` is not ["b", "u", "g"]."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise RefError(f"labels is {'text' if isinstance(v, str) else kind_of(v)}, not a list")
    out = []
    for i, lb in enumerate(v, 1):
        name = lb.get("name") if isinstance(lb, dict) else lb
        if not isinstance(name, str):
            raise RefError(f"label {i} is {kind_of(lb)}, not a label name or object")
        out.append(name)
    return out


def format_comment(author: str, created_at: str | None, body: str) -> str:
    date = (created_at or "")[:10] or "unknown date"
    return f"{author} ({date}):\n{body}"


def join_discussion(comments: list[tuple[str, str | None, str]]) -> str:
    return "\n\n".join(format_comment(a, d, b) for a, d, b in comments if b)


def _login(user: Any) -> str:
    # Deleted accounts come back as null users; GitHub shows them as "ghost".
    if user is None:
        return "ghost"
    if not isinstance(user, dict) or not isinstance(user.get("login"), (str, type(None))):
        raise RefError(f"user {str(user)[:60]!r} is not a user object with a login name")
    return user.get("login") or "ghost"


def _is_bot(user: Any, key: str) -> bool:
    return isinstance(user, dict) and bool(user.get(key))


def rest_issue_to_row(
    issue: dict[str, Any], comments: list[dict[str, Any]], skip_bot_comments: bool = False
) -> dict[str, Any]:
    """A REST `issue` object plus its REST `comment` objects -> one row."""
    owner, name, number, _ = parse_issue_ref(issue["html_url"])
    kept = [
        (_login(c.get("user")), _optional_text(c, "created_at"), _text(c.get("body"), f"comment {i} body"))
        for i, c in enumerate(comments, 1)
        if not (skip_bot_comments and isinstance(c.get("user"), dict) and c["user"].get("type") == "Bot")
    ]
    return {
        "id": issue_id(name, number),
        "repo": f"{owner}/{name}",
        "number": number,
        "url": issue["html_url"],
        "title": _text(issue.get("title"), "title"),
        "body": _text(issue.get("body"), "body"),
        "discussion": join_discussion(kept),
        "created_at": _optional_text(issue, "created_at"),
        "state": _optional_text(issue, "state"),
        "state_reason": _optional_text(issue, "state_reason"),
        "labels": _labels(issue.get("labels")),
        "closed_at": _optional_text(issue, "closed_at"),
        "updated_at": _optional_text(issue, "updated_at"),
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
        owner, name, number, _ = parse_issue_ref(_text(item["url"], "url"))
    elif repo and number is not None:
        owner, name = parse_repo(repo)
    else:
        raise RefError(
            "gh export item without `url` (and no --repo given, or no `number`): export with --json url,number,..."
        )
    comments = item.get("comments") or []
    if not isinstance(comments, list):  # `--json comments` gives a list; anything else is a count or garbage
        comments = []
    if not all(isinstance(c, dict) for c in comments):
        raise RefError("comments holds something other than comment objects")
    kept = [
        (_login(c.get("author")), _optional_text(c, "createdAt"), _text(c.get("body"), f"comment {i} body"))
        for i, c in enumerate(comments, 1)
        if not (skip_bot_comments and (_is_bot(c.get("author"), "is_bot") or _login(c.get("author")).endswith("[bot]")))
    ]
    state = _optional_text(item, "state")
    reason = _optional_text(item, "stateReason")
    return {
        "id": issue_id(name, number),
        "repo": f"{owner}/{name}",
        "number": int(number),
        "url": item.get("url") or f"https://github.com/{owner}/{name}/issues/{number}",
        "title": _text(item.get("title"), "title"),
        "body": _text(item.get("body"), "body"),
        "discussion": join_discussion(kept),
        "created_at": _optional_text(item, "createdAt"),
        "state": state.lower() if state else state,
        "state_reason": reason.lower() if reason else None,
        "labels": _labels(item.get("labels")),
        "closed_at": _optional_text(item, "closedAt"),
        "updated_at": _optional_text(item, "updatedAt"),
        "author": _login(item.get("author")) if "author" in item else None,
        "source": "gh-json",
    }
