"""What the workbench's pages, API and middleware share: the app's state (project, token mode, a
cache of derived figures keyed on the database's state), HTTP errors, and rendering a page."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from classify.workbench.project import Project
from classify.workbench.reviewtask import ReviewTask

MAX_BODY = 200_000  # bytes of a request body: a code, a decision with its proposals and notes fit many times over


class HTTPError(Exception):
    """A refusal with its own status (415, 400, 413); ClassifyError subclasses map in app.status_of."""

    def __init__(self, status: int, msg: str):
        super().__init__(msg)
        self.status = status


class Workbench:
    """The app's state: the project, whether tokens are required, the review task, and a cache of
    derived figures. The cache keys on Project.state_key, which changes with every commit by any
    process, so two servers on one project never show each other stale figures."""

    def __init__(self, project: Project, require_tokens: bool, review: ReviewTask | None = None, n_boot: int = 1000):
        self.project = project
        self.require_tokens = require_tokens
        self.review = review
        self.n_boot = n_boot
        self._cache: dict[tuple, tuple[tuple[int, int], Any]] = {}
        self._lock = threading.Lock()

    def cached(self, key: tuple, fn: Callable[[], Any]) -> Any:
        state = self.project.state_key()
        with self._lock:
            hit = self._cache.get(key)
        if hit and hit[0] == state:
            return hit[1]
        value = fn()
        with self._lock:
            self._cache[key] = (state, value)
        return value


def wb_of(request: Request) -> Workbench:
    return request.app.state.wb


def error_json(status: int, msg: str, **extra) -> JSONResponse:
    return JSONResponse({"error": msg, **extra}, status_code=status)


def csrf_token(request: Request) -> str:
    return request.cookies.get("wb_csrf") or request.state.new_csrf


def page(request: Request, name: str, coder: str | None, **ctx) -> Response:
    """A page for `coder` (None: nobody logged in). Blocking (reads the project): call it from a
    sync endpoint or a thread."""
    wb = wb_of(request)
    prog = wb.project.progress()
    return request.app.state.templates.TemplateResponse(
        request,
        name,
        {
            "coder": coder,
            "coders": wb.project.coders(),
            "progress": prog.get(coder) if coder else None,
            "csrf": csrf_token(request),
            "tax": wb.project.taxonomy,
            "has_review": wb.review is not None,
            "require_tokens": wb.require_tokens,
            **ctx,
        },
    )
