"""SQLite response cache and request log for LLM calls, two files in cache_dir():

- llm-cache.sqlite, `responses`: one row per distinct request, keyed by (endpoint identity, model,
  rendered messages, sampling parameters). A repeated run reads answers from here and sends
  nothing. A pure cache: a damaged file is moved aside with a warning and rebuilt.
- llm.sqlite, `requests`: every HTTP attempt, with outcome, tokens and latency, in the spirit of
  the `llm` CLI's log; `classify logs` lists recent ones. Data: a damaged file is an error naming
  it, never dropped. API keys are never written to either file.

They are two files so that a damaged cache can be rebuilt without touching the log. Until
schema version 2 both tables lived in llm.sqlite; opening such a file moves its responses over.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from classify.core.paths import cache_dir
from classify.core.storage import Migration, SQLiteStore

_RESPONSES = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    endpoint TEXT, model TEXT, response TEXT NOT NULL, created_at TEXT
);
"""
_REQUESTS = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT, run_id TEXT, endpoint TEXT, model TEXT, record_id TEXT, key TEXT,
    attempt INTEGER, outcome TEXT, http_status INTEGER, error TEXT,
    prompt_tokens INTEGER, completion_tokens INTEGER, latency_ms REAL,
    messages TEXT, params TEXT, response TEXT
);
CREATE INDEX IF NOT EXISTS requests_ts ON requests (id DESC);
"""
# Batches submitted and not yet collected (batch.py): paid work, so kept with the log (data).
_BATCHES = """
CREATE TABLE IF NOT EXISTS batches (
    state_key TEXT PRIMARY KEY, endpoint TEXT, batch_id TEXT NOT NULL, input_file_id TEXT,
    requests INTEGER, status TEXT, created_at TEXT, updated_at TEXT
);
"""
_CACHE_MIGRATIONS: list[Migration] = [_RESPONSES]


def _log_migrations(cache_path: Path) -> list[Migration]:
    def split_out_responses(db: sqlite3.Connection) -> None:
        # The cache commits first; if the log's transaction then fails, the next open copies
        # again and INSERT OR IGNORE keeps that harmless.
        if db.execute("SELECT 1 FROM responses LIMIT 1").fetchone():
            with _open_cache(cache_path) as cache, cache.db:
                cache.db.executemany(
                    "INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?)",
                    db.execute("SELECT key, endpoint, model, response, created_at FROM responses"),
                )
        db.execute("DROP TABLE responses")

    return [_RESPONSES + _REQUESTS, split_out_responses, _BATCHES]


def _open_cache(path: Path) -> SQLiteStore:
    return SQLiteStore(
        path,
        "LLM response cache",
        _CACHE_MIGRATIONS,
        kind="cache",
        tables={"responses"},
        legacy_tables={"responses"},
        check_same_thread=False,
    )


def _open_log(path: Path, cache_path: Path) -> SQLiteStore:
    return SQLiteStore(
        path,
        "LLM request log",
        _log_migrations(cache_path),
        kind="data",
        tables={"requests", "batches"},
        legacy_tables={"requests"},
        check_same_thread=False,
    )


def default_db_path() -> Path:
    """The request log (what `classify logs` reads)."""
    return cache_dir() / "llm.sqlite"


def cache_path_for(log_path: Path) -> Path:
    """`llm.sqlite` -> `llm-cache.sqlite` beside it."""
    return log_path.with_name(f"{log_path.stem}-cache{log_path.suffix}")


def request_key(identity: str, model: str, messages: list[dict], params: dict[str, Any]) -> str:
    blob = json.dumps(
        {"endpoint": identity, "model": model, "messages": messages, "params": params},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class LLMStore:
    """The response cache and the request log; `path` is the log, the cache sits beside it."""

    def __init__(self, path: Path | None = None, cache_path: Path | None = None):
        self.path = Path(path) if path else default_db_path()
        self.cache_path = Path(cache_path) if cache_path else cache_path_for(self.path)
        self._lock = threading.Lock()
        # The log first: upgrading a pre-version-2 log moves its responses into the cache file.
        self._log = _open_log(self.path, self.cache_path)
        try:
            self._cache = _open_cache(self.cache_path)
        except BaseException:
            self._log.close()
            raise
        # One commit per request: with WAL, NORMAL stays consistent and skips the fsync that
        # otherwise held the client's event loop ~10 ms a request (power loss may drop the last
        # few rows, never corrupt the file).
        for store in (self._log, self._cache):
            store.db.execute("PRAGMA synchronous=NORMAL")

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached response, or None: also for a row that does not decode (it is only a cache)."""
        with self._lock:
            row = self._cache.db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        if not row:
            return None
        try:
            got = json.loads(row[0])
        except (TypeError, ValueError, RecursionError):
            return None
        return got if isinstance(got, dict) else None

    def has(self, key: str) -> bool:
        with self._lock:
            return self._cache.db.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None

    def put(self, key: str, endpoint: str, model: str, response: dict[str, Any]) -> None:
        with self._lock, self._cache.db:
            self._cache.db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                (key, endpoint, model, json.dumps(response, ensure_ascii=False), _now()),
            )

    def log(self, **row: Any) -> None:
        cols = (
            "run_id",
            "endpoint",
            "model",
            "record_id",
            "key",
            "attempt",
            "outcome",
            "http_status",
            "error",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
            "messages",
            "params",
            "response",
        )
        vals = [row.get(c) for c in cols]
        for i, c in enumerate(cols):
            if c in ("messages", "params") and vals[i] is not None and not isinstance(vals[i], str):
                vals[i] = json.dumps(vals[i], ensure_ascii=False)
        with self._lock, self._log.db:
            self._log.db.execute(
                f"INSERT INTO requests (ts, {', '.join(cols)}) VALUES (?, {', '.join('?' * len(cols))})",
                [_now(), *vals],
            )

    def batch(self, state_key: str) -> dict[str, Any] | None:
        """The batch submitted for these requests, unless it was collected or failed."""
        with self._lock:
            cur = self._log.db.execute(
                "SELECT batch_id, input_file_id, status FROM batches WHERE state_key = ? AND status NOT IN ('collected', 'failed')",
                (state_key,),
            )
            row = cur.fetchone()
        return {"batch_id": row[0], "input_file_id": row[1], "status": row[2]} if row else None

    def save_batch(
        self, state_key: str, endpoint: str, batch_id: str, input_file_id: str | None, requests: int, status: str
    ) -> None:
        now = _now()
        with self._lock, self._log.db:
            self._log.db.execute(
                "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(state_key) DO UPDATE SET "
                "batch_id = excluded.batch_id, input_file_id = excluded.input_file_id, status = excluded.status, "
                "updated_at = excluded.updated_at",
                (state_key, endpoint, batch_id, input_file_id, requests, status, now, now),
            )

    def close(self) -> None:
        with self._lock:
            self._cache.close()
            self._log.close()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def list_logs(
    limit: int = 20, path: Path | None = None, run_id: str | None = None, full: bool = False
) -> list[dict[str, Any]]:
    """The most recent logged requests, newest first (for `classify logs`).

    full=False leaves out the bulky messages/params/response columns. No log file: []. A damaged
    or newer-version log raises StorageError naming the file (it is data: never read as empty)."""
    path = Path(path) if path else default_db_path()
    if not path.exists():
        return []
    with _open_log(path, cache_path_for(path)) as store:
        store.db.row_factory = sqlite3.Row
        cols = (
            "*"
            if full
            else (
                "id, ts, run_id, endpoint, model, record_id, attempt, outcome, http_status, error, "
                "prompt_tokens, completion_tokens, latency_ms"
            )
        )
        q = f"SELECT {cols} FROM requests"
        args: list[Any] = []
        if run_id:
            q += " WHERE run_id = ?"
            args.append(run_id)
        q += " ORDER BY id DESC LIMIT ?"
        args.append(int(limit))
        return [dict(r) for r in store.db.execute(q, args)]


