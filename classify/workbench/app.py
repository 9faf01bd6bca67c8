"""The workbench web app (Starlette + Jinja2, plain JavaScript, no external assets).

Pages and the JSON API share one set of library calls (classify.workbench.project). Security:
- identity: on a loopback address a coder picks their name (cookie); on any other address every
  request needs the coder's token (cookie after login, or `Authorization: Bearer` for scripts);
- CSRF: form posts carry a per-browser token that must match its cookie; JSON posts must be
  `application/json` (a cross-site page cannot send that without a CORS preflight, which is never
  granted) and a foreign Origin is refused;
- DNS rebinding: the Host header must name the address the server was started on;
- everything from an issue is escaped (Jinja2 autoescape, markdown without raw HTML), and a
  Content-Security-Policy allows only the app's own scripts and styles.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from classify.core.errors import ClassifyError
from classify.workbench import agreement as agree
from classify.workbench.project import Forbidden, ItemState, LabelError, NotFound, Project, ProjectError
from classify.workbench.render import render, safe_url
from classify.workbench.reviewtask import ReviewTask

HERE = Path(__file__).parent
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class Workbench:
    """The app's state: the project, whether tokens are required, an agreement cache."""

    def __init__(self, project: Project, require_tokens: bool, review: ReviewTask | None = None, n_boot: int = 1000):
        self.project = project
        self.require_tokens = require_tokens
        self.review = review
        self.n_boot = n_boot
        self._cache: dict[tuple, tuple[int, Any]] = {}

    def cached(self, key: tuple, fn):
        hit = self._cache.get(key)
        if hit and hit[0] == self.project.version:
            return hit[1]
        value = fn()
        self._cache[key] = (self.project.version, value)
        return value


def _wb(request: Request) -> Workbench:
    return request.app.state.wb


def _error(status: int, msg: str, **extra) -> JSONResponse:
    return JSONResponse({"error": msg, **extra}, status_code=status)


def _auth_coder(request: Request) -> str | None:
    """The coder this request acts as: by token (token mode) or by the picker's cookie."""
    wb = _wb(request)
    if wb.require_tokens:
        auth = request.headers.get("authorization", "")
        token = auth[7:] if auth.lower().startswith("bearer ") else request.cookies.get("wb_token")
        return wb.project.coder_for_token(token)
    name = request.cookies.get("wb_coder")
    return name if name in wb.project.coders() else None


def _api_coder(request: Request, claimed: Any) -> str:
    """The coder of an API call: the claimed one must be a project coder, and in token mode the
    token's own coder."""
    wb = _wb(request)
    if wb.require_tokens:
        who = _auth_coder(request)
        if who is None:
            raise Forbidden("a valid coder token is required (Authorization: Bearer <token>)")
        if claimed is not None and claimed != who:
            raise Forbidden(f"this token belongs to {who!r}, not {claimed!r}")
        return who
    if claimed is None:
        claimed = _auth_coder(request)
    return wb.project.require_coder(claimed)


def _csrf_token(request: Request) -> str:
    return request.cookies.get("wb_csrf") or request.state.new_csrf


async def _form(request: Request) -> dict[str, str]:
    """A form post's fields after the CSRF check (token in the form must equal its cookie)."""
    form = await request.form()
    sent = str(form.get("csrf", ""))
    cookie = request.cookies.get("wb_csrf", "")
    if not cookie or not secrets.compare_digest(sent, cookie):
        raise Forbidden("CSRF check failed: reload the page and try again")
    return {k: str(v) for k, v in form.items()}


def _page(request: Request, name: str, **ctx) -> Response:
    wb = _wb(request)
    coder = _auth_coder(request)
    prog = wb.project.progress()
    return request.app.state.templates.TemplateResponse(
        request,
        name,
        {
            "coder": coder,
            "coders": wb.project.coders(),
            "progress": prog.get(coder) if coder else None,
            "csrf": _csrf_token(request),
            "tax": wb.project.taxonomy,
            "has_review": wb.review is not None,
            "require_tokens": wb.require_tokens,
            **ctx,
        },
    )


def _login_redirect() -> RedirectResponse:
    return RedirectResponse("/", status_code=303)


# ---------------------------------------------------------------- pages


async def home(request: Request) -> Response:
    if _auth_coder(request):
        return RedirectResponse("/code", status_code=303)
    return _page(request, "login.html")


