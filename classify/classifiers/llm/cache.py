"""SQLite response cache and request log for LLM calls (cache_dir()/llm.sqlite).

- responses: one row per distinct request, keyed by (endpoint identity, model, rendered
  messages, sampling parameters). A repeated run reads answers from here and sends nothing.
- requests: every HTTP attempt, with outcome, tokens and latency, in the spirit of the `llm`
  CLI's log. `classify logs` lists recent ones. API keys are never written here.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from classify.core.paths import cache_dir

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    endpoint TEXT, model TEXT, response TEXT NOT NULL, created_at TEXT
);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT, run_id TEXT, endpoint TEXT, model TEXT, record_id TEXT, key TEXT,
    attempt INTEGER, outcome TEXT, http_status INTEGER, error TEXT,
    prompt_tokens INTEGER, completion_tokens INTEGER, latency_ms REAL,
    messages TEXT, params TEXT, response TEXT
);
CREATE INDEX IF NOT EXISTS requests_ts ON requests (id DESC);
"""


def default_db_path() -> Path:
    return cache_dir() / "llm.sqlite"


def request_key(identity: str, model: str, messages: list[dict], params: dict[str, Any]) -> str:
    blob = json.dumps({"endpoint": identity, "model": model, "messages": messages, "params": params},
                      sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class LLMStore:
    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else default_db_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(_SCHEMA)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self.db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def has(self, key: str) -> bool:
        with self._lock:
            return self.db.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None

    def put(self, key: str, endpoint: str, model: str, response: dict[str, Any]) -> None:
        with self._lock, self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                (key, endpoint, model, json.dumps(response, ensure_ascii=False), _now()),
            )

    def log(self, **row: Any) -> None:
        cols = ("run_id", "endpoint", "model", "record_id", "key", "attempt", "outcome", "http_status", "error",
                "prompt_tokens", "completion_tokens", "latency_ms", "messages", "params", "response")
        vals = [row.get(c) for c in cols]
        for i, c in enumerate(cols):
            if c in ("messages", "params") and vals[i] is not None and not isinstance(vals[i], str):
                vals[i] = json.dumps(vals[i], ensure_ascii=False)
        with self._lock, self.db:
            self.db.execute(
                f"INSERT INTO requests (ts, {', '.join(cols)}) VALUES (?, {', '.join('?' * len(cols))})",
                [_now(), *vals],
            )

    def close(self) -> None:
        with self._lock:
            self.db.close()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def list_logs(limit: int = 20, path: Path | None = None, run_id: str | None = None,
              full: bool = False) -> list[dict[str, Any]]:
    """The most recent logged requests, newest first (for `classify logs`).

    full=False leaves out the bulky messages/params/response columns."""
    path = Path(path) if path else default_db_path()
    if not path.exists():
        return []
    db = sqlite3.connect(path, timeout=60)
    try:
        db.row_factory = sqlite3.Row
        cols = "*" if full else ("id, ts, run_id, endpoint, model, record_id, attempt, outcome, http_status, error, "
                                 "prompt_tokens, completion_tokens, latency_ms")
        q = f"SELECT {cols} FROM requests"
        args: list[Any] = []
        if run_id:
            q += " WHERE run_id = ?"
            args.append(run_id)
        q += " ORDER BY id DESC LIMIT ?"
        args.append(int(limit))
        try:
            return [dict(r) for r in db.execute(q, args)]
        except sqlite3.OperationalError:  # an older or foreign file without the table
            return []
    finally:
        db.close()


def format_logs(rows: list[dict[str, Any]]) -> str:
    """Plain-text table of list_logs() rows."""
    if not rows:
        return "no logged LLM requests"
    head = f"{'id':>6}  {'time (UTC)':19}  {'model':24}  {'record':18}  {'try':>3}  {'outcome':9}  {'http':>4}  {'in':>6}  {'out':>5}  {'ms':>7}  error"
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['id']:>6}  {str(r['ts'])[:19]:19}  {str(r['model'])[:24]:24}  {str(r['record_id'] or '')[:18]:18}  "
            f"{r['attempt'] or 0:>3}  {str(r['outcome'])[:9]:9}  {r['http_status'] or '':>4}  {r['prompt_tokens'] or '':>6}  "
            f"{r['completion_tokens'] or '':>5}  {round(r['latency_ms']) if r['latency_ms'] is not None else '':>7}  "
            f"{(r['error'] or '')[:60]}"
        )
    return "\n".join(lines)


def monotonic_ms() -> float:
    return time.perf_counter() * 1000.0
