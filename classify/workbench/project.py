"""A workbench project: one SQLite file holding the records, the coders, every code and every
adjudication decision.

Nothing is updated in place: a code or decision is a new row with its coder and time, and the
current one is the latest row for its (item, coder) or item. So the full history of every item
stays in the file, and several coders (several server processes, even) can write at once: WAL
and SQLite's write lock order them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import secrets
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from classify.core import screening
from classify.core.errors import ClassifyError, UsageError
from classify.core.records import CORE_FIELDS, Record, read_records
from classify.core.storage import SQLiteStore
from classify.core.taxonomy import Taxonomy, load_taxonomy, taxonomy_from_text
from classify.core.timestamps import utc_timestamp
from classify.workbench.items import Adjudication, Code, ItemState

DB_NAME = "workbench.sqlite"
CODER_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$"
MAX_NOTE = 5000  # characters: a note explains a code; it is stored with every code and read on every page
MAX_PROPOSALS = 20

MIGRATIONS = [
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE items (id TEXT PRIMARY KEY, pos INTEGER NOT NULL, record TEXT NOT NULL, suggestion TEXT);
    CREATE TABLE coders (name TEXT PRIMARY KEY, pos INTEGER NOT NULL, token_hash TEXT, created_at TEXT NOT NULL);
    CREATE TABLE assignments (item_id TEXT NOT NULL, coder TEXT NOT NULL, PRIMARY KEY (item_id, coder));
    CREATE TABLE codes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, item_id TEXT NOT NULL, coder TEXT NOT NULL,
        labels TEXT NOT NULL, note TEXT NOT NULL, unsure INTEGER NOT NULL, created_at TEXT NOT NULL);
    CREATE INDEX codes_item ON codes (item_id, coder);
    CREATE TABLE decisions (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, item_id TEXT NOT NULL, labels TEXT NOT NULL,
        note TEXT NOT NULL, proposals TEXT NOT NULL, adjudicator TEXT NOT NULL, created_at TEXT NOT NULL);
    CREATE TABLE review_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, item_id TEXT NOT NULL, dimension TEXT NOT NULL,
        decision TEXT NOT NULL, reviewer TEXT NOT NULL, created_at TEXT NOT NULL);
    """
]
TABLES = {"meta", "items", "coders", "assignments", "codes", "decisions", "review_log"}


class ProjectError(ClassifyError, ValueError):
    """A project cannot be created, opened or used as asked; the message says why."""


class LabelError(ProjectError):
    """Labels that do not fit the codebook; `allowed` lists the valid ids per dimension."""

    def __init__(self, msg: str, allowed: dict[str, list[str]]):
        super().__init__(msg)
        self.allowed = allowed


class NotFound(ProjectError):
    """An unknown item."""


class Forbidden(ProjectError):
    """An unknown coder, or a coder acting on an item that is not theirs."""


def check_note(note: Any) -> str:
    if not isinstance(note, str):
        raise LabelError("note must be a string", {})
    if len(note) > MAX_NOTE:
        raise LabelError(f"a note is at most {MAX_NOTE} characters (this one has {len(note)})", {})
    return note


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _assign(ids: Sequence[str], coders: Sequence[str], overlap: float, seed: int) -> dict[str, list[str]]:
    """Coders per item: a share `overlap` of the items (seeded choice) goes to two coders, the rest
    to one, rotating so that every coder gets about the same load and every pair about the same overlap."""
    if len(coders) == 1:
        return {i: [coders[0]] for i in ids}
    n_double = round(overlap * len(ids))
    order = list(ids)
    random.Random(seed).shuffle(order)
    double = set(order[:n_double])
    pairs = list(itertools.combinations(coders, 2))
    out: dict[str, list[str]] = {}
    k_single = k_double = 0
    for i in ids:
        if i in double:
            out[i] = list(pairs[k_double % len(pairs)])
            k_double += 1
        else:
            out[i] = [coders[k_single % len(coders)]]
            k_single += 1
    return out


def parse_coders(text: str) -> list[str]:
    import re

    names = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in names if not re.match(CODER_RE, c)]
    if bad:
        raise UsageError(f"--coders: bad coder name(s) {bad}: letters, digits, '.', '_', '-', up to 32 characters")
    if len(set(names)) != len(names):
        raise UsageError(f"--coders: a name is given twice ({text})")
    if not names:
        raise UsageError("--coders: give at least one coder name, e.g. --coders a,b")
    return names


def suggestion_of(r: Record, tax: Taxonomy) -> dict | None:
    """A model's labels carried by the input row (a `classify run` output): shown to coders only
    after they code, and in adjudication."""
    out = {}
    for d in tax.dimension_ids:
        if d in r.fields and r.fields[d] is not None and not tax.validate_label(d, r.fields[d]):
            conf = r.fields.get(f"{d}_confidence")
            out[d] = {
                "label": r.fields[d],
                "confidence": float(conf) if isinstance(conf, (int, float)) else None,
                "model": r.fields.get(f"{d}_model") or r.fields.get("model"),
            }
    return out or None


