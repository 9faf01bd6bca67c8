"""A local stand-in for api.github.com, for tests and benchmarks (never the internet).

Serves the REST shapes the fetcher reads: the issues list (pull requests mixed in, with a
`pull_request` key), single issues, issue comments; Link pagination with GitHub's
`/repositories/{id}/...` next URLs; rate-limit headers; weak ETags and 304; 301 for renamed
repositories. Faults are scripted per URL: 5xx, dropped connections, primary and secondary rate
limits. Every request is logged with its arrival time and headers.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

DOCS = "https://docs.github.com/rest"
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID 0C4A:1B2C:3D4E5F:6A7B8C:66F0A1B2."
)


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


@dataclass
class Fault:
    match: str  # regular expression searched in "path?query"
    status: int | None = 502  # None: serve normally, but with `headers` added
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # dict -> JSON, str -> sent as text/html, bytes -> sent as they are
    times: int = 1
    drop: bool = False  # close the connection without answering
    trickle: float = 0.0  # seconds between the bytes of the body (a slow-loris server)
    hits: int = 0

    @classmethod
    def secondary(cls, match: str, retry_after: int | None = 1, times: int = 1) -> Fault:
        headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
        return cls(match, 403, headers, {"message": SECONDARY_MESSAGE, "documentation_url": DOCS + "#secondary"}, times)

    @classmethod
    def primary(cls, match: str, reset: int, status: int = 403, times: int = 1) -> Fault:
        headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset), "x-ratelimit-used": "5000"}
        body = {"message": "API rate limit exceeded for user ID 583231.", "documentation_url": DOCS + "#primary"}
        return cls(match, status, headers, body, times)


@dataclass
class Logged:
    t: float
    path: str  # with query
    headers: dict[str, str]
    status: int = 0


class Repo:
    def __init__(self, rid: int, owner: str, name: str):
        self.id, self.owner, self.name = rid, owner, name
        self.items: dict[int, dict[str, Any]] = {}  # number -> internal issue / PR
        self.comments: dict[int, list[dict[str, Any]]] = {}

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def add_issue(
        self,
        number: int,
        title: str | None = None,
        body: str | None = "",
        *,
        user: str = "reporter",
        labels: tuple[str, ...] = (),
        state: str = "open",
        pull: bool = False,
        created: datetime | None = None,
        comments: list[tuple[str, str]] = (),
    ) -> dict[str, Any]:
        created = created or T0 + timedelta(days=number)
        item = {
            "number": number,
            "title": title if title is not None else f"{'PR' if pull else 'Issue'} {number}: kernel fails",
            "body": body,
            "user": user,
            "labels": list(labels),
            "state": state,
            "pull": pull,
            "created_at": iso(created),
            "updated_at": iso(created),
            "closed_at": iso(created + timedelta(days=3)) if state == "closed" else None,
        }
        self.items[number] = item
        self.comments[number] = []
        for i, (login, text) in enumerate(comments):
            self.add_comment(number, login, text, created + timedelta(hours=i + 1))
        return item

    def add_comment(self, number: int, login: str, body: str, when: datetime | None = None, bot: bool = False) -> None:
        item = self.items[number]
        when = when or datetime.now(timezone.utc)
        cid = number * 1000 + len(self.comments[number]) + 1
        self.comments[number].append({"id": cid, "user": login, "bot": bot, "body": body, "created_at": iso(when)})
        item["updated_at"] = max(item["updated_at"], iso(when))

    # -- GitHub JSON shapes --------------------------------------------------------------------
    def user_json(self, base: str, login: str | None, bot: bool = False) -> dict[str, Any] | None:
        if login is None:
            return None
        return {
            "login": login,
            "id": abs(hash(login)) % 10**7,
            "node_id": "MDQ6VXNlcjE=",
            "url": f"{base}/users/{login}",
            "html_url": f"https://github.com/{login}",
            "type": "Bot" if bot else "User",
            "site_admin": False,
        }

    def issue_json(self, base: str, n: int) -> dict[str, Any]:
        it = self.items[n]
        api = f"{base}/repos/{self.full_name}/issues/{n}"
        web = f"https://github.com/{self.full_name}/{'pull' if it['pull'] else 'issues'}/{n}"
        out = {
            "url": api,
            "repository_url": f"{base}/repos/{self.full_name}",
            "labels_url": api + "/labels{/name}",
            "comments_url": api + "/comments",
            "events_url": api + "/events",
            "html_url": web,
            "id": self.id * 100000 + n,
            "node_id": "I_kwDOAbc",
            "number": n,
            "title": it["title"],
            "user": self.user_json(base, it["user"]),
            "labels": [
                {
                    "id": i + 1,
                    "node_id": "LA_kw",
                    "url": f"{base}/repos/{self.full_name}/labels/{lb}",
                    "name": lb,
                    "color": "d73a4a",
                    "default": False,
                    "description": None,
                }
                for i, lb in enumerate(it["labels"])
            ],
            "state": it["state"],
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": len(self.comments[n]),
            "created_at": it["created_at"],
            "updated_at": it["updated_at"],
            "closed_at": it["closed_at"],
            "author_association": "NONE",
            "active_lock_reason": None,
            "body": it["body"],
            "reactions": {"url": api + "/reactions", "total_count": 0},
            "timeline_url": api + "/timeline",
            "performed_via_github_app": None,
            "state_reason": "completed" if it["state"] == "closed" else None,
        }
        if it["pull"]:
            out["draft"] = False
            out["pull_request"] = {
                "url": f"{base}/repos/{self.full_name}/pulls/{n}",
                "html_url": web,
                "diff_url": web + ".diff",
                "patch_url": web + ".patch",
                "merged_at": None,
            }
        return out

    def comment_json(self, base: str, n: int, c: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"{base}/repos/{self.full_name}/issues/comments/{c['id']}",
            "html_url": f"https://github.com/{self.full_name}/issues/{n}#issuecomment-{c['id']}",
            "issue_url": f"{base}/repos/{self.full_name}/issues/{n}",
            "id": c["id"],
            "node_id": "IC_kw",
            "user": self.user_json(base, c["user"], c["bot"]),
            "created_at": c["created_at"],
            "updated_at": c["created_at"],
            "author_association": "CONTRIBUTOR",
            "body": c["body"],
            "reactions": {"total_count": 0},
            "performed_via_github_app": None,
        }


class LocalGitHub:
    def __init__(self, token: str | None = None, echo_auth_in_errors: bool = False, latency: float = 0.0):
        self.token = token
        self.echo_auth_in_errors = echo_auth_in_errors  # a misbehaving server, to test redaction
        self.latency = latency
        self.repos: dict[str, Repo] = {}
        self.renames: dict[str, str] = {}  # old full name -> current full name
        self.faults: list[Fault] = []
        self.log: list[Logged] = []
        self.remaining = 5000
        self.link_on_304 = True  # whether 304 answers repeat the Link header
        self.bulk_page_cap: int | None = None  # last page served by the repository-wide comments listing
        self.reset = int(time.time()) + 3600
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    # -- setup ---------------------------------------------------------------------------------
    def add_repo(self, full_name: str) -> Repo:
        owner, name = full_name.split("/")
        repo = Repo(1000 + len(self.repos), owner, name)
        self.repos[full_name.lower()] = repo
        return repo

    def start(self) -> LocalGitHub:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> LocalGitHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # -- inspection ----------------------------------------------------------------------------
    def requests_to(self, fragment: str) -> list[Logged]:
        return [r for r in self.log if fragment in r.path]

    def statuses(self) -> list[int]:
        return [r.status for r in self.log]

    # -- routing -------------------------------------------------------------------------------
    def _find(self, key: str) -> Repo | None:
        if key.startswith("#"):
            return next((r for r in self.repos.values() if str(r.id) == key[1:]), None)
        return self.repos.get(key.lower())

    def handle(self, path: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        base = self.base_url
        m = re.fullmatch(
            r"/(?:repos/([\w.-]+/[\w.-]+)|repositories/(\d+))/issues(?:/(\d+|comments))?(/comments)?", path
        )
        if not m or (m.group(3) == "comments" and m.group(4)):
            return 404, {}, {"message": "Not Found", "documentation_url": DOCS}
        full, rid, number, comments = m.groups()
        if full and full.lower() in self.renames:
            # GitHub answers a renamed repository with a 301 to its /repositories/{id} URL.
            repo = self.repos[self.renames[full.lower()].lower()]
            rest = path.split("/issues", 1)[1]
            qs = ("?" + urlencode(query)) if query else ""
            url = f"{base}/repositories/{repo.id}/issues{rest}{qs}"
            return 301, {"location": url}, {"message": "Moved Permanently", "url": url, "documentation_url": DOCS}
        repo = self._find(full if full else "#" + rid)
        if repo is None:
            return 404, {}, {"message": "Not Found", "documentation_url": DOCS}
        if number is None:
            return self._list_issues(repo, query)
        if number == "comments":
            return self._repo_comments(repo, query)
        n = int(number)
        if n not in repo.items:
            return 404, {}, {"message": "Not Found", "documentation_url": DOCS}
        if comments:
            items = [repo.comment_json(base, n, c) for c in repo.comments[n]]
            return self._paginate(items, query, f"/repositories/{repo.id}/issues/{n}/comments")
        return 200, {}, repo.issue_json(base, n)

    def _list_issues(self, repo: Repo, query: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        state = query.get("state", "open")
        since = query.get("since")
        key = "updated_at" if query.get("sort") == "updated" else "created_at"
        items = [it for it in repo.items.values() if state == "all" or it["state"] == state]
        if since:
            items = [it for it in items if it["updated_at"] >= since]
        items.sort(key=lambda it: (it[key], it["number"]), reverse=query.get("direction", "desc") == "desc")
        return self._paginate(
            [repo.issue_json(self.base_url, it["number"]) for it in items], query, f"/repositories/{repo.id}/issues"
        )

    def _repo_comments(self, repo: Repo, query: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        """GET /repos/{o}/{n}/issues/comments: comments of all issues and PRs (default sort created asc)."""
        rows = [(c, n) for n, cs in repo.comments.items() for c in cs]
        if query.get("since"):
            rows = [(c, n) for c, n in rows if c["created_at"] >= query["since"]]
        rows.sort(key=lambda cn: (cn[0]["created_at"], cn[0]["id"]), reverse=query.get("direction", "asc") == "desc")
        items = [repo.comment_json(self.base_url, n, c) for c, n in rows]
        return self._paginate(items, query, f"/repositories/{repo.id}/issues/comments", cap=self.bulk_page_cap)

    def _paginate(
        self, items: list, query: dict[str, str], link_path: str, cap: int | None = None
    ) -> tuple[int, dict[str, str], Any]:
        per_page = min(int(query.get("per_page", 30)), 100)
        page = int(query.get("page", 1))
        last = max(1, -(-len(items) // per_page))
        if cap:  # some GitHub listings stop paginating after a number of pages
            last = min(last, cap)
            if page > cap:
                items = []
        chunk = items[(page - 1) * per_page : page * per_page]

        def link(p: int) -> str:
            return f"<{self.base_url}{link_path}?{urlencode({**query, 'page': p})}>"

        rels = []
        if page > 1:
            rels += [f'{link(page - 1)}; rel="prev"']
        if page < last:
            rels += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
        if page > 1:
            rels += [f'{link(1)}; rel="first"']
        return 200, ({"link": ", ".join(rels)} if rels else {}), chunk


def _make_handler(gh: LocalGitHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: without this, Nagle + delayed ACK add ~40 ms each.
        disable_nagle_algorithm = True

        def log_message(self, *args) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            entry = Logged(time.time(), self.path, {k.lower(): v for k, v in self.headers.items()})
            with gh._lock:
                gh.log.append(entry)
            if gh.latency:
                time.sleep(gh.latency)
            u = urlsplit(self.path)
            query = dict(parse_qsl(u.query))
            auth = entry.headers.get("authorization")
            if gh.token is not None and auth != f"Bearer {gh.token}":
                msg = "Bad credentials" + (f" (got {auth})" if gh.echo_auth_in_errors else "")
                return self._send(entry, 401, {}, {"message": msg, "documentation_url": DOCS})
            extra_headers: dict[str, str] = {}
            with gh._lock:
                fault = next((f for f in gh.faults if f.times > 0 and re.search(f.match, self.path)), None)
                if fault:
                    fault.times -= 1
                    fault.hits += 1
            if fault and fault.drop:
                entry.status = -1
                self.close_connection = True
                return
            if fault and fault.status is not None:
                return self._send(entry, fault.status, fault.headers, fault.body, trickle=fault.trickle)
            if fault:
                extra_headers = fault.headers
            with gh._lock:
                status, headers, body = gh.handle(u.path, query, entry.headers)
            self._send(entry, status, {**headers, **extra_headers}, body, conditional=True)

        def _send(
            self,
            entry: Logged,
            status: int,
            headers: dict[str, str],
            body: Any,
            conditional: bool = False,
            trickle: float = 0.0,
        ) -> None:
            if isinstance(body, bytes):  # sent as given (with a content-encoding header: compressed)
                payload, ctype = body, "application/json"
            elif isinstance(body, str):
                payload, ctype = body.encode(), "text/html; charset=utf-8"
            else:
                payload, ctype = json.dumps(body).encode(), "application/json; charset=utf-8"
            hdrs = {
                "x-ratelimit-limit": "5000",
                "x-ratelimit-remaining": str(gh.remaining),
                "x-ratelimit-reset": str(gh.reset),
                "x-ratelimit-used": str(5000 - gh.remaining),
                "x-ratelimit-resource": "core",
                "x-github-api-version-selected": "2022-11-28",
            }
            etag = None
            if conditional and status == 200:
                etag = 'W/"' + hashlib.sha256(payload).hexdigest() + '"'
                hdrs["etag"] = etag
                if entry.headers.get("if-none-match") == etag:
                    status = 304  # a 304 does not count against the rate limit
            if status != 304:
                with gh._lock:
                    gh.remaining = max(0, gh.remaining - 1)
            hdrs.update({k.lower(): v for k, v in headers.items()})
            entry.status = status
            self.send_response(status)
            if status == 304:
                if not gh.link_on_304:
                    hdrs.pop("link", None)
                for k, v in hdrs.items():
                    self.send_header(k, v)
                self.end_headers()
                return
            for k, v in hdrs.items():
                self.send_header(k, v)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            if not trickle:
                self.wfile.write(payload)
                return
            try:
                for i in range(len(payload)):
                    self.wfile.write(payload[i : i + 1])
                    self.wfile.flush()
                    time.sleep(trickle)
            except OSError:  # the client gave up and closed the connection
                self.close_connection = True

    return Handler
