"""The workbench web app (Starlette + Jinja2, plain JavaScript, no external assets): routes,
middleware and error pages. The parts, one job each:

- auth.py        who is speaking (session cookie or token, never the request's own claim), CSRF;
- middleware.py  security headers, foreign Origins refused, request bodies bounded;
- pages.py       the HTML pages;
- api.py         the JSON API;
- web.py         what they share (the app state and its cache, rendering a page).

Security: on a loopback address a coder picks their name (cookie); on any other address every
request needs the coder's token (cookie after login, or `Authorization: Bearer`). Form posts carry
a per-browser CSRF token; JSON posts must be `application/json` and a foreign Origin is refused;
the Host header must name the served address (DNS rebinding); everything from an issue is escaped
and a Content-Security-Policy allows only the app's own scripts and styles.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote, unquote_to_bytes

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from classify.core.errors import ClassifyError
from classify.workbench import api, pages
from classify.workbench.auth import session_coder
from classify.workbench.middleware import BodyLimitMiddleware, SecurityMiddleware
from classify.workbench.project import Forbidden, LabelError, NotFound, Project, ProjectError
from classify.workbench.reviewtask import ReviewTask
from classify.workbench.web import HTTPError, Workbench, error_json, page

HERE = Path(__file__).parent
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def status_of(e: Exception) -> int:
    if isinstance(e, HTTPError):
        return e.status
    if isinstance(e, NotFound):
        return 404
    if isinstance(e, Forbidden):
        return 403
    return 422


async def on_error(request: Request, e: Exception) -> Response:
    status = status_of(e)
    if request.url.path.startswith("/api/"):
        extra = {"allowed": e.allowed} if isinstance(e, LabelError) and e.allowed else {}
        return error_json(status, str(e), **extra)

    def render() -> Response:
        resp = page(request, "error.html", session_coder(request), status=status, message=str(e))
        resp.status_code = status
        return resp

    return await run_in_threadpool(render)


class ItemRoute(Route):
    """A route whose `{item_id}` is one segment of the raw, still encoded path, decoded after the
    match. Starlette matches the decoded path, where item `a/history` (`/api/items/a%2Fhistory`)
    and the history of item `a` are the same text; the pages encode an id as one segment
    (`seg`, encodeURIComponent), so an encoded slash belongs to the id."""

    def matches(self, scope):
        if scope["type"] != "http":
            return super().matches(scope)
        # raw_path is optional in ASGI: without it, every slash separates (an id with one: 404)
        raw = scope.get("raw_path") or quote(scope["path"]).encode()
        match, child = super().matches({**scope, "path": raw.decode("latin-1")})
        if match is not Match.NONE:
            params = child["path_params"]
            params["item_id"] = unquote_to_bytes(params["item_id"].encode("latin-1")).decode("utf-8", "replace")
        return match, child


def make_app(
    project: Project,
    host: str = "127.0.0.1",
    review: ReviewTask | None = None,
    require_tokens: bool | None = None,
    n_boot: int = 1000,
) -> Starlette:
    """The ASGI app for a project. Tokens are required unless it is served on a loopback address."""
    import python_multipart  # noqa: F401  starlette parses form posts with it: missing, fail here, not at a post

    if require_tokens is None:
        require_tokens = host not in LOOPBACK
    if require_tokens and project.coders_without_token():
        raise ProjectError(
            f"serving on {host} needs a token for every coder (missing: {', '.join(project.coders_without_token())}); "
            f"make them with `classify workbench tokens --project {project.folder}`"
        )
    allowed_hosts = (
        ["*"]
        if host in ("0.0.0.0", "::")
        else sorted({host, "127.0.0.1", "localhost", "[::1]"} if host in LOOPBACK else {host})
    )
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals["json"] = json
    # an item id in a link or form action is one path segment, whatever it holds (?, #, /, ..)
    templates.env.filters["seg"] = lambda s: quote(str(s), safe="")
    routes = [
        Route("/", pages.home),
        Route("/login", pages.login, methods=["POST"]),
        Route("/logout", pages.logout, methods=["POST"]),
        Route("/code", pages.code_page),
        Route("/code/{item_id:path}", pages.code_page),
        Route("/agreement", pages.agreement_page),
        Route("/adjudicate", pages.adjudicate_list),
        Route("/adjudicate/{item_id:path}", pages.adjudicate_page, methods=["GET"]),
        Route("/adjudicate/{item_id:path}", pages.adjudicate_post, methods=["POST"]),
        Route("/review", pages.review_list),
        Route("/review/{n:int}", pages.review_page, methods=["GET"]),
        Route("/review/{n:int}", pages.review_post, methods=["POST"]),
        Route("/api/items", api.items),
        Route("/api/agreement", api.agreement),
        Route("/api/agreement/details", api.agreement_details),
        ItemRoute("/api/items/{item_id}/codes", api.code, methods=["POST"]),
        ItemRoute("/api/items/{item_id}/decision", api.decision, methods=["POST"]),
        ItemRoute("/api/items/{item_id}/history", api.history),
        ItemRoute("/api/items/{item_id}", api.item),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts),
            Middleware(SecurityMiddleware),
            Middleware(BodyLimitMiddleware),
        ],
        exception_handlers={ClassifyError: on_error, HTTPError: on_error},
    )
    app.state.wb = Workbench(project, require_tokens, review, n_boot=n_boot)
    app.state.templates = templates
    return app