class Project:
    """An open project (`Project.open` / `Project.create`); every method is thread-safe."""

    def __init__(self, folder: Path, store: SQLiteStore):
        self.folder = folder
        self.store = store
        self.db = store.db
        self._lock = threading.RLock()
        meta = self.meta()
        # the codebook as it was when the project was made: a later edit of the file cannot change the questions
        self.taxonomy = taxonomy_from_text(meta["taxonomy_text"], meta.get("taxonomy_path") or "<project>")
        self.dims = self.taxonomy.dimension_ids
        self.show_suggestions = meta.get("show_suggestions") == "1"
        self.version = 0  # bumped on every write through this object

    # ------------------------------------------------------------------ opening

    @staticmethod
    def path_of(folder: str | Path) -> Path:
        return Path(folder) / DB_NAME

    @classmethod
    def exists(cls, folder: str | Path) -> bool:
        return cls.path_of(folder).exists()

    @classmethod
    def open(cls, folder: str | Path) -> Project:
        folder = Path(folder)
        if not cls.exists(folder):
            raise ProjectError(f"{folder}: no workbench project here (create one with --input FILE)")
        store = SQLiteStore(
            cls.path_of(folder), "workbench project", MIGRATIONS, kind="data", tables=TABLES, check_same_thread=False
        )
        return cls(folder, store)

    @classmethod
    def create(
        cls,
        folder: str | Path,
        input_path: str | Path,
        coders: Sequence[str],
        taxonomy: str | Path | None = None,
        overlap: float = 1.0,
        show_suggestions: bool = False,
        seed: int = 0,
    ) -> Project:
        folder = Path(folder)
        if cls.exists(folder):
            raise ProjectError(f"{folder}: a project exists already; --input only creates a new one")
        if folder.exists() and not folder.is_dir():
            raise ProjectError(f"--project {folder} is a file, not a folder: give a folder to hold the project")
        if not 0.0 <= overlap <= 1.0:
            raise UsageError(f"--overlap must be between 0 and 1, not {overlap}")
        if not coders:
            raise UsageError("a new project needs its coders: --coders a,b")
        if len(coders) < 2 and overlap > 0:
            raise UsageError("double coding needs at least two coders (--coders a,b), or --overlap 0")
        tax = load_taxonomy(taxonomy)
        if screening.is_screening_taxonomy(tax):
            raise UsageError(
                "the workbench codes label taxonomies (symptom, root cause); screening is not supported yet"
            )
        records = read_records(input_path)  # ids, empty texts, duplicates: refused as everywhere else
        if not records:
            raise ProjectError(f"{input_path}: no records to code")
        text = tax.path.read_text(encoding="utf-8") if tax.path else yaml.safe_dump(tax.raw)
        folder.mkdir(parents=True, exist_ok=True)
        store = SQLiteStore(
            cls.path_of(folder), "workbench project", MIGRATIONS, kind="data", tables=TABLES, check_same_thread=False
        )
        db = store.db
        try:
            with db:
                meta = {
                    "created_at": utc_timestamp(),
                    "input": str(Path(input_path).resolve()),
                    "taxonomy_path": str(tax.path.resolve()) if tax.path else "",
                    "taxonomy_text": text,
                    "overlap": str(overlap),
                    "show_suggestions": "1" if show_suggestions else "0",
                    "seed": str(seed),
                }
                db.executemany("INSERT INTO meta VALUES (?, ?)", list(meta.items()))
                for pos, c in enumerate(coders):
                    db.execute("INSERT INTO coders VALUES (?, ?, NULL, ?)", (c, pos, utc_timestamp()))
                for pos, r in enumerate(records):
                    rec = {k: getattr(r, k) for k in CORE_FIELDS}
                    sug = suggestion_of(r, tax)
                    db.execute(
                        "INSERT INTO items VALUES (?, ?, ?, ?)",
                        (r.id, pos, json.dumps(rec, ensure_ascii=False), json.dumps(sug) if sug else None),
                    )
                plan = _assign([r.id for r in records], list(coders), overlap, seed)
                db.executemany("INSERT INTO assignments VALUES (?, ?)", [(i, c) for i, cs in plan.items() for c in cs])
        except BaseException:
            store.close()
            cls.path_of(folder).unlink(missing_ok=True)
            raise
        return cls(folder, store)

    def close(self) -> None:
        self.store.close()

    @contextmanager
    def _write(self) -> Iterator[Any]:
        with self._lock, self.db:
            yield self.db
        self.version += 1

    def state_key(self) -> tuple[int, int]:
        """Changes whenever the database does, through this process or any other (SQLite's
        data_version counts other connections' commits, `version` this one's): caches of derived
        figures key on it, so two servers on one project agree."""
        with self._lock:
            return self.version, int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def meta(self) -> dict[str, str]:
        with self._lock:
            return dict(self.db.execute("SELECT key, value FROM meta").fetchall())

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # ------------------------------------------------------------------ coders and tokens

    def coders(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self.db.execute("SELECT name FROM coders ORDER BY pos")]

    def check_coders(self, names: Sequence[str]) -> None:
        """--coders given for an existing project must be its coders: nothing passed is ignored."""
        have = self.coders()
        if list(names) != have:
            raise UsageError(
                f"{self.folder}: the project's coders are {','.join(have)}, not {','.join(names)}; "
                "coders are fixed when a project is created (leave out --coders)"
            )

    def make_tokens(self) -> dict[str, str]:
        """A fresh token per coder, returned once; only their hashes are stored."""
        tokens = {c: secrets.token_urlsafe(24) for c in self.coders()}
        with self._write() as db:
            for c, t in tokens.items():
                db.execute("UPDATE coders SET token_hash = ? WHERE name = ?", (hash_token(t), c))
        return tokens

    def coders_without_token(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self.db.execute("SELECT name FROM coders WHERE token_hash IS NULL ORDER BY pos")]

    def coder_for_token(self, token: str | None) -> str | None:
        if not token:
            return None
        h = hash_token(token)
        with self._lock:
            rows = self.db.execute("SELECT name, token_hash FROM coders WHERE token_hash IS NOT NULL").fetchall()
        for name, stored in rows:
            if secrets.compare_digest(stored, h):
                return str(name)
        return None

    def require_coder(self, coder: Any) -> str:
        if not isinstance(coder, str) or coder not in self.coders():
            raise Forbidden(f"unknown coder {coder!r}; this project's coders are {', '.join(self.coders())}")
        return coder

    # ------------------------------------------------------------------ items

    def item_ids(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self.db.execute("SELECT id FROM items ORDER BY pos")]

    def states(self) -> list[ItemState]:
        """Every item with its latest code per coder and latest decision."""
        with self._lock:
            items = self.db.execute("SELECT id, pos, record, suggestion FROM items ORDER BY pos").fetchall()
            assigned: dict[str, list[str]] = {}
            for i, c in self.db.execute(
                "SELECT a.item_id, a.coder FROM assignments a JOIN coders c ON c.name = a.coder ORDER BY c.pos"
            ):
                assigned.setdefault(i, []).append(c)
            codes = self.db.execute(
                "SELECT seq, item_id, coder, labels, note, unsure, created_at FROM codes ORDER BY seq"
            ).fetchall()
            decisions = self.db.execute(
                "SELECT seq, item_id, labels, note, proposals, adjudicator, created_at FROM decisions ORDER BY seq"
            ).fetchall()
        out = {
            i: ItemState(i, pos, json.loads(rec), json.loads(sug) if sug else None, assigned.get(i, []))
            for i, pos, rec, sug in items
        }
        for seq, i, coder, labels, note, unsure, at in codes:
            out[i].add(Code(coder, json.loads(labels), note, bool(unsure), at, seq))
        for seq, i, labels, note, props, who, at in decisions:
            out[i].decision = Adjudication(json.loads(labels), note, json.loads(props), who, at, seq)
        return list(out.values())

    def state(self, item_id: str) -> ItemState:
        for s in self.states():
            if s.id == item_id:
                return s
        raise NotFound(f"unknown item {item_id!r}")

    def history(self, item_id: str) -> list[dict]:
        """Every code and decision ever made on the item, oldest first."""
        self.state(item_id)
        with self._lock:
            codes = self.db.execute(
                "SELECT seq, coder, labels, note, unsure, created_at FROM codes WHERE item_id = ? ORDER BY seq",
                (item_id,),
            ).fetchall()
            decs = self.db.execute(
                "SELECT seq, adjudicator, labels, note, proposals, created_at FROM decisions WHERE item_id = ? ORDER BY seq",
                (item_id,),
            ).fetchall()
        rows = [
            {"seq": s, "kind": "code", "by": c, "labels": json.loads(lb), "note": n, "unsure": bool(u), "at": at}
            for s, c, lb, n, u, at in codes
        ] + [
            {
                "seq": s,
                "kind": "decision",
                "by": c,
                "labels": json.loads(lb),
                "note": n,
                "proposals": json.loads(p),
                "at": at,
            }
            for s, c, lb, n, p, at in decs
        ]
        return sorted(rows, key=lambda r: (r["at"], r["kind"] == "decision", r["seq"]))

    # ------------------------------------------------------------------ codes and decisions

    def check_labels(self, labels: Any, what: str = "labels") -> dict[str, str | None]:
        """Labels for every dimension, each a category id or null; LabelError lists the allowed ids."""
        allowed = {d: self.taxonomy.dimensions[d].ids for d in self.dims}
        if not isinstance(labels, dict):
            raise LabelError(f"{what} must be an object with one label per dimension ({', '.join(self.dims)})", allowed)
        problems = []
        unknown_dims = sorted(set(labels) - set(self.dims))
        if unknown_dims:
            problems.append(f"unknown dimension(s) {unknown_dims}")
        missing = [d for d in self.dims if d not in labels]
        if missing:
            problems.append(f"missing label for {', '.join(missing)} (null: not shown in the report)")
        for d in self.dims:
            y = labels.get(d)
            if d in labels and y is not None and (not isinstance(y, str) or y not in allowed[d]):
                problems.append(f"{d} label {y!r} is not in the codebook {self.taxonomy.label}")
        if problems:
            raise LabelError(f"{what}: " + "; ".join(problems), allowed)
        return {d: labels[d] for d in self.dims}

    def add_code(self, item_id: str, coder: str, labels: Any, note: Any = "", unsure: Any = False) -> Code:
        """Record a coder's code (a new row: an earlier code stays in the history, and the first one
        stays the coder's independent code: classify.workbench.items)."""
        coder = self.require_coder(coder)
        st = self.state(item_id)  # NotFound first: an unknown item is a 404 whatever else is wrong
        if coder not in st.assigned:
            raise Forbidden(f"item {item_id!r} is not assigned to coder {coder!r} (assigned: {', '.join(st.assigned)})")
        clean = self.check_labels(labels)
        note = check_note(note)
        if not isinstance(unsure, bool):
            raise LabelError("unsure must be true or false", {})
        at = utc_timestamp()
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO codes (item_id, coder, labels, note, unsure, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (item_id, coder, json.dumps(clean), note, int(unsure), at),
            )
        return Code(coder, clean, note, unsure, at, int(cur.lastrowid or 0))

    def can_see_codes(self, st: ItemState, viewer: str) -> bool:
        """Blindness: a coder sees others' codes of an item only once they coded it themselves."""
        return viewer not in st.assigned or viewer in st.codes

    def decide(
        self, item_id: str, adjudicator: str, labels: Any, note: Any = "", proposals: Any = None
    ) -> Adjudication:
        """Settle an item: the final labels with a note and optional codebook proposals. Only an item
        every assigned coder coded, and with something to settle (the first codes differ, a coder
        changed their code, or marked it unsure), can be adjudicated."""
        from classify.workbench.adjudicate import check_proposals

        adjudicator = self.require_coder(adjudicator)
        st = self.state(item_id)
        if not self.can_see_codes(st, adjudicator):
            raise Forbidden(f"{adjudicator} has not coded {item_id} yet: code it before adjudicating it")
        if not st.complete:
            missing = [c for c in st.assigned if c not in st.codes]
            raise Forbidden(f"{item_id} is not coded by {', '.join(missing)} yet: nothing to adjudicate")
        if not st.reasons(self.dims):
            raise Forbidden(f"{item_id}: its coders agree, kept their first codes and were sure: nothing to adjudicate")
        clean = self.check_labels(labels)
        note = check_note(note)
        if not note.strip():
            raise LabelError("an adjudication needs a note saying why", {})
        if isinstance(proposals, list) and len(proposals) > MAX_PROPOSALS:
            raise LabelError(f"at most {MAX_PROPOSALS} proposals per decision, not {len(proposals)}", {})
        props = check_proposals(proposals or [], self.taxonomy)
        at = utc_timestamp()
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO decisions (item_id, labels, note, proposals, adjudicator, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (item_id, json.dumps(clean), note.strip(), json.dumps(props), adjudicator, at),
            )
        return Adjudication(clean, note.strip(), props, adjudicator, at, int(cur.lastrowid or 0))

    def adjudication_keys(self) -> set[tuple[str, str, str, str]]:
        """(item, adjudicator, time, note) of every decision ever made (an export recognises its own;
        the note too, as times are to the second and the adjudicator may review the item that second)."""
        with self._lock:
            return {
                (i, a, t, n)
                for i, a, t, n in self.db.execute("SELECT item_id, adjudicator, created_at, note FROM decisions")
            }

    def log_review(self, item_id: str, dimension: str, decision: dict, reviewer: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO review_log (item_id, dimension, decision, reviewer, created_at) VALUES (?, ?, ?, ?, ?)",
                (item_id, dimension, json.dumps(decision), reviewer, utc_timestamp()),
            )

    def progress(self) -> dict[str, dict[str, int]]:
        out = {c: {"assigned": 0, "coded": 0} for c in self.coders()}
        for st in self.states():
            for c in st.assigned:
                out[c]["assigned"] += 1
                out[c]["coded"] += c in st.codes
        return out
