"""The SQLite storage layer (classify.core.storage) and the three stores built on it: real SQLite
files, old layouts written with the exact DDL earlier versions used, damage made by hand."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from classify.classifiers.llm.cache import LLMStore, format_logs, list_logs
from classify.cli.main import app
from classify.core.storage import SQLiteStore, StorageError
from classify.encoders.encoder import EmbeddingCache, Encoder, text_hash
from classify.ingest.cache import ResponseCache

# The schemas of the files users have today (before user_version), copied from the old code.
OLD_EMB = "CREATE TABLE IF NOT EXISTS emb (model TEXT, h TEXT, dim INTEGER, vec BLOB, PRIMARY KEY (model, h))"
OLD_LLM = """
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
OLD_ETAGS = """
CREATE TABLE IF NOT EXISTS responses (url TEXT PRIMARY KEY, etag TEXT NOT NULL, next_url TEXT, body TEXT NOT NULL,
                                      fetched_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
INSERT INTO meta VALUES ('schema', '1');
"""


def raw(path: Path, script: str = "") -> sqlite3.Connection:
    db = sqlite3.connect(path)
    if script:
        db.executescript(script)
    return db


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} - {"sqlite_sequence"}


def user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


def set_version(path: Path, v: int) -> None:
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {v}")
    db.commit()
    db.close()


def aside(path: Path, tag: str) -> list[Path]:
    return sorted(p for p in path.parent.glob(f"{path.name}.{tag}-*") if not p.name.endswith(("-wal", "-shm")))