async def login(request: Request) -> Response:
    wb = _wb(request)
    form = await _form(request)
    resp = RedirectResponse("/code", status_code=303)
    if wb.require_tokens:
        if not wb.project.coder_for_token(form.get("token")):
            return _page(request, "login.html", error="unknown token")
        resp.set_cookie("wb_token", form["token"], httponly=True, samesite="strict")
    else:
        name = form.get("coder")
        if name not in wb.project.coders():
            return _page(request, "login.html", error=f"unknown coder {name!r}")
        resp.set_cookie("wb_coder", name, httponly=True, samesite="strict")
    return resp


async def logout(request: Request) -> Response:
    await _form(request)
    resp = _login_redirect()
    resp.delete_cookie("wb_coder")
    resp.delete_cookie("wb_token")
    return resp


def _my_items(project: Project, coder: str) -> list[ItemState]:
    return [s for s in project.states() if coder in s.assigned]


async def code_page(request: Request) -> Response:
    wb = _wb(request)
    coder = _auth_coder(request)
    if not coder:
        return _login_redirect()
    mine = _my_items(wb.project, coder)
    if not mine:
        return _page(request, "code.html", item=None, done=True)
    wanted = request.path_params.get("item_id")
    if wanted is None:
        st = next((s for s in mine if coder not in s.codes), None)
        if st is None:
            return _page(request, "code.html", item=None, done=True, n=len(mine))
    else:
        st = next((s for s in mine if s.id == wanted), None)
        if st is None:
            raise NotFound(f"no item {wanted!r} among {coder}'s items")
    i = mine.index(st)
    mine_code = st.codes.get(coder)
    show_sug = wb.project.show_suggestions or mine_code is not None  # blind until coded
    return _page(
        request,
        "code.html",
        item=st,
        rec=st.record,
        body=render(st.record.get("body")),
        discussion=render(st.record.get("discussion")),
        url=safe_url(st.record.get("url")),
        pos=i + 1,
        n=len(mine),
        prev_id=mine[i - 1].id if i > 0 else None,
        next_id=mine[i + 1].id if i + 1 < len(mine) else None,
        next_open=next((s.id for s in mine[i + 1 :] + mine[:i] if coder not in s.codes), None),
        my_code=mine_code,
        suggestion=st.suggestion if show_sug else None,
        state_json={
            "item": st.id,
            "coder": coder,
            "dims": [{"id": d, "categories": wb.project.taxonomy.dimensions[d].ids} for d in wb.project.dims],
            "code": mine_code.labels if mine_code else None,
            "note": mine_code.note if mine_code else "",
            "unsure": mine_code.unsure if mine_code else False,
            "prev": mine[i - 1].id if i > 0 else None,
            "next": mine[i + 1].id if i + 1 < len(mine) else None,
        },
    )


def _summary_page(request: Request, template: str) -> Response:
    """A page over the coder's agreement summary (computed once per coder and project state)."""
    wb = _wb(request)
    coder = _auth_coder(request)
    if not coder:
        return _login_redirect()
    s = wb.cached(("summary", coder), lambda: agree.summary(wb.project, coder, n_boot=wb.n_boot))
    return _page(request, template, s=s)


async def agreement_page(request: Request) -> Response:
    return _summary_page(request, "agreement.html")


async def adjudicate_list(request: Request) -> Response:
    return _summary_page(request, "adjudicate_list.html")


async def adjudicate_page(request: Request) -> Response:
    wb = _wb(request)
    coder = _auth_coder(request)
    if not coder:
        return _login_redirect()
    st = wb.project.state(request.path_params["item_id"])
    if not wb.project.can_see_codes(st, coder):
        raise Forbidden(f"code {st.id} yourself before you see the other codes")
    return _adjudicate_view(request, st)


def _adjudicate_view(request: Request, st: ItemState, error: str | None = None) -> Response:
    wb = _wb(request)
    tax = wb.project.taxonomy
    return _page(
        request,
        "adjudicate.html",
        item=st,
        rec=st.record,
        body=render(st.record.get("body")),
        discussion=render(st.record.get("discussion")),
        url=safe_url(st.record.get("url")),
        disagree=st.disagreeing(wb.project.dims),
        cats={d: {c.id: c for c in tax.dimensions[d].categories} for d in wb.project.dims},
        history=wb.project.history(st.id),
        error=error,
    )


