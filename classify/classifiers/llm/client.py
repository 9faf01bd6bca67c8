"""Async chat-completion client: bounded concurrency, retries, response cache, request log.

Retries (tenacity): exponential backoff with jitter on 429, 408/409, 5xx, timeouts, connection
errors and malformed response bodies; a Retry-After header (seconds or HTTP date) sets the wait.
No retry on 401/403/404 (LLMError: the run cannot succeed) nor on other 4xx (RequestFailed: this
one request cannot succeed). When a server refuses the structured-output style, the client steps
down json_schema -> json_object -> none once, for the rest of the run.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import openai
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from classify.classifiers.llm.answer import response_format
from classify.classifiers.llm.cache import LLMStore, request_key
from classify.classifiers.llm.endpoint import STRUCTURED_STYLES, Endpoint
from classify.core.errors import ClassifyError
from classify.core.http import redact, retry_after_seconds

MAX_RETRY_AFTER = 120.0  # seconds; a server asking for longer gets this and another try


class LLMError(ClassifyError, RuntimeError):
    """The endpoint cannot serve this run (bad key, unknown model or URL). Never retried."""


class RequestFailed(Exception):
    """One request failed for good (retries exhausted, or a 4xx that retrying cannot fix)."""


class _Transient(Exception):
    def __init__(self, msg: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(msg)
        self.status = status
        self.retry_after = retry_after


class _FormatRejected(Exception):
    pass


@dataclass
class ChatResult:
    content: str
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    logprobs: list[tuple[str, float]] | None = None
    model: str | None = None
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "finish_reason": self.finish_reason,
            "usage": self.usage,
            "logprobs": self.logprobs,
            "model": self.model,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], cached: bool = False) -> ChatResult:
        lp = d.get("logprobs")
        return cls(
            d.get("content") or "",
            d.get("finish_reason"),
            d.get("usage") or {},
            [tuple(x) for x in lp] if lp else None,
            d.get("model"),
            cached,
        )


@dataclass
class ClientStats:
    requests: int = 0  # HTTP attempts sent
    cache_hits: int = 0
    retries: int = 0  # attempts beyond the first, over all requests
    failed: int = 0  # requests given up (RequestFailed)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    fallbacks: list[str] = field(default_factory=list)  # structured-output styles abandoned

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _wait(retry_state) -> float:
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    if isinstance(exc, _Transient) and exc.retry_after is not None:
        ra = min(exc.retry_after, MAX_RETRY_AFTER)
        return ra + random.uniform(0, 0.05 + 0.1 * ra)  # honour it, and do not stampede back at once
    return _BACKOFF(retry_state)


_BACKOFF = wait_exponential_jitter(multiplier=0.5, max=30.0, jitter=0.5)


def _error_message(e: Exception) -> str:
    msg = getattr(e, "message", None) or str(e)
    body = getattr(e, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"] not in msg:
        msg = f"{msg}: {body['message']}"
    return msg


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
    ):
        self.endpoint = endpoint
        self.store = store
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.use_cache = use_cache
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.style = endpoint.structured  # may step down on refusal
        self.logprobs = endpoint.logprobs
        self.stats = ClientStats()
        self._key: str | None = None
        self._sem: asyncio.Semaphore | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._inflight: dict[str, asyncio.Future] = {}

    async def __aenter__(self) -> ChatClient:
        self._key = self.endpoint.api_key()
        self._client = openai.AsyncOpenAI(
            api_key=self._key,
            base_url=self.endpoint.url,
            max_retries=0,
            timeout=self.endpoint.timeout,
        )
        self._sem = asyncio.Semaphore(self.concurrency)
        return self

    async def __aexit__(self, *exc) -> None:
        if self._client is not None:
            await self._client.close()
        self._client = None

    def cache_key(self, messages: list[dict], params: dict[str, Any], schema: dict | None) -> str:
        # Keyed on the configured structured style, not the one in effect after a fallback, so a
        # re-run finds its answers without first re-discovering what the server refuses.
        kp = {**params, "structured": self.endpoint.structured, "schema": schema, "logprobs": self.endpoint.logprobs}
        return request_key(self.endpoint.cache_identity, self.endpoint.model, messages, kp)

    def cached(self, messages: list[dict], params: dict[str, Any], schema: dict | None) -> bool:
        return bool(self.store and self.use_cache and self.store.has(self.cache_key(messages, params, schema)))

    async def complete(
        self, messages: list[dict], params: dict[str, Any], schema: dict | None = None, record_id: str | None = None
    ) -> ChatResult:
        """One chat completion (from the cache when possible). Raises RequestFailed or LLMError."""
        key = self.cache_key(messages, params, schema)
        if self.store and self.use_cache:
            hit = self.store.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                return ChatResult.from_json(hit, cached=True)
        if key in self._inflight:  # the same request is already on its way (duplicate issue text)
            self.stats.cache_hits += 1
            res = await asyncio.shield(self._inflight[key])
            return ChatResult(**{**res.__dict__, "cached": True})
        fut = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            res = await self._with_retries(key, messages, params, schema, record_id)
        except BaseException as e:
            if isinstance(e, asyncio.CancelledError):
                fut.cancel()
            else:
                fut.set_exception(e)
                fut.exception()  # mark retrieved: waiters (if any) get it; no "never retrieved" noise
            raise
        finally:
            self._inflight.pop(key, None)
        fut.set_result(res)
        if self.store:
            self.store.put(key, self.endpoint.cache_identity, self.endpoint.model, res.to_json())
        return res

    async def _with_retries(self, key, messages, params, schema, record_id) -> ChatResult:
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_Transient),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=_wait,
            reraise=True,
        )
        last: _Transient | None = None
        try:
            async for attempt in retrying:
                n = attempt.retry_state.attempt_number
                if n > 1:
                    self.stats.retries += 1
                with attempt:
                    while True:
                        try:
                            return await self._send(key, messages, params, schema, record_id, n)
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

    async def _send(self, key, messages, params, schema, record_id, attempt) -> ChatResult:
        assert self._client is not None and self._sem is not None, "use ChatClient as an async context manager"
        async with self._sem:
            # Built inside the semaphore: a request queued behind a refused one uses the new style.
            style, want_lp = self.style, self.logprobs
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
            log = dict(
                run_id=self.run_id,
                endpoint=self.endpoint.cache_identity,
                model=self.endpoint.model,
                record_id=record_id,
                key=key,
                attempt=attempt,
                messages=messages,
                params={k: v for k, v in body.items() if k not in ("messages", "model")},
            )
            t0 = time.perf_counter()  # latency of the request itself, not of the queue before it
            self.stats.requests += 1
            status: int | None
            err: Exception | None
            try:
                resp = await self._client.chat.completions.create(**body)
                status, err = 200, None
            except openai.APIStatusError as e:
                resp, status, err = None, e.status_code, e
            except (openai.APITimeoutError, openai.APIConnectionError) as e:
                resp, status, err = None, None, e
            except (json.JSONDecodeError, openai.APIResponseValidationError, ValueError) as e:
                resp, status, err = None, 200, e
        ms = (time.perf_counter() - t0) * 1000.0
        self.stats.latency_ms += ms

        if err is None:
            try:
                res = self._result(resp)
            except _Transient as e:
                err = e
        if err is not None:
            msg = redact(_error_message(err), [self._key])
            headers = getattr(getattr(err, "response", None), "headers", None)
            low = msg.lower()
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
            if status in (401, 403):
                self._log(log, "error", status, msg, ms)
                raise LLMError(
                    f"{self.endpoint.describe()['endpoint']}: authentication failed (HTTP {status}); "
                    f"check the key in ${self.endpoint.api_key_env}: {msg}"
                )
            if status == 404:
                self._log(log, "error", status, msg, ms)
                raise LLMError(
                    f"{self.endpoint.describe()['endpoint']}: not found (HTTP 404); check the base URL "
                    f"and the model name {self.endpoint.model!r}: {msg}"
                )
            if status is None or status in (408, 409, 429) or status >= 500 or status == 200:
                kind = (
                    "timeout"
                    if isinstance(err, openai.APITimeoutError)
                    else ("connection" if status is None else ("malformed" if status == 200 else f"HTTP {status}"))
                )
                self._log(log, "transient", status, f"{kind}: {msg}", ms)
                raise _Transient(f"{kind}: {msg[:300]}", status, retry_after_seconds(headers))
            self._log(log, "error", status, msg, ms)
            raise RequestFailed(f"HTTP {status}: {msg[:300]}")

        self.stats.prompt_tokens += res.usage.get("prompt_tokens", 0)
        self.stats.completion_tokens += res.usage.get("completion_tokens", 0)
        self._log(log, "ok", 200, None, ms, res)
        return res

    def _result(self, resp) -> ChatResult:
        choices = getattr(resp, "choices", None)
        if not choices:
            raise _Transient("malformed: response has no choices")
        ch = choices[0]
        msg = getattr(ch, "message", None)
        content = getattr(msg, "content", None) if msg is not None else None
        lp = None
        lpc = getattr(getattr(ch, "logprobs", None), "content", None)
        if lpc:
            lp = [(t.token, t.logprob) for t in lpc if getattr(t, "token", None) is not None]
        u = getattr(resp, "usage", None)
        usage = (
            {
                "prompt_tokens": int(getattr(u, "prompt_tokens", 0) or 0),
                "completion_tokens": int(getattr(u, "completion_tokens", 0) or 0),
            }
            if u
            else {}
        )
        return ChatResult(content or "", getattr(ch, "finish_reason", None), usage, lp, getattr(resp, "model", None))

    def _log(self, log: dict, outcome: str, status, error, ms, res: ChatResult | None = None) -> None:
        if not self.store:
            return
        self.store.log(
            **log,
            outcome=outcome,
            http_status=status,
            error=error,
            latency_ms=round(ms, 1),
            prompt_tokens=res.usage.get("prompt_tokens") if res else None,
            completion_tokens=res.usage.get("completion_tokens") if res else None,
            response=res.content if res else None,
        )