def truncated_copy(path: Path, build) -> None:
    """A real store file with rows, cut to half its length (a crash mid-copy, a full disk)."""
    build(path)
    data = path.read_bytes()
    assert len(data) > 8192, "too small to truncate meaningfully"
    for side in ("-wal", "-shm"):
        Path(str(path) + side).unlink(missing_ok=True)
    path.write_bytes(data[: len(data) // 2])


# -- the generic store -------------------------------------------------------------------------


def test_migrations_run_once_and_in_order(tmp_path):
    ran: list[int] = []

    def step(n):
        def run(db):
            ran.append(n)
            db.execute(f"INSERT INTO t VALUES ({n})")

        return run

    path = tmp_path / "s.sqlite"
    migrations = ["CREATE TABLE t (n INTEGER)", step(2), step(3)]
    with SQLiteStore(path, "test store", migrations, tables={"t"}) as s:
        assert s.version == 3 and ran == [2, 3]
    with SQLiteStore(path, "test store", migrations, tables={"t"}) as s:
        assert s.version == 3 and ran == [2, 3]  # nothing runs twice
    with SQLiteStore(path, "test store", [*migrations, step(4)], tables={"t"}) as s:
        assert s.version == 4 and ran == [2, 3, 4]  # only the new one
        assert [r[0] for r in s.db.execute("SELECT n FROM t")] == [2, 3, 4]


def test_a_file_from_before_versions_counts_as_version_1(tmp_path):
    path = tmp_path / "s.sqlite"
    with raw(path, "CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1);"):
        pass
    ran: list[str] = []
    # Migration 1 is not idempotent here: running it on the old file would fail.
    with SQLiteStore(
        path,
        "test store",
        ["CREATE TABLE t (n INTEGER)", lambda db: ran.append("2")],
        tables={"t"},
        legacy_tables={"t"},
    ) as s:
        assert s.version == 2 and ran == ["2"]
        assert s.db.execute("SELECT n FROM t").fetchall() == [(1,)]


def test_a_failing_migration_leaves_the_file_at_its_old_version(tmp_path):
    path = tmp_path / "s.sqlite"
    SQLiteStore(path, "test store", ["CREATE TABLE t (n INTEGER)"], tables={"t"}).close()

    def boom(db):
        raise RuntimeError("migration bug")

    with pytest.raises(RuntimeError, match="migration bug"):
        SQLiteStore(path, "test store", ["CREATE TABLE t (n INTEGER)", "CREATE TABLE u (x)", boom])
    assert user_version(path) == 1 and tables(path) == {"t"}  # migration 2 rolled back with 3


def test_sql_migration_with_semicolons_inside_statements(tmp_path):
    script = """CREATE TABLE t (s TEXT);
    CREATE TABLE n (c INTEGER); INSERT INTO n VALUES (0);
    CREATE TRIGGER count_t AFTER INSERT ON t BEGIN UPDATE n SET c = c + 1; END;
    INSERT INTO t VALUES ('a;b');"""
    with SQLiteStore(tmp_path / "s.sqlite", "test store", [script], tables={"t", "n"}) as s:
        assert s.db.execute("SELECT s FROM t").fetchall() == [("a;b",)]
        assert s.db.execute("SELECT c FROM n").fetchone() == (1,)


def test_wal_is_on_for_every_store(tmp_path):
    stores = [EmbeddingCache(tmp_path / "e.sqlite"), ResponseCache(tmp_path / "x.etags.sqlite")]
    llm = LLMStore(tmp_path / "llm.sqlite")
    try:
        for path in (tmp_path / "e.sqlite", tmp_path / "x.etags.sqlite", llm.path, llm.cache_path):
            with sqlite3.connect(path) as db:  # WAL is a property of the file, seen by any connection
                assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal", path
    finally:
        for s in stores:
            s.close()
        llm.close()


def test_data_store_refuses_a_newer_file_untouched(tmp_path):
    path = tmp_path / "d.sqlite"
    SQLiteStore(path, "test log", ["CREATE TABLE t (n)"], kind="data", tables={"t"}).close()
    set_version(path, 7)
    before = path.read_bytes()
    with pytest.raises(StorageError) as e:
        SQLiteStore(path, "test log", ["CREATE TABLE t (n)"], kind="data", tables={"t"})
    msg = str(e.value)
    assert str(path) in msg and "version 7" in msg and "(1)" in msg
    assert path.read_bytes() == before and not aside(path, "newer")


def test_cache_store_moves_a_newer_file_aside(tmp_path, caplog):
    path = tmp_path / "c.sqlite"
    with SQLiteStore(path, "test cache", ["CREATE TABLE t (n)"], tables={"t"}) as s, s.db:
        s.db.execute("INSERT INTO t VALUES (1)")
    set_version(path, 2)
    with caplog.at_level(logging.WARNING, logger="classify.storage"):
        with SQLiteStore(path, "test cache", ["CREATE TABLE t (n)"], tables={"t"}) as s:
            assert s.version == 1 and s.db.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)
    (moved,) = aside(path, "newer")
    assert user_version(moved) == 2  # the newer file is kept, whole
    (rec,) = caplog.records
    assert "\n" not in rec.getMessage() and "version 2" in rec.getMessage() and moved.name in rec.getMessage()


def test_foreign_file_is_not_taken_for_a_store(tmp_path):
    path = tmp_path / "other.sqlite"
    raw(path, "CREATE TABLE people (name TEXT)").close()
    with pytest.raises(StorageError, match="people"):
        SQLiteStore(path, "test log", ["CREATE TABLE t (n)"], kind="data", tables={"t"}, legacy_tables={"t"})
    assert tables(path) == {"people"}


def test_missing_table_at_current_version(tmp_path):
    path = tmp_path / "d.sqlite"
    SQLiteStore(path, "test log", ["CREATE TABLE t (n)"], kind="data", tables={"t"}).close()
    with raw(path) as db:
        db.execute("DROP TABLE t")
    with pytest.raises(StorageError, match=r"missing table\(s\) t"):
        SQLiteStore(path, "test log", ["CREATE TABLE t (n)"], kind="data", tables={"t"})


# -- today's files are upgraded in place, rows kept ---------------------------------------------


def test_old_embedding_cache_upgraded_with_rows(tmp_path):
    path = tmp_path / "embeddings.sqlite"
    with raw(path, OLD_EMB) as db:
        db.execute("INSERT INTO emb VALUES ('m', 'h', 3, ?)", (np.arange(3, dtype=np.float32).tobytes(),))
    assert user_version(path) == 0
    c = EmbeddingCache(path)
    assert np.array_equal(c.get_many("m", ["h"])["h"], [0, 1, 2])
    assert c.store.version == 1
    c.close()


def test_old_llm_file_upgraded_responses_move_to_the_cache_file(tmp_path):
    path = tmp_path / "llm.sqlite"
    with raw(path, OLD_LLM) as db:
        db.execute("INSERT INTO responses VALUES ('k1', 'e', 'm', ?, 't')", (json.dumps({"answer": 1}),))
        db.execute("INSERT INTO requests (ts, run_id, model, record_id, outcome) VALUES ('t', 'run1', 'm', 'r1', 'ok')")
    store = LLMStore(path)
    try:
        assert store.get("k1") == {"answer": 1} and store.has("k1")  # a second run still finds it cached
        assert store.cache_path == tmp_path / "llm-cache.sqlite"
        # version 3 added the submitted batches (classify/classifiers/llm/batch.py)
        assert tables(path) == {"requests", "batches"} and tables(store.cache_path) == {"responses"}
        assert user_version(path) == 3 and user_version(store.cache_path) == 1
        [row] = list_logs(10, path)
        assert row["record_id"] == "r1" and row["run_id"] == "run1"
        store.log(run_id="run2", model="m", record_id="r2", outcome="ok")  # ids keep counting
        assert [r["record_id"] for r in list_logs(10, path)] == ["r2", "r1"]
    finally:
        store.close()


def test_old_llm_log_read_by_list_logs_first(tmp_path):
    # `classify logs` may be the first to open an old file: it upgrades it without losing answers.
    path = tmp_path / "llm.sqlite"
    with raw(path, OLD_LLM) as db:
        db.execute("INSERT INTO responses VALUES ('k1', 'e', 'm', '{}', 't')")
        db.execute("INSERT INTO requests (ts, record_id, outcome) VALUES ('t', 'r1', 'ok')")
    assert [r["record_id"] for r in list_logs(5, path)] == ["r1"]
    assert tables(path) == {"requests", "batches"}
    store = LLMStore(path)
    assert store.get("k1") == {}
    store.close()


def test_old_etag_cache_upgraded_with_rows(tmp_path):
    path = tmp_path / "out.jsonl.etags.sqlite"
    with raw(path, OLD_ETAGS) as db:
        db.execute("INSERT INTO responses VALUES ('u', 'W/\"1\"', 'next', '[1, 2]', 't')")
    with ResponseCache(path) as c:
        got = c.get("u")
        assert got is not None and got.etag == 'W/"1"' and got.data == [1, 2] and got.next_url == "next"
        assert len(c) == 1 and c.store.version == 2
    assert tables(path) == {"responses"}  # the version moved from `meta` to user_version


# -- damaged files: caches are rebuilt, the log is reported -------------------------------------


def _emb_file(path: Path) -> None:
    c = EmbeddingCache(path)
    c.put_many("m", {f"h{i}": np.full(384, i, dtype=np.float32) for i in range(40)})
    c.close()


def _etag_file(path: Path) -> None:
    with ResponseCache(path) as c:
        for i in range(60):
            c.put(f"https://api.github.com/x?page={i}", f'"{i}"', [{"body": "x" * 200}], None)


def _llm_files(path: Path) -> None:
    s = LLMStore(path)
    for i in range(60):
        s.put(f"k{i}", "e", "m", {"text": "y" * 200})
        s.log(run_id="r", model="m", record_id=f"r{i}", outcome="ok", messages=[{"content": "z" * 200}])
    s.close()


def _random_bytes(path: Path, build) -> None:
    path.write_bytes(os.urandom(20_000))


def garbled_pages(path: Path, build) -> None:
    """A real store file whose schema page is intact and whose data pages are overwritten: it
    opens and answers `user_version`; only a check of the pages finds the damage."""
    build(path)
    data = bytearray(path.read_bytes())
    start = 4096 * 2  # keep page 1 (the schema) and the tables' first pages readable
    data[start:] = os.urandom(len(data) - start)
    path.write_bytes(bytes(data))


DAMAGE = [_random_bytes, truncated_copy, garbled_pages]
DAMAGE_IDS = ["random-bytes", "truncated", "garbled-pages"]


@pytest.mark.parametrize("damage", DAMAGE, ids=DAMAGE_IDS)
@pytest.mark.parametrize("kind", ["embeddings", "etags", "llm-cache"])
def test_damaged_cache_is_moved_aside_and_rebuilt(tmp_path, caplog, damage, kind):
    if kind == "embeddings":
        path = tmp_path / "embeddings.sqlite"
        damage(path, _emb_file)
        opened = EmbeddingCache(path)
        assert opened.get_many("m", ["h1"]) == {}
        opened.put_many("m", {"h1": np.ones(4, dtype=np.float32)})
        assert len(opened.get_many("m", ["h1"])["h1"]) == 4
    elif kind == "etags":
        path = tmp_path / "out.jsonl.etags.sqlite"
        damage(path, _etag_file)
        opened = ResponseCache(path)
        assert len(opened) == 0
        opened.put("u", "e", [], None)
        assert opened.get("u") is not None
    else:
        log_path = tmp_path / "llm.sqlite"
        _llm_files(log_path)
        path = tmp_path / "llm-cache.sqlite"
        damage(path, lambda p: None)  # the cache file the run above wrote
        opened = LLMStore(log_path)
        assert opened.get("k1") is None and len(list_logs(100, log_path)) == 60  # the log is untouched
    opened.close()
    (moved,) = aside(path, "corrupt")
    assert moved.stat().st_size > 0
    msgs = [r.getMessage() for r in caplog.records if r.name == "classify.storage"]
    assert len(msgs) == 1 and str(path) in msgs[0] and moved.name in msgs[0] and "\n" not in msgs[0]
    assert user_version(path) >= 1  # a fresh file at the current version took its place


@pytest.mark.parametrize("damage", DAMAGE, ids=DAMAGE_IDS)
def test_damaged_log_is_an_error_naming_the_file(tmp_path, damage):
    path = tmp_path / "llm.sqlite"
    damage(path, _llm_files)
    before = path.read_bytes()
    with pytest.raises(StorageError) as e:
        LLMStore(path)
    assert str(path) in str(e.value) and "LLM request log" in str(e.value)
    with pytest.raises(StorageError, match="llm.sqlite"):
        list_logs(10, path)  # never "no logged LLM requests"
    assert path.read_bytes() == before and not aside(path, "corrupt")


def test_stale_wal_of_a_damaged_cache_moves_with_it(tmp_path):
    # A WAL left by the bad file would be replayed into the fresh one and bring its pages back.
    path = tmp_path / "embeddings.sqlite"
    _emb_file(path)
    db = raw(path)
    db.execute("PRAGMA wal_autocheckpoint = 0")
    with db:
        db.executemany(
            "INSERT OR REPLACE INTO emb VALUES ('m', ?, 1, ?)",
            [(f"w{i}", np.ones(1, dtype=np.float32).tobytes()) for i in range(50)],
        )
    wal = Path(str(path) + "-wal").read_bytes()
    db.close()
    path.write_bytes(os.urandom(20_000))
    Path(str(path) + "-wal").write_bytes(wal)
    c = EmbeddingCache(path)
    assert c.get_many("m", ["w1", "h1"]) == {}
    assert c.db.execute("PRAGMA quick_check").fetchone() == ("ok",)
    c.close()
    (moved,) = aside(path, "corrupt")
    assert Path(str(moved) + "-wal").read_bytes() == wal


def test_classify_logs_reports_a_damaged_log_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CLASSIFY_CACHE_DIR", str(tmp_path))
    (tmp_path / "llm.sqlite").write_bytes(os.urandom(20_000))
    r = CliRunner().invoke(app, ["logs"])
    assert r.exit_code == 2, r.output
    assert "llm.sqlite" in r.output and "Traceback" not in r.output
    assert "no logged LLM requests" not in r.output


def test_classify_logs_lists_requests(tmp_path, monkeypatch):
    monkeypatch.setenv("CLASSIFY_CACHE_DIR", str(tmp_path))
    s = LLMStore()
    s.log(run_id="run7", model="m", record_id="rec-1", outcome="ok", attempt=1)
    s.close()
    r = CliRunner().invoke(app, ["logs"])
    assert r.exit_code == 0 and "rec-1" in r.output
    assert "rec-1" in format_logs(list_logs(5))


# -- unusable rows in the embedding cache are encoded again -------------------------------------


class FakeModel:
    """Stands in for the sentence encoder: a fixed unit vector per text, and a count of texts seen."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts, **_kw):
        self.seen += texts
        out = np.stack([np.random.default_rng(int(text_hash(t)[:8], 16)).normal(size=8) for t in texts])
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _encoder(path: Path) -> Encoder:
    enc = Encoder(show_progress=False, cache=EmbeddingCache(path))
    enc._model = FakeModel()
    return enc


def test_short_nan_and_odd_rows_are_reencoded(tmp_path, caplog):
    path = tmp_path / "e.sqlite"
    texts = ["short blob", "nan vector", "inf vector", "odd length", "fine one", "fine two"]
    first = _encoder(path)
    want = first.encode(texts)
    assert first.n_encoded == 6
    with raw(path) as db:
        key = first.model_key

        def set_vec(text, blob, dim=8):
            db.execute("UPDATE emb SET vec = ?, dim = ? WHERE model = ? AND h = ?", (blob, dim, key, text_hash(text)))

        set_vec("short blob", np.ones(8, dtype=np.float32).tobytes()[:20])
        set_vec("nan vector", np.full(8, np.nan, dtype=np.float32).tobytes())
        set_vec("inf vector", np.r_[np.ones(7), np.inf].astype(np.float32).tobytes())
        set_vec("odd length", np.ones(5, dtype=np.float32).tobytes(), dim=5)  # whole, but not this model's size
    second = _encoder(path)
    with caplog.at_level(logging.WARNING, logger="classify.storage"):
        got = second.encode(texts)
    assert sorted(second._model.seen) == ["inf vector", "nan vector", "odd length", "short blob"]
    assert np.isfinite(got).all() and np.allclose(got, want, atol=1e-6)
    assert second.cache.n_bad == 4 and any("4 cached vector(s) unusable" in r.getMessage() for r in caplog.records)
    third = _encoder(path)
    assert np.allclose(third.encode(texts), want, atol=1e-6) and third.n_encoded == 0  # the rows were repaired
