import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    # Tests never read or write the user's cache; the embedding cache lives per test session.
    d = tmp_path_factory.mktemp("classify-cache")
    old = os.environ.get("CLASSIFY_CACHE_DIR")
    os.environ["CLASSIFY_CACHE_DIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("CLASSIFY_CACHE_DIR", None)
    else:
        os.environ["CLASSIFY_CACHE_DIR"] = old


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
        return [json.loads(l) for l in f]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
