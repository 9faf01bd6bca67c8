"""Open (or create) a project and serve it with uvicorn; every option is checked before anything
is created or bound."""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from classify.core.errors import UsageError
from classify.workbench.adjudicate import ExportResult, export
from classify.workbench.project import Project, ProjectError, parse_coders
from classify.workbench.reviewtask import ReviewTask


@dataclass
class ServeOptions:
    project: Path
    input: Path | None = None
    coders: str | None = None
    host: str = "127.0.0.1"
    port: int = 8765
    taxonomy: Path | None = None
    overlap: float | None = None
    show_suggestions: bool = False
    queue: Path | None = None


def open_project(o: ServeOptions) -> tuple[Project, bool]:
    """The project, created from --input when new; True when it was created now."""
    if not 0 < o.port < 65536:
        raise UsageError(f"--port must be 1..65535, not {o.port}")
    names = parse_coders(o.coders) if o.coders is not None else None
    if Project.exists(o.project):
        given = [
            f for f, v in (("--input", o.input), ("--taxonomy", o.taxonomy), ("--overlap", o.overlap)) if v is not None
        ]
        if o.show_suggestions:
            given.append("--show-suggestions")
        if given:
            raise UsageError(
                f"{o.project}: the project exists; {', '.join(given)} only apply when creating one "
                "(use a new --project folder)"
            )
        p = Project.open(o.project)
        if names is not None:
            p.check_coders(names)
        return p, False
    if o.input is None:
        raise ProjectError(f"{o.project}: no project here; create one with --input FILE --coders a,b")
    return (
        Project.create(
            o.project,
            o.input,
            names or [],
            taxonomy=o.taxonomy,
            overlap=1.0 if o.overlap is None else o.overlap,
            show_suggestions=o.show_suggestions,
        ),
        True,
    )


def served_url(host: str, port: int) -> str:
    """The URL to open: an IPv6 address goes in brackets (http://[::1]:8765/), as URLs require."""
    h = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{h}:{port}/"


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything says the workbench is on; a clear error if not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise ProjectError(
            f"cannot serve on {served_url(host, port)}: {e.strerror or e}"
            + (" (another server uses the port: pick another with --port)" if e.errno == errno.EADDRINUSE else "")
        ) from None
    sock.set_inheritable(True)
    return sock


def serve(o: ServeOptions, say: Callable[[str], None] = print) -> None:
    import uvicorn

    from classify.workbench.app import make_app

    if o.queue is not None and not Path(o.queue).exists():
        raise UsageError(f"--queue {o.queue}: file not found (build one with `classify review build`)")
    project, created = open_project(o)
    review = ReviewTask(project, o.queue) if o.queue else None
    app = make_app(project, host=o.host, review=review)  # refuses a non-loopback host without tokens
    sock = bind(o.host, o.port)
    n = len(project.item_ids())
    say(f"{'created' if created else 'opened'} {project.folder}: {n} items, coders {', '.join(project.coders())}")
    if review:
        say(f"review task: {len(review.queue.items)} items from {review.queue_path}")
    say(f"workbench on {served_url(o.host, o.port)}  (Ctrl-C to stop)")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


def make_tokens(folder: Path) -> dict[str, str]:
    p = Project.open(folder)
    try:
        return p.make_tokens()
    finally:
        p.close()


def export_project(folder: Path, out: Path, force: bool = False) -> ExportResult:
    p = Project.open(folder)
    try:
        return export(p, out, force)
    finally:
        p.close()
