"""Who is speaking, and form posts that really come from our pages.

Identity comes from the session only: the login cookie (on loopback a coder picks their name; on
any other address the cookie holds their token) or an `Authorization: Bearer` token. A coder
named in the request (`?coder=`, a body's `coder` / `adjudicator`) must be the session's coder,
else the request is refused: it can never make one coder act or read as another.
"""

from __future__ import annotations

import secrets
from typing import Any

from starlette.requests import Request

from classify.workbench.project import Forbidden
from classify.workbench.web import MAX_BODY, HTTPError, wb_of


def session_coder(request: Request) -> str | None:
    """The coder this request acts as (a bearer token, else the login cookie), None without one."""
    wb = wb_of(request)
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return wb.project.coder_for_token(auth[7:].strip())
    if wb.require_tokens:
        return wb.project.coder_for_token(request.cookies.get("wb_token"))
    name = request.cookies.get("wb_coder")
    return name if name in wb.project.coders() else None


def acting_coder(request: Request, claimed: Any = None) -> str:
    """The session's coder; refused without a session, or when the request names another coder."""
    who = session_coder(request)
    if who is None:
        raise Forbidden(
            "a valid coder token is required (Authorization: Bearer <token>)"
            if wb_of(request).require_tokens
            else "log in first: pick your name on the workbench's start page (or send a coder token as "
            "Authorization: Bearer <token>)"
        )
    if claimed is not None and claimed != who:
        raise Forbidden(
            f"this session belongs to {who!r}, not {claimed!r}: a request acts for its session's coder only"
        )
    return who


def viewer(request: Request, claimed: Any = None) -> str | None:
    """For reading: the session's coder (a named coder must be it); None without a session, unless
    tokens are required."""
    if claimed is not None or wb_of(request).require_tokens:
        return acting_coder(request, claimed)
    return session_coder(request)


async def form_fields(request: Request) -> dict[str, str]:
    """A form post's fields after the CSRF check (the token in the form must equal its cookie)."""
    form = await request.form(max_files=0, max_fields=50, max_part_size=MAX_BODY)
    sent = str(form.get("csrf", ""))
    cookie = request.cookies.get("wb_csrf", "")
    if not cookie or not secrets.compare_digest(sent, cookie):
        raise Forbidden("CSRF check failed: reload the page and try again")
    return {k: str(v) for k, v in form.items()}


async def json_body(request: Request) -> dict:
    """A JSON object body (Content-Type application/json: a cross-site page cannot send it without
    a preflight); malformed or deeply nested JSON is a 400, not a 500."""
    from classify.core.jsontext import loads, too_deep_at

    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise HTTPError(415, "send JSON (Content-Type: application/json)")
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HTTPError(400, "the body is not valid JSON (UTF-8)") from None
    if too_deep_at(text) is not None:
        raise HTTPError(400, "the body nests too deeply to be a code or a decision")
    try:
        body = loads(text)
    except ValueError:
        raise HTTPError(400, "the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise HTTPError(400, "the body must be a JSON object")
    return body
