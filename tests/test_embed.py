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