def endpoint_figures(path: Path | None = None, run_id: str | None = None, last: int = 1000) -> list[dict[str, Any]]:
    """Per server, over the `last` logged requests (or one run's): attempts, how they ended,
    mean latency and tokens. What `classify logs --endpoints` prints."""
    path = Path(path) if path else default_db_path()
    if not path.exists():
        return []
    where, args = ("WHERE run_id = ?", [run_id]) if run_id else ("", [])
    q = f"""
        SELECT endpoint, COUNT(*) AS requests,
               SUM(outcome = 'ok') AS ok, SUM(outcome = 'transient') AS transient,
               SUM(outcome IN ('error', 'rejected')) AS errors,
               AVG(latency_ms) AS mean_ms,
               COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens,
               COALESCE(SUM(completion_tokens), 0) AS completion_tokens
        FROM (SELECT * FROM requests {where} ORDER BY id DESC LIMIT ?)
        GROUP BY endpoint ORDER BY requests DESC, endpoint"""
    with _open_log(path, cache_path_for(path)) as store:
        store.db.row_factory = sqlite3.Row
        return [dict(r) for r in store.db.execute(q, [*args, int(last)])]


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str, Any]]) -> str:
    """Fixed-width text: columns are (heading, format spec, value of a row)."""
    if not rows:
        return "no logged LLM requests"

    def line(cells: list[Any]) -> str:
        return "  ".join(f"{c:{spec}}" for c, (_, spec, _) in zip(cells, columns)).rstrip()

    return "\n".join([line([h for h, _, _ in columns]), *(line([f(r) for _, _, f in columns]) for r in rows)])


def format_endpoint_figures(rows: list[dict[str, Any]]) -> str:
    """Plain-text table of endpoint_figures() rows."""
    return _table(
        rows,
        [
            ("endpoint", "48", lambda r: str(r["endpoint"])[:48]),
            ("requests", ">8", lambda r: r["requests"]),
            ("ok", ">6", lambda r: r["ok"] or 0),
            ("transient", ">9", lambda r: r["transient"] or 0),
            ("errors", ">6", lambda r: r["errors"] or 0),
            ("mean ms", ">8", lambda r: round(r["mean_ms"] or 0)),
            ("in", ">9", lambda r: r["prompt_tokens"]),
            ("out", ">8", lambda r: r["completion_tokens"]),
        ],
    )


def format_logs(rows: list[dict[str, Any]]) -> str:
    """Plain-text table of list_logs() rows."""
    return _table(
        rows,
        [
            ("id", ">6", lambda r: r["id"]),
            ("time (UTC)", "19", lambda r: str(r["ts"])[:19]),
            ("model", "24", lambda r: str(r["model"])[:24]),
            ("record", "18", lambda r: str(r["record_id"] or "")[:18]),
            ("try", ">3", lambda r: r["attempt"] or 0),
            ("outcome", "9", lambda r: str(r["outcome"])[:9]),
            ("http", ">4", lambda r: r["http_status"] or ""),
            ("in", ">6", lambda r: r["prompt_tokens"] or ""),
            ("out", ">5", lambda r: r["completion_tokens"] or ""),
            ("ms", ">7", lambda r: round(r["latency_ms"]) if r["latency_ms"] is not None else ""),
            ("error", "", lambda r: (r["error"] or "")[:60]),
        ],
    )
