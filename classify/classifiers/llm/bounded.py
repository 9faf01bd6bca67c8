"""A bound on the size of a chat answer as it arrives (the HTTP transport of the LLM client).

`sanitize` refuses an answer far above max_tokens once it is read, but a server that sends a
gigabyte would have filled memory by then. Chat answers are cut off at MAX_CHAT_BYTES while they
stream in; other calls (a batch's output file, far larger by design) are not bounded here.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from typing import Any

import openai

# The HTTP library the openai SDK is built on (httpx, or its successor httpx2 in newer releases):
# the transport must speak its types.
httpx: Any = importlib.import_module(openai.DefaultAsyncHttpxClient.__mro__[1].__module__.split(".")[0])

# n=10 samples of 1,000 tokens, each token with its logprob record (~200 bytes): 2 MB. A chat
# answer 8 times that is no answer.
MAX_CHAT_BYTES = 16_000_000


class AnswerTooLarge(Exception):
    """A chat answer passed MAX_CHAT_BYTES: asking again would bring the same."""


class _Bounded(httpx.AsyncByteStream):
    def __init__(self, inner: Any, limit: int):  # the transport's stream (an async iterable of bytes)
        self._inner, self._limit = inner, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._limit:
                raise AnswerTooLarge(f"answer larger than {self._limit / 1e6:.0f} MB: refused")
            yield chunk

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()


class BoundedTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, with chat-completion bodies bounded to `limit` bytes."""

    def __init__(self, limit: int = MAX_CHAT_BYTES):
        self._inner = httpx.AsyncHTTPTransport()
        self._limit = limit

    async def handle_async_request(self, request: Any) -> Any:
        resp = await self._inner.handle_async_request(request)
        if not request.url.path.rstrip("/").endswith("/chat/completions"):
            return resp
        return httpx.Response(
            resp.status_code,
            headers=resp.headers,
            stream=_Bounded(resp.stream, self._limit),
            extensions=resp.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
