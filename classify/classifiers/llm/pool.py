"""Several servers of one model used as one: least-outstanding balancing and failover.

Each request goes to the server with the fewest requests in flight (ties: the one sent fewest so
far), among those in service. A server whose requests fail `fail_limit` times in a row (no
connection, timeout, 5xx) is taken out for `cooldown` seconds, doubling up to `max_cooldown` each
time it fails again; after that it gets one request again, and a success puts it back. When every
server is out, the one back soonest is tried rather than none. What each server can do (whether
it honours `n`) is found out once per server and remembered for the process. A server that refuses
the key or does not know the model (401, 403, 404) is retired for the run while others serve it:
waiting does not mend a configuration.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# (server name, model) -> whether it returns n choices for one request with `n`; found once per process.
_N_SUPPORT: dict[tuple[str, str], bool] = {}


@dataclass
class Route:
    """One server: its client and its state in the pool."""

    name: str  # what logs show: the URL without credentials, or the local model's identity
    client: Any  # openai.AsyncOpenAI
    model: str
    outstanding: int = 0
    sent: int = 0
    fails: int = 0  # consecutive failures
    down_until: float = 0.0
    cooldown: float = 0.0
    retired: bool = False  # refused the key or the model: never asked again this run
    n_probe: asyncio.Future | None = None  # done when the request finding out whether `n` works is back

    @property
    def n_support(self) -> bool | None:
        return _N_SUPPORT.get((self.name, self.model))

    @n_support.setter
    def n_support(self, value: bool) -> None:
        _N_SUPPORT[(self.name, self.model)] = value


class EndpointPool:
    def __init__(
        self,
        routes: list[Route],
        *,
        fail_limit: int = 3,
        cooldown: float = 5.0,
        max_cooldown: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        on_out: Callable[[str], None] | None = None,
    ):
        if not routes:
            raise ValueError("a pool needs at least one server")
        self.routes = routes
        self.fail_limit = fail_limit
        self.base_cooldown = cooldown
        self.max_cooldown = max_cooldown
        self.clock = clock
        self.on_out = on_out  # told each time a server is taken out

    def up(self) -> list[Route]:
        now = self.clock()
        return [r for r in self.routes if r.down_until <= now and not r.retired]

    def retire(self, route: Route, why: str) -> bool:
        """Take `route` out for good (a wrong key or model there); whether another server is left."""
        if not route.retired:
            route.retired = True
            if self.on_out is not None and any(not r.retired for r in self.routes):
                self.on_out(f"{route.name} out for the rest of the run: {why}")
        return any(not r.retired for r in self.routes)

    def pick(self) -> Route:
        """The server the next request goes to; the caller calls release() when it is back."""
        serving = [r for r in self.routes if not r.retired] or self.routes
        live = self.up() or [min(serving, key=lambda r: r.down_until)]
        route = min(live, key=lambda r: (r.outstanding, r.sent))
        route.outstanding += 1
        route.sent += 1
        return route

    def release(self, route: Route, failed: bool | None) -> None:
        """A request is back: failed True (the server's fault), False (it answered), None (no verdict)."""
        route.outstanding -= 1
        if failed is None:
            return
        if not failed:
            route.fails, route.cooldown = 0, 0.0
            return
        if route.down_until > self.clock():
            return  # sent before it was taken out: already counted against it
        route.fails += 1
        if route.fails >= self.fail_limit and len(self.routes) > 1:
            route.cooldown = min(self.max_cooldown, route.cooldown * 2 or self.base_cooldown)
            route.down_until = self.clock() + route.cooldown
            route.fails = self.fail_limit - 1  # one more failure after the break takes it out again
            if self.on_out is not None:
                self.on_out(f"{route.name} out for {route.cooldown:.0f} s after {self.fail_limit} failures in a row")

    def others_up(self, route: Route) -> bool:
        return any(r is not route for r in self.up())


def forget_capabilities() -> None:
    """Find out again what each server can do (a server was upgraded; tests start clean)."""
    _N_SUPPORT.clear()
