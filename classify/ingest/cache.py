"""ETag store for conditional GitHub requests: one SQLite file beside the output.

A refresh sends `If-None-Match` with the stored ETag; a 304 answer costs no rate limit and the
stored body (and its next-page link) is reused, so re-fetching an unchanged repository is cheap.
Each response is committed as soon as it arrives: an interrupted fetch keeps what it got.
"""

from __future__ import annotations

from classify.core.errors import ClassifyError
import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


class CacheError(ClassifyError, RuntimeError):
    pass


@dataclass
class CachedResponse:
    etag: str
    data: Any
    next_url: str | None


def default_cache_path(output: str | Path) -> Path:
    """`issues.jsonl` -> `issues.jsonl.etags.sqlite` in the same folder."""
    output = Path(output)
    return output.with_name(output.name + ".etags.sqlite")


class ResponseCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path)
            # WAL without fsync per commit: a crash may drop the last few entries (they are simply
            # fetched again) but never corrupts the file; per-response fsyncs doubled a cold fetch.
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (url TEXT PRIMARY KEY, etag TEXT NOT NULL,"
                " next_url TEXT, body TEXT NOT NULL, fetched_at TEXT NOT NULL)"
            )
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif row[0] != str(SCHEMA_VERSION):
                raise CacheError(f"{self.path}: ETag cache schema {row[0]}, expected {SCHEMA_VERSION}; delete the file")
            self._db.commit()
        except sqlite3.DatabaseError as e:
            raise CacheError(f"{self.path}: not a usable ETag cache ({e}); delete it or pass another cache file") from e

    def get(self, url: str) -> CachedResponse | None:
        row = self._db.execute("SELECT etag, body, next_url FROM responses WHERE url=?", (url,)).fetchone()
        if row is None:
            return None
        return CachedResponse(etag=row[0], data=json.loads(row[1]), next_url=row[2])

    def put(self, url: str, etag: str, data: Any, next_url: str | None) -> None:
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._db.execute(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
            (url, etag, next_url, json.dumps(data, ensure_ascii=False), now),
        )
        self._db.commit()

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "ResponseCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