async def adjudicate_post(request: Request) -> Response:
    wb = _wb(request)
    coder = _auth_coder(request)
    if not coder:
        return _login_redirect()
    form = await _form(request)
    st = wb.project.state(request.path_params["item_id"])
    labels = {d: (form.get(f"label_{d}") or None) for d in wb.project.dims}
    proposals = []
    if form.get("proposal_text", "").strip():
        kind = form.get("proposal_kind", "add_cue_include")
        dim, _, cat = form.get("proposal_category", "").partition(".")
        text = form["proposal_text"].strip()
        if kind == "edit_definition":
            proposals.append({"kind": "edit_definition", "dimension": dim, "category": cat, "definition": text})
        else:
            cue = "exclude" if kind == "add_cue_exclude" else "include"
            proposals.append({"kind": "add_cue", "dimension": dim, "category": cat, "cue": cue, "text": text})
    try:
        wb.project.decide(st.id, coder, labels, form.get("note", ""), proposals)
    except LabelError as e:
        return _adjudicate_view(request, st, error=str(e))
    return RedirectResponse(f"/adjudicate/{st.id}", status_code=303)


async def review_list(request: Request) -> Response:
    wb = _wb(request)
    if not _auth_coder(request):
        return _login_redirect()
    if wb.review is None:
        raise NotFound("no review queue in this project (serve with --queue review/queue.json)")
    return _page(request, "review_list.html", rt=wb.review, decided=wb.review.decided())


async def review_page(request: Request, error: str | None = None) -> Response:
    wb = _wb(request)
    if not _auth_coder(request):
        return _login_redirect()
    if wb.review is None:
        raise NotFound("no review queue in this project")
    n = int(request.path_params["n"])
    it = wb.review.item(n)
    return _page(
        request,
        "review.html",
        n=n,
        it=it,
        total=len(wb.review.queue.items),
        body=render(it.record.get("body")),
        discussion=render(it.record.get("discussion")),
        url=safe_url(it.record.get("url")),
        cats=wb.review.taxonomy.dimensions[it.dimension].categories,
        decided=wb.review.decided().get(it.key),
        error=error,
    )


async def review_post(request: Request) -> Response:
    wb = _wb(request)
    coder = _auth_coder(request)
    if not coder:
        return _login_redirect()
    if wb.review is None:
        raise NotFound("no review queue in this project")
    form = await _form(request)
    n = int(request.path_params["n"])
    try:
        wb.review.decide(n, coder, form.get("action", ""), form.get("label") or None, form.get("note", ""))
    except ClassifyError as e:
        return await review_page(request, error=str(e))
    nxt = n + 1 if n + 1 <= len(wb.review.queue.items) else n
    return RedirectResponse(f"/review/{nxt}", status_code=303)


# ---------------------------------------------------------------- JSON API


def _item_json(wb: Workbench, st: ItemState, coder: str | None) -> dict:
    out: dict[str, Any] = {
        "id": st.id,
        "title": st.record.get("title"),
        "url": st.record.get("url"),
        "assigned": st.assigned,
        "n_codes": len(st.codes),
    }
    if coder:
        mine = st.codes.get(coder)
        out["coded"] = mine is not None
        out["code"] = {"labels": mine.labels, "note": mine.note, "unsure": mine.unsure, "at": mine.at} if mine else None
        if mine is not None or wb.project.show_suggestions:
            out["suggestion"] = st.suggestion
        if wb.project.can_see_codes(st, coder):
            out["codes"] = {c: s.labels for c, s in st.codes.items()}
            out["decision"] = (
                {"labels": st.decision.labels, "note": st.decision.note, "by": st.decision.adjudicator}
                if st.decision
                else None
            )
    return out


async def api_items(request: Request) -> Response:
    wb = _wb(request)
    claimed = request.query_params.get("coder")
    coder = _api_coder(request, claimed) if (claimed or wb.require_tokens) else None
    states = wb.project.states()
    if coder:
        states = [s for s in states if coder in s.assigned]
    return JSONResponse({"items": [_item_json(wb, s, coder) for s in states]})


async def api_item(request: Request) -> Response:
    wb = _wb(request)
    claimed = request.query_params.get("coder")
    coder = _api_coder(request, claimed) if (claimed or wb.require_tokens) else None
    st = wb.project.state(request.path_params["item_id"])
    return JSONResponse({**_item_json(wb, st, coder), "record": st.record})


