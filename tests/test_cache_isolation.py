"""conftest gives every test an empty cache dir of its own; `shared_cache` opts into the session's."""

from __future__ import annotations

import os
from pathlib import Path

from classify.core.paths import cache_dir

_SEEN: dict[str, Path] = {}


def test_a_test_gets_an_empty_cache_dir_of_its_own(_session_cache):
    d = cache_dir()
    assert d != _session_cache and list(d.iterdir()) == []
    assert Path.home() / ".cache" not in d.parents  # never the user's cache
    (d / "left-behind").write_text("x")
    _SEEN["first"] = d


def test_the_next_test_does_not_see_what_the_last_one_left(_session_cache):
    d = cache_dir()
    assert "first" in _SEEN and d != _SEEN["first"] and not (d / "left-behind").exists()


def test_shared_cache_keeps_the_session_dir(shared_cache, _session_cache):
    assert shared_cache == _session_cache
    assert Path(os.environ["CLASSIFY_CACHE_DIR"]) == shared_cache == cache_dir()
