"""model2vec backend: a static table distilled once from the packaged MiniLM, reused after that.

The slow tests share one distillation (~1-1.5 min on 2 cores): the first to ask for the model
distils it into this test session's cache dir, the rest load it.
"""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from classify.encoders.encoder import BACKENDS, EmbeddingCache, Encoder, resolve_encoder, text_hash


def _m2v(**kw) -> Encoder:
    return Encoder(None, backend="model2vec", show_progress=False, **kw)


@pytest.fixture(scope="module")
def distilled(shared_cache):
    """The StaticSentenceEncoder of the packaged MiniLM, distilled (once) for this session."""
    from classify.encoders.static import static_dir

    enc = _m2v(use_cache=False)
    existed = (static_dir(enc.weights_key) / "model.safetensors").exists()
    model = enc.model()
    assert model.distilled is not existed  # distilled exactly when it was not there yet
    return model


def test_unknown_backend_is_refused_up_front():
    with pytest.raises(ValueError, match="unknown encoder backend 'model2vec-fp8'.*model2vec"):
        Encoder(None, backend="model2vec-fp8")
    with pytest.raises(ValueError, match="unknown encoder backend"):
        Encoder(None, backend="")


def test_unknown_backend_is_a_clean_cli_error(tmp_path):
    from classify.cli.main import app

    out = tmp_path / "labels.jsonl"
    r = CliRunner().invoke(app, ["run", "--model", "embed-logreg", "--opt", "backend=static", "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert "unknown encoder backend 'static'" in r.output and "model2vec" in r.output
    assert "Traceback" not in r.output
    assert not out.exists()


def test_model2vec_has_its_own_cache_key_naming_the_settings():
    from classify.encoders.static import settings_tag, static_dir

    assert "model2vec" in BACKENDS
    keys = {b: Encoder(None, backend=b).model_key for b in BACKENDS}
    assert len(set(keys.values())) == len(BACKENDS)
    _, weights_key = resolve_encoder(None)
    assert keys["model2vec"] == f"{weights_key}|model2vec:{settings_tag()}"
    d = static_dir(weights_key)
    assert weights_key.split("|")[1] in d.name and settings_tag() in d.name


@pytest.mark.slow
def test_encodes_real_texts_normalised_and_deterministic(distilled, gold):
    from model2vec import StaticModel

    assert isinstance(distilled.model, StaticModel)
    texts = [r.text(True) for r in gold.records[:40]] + [
        "short",
        "CUDA error: an illegal memory access was encountered",
    ]
    enc = _m2v(use_cache=False)
    v = enc.encode(texts)
    assert v.shape == (len(texts), 256) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    assert len(np.unique(v.round(5), axis=0)) == len(texts)  # different texts, different vectors
    again = _m2v(use_cache=False).encode(texts[::-1])[::-1]  # another encoder, another order
    assert np.array_equal(v, again)
    assert np.array_equal(enc.encode(texts[:1])[0], v[0])  # a text alone = the same text in a batch


@pytest.mark.slow
def test_static_vectors_keep_minilm_similarity_structure(distilled, gold):
    """Not random vectors: pairwise similarities follow MiniLM's own (a real distillation)."""
    from scipy.stats import spearmanr

    texts = [r.text(False) for r in gold.records[:60]]
    s = _m2v(use_cache=False).encode(texts)
    t = Encoder(None, backend="torch", use_cache=False, show_progress=False).encode(texts)
    iu = np.triu_indices(len(texts), 1)
    rho = spearmanr((s @ s.T)[iu], (t @ t.T)[iu])[0]
    assert rho > 0.5, rho


@pytest.mark.slow
def test_second_encoder_reuses_table_and_cache(distilled, tmp_path):
    path = distilled.path / "model.safetensors"
    mtime = path.stat().st_mtime_ns
    texts = [
        "CUDA error: illegal memory access in flash_attn_fwd",
        "pip install fails: no matching distribution",
        "hello",
    ]
    cache_path = tmp_path / "emb.sqlite"
    e1 = _m2v(cache=EmbeddingCache(cache_path))
    v1 = e1.encode(texts + [texts[0]])
    assert e1.n_encoded == 3 and e1.model().distilled is False  # loaded, not distilled again
    assert path.stat().st_mtime_ns == mtime
    e2 = _m2v(cache=EmbeddingCache(cache_path))
    v2 = e2.encode(texts)
    assert e2.n_encoded == 0 and e2._model is None  # all from the SQLite cache, no model load
    assert np.array_equal(v1[:3], v2)
    # The torch key never sees these 256-d vectors.
    torch_enc = Encoder(None, show_progress=False, cache=EmbeddingCache(cache_path))
    assert torch_enc.cache.get_many(torch_enc.model_key, [text_hash(texts[0])]) == {}


@pytest.mark.slow
def test_embed_logreg_trains_and_predicts_on_static_vectors(distilled, gold, taxonomy):
    from classify.classifiers.base import ModelOptions, make_classifier

    idx = np.random.default_rng(0).permutation(len(gold))
    te, tr = sorted(idx[:40]), sorted(idx[40:])
    labels = {d: [gold.labels[d][i] for i in tr] for d in taxonomy.dimension_ids}
    opts = ModelOptions(show_progress=False, extra={"backend": "model2vec"})
    clf = make_classifier("embed-logreg", taxonomy, opts).fit([gold.records[i] for i in tr], labels)
    preds = clf.predict([gold.records[i] for i in te])["symptom"]
    assert clf.encoder_.model_key.split("|")[-1].startswith("model2vec:")
    truth = [gold.labels["symptom"][i] for i in te]
    hits = sum(p.label == y for p, y in zip(preds, truth))
    majority = max(truth.count(y) for y in set(truth))
    assert hits > majority, (hits, majority)  # better than always answering the commonest label