async def _json_body(request: Request) -> dict:
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise _HTTP(415, "send JSON (Content-Type: application/json)")
    try:
        body = await request.json()
    except ValueError:
        raise _HTTP(400, "the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise _HTTP(400, "the body must be a JSON object")
    return body


async def api_code(request: Request) -> Response:
    wb = _wb(request)
    body = await _json_body(request)
    item_id = request.path_params["item_id"]
    wb.project.state(item_id)  # 404 before anything else
    coder = _api_coder(request, body.get("coder"))
    code = wb.project.add_code(item_id, coder, body.get("labels"), body.get("note", ""), body.get("unsure", False))
    return JSONResponse(
        {"id": item_id, "coder": coder, "labels": code.labels, "note": code.note, "unsure": code.unsure, "at": code.at},
        status_code=201,
    )


async def api_decision(request: Request) -> Response:
    wb = _wb(request)
    body = await _json_body(request)
    item_id = request.path_params["item_id"]
    wb.project.state(item_id)
    coder = _api_coder(request, body.get("adjudicator"))
    d = wb.project.decide(item_id, coder, body.get("labels"), body.get("note", ""), body.get("proposals"))
    return JSONResponse({"id": item_id, "labels": d.labels, "note": d.note, "by": d.adjudicator, "at": d.at}, 201)


async def api_history(request: Request) -> Response:
    wb = _wb(request)
    coder = _api_coder(request, request.query_params.get("coder"))
    st = wb.project.state(request.path_params["item_id"])
    if not wb.project.can_see_codes(st, coder):
        raise Forbidden(f"{coder} has not coded {st.id} yet")
    return JSONResponse({"id": st.id, "history": wb.project.history(st.id)})


async def api_agreement(request: Request) -> Response:
    wb = _wb(request)
    if wb.require_tokens:
        _api_coder(request, None)
    coders = wb.project.coders()
    a = request.query_params.get("a", coders[0])
    b = request.query_params.get("b", coders[1] if len(coders) > 1 else coders[0])
    for c in (a, b):
        wb.project.require_coder(c)
    if a == b:
        raise LabelError("agreement needs two different coders (?a=...&b=...)", {})
    res = wb.cached(("pair", a, b), lambda: agree.pair_agreement(wb.project, a, b, n_boot=wb.n_boot))
    return JSONResponse(res)


async def api_agreement_details(request: Request) -> Response:
    wb = _wb(request)
    viewer = (
        _api_coder(request, request.query_params.get("coder"))
        if (wb.require_tokens or request.query_params.get("coder"))
        else None
    )
    return JSONResponse(wb.cached(("summary", viewer), lambda: agree.summary(wb.project, viewer, n_boot=wb.n_boot)))


# ---------------------------------------------------------------- errors and security


class _HTTP(Exception):
    def __init__(self, status: int, msg: str):
        super().__init__(msg)
        self.status = status


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _status(e: Exception) -> int:
    if isinstance(e, _HTTP):
        return e.status
    if isinstance(e, NotFound):
        return 404
    if isinstance(e, Forbidden):
        return 403
    return 422


async def _on_error(request: Request, e: Exception) -> Response:
    status = _status(e)
    if _wants_json(request):
        extra = {"allowed": e.allowed} if isinstance(e, LabelError) and e.allowed else {}
        return _error(status, str(e), **extra)
    resp = _page(request, "error.html", status=status, message=str(e))
    resp.status_code = status
    return resp


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
                resp = _error(403, f"cross-origin request from {origin} refused")
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
    routes = [
        Route("/", home),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/code", code_page),
        Route("/code/{item_id:path}", code_page),
        Route("/agreement", agreement_page),
        Route("/adjudicate", adjudicate_list),
        Route("/adjudicate/{item_id:path}", adjudicate_page, methods=["GET"]),
        Route("/adjudicate/{item_id:path}", adjudicate_post, methods=["POST"]),
        Route("/review", review_list),
        Route("/review/{n:int}", review_page, methods=["GET"]),
        Route("/review/{n:int}", review_post, methods=["POST"]),
        Route("/api/items", api_items),
        Route("/api/agreement", api_agreement),
        Route("/api/agreement/details", api_agreement_details),
        Route("/api/items/{item_id:path}/codes", api_code, methods=["POST"]),
        Route("/api/items/{item_id:path}/decision", api_decision, methods=["POST"]),
        Route("/api/items/{item_id:path}/history", api_history),
        Route("/api/items/{item_id:path}", api_item),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts), Middleware(SecurityMiddleware)],
        exception_handlers={ClassifyError: _on_error, _HTTP: _on_error},
    )
    app.state.wb = Workbench(project, require_tokens, review, n_boot=n_boot)
    app.state.templates = templates
    return app
