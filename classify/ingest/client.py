"""A small GitHub REST client: auth, pagination, rate limits, retries, conditional requests.

Rate limits follow GitHub's documented rules: on 403/429, wait as `Retry-After` says if given
(seconds or an HTTP date);
else if `X-RateLimit-Remaining` is 0, wait until `X-RateLimit-Reset`; else, if the message says
"rate limit" (a secondary limit), wait a minute, doubling on each repeat. Any wait longer than
`max_wait` stops with RateLimitError instead of retrying early. A successful response
with Remaining 0 makes the next request wait for the reset too. 5xx answers and connection errors
are retried with exponential backoff. The token is sent only to the API origin and never appears
in messages (any echo of it is redacted).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from classify.core.errors import ClassifyError
from classify.core.http import redact, retry_after_seconds
from classify.core.jsontext import MAX_JSON_DEPTH, loads, too_deep_at
from classify.ingest import deadline
from classify.ingest.cache import ResponseCache

DEFAULT_API_URL = "https://api.github.com"
MAX_PAGES = 10_000  # pages of one listing: a million issues at 100 a page, more than any repository has
NO_PROGRESS_PAGES = 3  # pages in a row with no new item (empty or repeated) before pagination is stopped
API_VERSION = "2022-11-28"
# A page of 100 issues with GitHub's largest bodies (65,536 characters) is ~30 MB.
MAX_ANSWER_BYTES = 64_000_000
# A wait a server demands beyond this is shown as this (a Retry-After of 1e308 seconds is no
# figure to print); any such wait is far past --max-wait and stops the run anyway.
MAX_SERVER_WAIT = 7 * 86400.0
log = logging.getLogger("classify.fetch")


class FetchError(ClassifyError, RuntimeError):
    """A request failed for good. The message names the URL and GitHub's reason, never the token."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class RateLimitError(FetchError):
    """The rate limit needs a longer wait than allowed (RetryPolicy.max_wait)."""


class _Retryable(FetchError):
    def __init__(self, message: str, status: int | None = None, wait: float | None = None, kind: str = "error"):
        super().__init__(message, status)
        self.wait = wait  # seconds demanded by the server; None = use backoff
        self.kind = kind  # "error" (5xx/connection), "rate_limit", "secondary"


@dataclass
class RetryPolicy:
    """Retry and wait bounds; tests shrink them, real runs keep GitHub's recommendations."""

    max_attempts: int = 6  # per request, rate-limit waits included
    backoff_initial: float = 1.0  # 5xx / connection errors: 1, 2, 4, ... seconds
    backoff_max: float = 60.0
    secondary_wait: float = 60.0  # secondary limit without Retry-After: GitHub says wait >= 1 minute
    max_wait: float = 3900.0  # a single demanded wait above this aborts with RateLimitError
    reset_margin: float = 1.0  # extra seconds after X-RateLimit-Reset
    timeout: float = 30.0  # per socket operation (connect, each read)
    deadline: float = 120.0  # per attempt, from sending to the last byte; retried like a timeout


@dataclass
class FetchStats:
    requests: int = 0  # HTTP attempts sent
    not_modified: int = 0  # 304 answers served from the ETag cache
    retries: int = 0
    rate_limit_waits: int = 0  # retries and pauses caused by rate limits
    waited_seconds: float = 0.0
    statuses: dict[int, int] = field(default_factory=dict)

    def summary(self) -> str:
        return (
            f"{self.requests} requests, {self.not_modified} not modified (304), {self.retries} retries, "
            f"{self.rate_limit_waits} rate-limit waits ({self.waited_seconds:.1f}s waited)"
        )


@dataclass
class Page:
    data: Any
    next_url: str | None
    cached: bool  # True when a 304 let us reuse the stored body
    url: str = ""  # the URL this page came from, for messages about its content
    redirected: bool = False  # the server answered through a redirect (a renamed repository)


def token_from_env() -> str | None:
    return os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN") or None


def _origin(url: str) -> tuple[str, str, int | None]:
    u = urlsplit(url)
    try:
        port = u.port or {"https": 443, "http": 80}.get(u.scheme)
    except ValueError:  # a port out of range in a Link header: no origin of ours
        port = -1
    return (u.scheme, (u.hostname or "").lower(), port)


