import numpy as np
import pytest

from classify.encoders.encoder import EmbeddingCache, Encoder


@pytest.mark.slow
def test_second_run_hits_cache_and_never_loads_the_model(tmp_path):
    cache_path = tmp_path / "emb.sqlite"
    texts = [
        "CUDA error: illegal memory access in flash_attn_fwd",
        "pip install fails: no matching distribution",
        "hello",
    ]
    e1 = Encoder(show_progress=False, cache=EmbeddingCache(cache_path))
    v1 = e1.encode(texts + [texts[0]])
    assert v1.shape == (4, 384) and e1.n_encoded == 3  # duplicate text encoded once
    assert np.allclose(np.linalg.norm(v1, axis=1), 1, atol=1e-4)
    e2 = Encoder(show_progress=False, cache=EmbeddingCache(cache_path))
    v2 = e2.encode(texts)
    assert e2.n_encoded == 0 and e2._model is None  # no model call, not even a model load
    assert np.array_equal(v1[:3], v2)
    v3 = e2.encode(texts + ["a new text"])
    assert e2.n_encoded == 1 and np.array_equal(v3[:3], v2)


def test_cache_keys_separate_models(tmp_path):
    c = EmbeddingCache(tmp_path / "e.sqlite")
    c.put_many("m1", {"h": np.ones(3, dtype=np.float32)})
    assert c.get_many("m2", ["h"]) == {}
    assert np.array_equal(c.get_many("m1", ["h", "h"])["h"], np.ones(3))


@pytest.mark.slow
def test_encoding_off_a_terminal_prints_plain_progress_lines(tmp_path, capfd, monkeypatch):
    # issue 21 item 2: a cold `classify eval` encoded gold for minutes without a word when stderr was
    # a log file (the library's bar is drawn only on a terminal); now plain lines, no \r or escapes.
    from classify.core import progress

    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    texts = [f"report {i}: segfault in kernel {i}" for i in range(5)]
    enc = Encoder(show_progress=True, cache=EmbeddingCache(tmp_path / "e.sqlite"))
    enc.encode(texts, slice_size=2)
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("encoding:")]
    assert [line.split(",")[0] for line in lines] == [
        "encoding: 2/5 texts (40%)",
        "encoding: 4/5 texts (80%)",
        "encoding: 5/5 texts (100%)",
    ]
    assert "\r" not in err and "\x1b" not in err
    # a caller watching with its own callback gets the counts, and no second display
    seen: list[int] = []
    enc.encode([*texts, "one more", "and another"], progress=seen.append, slice_size=2)
    assert seen == [5, 2] and "encoding:" not in capfd.readouterr().err
    # a quiet encoder says nothing
    Encoder(show_progress=False, cache=EmbeddingCache(tmp_path / "f.sqlite")).encode(texts, slice_size=2)
    assert capfd.readouterr().err == ""
