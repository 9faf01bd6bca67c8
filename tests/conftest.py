import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _session_cache(tmp_path_factory) -> Path:
    """Tests never read or write the user's cache: outside a test, the cache is this session dir.

    Module- and session-scoped fixtures run there (before any test's own dir is set), so an expensive
    artefact they build (a distilled model2vec table, warm embeddings) is made once per session.
    """
    d = tmp_path_factory.mktemp("classify-cache-shared")
    old = os.environ.get("CLASSIFY_CACHE_DIR")
    os.environ["CLASSIFY_CACHE_DIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("CLASSIFY_CACHE_DIR", None)
    else:
        os.environ["CLASSIFY_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def shared_cache(_session_cache) -> Path:
    """Opt-in: a test (or a fixture) that asks for this keeps the session's cache dir, to reuse an
    expensive artefact another test or fixture built there."""
    return _session_cache


@pytest.fixture(autouse=True)
def _own_cache(request, tmp_path_factory, monkeypatch) -> None:
    # Every other test gets an empty cache dir of its own: it cannot pass because an earlier test
    # warmed the cache, nor fail because one left something broken in it.
    if "shared_cache" not in request.fixturenames:
        monkeypatch.setenv("CLASSIFY_CACHE_DIR", str(tmp_path_factory.mktemp("classify-cache")))


@pytest.fixture(scope="session")
def taxonomy():
    from classify.core.taxonomy import load_taxonomy

    return load_taxonomy()


@pytest.fixture(scope="session")
def gold(taxonomy):
    from classify.core.gold import load_gold
    from classify.core.paths import DEFAULT_GOLD

    return load_gold(DEFAULT_GOLD, taxonomy)


@pytest.fixture
def gold_rows():
    with open(ROOT / "gold" / "reports.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def caused_records(gold, n):
    """`n` gold records with a root cause, each a different one: every cause stratum holds a single record."""
    seen, out = set(), []
    for r in gold.records:
        c = r.fields.get("root_cause")
        if c and c not in seen:
            seen.add(c)
            out.append(r)
    assert len(out) >= n
    return out[:n]