class GitHubClient:
    def __init__(
        self,
        token: str | None = None,
        base_url: str | None = None,
        cache: ResponseCache | None = None,
        policy: RetryPolicy | None = None,
    ):
        self.base_url = (base_url or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")
        if urlsplit(self.base_url).scheme not in ("http", "https"):
            raise FetchError(f"base URL must start with http:// or https://, got {self.base_url!r}")
        self.cache = cache
        self.policy = policy or RetryPolicy()
        self.stats = FetchStats()
        self._token = token or None
        self._blocked_until = 0.0  # local time before which no request may be sent (primary limit)
        self._secondary_hits = 0  # secondary limits in a row without a Retry-After: the wait doubles each time
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "classify-fetch",
        }
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        # httpx drops Authorization when a redirect leaves the origin (renamed repos redirect in-origin).
        self._http = httpx.Client(headers=headers, timeout=self.policy.timeout, follow_redirects=True)
        self._budget = deadline.Budget()
        deadline.install(self._http, self._budget)

    def __repr__(self) -> str:
        return f"GitHubClient(base_url={self.base_url!r}, authenticated={bool(self._token)})"

    @property
    def authenticated(self) -> bool:
        return bool(self._token)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- URLs -----------------------------------------------------------------------------------
    def url(self, path: str, params: dict[str, Any] | None = None) -> str:
        """Absolute URL for an API path; parameter order is kept so ETag keys are stable."""
        u = httpx.URL(self.base_url + "/" + path.lstrip("/"))
        if params:
            u = u.copy_merge_params({k: str(v) for k, v in params.items() if v is not None})
        return str(u)

    def _check_origin(self, url: str) -> None:
        if _origin(url) != _origin(self.base_url):
            raise FetchError(
                f"refusing to request {url}: not on {self.base_url} (the token is only sent to the API host)"
            )

    def redact(self, text: str) -> str:
        # keylike=False: these messages carry repository URLs, and a name like `keystone-auth`
        # would look like a key to the broad pattern.
        return redact(text, [self._token], keylike=False)

    # -- requests -------------------------------------------------------------------------------
    def get_json(self, url: str) -> Page:
        """GET one URL with retries; 304 answers come back from the ETag cache."""
        self._check_origin(url)
        cached = self.cache.get(url) if self.cache is not None else None
        retrying = Retrying(
            stop=stop_after_attempt(self.policy.max_attempts),
            wait=self._wait,
            retry=retry_if_exception_type(_Retryable),
            before_sleep=self._before_sleep,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._get_once(url, cached)
        except _Retryable as e:
            raise FetchError(f"{e} (gave up after {self.policy.max_attempts} attempts)", e.status) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def paginate(
        self, path_or_url: str, params: dict[str, Any] | None = None, *, max_pages: int = MAX_PAGES
    ) -> Iterator[Page]:
        """Yield pages of a list endpoint, following Link rel="next" until it ends.

        A server that keeps sending new `next` links is stopped: after `max_pages` pages, or after
        NO_PROGRESS_PAGES pages in a row that bring no item not seen before (empty pages, or repeats).
        """
        url: str | None = path_or_url if "://" in path_or_url else self.url(path_or_url, params)
        seen_urls: set[str] = set()
        seen_items: set[str] = set()
        idle = 0
        while url:
            if url in seen_urls:
                raise FetchError(f"pagination loops back to {url}")
            if len(seen_urls) >= max_pages:
                raise FetchError(f"pagination did not end after {max_pages} pages (last next link: {url})")
            seen_urls.add(url)
            page = self.get_json(url)
            if not isinstance(page.data, list):
                raise FetchError(f"GET {url}: expected a JSON list, got {type(page.data).__name__}")
            keys = {_item_key(x) for x in page.data}
            idle = 0 if keys - seen_items else idle + 1
            seen_items |= keys
            if idle >= NO_PROGRESS_PAGES and page.next_url:
                raise FetchError(
                    f"pagination makes no progress: {idle} pages in a row brought no new item, yet the server "
                    f"keeps sending next links (last: {page.next_url})"
                )
            yield page
            url = page.next_url

    def _send(self, url: str, headers: dict[str, str]) -> tuple[httpx.Response, str]:
        """One GET within the policy's total deadline; the response and its body as text, which may
        not pass MAX_ANSWER_BYTES once decompressed (a gzip bomb is small on the wire)."""
        self._budget.start(self.policy.deadline)
        try:
            with self._http.stream("GET", url, headers=headers) as r:
                body, size = [], 0
                for chunk in r.iter_bytes():
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise FetchError(
                            f"GET {url}: the answer is larger than {MAX_ANSWER_BYTES / 1e6:.0f} MB; "
                            "no GitHub answer is that large"
                        )
                    body.append(chunk)
            return r, b"".join(body).decode(r.encoding or "utf-8", errors="replace")
        except httpx.TooManyRedirects:
            raise FetchError(f"GET {url}: the server redirects in a loop (more than 20 redirects)") from None
        except httpx.TransportError as e:
            if self._budget.expired():
                raise _Retryable(
                    f"GET {url}: no complete answer within {self.policy.deadline:.0f}s (the server sends too slowly)"
                ) from None
            raise _Retryable(self.redact(f"GET {url}: connection failed: {type(e).__name__}: {e}")) from None
        except httpx.DecodingError as e:
            raise _Retryable(self.redact(f"GET {url}: undecodable answer: {e}")) from None
        except (httpx.HTTPError, httpx.InvalidURL, LookupError) as e:  # a bad Location header, unknown charset
            raise FetchError(self.redact(f"GET {url}: {type(e).__name__}: {e}")) from None
        finally:
            self._budget.stop()
            self.stats.requests += 1

    def _get_once(self, url: str, cached) -> Page:
        self._wait_for_reset()
        headers = {"If-None-Match": cached.etag} if cached is not None else {}
        r, text = self._send(url, headers)
        self.stats.statuses[r.status_code] = self.stats.statuses.get(r.status_code, 0) + 1
        self._note_rate_limit(r)
        if r.status_code == 304:
            if cached is None:
                raise FetchError(f"GET {url}: 304 Not Modified without a conditional request", 304)
            self.stats.not_modified += 1
            self._secondary_hits = 0
            if "link" in r.headers:
                nxt = r.links.get("next", {}).get("url")
                if nxt != cached.next_url and self.cache is not None:
                    self.cache.put(url, cached.etag, cached.data, nxt)
                return Page(cached.data, nxt, True, url)
            if cached.next_url is None and _full_page(url, cached.data):
                # The ETag covers the body only: a full last page stays 304 when new items start
                # a next page. Without a Link header to tell, ask for it in full once.
                return self._get_once(url, None)
            return Page(cached.data, cached.next_url, True, url)
        if r.status_code == 200:
            if too_deep_at(text) is not None:
                raise FetchError(f"GET {url}: the answer's JSON is nested deeper than {MAX_JSON_DEPTH} levels", 200)
            try:
                data = loads(text)
            except ValueError:
                raise _Retryable(f"GET {url}: truncated or non-JSON body", 200) from None
            self._secondary_hits = 0
            nxt = r.links.get("next", {}).get("url")
            etag = r.headers.get("etag")
            if self.cache is not None and etag:
                self.cache.put(url, etag, data, nxt)
            return Page(data, nxt, False, url, redirected=bool(r.history))
        if r.status_code in (403, 429):
            wait, kind = self._rate_limit_wait(r, text)
            if kind is not None:
                msg = self._describe(url, r, text)
                if kind == "secondary" and wait is None:
                    # GitHub: wait at least a minute, longer on each repeat. A wait past --max-wait
                    # stops the run like any other rate limit, instead of retrying early.
                    wait = self.policy.secondary_wait * 2**self._secondary_hits
                    self._secondary_hits += 1
                if wait is not None and wait > self.policy.max_wait:
                    raise RateLimitError(
                        f"{msg}; the limit lifts in {_duration(wait)}, more than the allowed wait of "
                        f"{self.policy.max_wait:.0f}s; run again later (fetched pages stay in the ETag cache)",
                        r.status_code,
                    )
                raise _Retryable(msg, r.status_code, wait=wait, kind=kind)
        if r.status_code >= 500:
            raise _Retryable(self._describe(url, r, text), r.status_code)
        raise FetchError(self._describe(url, r, text), r.status_code)

    # -- rate limits ----------------------------------------------------------------------------
    def _seconds_until_reset(self, r: httpx.Response) -> float | None:
        reset = r.headers.get("x-ratelimit-reset")
        if not reset or not reset.isdigit():
            return None
        if len(reset) > 12:  # beyond year 33000: no clock to subtract (and too large for a float)
            return MAX_SERVER_WAIT
        now = time.time()
        # The server's clock (Date header) decides; it is truncated to the second, so we err late.
        date = r.headers.get("date")
        if date:
            try:
                now = parsedate_to_datetime(date).timestamp()
            except (TypeError, ValueError):
                pass
        return min(max(0.0, int(reset) - now) + self.policy.reset_margin, MAX_SERVER_WAIT)

    def _rate_limit_wait(self, r: httpx.Response, text: str) -> tuple[float | None, str | None]:
        """(seconds to wait or None for backoff, kind) for a 403/429; kind None = not a rate limit."""
        retry_after = retry_after_seconds(r.headers)  # seconds or an HTTP date
        if retry_after is not None:
            return min(retry_after, MAX_SERVER_WAIT), "rate_limit"
        if r.headers.get("x-ratelimit-remaining") == "0":
            wait = self._seconds_until_reset(r)
            if wait is not None:
                return wait, "rate_limit"
        if "rate limit" in _message(text).lower():
            return None, "secondary"
        return None, None

    def _note_rate_limit(self, r: httpx.Response) -> None:
        if r.headers.get("x-ratelimit-remaining") == "0":
            wait = self._seconds_until_reset(r)
            if wait is not None:
                self._blocked_until = max(self._blocked_until, time.time() + wait)

    def _wait_for_reset(self) -> None:
        wait = self._blocked_until - time.time()
        if wait <= 0:
            return
        if wait > self.policy.max_wait:
            raise RateLimitError(
                f"rate limit exhausted; it resets in {_duration(wait)}, more than the allowed wait of "
                f"{self.policy.max_wait:.0f}s; run again later (fetched pages stay in the ETag cache)"
            )
        log.warning("rate limit exhausted: waiting %.1fs for the reset", wait)
        self.stats.rate_limit_waits += 1
        self._sleep(wait)

    # -- tenacity hooks -------------------------------------------------------------------------
    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        n = state.attempt_number
        p = self.policy
        if isinstance(exc, _Retryable) and exc.wait is not None:
            return exc.wait
        return min(p.backoff_initial * 2 ** (n - 1), p.backoff_max)

    def _before_sleep(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        self.stats.retries += 1
        if isinstance(exc, _Retryable) and exc.kind != "error":
            self.stats.rate_limit_waits += 1
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "%s; retrying in %.1fs (attempt %d of %d)", exc, wait, state.attempt_number + 1, self.policy.max_attempts
        )

    def _sleep(self, seconds: float) -> None:
        self.stats.waited_seconds += seconds
        time.sleep(seconds)

    def _describe(self, url: str, r: httpx.Response, text: str) -> str:
        msg = _message(text)
        hint = {
            401: " (bad credentials: check GITHUB_TOKEN)",
            404: " (no such issue or repository, or the token cannot see it)",
            410: " (the issue was deleted)",
        }.get(r.status_code, "")
        return self.redact(f"GET {url}: HTTP {r.status_code}{': ' + msg if msg else ''}{hint}")


def _item_key(item: Any) -> str:
    """What tells two listed items apart: GitHub's own id, else the item itself."""
    if isinstance(item, dict) and item.get("id") is not None:
        return f"id:{item['id']}"
    return "json:" + repr(item)


def _full_page(url: str, data: Any) -> bool:
    per_page = httpx.URL(url).params.get("per_page") or "30"  # GitHub's default page size
    return isinstance(data, list) and per_page.isdigit() and len(data) >= int(per_page)


def _duration(seconds: float) -> str:
    """A wait as people read it; MAX_SERVER_WAIT (where demanded waits are capped) says so."""
    if seconds >= MAX_SERVER_WAIT:
        return f"{MAX_SERVER_WAIT / 86400:.0f} days or more (the server's figure, capped)"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds:.0f}s"


def _message(text: str) -> str:
    try:
        body = loads(text)
    except ValueError:
        return text[:200].strip()
    return str(body.get("message", ""))[:300] if isinstance(body, dict) else ""
