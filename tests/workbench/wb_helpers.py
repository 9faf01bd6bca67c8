"""Helpers for the workbench tests: a small project from real issue texts; the app in Starlette's
TestClient for the API tests, or served by a real uvicorn server on a free port in a thread for the
browser tests (imported, not a conftest: a conftest.py here would shadow tests/conftest.py)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from classify.core import paths
from classify.workbench.app import make_app
from classify.workbench.project import Project

EVIL_TITLE = '<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned=2"> crash'


def write_input(path: Path, n: int = 5, evil: bool = True) -> Path:
    """The first `n` reports of data/issues.jsonl; the first gets a title and body with HTML in them."""
    rows = [json.loads(line) for line in paths.DEFAULT_INPUT.read_text(encoding="utf-8").splitlines()[:n]]
    if evil:
        rows[0]["title"] = EVIL_TITLE
        rows[0]["body"] = (
            "Raw <script>window.__pwned = 3</script> and [a link](javascript:alert(1)).\n\n"
            "```\nTraceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access\n```\n"
            "torch 2.4.1, CUDA 12.4"
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(project: Project, n_boot: int = 200, **kw) -> Iterator[str]:
    """The workbench app on a real server (uvicorn, in a thread); yields its base URL."""
    import uvicorn

    port = free_port()
    app = make_app(project, n_boot=n_boot, **kw)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.time() + 10
    while not server.started:
        if time.time() > deadline or not t.is_alive():
            raise RuntimeError("workbench server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        t.join(10)


BASE = "http://127.0.0.1:8765"  # a Host the app serves (TrustedHostMiddleware refuses "testserver")


def client(project: Project, coder: str | None = None, n_boot: int = 200, app=None, **kw):
    """A TestClient of the app, logged in as `coder` (the picker's cookie) when given; a server
    error raises in the test instead of becoming a 500."""
    from starlette.testclient import TestClient

    c = TestClient(app or make_app(project, n_boot=n_boot, **kw), base_url=BASE, follow_redirects=False)
    if coder:
        c.cookies.set("wb_coder", coder)
    return c


def ask(c, method: str, path: str, body=None, headers: dict | None = None, raw: bytes | None = None):
    """(status, parsed JSON or text) of one TestClient request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {"Content-Type": "application/json"} if body is not None else {}
    h.update(headers or {})
    r = c.request(method, path, content=data, headers=h)
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, r.text


def call(method: str, url: str, body=None, headers: dict | None = None, raw: bytes | None = None):
    """(status, parsed JSON or text) of one request to a real server; errors are answers, not exceptions."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {"Content-Type": "application/json"} if body is not None else {}
    h.update(headers or {})
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text
