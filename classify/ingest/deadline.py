"""A total deadline for each HTTP request of the GitHub client.

httpx's timeouts are per socket operation: a server that trickles a byte every few seconds never
trips a 30 s read timeout and holds a request forever. Every read and write of the client's
connections goes through here instead, and waits at most until the request's deadline (a
ReadTimeout after that, retried like any timeout).
"""

from __future__ import annotations

import time
from typing import Any

import httpcore
import httpx


class Budget:
    """The time the request now in flight may still take (until `deadline`).

    The client sends one request at a time, so one budget serves all its connections.
    """

    def __init__(self) -> None:
        self.deadline: float | None = None  # time.monotonic() value

    def start(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def stop(self) -> None:
        self.deadline = None

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def timeout(self, timeout: float | None) -> float | None:
        """The per-operation timeout, shortened to what is left of the deadline."""
        if self.deadline is None:
            return timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise httpcore.ReadTimeout("the request's total deadline passed")
        return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, budget: Budget):
        self._inner, self._budget = inner, budget

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._budget.timeout(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._budget.timeout(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> _Stream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, self._budget.timeout(timeout)), self._budget)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend, budget: Budget):
        self._inner, self._budget = inner, budget

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address=None, socket_options=None):
        stream = self._inner.connect_tcp(host, port, self._budget.timeout(timeout), local_address, socket_options)
        return _Stream(stream, self._budget)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None):
        return _Stream(
            self._inner.connect_unix_socket(path, self._budget.timeout(timeout), socket_options), self._budget
        )

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def install(client: httpx.Client, budget: Budget) -> bool:
    """Route every connection of `client` (its transport and any proxy mounts) through `budget`.

    httpx offers no public hook for this; the connection pools' network backend is the one place
    every read passes. False when this httpx has no such attribute (the budget then does nothing,
    and tests/fetch/test_fetch_hostile.py fails).
    """
    transports = [client._transport, *(t for t in client._mounts.values() if t is not None)]
    done = False
    for t in transports:
        pool = getattr(t, "_pool", None)
        inner = getattr(pool, "_network_backend", None)
        if inner is not None:
            pool._network_backend = _Backend(inner, budget)  # type: ignore[union-attr]
            done = True
    return done
