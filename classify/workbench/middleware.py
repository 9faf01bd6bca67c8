"""Middleware on every request: security headers and the CSRF cookie, foreign Origins refused, and
request bodies bounded (a 60 MB note would slow every later page for every coder)."""

from __future__ import annotations

import secrets
from urllib.parse import urlparse

from starlette.requests import Request

from classify.workbench.web import MAX_BODY, error_json

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


class _TooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """A request body over MAX_BODY bytes is refused with 413, whether it says its length or not."""

    def __init__(self, app, limit: int = MAX_BODY):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = error_json(413, f"the request body is over {self.limit} bytes")
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await too_large(scope, receive, send)
            return
        seen = 0
        started = False

        async def counting_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        async def watching_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except _TooLarge:
            if not started:
                await too_large(scope, receive, send)


class SecurityMiddleware:
    """CSP and other headers on every response, a CSRF cookie for every browser, and no request
    from a foreign Origin that changes anything."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        new_csrf = None if request.cookies.get("wb_csrf") else secrets.token_urlsafe(24)
        scope.setdefault("state", {})["new_csrf"] = new_csrf
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            origin = request.headers.get("origin")
            if origin and urlparse(origin).netloc != request.headers.get("host"):
                resp = error_json(403, f"cross-origin request from {origin} refused")
                await resp(scope, receive, send)
                return

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),  # no-referrer would make the Origin of our own posts "null"
                    (b"x-frame-options", b"DENY"),
                    (b"cache-control", b"no-store"),
                ]
                if new_csrf:
                    headers.append((b"set-cookie", f"wb_csrf={new_csrf}; Path=/; HttpOnly; SameSite=Strict".encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
