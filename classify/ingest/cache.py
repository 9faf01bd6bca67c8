"""ETag store for conditional GitHub requests: one SQLite file beside the output.

A refresh sends `If-None-Match` with the stored ETag; a 304 answer costs no rate limit and the
stored body (and its next-page link) is reused, so re-fetching an unchanged repository is cheap.
Each response is committed as soon as it arrives: an interrupted fetch keeps what it got.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from classify.core.jsontext import loads
from classify.core.storage import Migration, SQLiteStore, StorageError

# The old name of the error an unusable store raises; callers still catch it by that name.
CacheError = StorageError

# 1: the tables of every file so far (its `meta` row held the schema number);
# 2: the version lives in PRAGMA user_version like the other stores, so `meta` goes.
_MIGRATIONS: list[Migration] = [
    """CREATE TABLE IF NOT EXISTS responses (url TEXT PRIMARY KEY, etag TEXT NOT NULL,
           next_url TEXT, body TEXT NOT NULL, fetched_at TEXT NOT NULL);
       CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);""",
    "DROP TABLE IF EXISTS meta",
]


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
    """A pure cache: a damaged or newer-version file is moved aside with a warning and rebuilt."""

    def __init__(self, path: str | Path):
        self.store = SQLiteStore(
            path, "ETag cache", _MIGRATIONS, kind="cache", tables={"responses"}, legacy_tables={"responses"}
        )
        self.path, self._db = self.store.path, self.store.db
        # No fsync per commit: a crash may drop the last few entries (they are simply fetched
        # again) but WAL never corrupts the file; per-response fsyncs doubled a cold fetch.
        self._db.execute("PRAGMA synchronous=NORMAL")

    def get(self, url: str) -> CachedResponse | None:
        row = self._db.execute("SELECT etag, body, next_url FROM responses WHERE url=?", (url,)).fetchone()
        if row is None:
            return None
        try:
            data = loads(row[1])
        except ValueError:  # an entry damaged outside the toolkit: a pure cache forgets it and fetches again
            self._db.execute("DELETE FROM responses WHERE url=?", (url,))
            self._db.commit()
            return None
        return CachedResponse(etag=row[0], data=data, next_url=row[2])

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
        self.store.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
