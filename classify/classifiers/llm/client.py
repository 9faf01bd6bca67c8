"""Async chat-completion client: bounded concurrency, retries, response cache, request log.

Retries (tenacity): exponential backoff with jitter on 429, 408/409, 5xx, timeouts, connection
errors and malformed response bodies; a Retry-After header (seconds or HTTP date) sets the wait.
No retry on 401/403/404 (LLMError: the run cannot succeed) nor on other 4xx (RequestFailed: this
one request cannot succeed). When a server refuses the structured-output style, the client steps
down json_schema -> json_object -> none once, for the rest of the run.

Several base URLs are one server to the run (pool.py): each request goes to the least busy one,
and a retry after a server's own failure goes at once to another. Self-consistency samples are
asked in one request with `n` where the server returns n choices; where it ignores or refuses
`n` (llama-cpp-python's server ignores it) they are asked one by one (found once per server).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from classify.classifiers.llm.answer import response_format
from classify.classifiers.llm.bounded import AnswerTooLarge, BoundedTransport
from classify.classifiers.llm.cache import LLMStore, request_key
from classify.classifiers.llm.endpoint import STRUCTURED_STYLES, Endpoint
from classify.classifiers.llm.pool import EndpointPool, Route
from classify.classifiers.llm.response import ChatResult, MalformedResponse, read_response, sanitize
from classify.core.errors import ClassifyError
from classify.core.http import redact, redact_url, retry_after_seconds, url_secrets

__all__ = ["Backoff", "ChatClient", "ChatResult", "ClientStats", "LLMError", "RequestFailed"]

TOTAL_DEADLINE = 2.0  # a request's whole answer must come within this many --timeout's
MAX_RETRY_AFTER = 120.0  # seconds; a server asking for longer gets this and another try
_NO_KEY = "not-needed"  # what the openai client is given when the server needs no key
_N_REFUSED = re.compile(r"\bn\b|'n'|\"n\"|\bchoices\b")


class LLMError(ClassifyError, RuntimeError):
    """The endpoint cannot serve this run (bad key, unknown model or URL). Never retried."""


class RequestFailed(Exception):
    """One request failed for good (retries exhausted, or a 4xx that retrying cannot fix)."""


class _Transient(Exception):
    def __init__(self, msg: str, status: int | None = None, retry_after: float | None = None, failover: bool = False):
        super().__init__(msg)
        self.status = status
        self.retry_after = retry_after
        self.failover = failover  # another server is up: retry there at once


class _FormatRejected(Exception):
    pass


@dataclass
class Backoff:
    """Waits between attempts. Tests pass a `sleep` that records instead of sleeping."""

    multiplier: float = 0.5
    max: float = 30.0
    jitter: float = 0.5
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Transient) and exc.failover:
            return 0.0
        if isinstance(exc, _Transient) and exc.retry_after is not None:
            ra = min(exc.retry_after, MAX_RETRY_AFTER)
            return ra + random.uniform(0, 0.05 + 0.1 * ra)  # honour it, and do not stampede back at once
        return wait_exponential_jitter(multiplier=self.multiplier, max=self.max, jitter=self.jitter)(state)


@dataclass
class ClientStats:
    requests: int = 0  # HTTP attempts sent
    cache_hits: int = 0
    retries: int = 0  # attempts beyond the first, over all requests
    failed: int = 0  # requests given up (RequestFailed)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    fallbacks: list[str] = field(default_factory=list)  # structured-output styles abandoned, servers taken out

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _error_message(e: Exception) -> str:
    msg = getattr(e, "message", None) or str(e)
    body = getattr(e, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"] not in msg:
        msg = f"{msg}: {body['message']}"
    return msg


def _split_query(url: str) -> tuple[str, dict[str, str]]:
    """A base URL without its query, and the query (a gateway's key) to send with every request."""
    u = urlsplit(url)
    return urlunsplit((u.scheme, u.netloc, u.path, "", "")), dict(parse_qsl(u.query))


class ChatClient:
    """Use as `async with ChatClient(...) as c: await c.complete(...)`."""

    def __init__(
        self,
        endpoint: Endpoint,
        store: LLMStore | None = None,
        *,
        concurrency: int = 4,
        max_retries: int = 6,
        use_cache: bool = True,
        run_id: str | None = None,
        backoff: Backoff | None = None,
        defer: bool = False,
    ):
        self.endpoint = endpoint
        # defer: send nothing; a request the cache cannot answer is noted in `deferred` (for a
        # batch) and fails as RequestFailed
        self.defer = defer
        self.deferred: dict[str, dict[str, Any]] = {}
        self.store = store
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.use_cache = use_cache
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.backoff = backoff or Backoff()
        self.style = endpoint.structured  # may step down on refusal
        self.logprobs = endpoint.logprobs
        self.stats = ClientStats()
        self._key: str | None = None
        self._secrets: list[str] = []
        self._sem: asyncio.Semaphore | None = None
        self.pool: EndpointPool | None = None
        self._inflight: dict[str, asyncio.Future] = {}

    async def __aenter__(self) -> ChatClient:
        self._key = self.endpoint.api_key()
        routes = []
        for url in self.endpoint.urls:
            base, query = _split_query(url)
            client = openai.AsyncOpenAI(
                api_key=self._key,
                base_url=base,
                default_query=query or None,
                max_retries=0,
                timeout=self.endpoint.timeout,
                http_client=openai.DefaultAsyncHttpxClient(transport=BoundedTransport()),
            )
            name = self.endpoint.identity or redact_url(url) or url
            routes.append(Route(name, client, self.endpoint.model))
            self._secrets += url_secrets(url)
        if self._key != _NO_KEY:
            self._secrets.append(self._key)
        self.pool = EndpointPool(routes, on_out=self.stats.fallbacks.append)
        self._sem = asyncio.Semaphore(self.concurrency)
        return self

    async def __aexit__(self, *exc) -> None:
        if self.pool is not None:
            for r in self.pool.routes:
                await r.client.close()
        self.pool = None

    def cache_key(self, messages: list[dict], params: dict[str, Any], schema: dict | None) -> str:
        # Keyed on the configured structured style, not the one in effect after a fallback, so a
        # re-run finds its answers without first re-discovering what the server refuses.
        kp = {**params, "structured": self.endpoint.structured, "schema": schema, "logprobs": self.endpoint.logprobs}
        return request_key(self.endpoint.cache_identity, self.endpoint.model, messages, kp)

    def cached(self, messages: list[dict], params: dict[str, Any], schema: dict | None) -> bool:
        return bool(self.store and self.use_cache and self.store.has(self.cache_key(messages, params, schema)))

    def _from_cache(self, key: str, max_tokens: int | None) -> ChatResult | None:
        if not (self.store and self.use_cache):
            return None
        hit = self.store.get(key)
        if hit is None:
            return None
        try:
            res = ChatResult.from_json(hit, cached=True)
        except ValueError:
            return None  # not a row this version can read: ask again, and the answer replaces it
        self.stats.cache_hits += 1
        return sanitize(res, max_tokens, self._secrets)

    async def complete(
        self, messages: list[dict], params: dict[str, Any], schema: dict | None = None, record_id: str | None = None
    ) -> ChatResult:
        """One chat completion (from the cache when possible). Raises RequestFailed or LLMError."""
        key = self.cache_key(messages, params, schema)
        return (await self._fetch([key], messages, params, schema, record_id))[0]

    async def complete_samples(
        self,
        messages: list[dict],
        params: list[dict[str, Any]],
        schema: dict | None = None,
        record_id: str | None = None,
    ) -> list[ChatResult | RequestFailed]:
        """One result per sampling parameter set (each cached under its own key, so a re-run finds
        them however they were asked): in one request with `n` where the server honours it, the
        rest one by one. A sample that failed for good is its RequestFailed. Raises LLMError."""
        keys = [self.cache_key(messages, p, schema) for p in params]
        out: list[ChatResult | RequestFailed | None] = [
            self._from_cache(k, p.get("max_tokens")) for k, p in zip(keys, params)
        ]
        todo = [i for i, r in enumerate(out) if r is None]
        if len(todo) > 1 and not self.defer and any(r.n_support is not False for r in self._routes()):
            first = params[todo[0]]
            try:
                got = await self._fetch(
                    [keys[i] for i in todo], messages, first, schema, record_id, n=len(todo), cache=False
                )
            except RequestFailed as e:
                for i in todo:  # the same request one by one would fail the same way
                    out[i] = e
                return out  # type: ignore[return-value]
            for i, r in zip(todo, got):
                out[i] = r
            todo = todo[len(got) :]

        async def one(i: int) -> None:
            try:
                out[i] = await self.complete(messages, params[i], schema, record_id)
            except RequestFailed as e:
                out[i] = e

        await asyncio.gather(*(one(i) for i in todo))
        return [r for r in out if r is not None]

    def _routes(self) -> list[Route]:
        return self.pool.routes if self.pool else []

    async def _fetch(
        self,
        keys: list[str],
        messages: list[dict],
        params: dict[str, Any],
        schema: dict | None,
        record_id: str | None,
        n: int = 1,
        cache: bool = True,
    ) -> list[ChatResult]:
        """Up to len(keys) answers to one request (n > 1: as many choices as the server gave)."""
        if cache:
            hit = self._from_cache(keys[0], params.get("max_tokens"))
            if hit is not None:
                return [hit]
        if self.defer:
            self.deferred[keys[0]] = {"body": self.body(messages, params, schema), "record_id": record_id}
            raise RequestFailed("not answered by the batch")
        flight = keys[0] if n == 1 else f"{keys[0]}|n={n}"
        if flight in self._inflight:  # the same request is already on its way (duplicate issue text)
            self.stats.cache_hits += 1
            res = await asyncio.shield(self._inflight[flight])
            return [ChatResult(**{**r.__dict__, "cached": True}) for r in res]
        fut = asyncio.get_running_loop().create_future()
        self._inflight[flight] = fut
        try:
            res = await self._with_retries(keys[0], messages, params, schema, record_id, n)
        except BaseException as e:
            if isinstance(e, asyncio.CancelledError):
                fut.cancel()
            else:
                fut.set_exception(e)
                fut.exception()  # mark retrieved: waiters (if any) get it; no "never retrieved" noise
            raise
        finally:
            self._inflight.pop(flight, None)
        fut.set_result(res)
        if self.store:
            for k, r in zip(keys, res):
                self.store.put(k, self.endpoint.cache_identity, self.endpoint.model, r.to_json())
        return res

    async def _with_retries(self, key, messages, params, schema, record_id, n) -> list[ChatResult]:
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_Transient),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self.backoff.wait,
            sleep=self.backoff.sleep,
            reraise=True,
        )
        last: _Transient | None = None
        try:
            async for attempt in retrying:
                a = attempt.retry_state.attempt_number
                if a > 1:
                    self.stats.retries += 1
                with attempt:
                    while True:
                        try:
                            return await self._send(key, messages, params, schema, record_id, a, n)
                        except _FormatRejected:
                            continue  # stepped down a style; send again at once (same attempt)
        except _Transient as e:
            last = e
        except RequestFailed:
            self.stats.failed += 1
            raise
        self.stats.failed += 1
        raise RequestFailed(f"gave up after {self.max_retries + 1} attempts: {last}")

    def _step_down(self, why: str) -> bool:
        i = STRUCTURED_STYLES.index(self.style)
        if self.style in ("json_schema", "json_object_schema"):
            nxt = "json_object"
        elif i + 1 < len(STRUCTURED_STYLES):
            nxt = STRUCTURED_STYLES[i + 1]
        else:
            return False
        self.stats.fallbacks.append(f"{self.style}->{nxt}: {why[:120]}")
        self.style = nxt
        return True

    def body(self, messages: list[dict], params: dict[str, Any], schema: dict | None) -> dict[str, Any]:
        """The request body as sent now (structured style and logprobs as they stand)."""
        return self._body(messages, params, schema, self.style, self.logprobs)

    def _body(self, messages, params, schema, style: str, want_lp: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.endpoint.model, "messages": messages, **params}
        if self.endpoint.dialect == "openai" and "max_tokens" in body:
            # OpenAI's newer models reject max_tokens; the other servers know only max_tokens.
            body["max_completion_tokens"] = body.pop("max_tokens")
        rf = response_format(style, schema) if schema is not None else None
        if rf is not None:
            body["response_format"] = rf
        if want_lp:
            body["logprobs"] = True
            body["top_logprobs"] = 1  # llama-cpp-python returns no logprobs without it
        return body

    async def _send(self, key, messages, params, schema, record_id, attempt, n) -> list[ChatResult]:
        assert self.pool is not None and self._sem is not None, "use ChatClient as an async context manager"
        async with self._sem:
            # Built inside the semaphore: a request queued behind a refused one uses the new style.
            style, want_lp = self.style, self.logprobs
            route = self.pool.pick()
            verdict: bool | None = None  # the server's fault (True), answered (False), or no verdict
            try:
                # The first request with `n` to a server finds out whether it honours it; requests
                # with `n` behind it wait for the answer rather than guess.
                while n > 1 and route.n_support is None and route.n_probe is not None:
                    await asyncio.wait([route.n_probe])
                ask_n = n > 1 and route.n_support is not False
                probe = ask_n and route.n_support is None
                if probe:
                    route.n_probe = asyncio.get_running_loop().create_future()
                try:
                    body = self._body(messages, params, schema, style, want_lp)
                    if ask_n:
                        body["n"] = n
                    log = dict(
                        run_id=self.run_id,
                        endpoint=route.name,
                        model=self.endpoint.model,
                        record_id=record_id,
                        key=key,
                        attempt=attempt,
                        messages=messages,
                        params={k: v for k, v in body.items() if k not in ("messages", "model")},
                    )
                    t0 = time.perf_counter()  # latency of the request itself, not of the queue before it
                    self.stats.requests += 1
                    status, err, resp = await self._post(route, body)
                    ms = (time.perf_counter() - t0) * 1000.0
                    self.stats.latency_ms += ms
                    res: list[ChatResult] = []
                    usage: dict[str, int] = {}
                    if err is None:
                        try:
                            res, usage = read_response(
                                resp, max_tokens=params.get("max_tokens"), secrets=self._secrets, n=n if ask_n else 1
                            )
                        except MalformedResponse as e:
                            err = e
                    if status != 429:  # busy is not broken
                        verdict = status is None or status >= 500 or (status == 200 and err is not None)
                    if err is not None:
                        self._failed(err, status, style, want_lp, route, ask_n, log, ms)
                    if probe:
                        route.n_support = len(res) >= n
                finally:
                    if probe and route.n_probe is not None:
                        route.n_probe.set_result(None)
                        route.n_probe = None
            finally:
                self.pool.release(route, verdict)
        self.stats.prompt_tokens += usage.get("prompt_tokens", 0)
        self.stats.completion_tokens += usage.get("completion_tokens", 0)
        if res:
            res[0].usage = usage  # the request's tokens, once (with n, one request serves all samples)
        self._log(log, "ok", 200, None, ms, res, usage)
        return res

    async def _post(self, route: Route, body: dict[str, Any]) -> tuple[int | None, Exception | None, Any]:
        """(HTTP status or None when no answer came, the error or None, the response)."""
        # The client's timeout is per socket read: a server trickling a byte a second never trips
        # it. The whole request gets TOTAL_DEADLINE timeouts, then is retried like a timeout.
        total = TOTAL_DEADLINE * self.endpoint.timeout
        try:
            return 200, None, await asyncio.wait_for(route.client.chat.completions.create(**body), total)
        except asyncio.TimeoutError:
            return None, TimeoutError(f"no complete answer within {total:.0f} s (the server sends too slowly)"), None
        except openai.APIStatusError as e:
            return e.status_code, e, None
        except AnswerTooLarge as e:
            return 200, e, None
        except (openai.APITimeoutError, openai.APIConnectionError) as e:
            if isinstance(e.__cause__, AnswerTooLarge):  # as older SDKs wrap it
                return 200, e.__cause__, None
            return None, e, None
        except (json.JSONDecodeError, openai.APIResponseValidationError, ValueError) as e:
            return 200, e, None

    def _failed(self, err: Exception, status, style, want_lp, route: Route, ask_n: bool, log, ms) -> None:
        """Raise what a failed attempt means: a step down, a retry, or an error."""
        msg = redact(_error_message(err), self._secrets)
        headers = getattr(getattr(err, "response", None), "headers", None)
        low = msg.lower()
        if status in (400, 422) and ask_n and _N_REFUSED.search(low):
            self._log(log, "rejected", status, msg, ms)
            route.n_support = False
            raise _FormatRejected(msg)
        if (
            status in (400, 422, 500)
            and style != "none"
            and any(w in low for w in ("response_format", "json_schema", "schema"))
        ):
            self._log(log, "rejected", status, msg, ms)
            if style != self.style or self._step_down(msg):  # another request already stepped down
                raise _FormatRejected(msg)
        if status in (400, 422) and want_lp and "logprobs" in low:
            self._log(log, "rejected", status, msg, ms)
            if self.logprobs:
                self.logprobs = False
                self.stats.fallbacks.append(f"logprobs off: {msg[:120]}")
            raise _FormatRejected(msg)
        if isinstance(err, AnswerTooLarge):
            self._log(log, "error", status, msg, ms)
            raise RequestFailed(msg)
        if status in (401, 403, 404):
            self._log(log, "error", status, msg, ms)
            why = (
                f"not found (HTTP 404); check the base URL and the model name {self.endpoint.model!r}"
                if status == 404
                else f"authentication failed (HTTP {status}); check the key in ${self.endpoint.api_key_env}"
            )
            assert self.pool is not None
            if self.pool.retire(route, why):  # one replica misconfigured: the others go on serving
                raise _Transient(f"HTTP {status}: {msg[:300]}", status, None, failover=True)
            raise LLMError(f"{route.name}: {why}: {msg}")
        if status is None or status in (408, 409, 429) or status >= 500 or status == 200:
            kind = (
                "timeout"
                if isinstance(err, (openai.APITimeoutError, TimeoutError))
                else ("connection" if status is None else ("malformed" if status == 200 else f"HTTP {status}"))
            )
            self._log(log, "transient", status, f"{kind}: {msg}", ms)
            assert self.pool is not None
            failover = status != 429 and self.pool.others_up(route)
            raise _Transient(f"{kind}: {msg[:300]}", status, retry_after_seconds(headers), failover)
        self._log(log, "error", status, msg, ms)
        raise RequestFailed(f"HTTP {status}: {msg[:300]}")

    def _log(self, log: dict, outcome: str, status, error, ms, res: list[ChatResult] = (), usage=None) -> None:  # type: ignore[assignment]
        if not self.store:
            return
        response = None
        if res:
            response = res[0].content if len(res) == 1 else json.dumps([r.content for r in res], ensure_ascii=False)
        self.store.log(
            **log,
            outcome=outcome,
            http_status=status,
            error=error,
            latency_ms=round(ms, 1),
            prompt_tokens=(usage or {}).get("prompt_tokens") if res else None,
            completion_tokens=(usage or {}).get("completion_tokens") if res else None,
            response=response,
        )
