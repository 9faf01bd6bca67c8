"""Spec `setfit`: SetFit's embedding phase trains on the fit's records only, and its tuned encoder is
cached per training set (trained once, read back after, retrained when the cache is damaged)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from classify.classifiers.base import ModelOptions, make_classifier, register
from classify.classifiers.features import SetFitFeatures
from classify.core.errors import ClassifyError
from classify.core.gold import gold_from_records
from classify.core.hashing import text_hash
from classify.encoders.encoder import resolve_encoder
from classify.encoders.setfit_body import SetFitConfig, body_folder, body_key, train_body
from classify.evaluation.crossval import cross_validate

pytest.importorskip("setfit")

# Tiny and quick: short sequences, one iteration (2 pairs per text and dimension).
FAST = SetFitConfig(max_seq_length=16, batch_size=16)
TEXTS = [f"CUDA kernel launch fails with illegal memory access case {i}" for i in range(6)] + [
    f"pip install fails to build the wheel with nvcc error case {i}" for i in range(6)
]
LABELS = {"symptom": ["crash"] * 6 + ["build_failure"] * 6}


def test_key_names_what_decides_the_weights():
    _, model = resolve_encoder(None)
    k = body_key(model, FAST, TEXTS, LABELS)
    assert k == body_key(model, FAST, list(TEXTS), {"symptom": list(LABELS["symptom"])})
    flipped = {"symptom": ["build_failure"] + LABELS["symptom"][1:]}
    assert body_key(model, FAST, TEXTS, flipped) != k
    assert body_key(model, FAST, TEXTS[::-1], {"symptom": LABELS["symptom"][::-1]}) != k  # pairs follow order
    assert body_key(model, FAST.model_copy(update={"seed": 1}), TEXTS, LABELS) != k
    assert body_key("other-encoder|x", FAST, TEXTS, LABELS) != k
    # a record without a label for the dimension does not train it, so it does not change the key
    assert body_key(model, FAST, [*TEXTS, "unlabeled"], {"symptom": [*LABELS["symptom"], None]}) == k


@pytest.mark.slow
def test_tuned_encoder_is_trained_once_read_back_and_retrained_when_damaged():
    from sentence_transformers import SentenceTransformer

    folder, first = train_body(None, TEXTS, LABELS, FAST)
    assert not first.cached and first.steps > 0 and first.pairs == {"symptom": 24}
    again_folder, again = train_body(None, TEXTS, LABELS, FAST)
    assert again.cached and again_folder == folder and again.steps == first.steps
    tuned = SentenceTransformer(str(folder), device="cpu").encode(TEXTS[:2])
    base = SentenceTransformer(resolve_encoder(None)[0], device="cpu").encode(TEXTS[:2])
    assert not np.allclose(tuned, base, atol=1e-4), "training changed no weight"
    # a damaged completion record: trained again, the record rewritten whole
    (folder / "classify-setfit.json").write_text("{not json")
    _, log = train_body(None, TEXTS, LABELS, FAST)
    assert not log.cached
    json.loads((folder / "classify-setfit.json").read_text())  # rewritten whole
    # weights altered after the save (a truncated copy, a disk error): trained again, not loaded
    weights = next(folder.rglob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:1000])
    _, log = train_body(None, TEXTS, LABELS, FAST)
    assert not log.cached and weights.stat().st_size > 1000
    # an interrupted save: the weights without the completion record
    (folder / "classify-setfit.json").unlink()
    _, log = train_body(None, TEXTS, LABELS, FAST)
    assert not log.cached and (folder / "classify-setfit.json").exists()
    assert body_folder(log.key) == folder


def test_missing_package_is_one_clear_error(taxonomy, gold, monkeypatch):
    monkeypatch.setitem(sys.modules, "setfit", None)  # import setfit raises ImportError
    clf = make_classifier("setfit", taxonomy, ModelOptions(show_progress=False))
    with pytest.raises(ClassifyError, match=r"pip install 'classify\[setfit\]'"):
        clf.fit(gold.records[:10], {d: gold.labels[d][:10] for d in taxonomy.dimension_ids})


def test_embed_false_is_refused_up_front(taxonomy):
    with pytest.raises(ClassifyError, match="embed=false"):
        make_classifier("setfit", taxonomy, ModelOptions(extra={"embed": False}))


_SEEN: list[list[str]] = []
_FITTED: list[SetFitFeatures] = []


@register("test-setfit-spy")
class _Spy(SetFitFeatures):
    # The real spec; the spy keeps the texts each fold's SetFit phase was given.
    def fit_embedder(self, texts, labels):
        _SEEN.append(list(texts))
        _FITTED.append(self)
        super().fit_embedder(texts, labels)


@pytest.mark.slow
def test_setfit_never_trains_on_the_evaluated_fold(gold, taxonomy):
    from classify.evaluation.profile import derived_gold

    small = derived_gold(gold_from_records(gold.records[:24], taxonomy))  # with root_cause_shown, as eval has
    _SEEN.clear()
    _FITTED.clear()
    opts = ModelOptions(show_progress=False, extra={"sf_max_seq_length": 16})
    res = cross_validate("test-setfit-spy", small, opts, k=2, seed=0)
    assert len(_SEEN) == 2
    for fold, seen in enumerate(_SEEN):
        evaluated = {text_hash(r.text(True)) for i, r in enumerate(small.records) if res.folds[i] == fold}
        assert evaluated.isdisjoint(text_hash(t) for t in seen), f"fold {fold} trained on evaluated records"
    # the encoder is tuned on the codebook's own dimensions; the derived "shown" decision only gets a head
    assert all(set(clf.body_.pairs) == {"symptom", "root_cause"} for clf in _FITTED)
