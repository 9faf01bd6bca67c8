"""One way to open the toolkit's SQLite files: WAL, a schema version, numbered migrations, and
a defined answer to a damaged file.

    store = SQLiteStore(path, "embedding cache", ["CREATE TABLE emb (...)"], tables={"emb"})
    store.db.execute(...)

- The schema version is `PRAGMA user_version`. Migration N (a SQL script or a callable taking
  the connection) brings version N-1 to N; pending ones run in one transaction, so an old file
  is upgraded in place or not at all. Files written before versions existed have user_version
  0 and already hold the tables of version 1: `legacy_tables` names them, and such a file counts
  as version 1.
- kind="cache" (rebuildable: embeddings, LLM responses, ETags): a corrupt, foreign or newer-version
  file is moved aside (`<name>.corrupt-<time>`, `<name>.newer-<time>`) with a one-line warning
  and a fresh file takes its place.
- kind="data" (the LLM request log): the same problems raise StorageError naming the file and
  what is wrong; the file is never touched.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Collection, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal, Union

from classify.core.errors import ClassifyError

log = logging.getLogger("classify.storage")

Migration = Union[str, Callable[[sqlite3.Connection], None]]
Kind = Literal["cache", "data"]

# SQLite's primary result codes for a damaged file (extended codes keep them in the low byte).
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26


class StorageError(ClassifyError):
    """A store that cannot be used as it is; the message names the file and what is wrong."""


class _Unusable(Exception):
    """Internal: the file is damaged, foreign or too new; `tag` names the move-aside suffix."""

    def __init__(self, reason: str, tag: str = "corrupt"):
        super().__init__(reason)
        self.reason, self.tag = reason, tag


class SQLiteStore:
    """An open SQLite file at its newest schema version (`self.db`, `self.version`)."""

    def __init__(
        self,
        path: str | Path,
        name: str,
        migrations: Sequence[Migration],
        *,
        kind: Kind = "cache",
        tables: Collection[str] = (),
        legacy_tables: Collection[str] = (),
        timeout: float = 60.0,
        check_same_thread: bool = True,
    ):
        if not migrations:
            raise ValueError("a store needs at least one migration (the one that creates its tables)")
        if kind not in ("cache", "data"):
            raise ValueError(f"kind must be 'cache' or 'data', not {kind!r}")
        self.path = Path(path)
        self.name, self.kind = name, kind
        self.migrations = list(migrations)
        self.tables, self.legacy_tables = set(tables), set(legacy_tables)
        self.timeout, self._check_same_thread = timeout, check_same_thread
        self._found: tuple[int, int] | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = self._open()

    @property
    def version(self) -> int:
        return _version_of(self.db)

    @property
    def latest(self) -> int:
        return len(self.migrations)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> sqlite3.Connection:
        try:
            return self._try_open()
        except _Unusable as bad:
            if self.kind == "data":
                raise StorageError(self._data_message(bad)) from None
            aside = self._move_aside(bad.tag)
            where = f"moved it to {aside.name}" if aside else "another process moved it"
            log.warning("%s: %s; %s, starting a fresh %s", self.path, bad.reason, where, self.name)
            try:
                return self._try_open()
            except _Unusable as again:  # a fresh file cannot be damaged; if it is, say so
                raise StorageError(f"{self.path}: fresh {self.name} unusable ({again.reason})") from None

    def _try_open(self) -> sqlite3.Connection:
        self._found = _inode(self.path)  # the file judged here, so that only it is ever moved aside
        try:
            db = sqlite3.connect(self.path, timeout=self.timeout, check_same_thread=self._check_same_thread)
        except sqlite3.Error as e:
            raise StorageError(f"{self.path}: cannot open the {self.name} ({e})") from None
        try:
            self._check(db)
            db.execute("PRAGMA journal_mode=WAL")
            self._migrate(db)
            return db
        except _Unusable:
            db.close()
            raise
        except sqlite3.Error as e:
            db.close()
            if _is_damage(e):
                raise _Unusable(f"not a usable SQLite file ({e})") from None
            raise StorageError(f"{self.path}: cannot use the {self.name} ({e})") from None

    def _check(self, db: sqlite3.Connection) -> None:
        # quick_check reads every page (about 0.3 s for 200 MB): cheap next to a run, and it
        # finds a truncated file at open instead of half-way through.
        result = [str(r[0]) for r in db.execute("PRAGMA quick_check(1)")]
        if result != ["ok"]:
            first = " ".join(" ".join(result).replace("*** in database main ***", "").split())
            raise _Unusable(f"damaged ({first[:120]})")  # one line: the message goes to a log
        found = _version_of(db)
        if found > self.latest:
            raise _Unusable(f"schema version {found} is newer than this classify knows ({self.latest})", tag="newer")

    def _migrate(self, db: sqlite3.Connection) -> None:
        # IMMEDIATE takes the write lock first, so two processes opening one old file upgrade it once.
        db.execute("BEGIN IMMEDIATE")
        try:
            have = _table_names(db)
            version = _version_of(db)
            if version == 0 and have:
                if not self.legacy_tables or not self.legacy_tables <= have:
                    raise _Unusable(f"its tables ({', '.join(sorted(have))}) are not those of the {self.name}")
                version = 1  # written before schema versions: its tables are version 1's
            for n in range(version + 1, self.latest + 1):
                step = self.migrations[n - 1]
                if callable(step):
                    step(db)
                else:
                    for stmt in _statements(step):
                        db.execute(stmt)
            db.execute(f"PRAGMA user_version = {self.latest}")
            missing = self.tables - _table_names(db)
            if missing:
                raise _Unusable(f"missing table(s) {', '.join(sorted(missing))} at schema version {self.latest}")
            db.commit()
        except BaseException:
            db.rollback()
            raise

    def _move_aside(self, tag: str) -> Path | None:
        """Rename the bad file (and its WAL) to `<name>.<tag>-<time>`; None if it is gone already."""
        # Another process may have moved the file and started a fresh one meanwhile: move only
        # the file found bad, never its replacement.
        if self._found is None or _inode(self.path) != self._found:
            return None
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.path.name}.{tag}-{stamp}")
        n = 1
        while target.exists():
            target = self.path.with_name(f"{self.path.name}.{tag}-{stamp}-{n}")
            n += 1
        os.replace(self.path, target)
        # A stale WAL beside a fresh file would be replayed into it: the journal files go too.
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                os.replace(side, target.with_name(target.name + suffix))
        return target

    def _data_message(self, bad: _Unusable) -> str:
        if bad.tag == "newer":
            return f"{self.path}: {self.name} {bad.reason}; upgrade classify or use another cache dir"
        return (
            f"{self.path}: {self.name} is unusable: {bad.reason}. It holds data that cannot be rebuilt, "
            f"so it was left as is: move it aside to start a fresh one (or try `sqlite3 {self.path} .recover`)"
        )


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def _version_of(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def _table_names(db: sqlite3.Connection) -> set[str]:
    return {
        r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    }


def _is_damage(e: sqlite3.Error) -> bool:
    """A damaged or foreign file, as opposed to a locked, full or unwritable one."""
    code = getattr(e, "sqlite_errorcode", None)  # Python >= 3.11
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    return type(e) is sqlite3.DatabaseError  # 3.10: corruption has no subclass of its own


def _statements(script: str) -> Iterator[str]:
    """The statements of a SQL script, one by one: executescript() would commit the open
    transaction first, and a migration must stay inside it."""
    buf = ""
    for part in script.split(";"):
        buf += part + ";"
        if sqlite3.complete_statement(buf):  # a ';' inside a string or trigger body is not an end
            if buf.strip(" \t\r\n;"):
                yield buf
            buf = ""
    if buf.strip(" \t\r\n;"):
        raise ValueError(f"incomplete SQL statement in migration: {buf.strip()[:80]!r}")
