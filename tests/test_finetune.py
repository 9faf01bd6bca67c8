"""Contrastive fine-tuning: it trains, and in cross-validation it never sees the evaluated fold."""

from __future__ import annotations

import numpy as np
import pytest

from classify.classifiers.base import ModelOptions, register
from classify.classifiers.features import FineTune
from classify.core.gold import gold_from_records
from classify.core.hashing import text_hash as _text_key
from classify.encoders.finetune import balanced_batches, supcon_loss
from classify.evaluation.crossval import cross_validate
from classify.evaluation.leaks import train_test_leaks

# Small and quick: one top layer, one epoch, short sequences.
FAST = {"ft_epochs": 1, "ft_top_layers": 1, "ft_max_seq_length": 64, "ft_batch_size": 8}

_SPY: list[FineTune] = []


@register("test-finetune-spy")
class _Spy(FineTune):
    # The real fine-tuned classifier; the test only keeps a reference to each fold's fitted instance.
    def fit(self, records, labels):
        _SPY.append(self)
        return super().fit(records, labels)


def test_supcon_loss_prefers_grouped_embeddings():
    import torch

    y = torch.tensor([0, 0, 1, 1])
    good = torch.nn.functional.normalize(torch.tensor([[1.0, 0.1], [1.0, -0.1], [-1.0, 0.1], [-1.0, -0.1]]), dim=1)
    bad = good[[0, 2, 1, 3]]
    assert supcon_loss(good, y, 0.1) < supcon_loss(bad, y, 0.1)
    assert supcon_loss(good, torch.tensor([0, 1, 2, 3]), 0.1) is None  # no positives: no loss


def test_balanced_batches_give_every_anchor_a_positive():
    y = np.array([0] * 50 + [1] * 3 + [2] * 1)
    batches = balanced_batches(y, 8, np.random.default_rng(0))
    assert len(batches) == int(np.ceil(len(y) / 8))
    seen = set()
    for b in batches:
        labels = y[b]
        for lab in labels:
            assert (labels == lab).sum() >= 2
        seen.update(labels.tolist())
    assert 1 in seen and 2 not in seen  # a class with one item cannot form a pair


@pytest.mark.slow
def test_finetuning_never_sees_the_evaluated_fold(gold, taxonomy):
    # 90 records keep this quick; cross_validate is the same code `classify eval` runs.
    small = gold_from_records(gold.records[:90], taxonomy)
    _SPY.clear()
    res = cross_validate("test-finetune-spy", small, ModelOptions(show_progress=False, extra=dict(FAST)), k=3, seed=0)
    assert train_test_leaks(res) == []
    assert len(_SPY) == 3
    for fold, clf in enumerate(_SPY):
        evaluated = [r for i, r in enumerate(small.records) if res.folds[i] == fold]
        trained = [r for i, r in enumerate(small.records) if res.folds[i] != fold]
        eval_keys = {_text_key(r.text(True)) for r in evaluated}
        train_keys = {_text_key(r.text(True)) for r in trained}
        used = clf.ft_.trained_on
        assert used, "fine-tuning took no gradient step"
        assert used.isdisjoint(eval_keys), f"fold {fold}: fine-tuning used evaluated records"
        assert used <= train_keys
        assert clf.ft_.log.steps > 0


@pytest.mark.slow
def test_finetuning_moves_the_embeddings_toward_the_labels(gold, taxonomy):
    from classify.encoders.finetune import FineTuneConfig, FineTunedEncoder, LowerStates

    recs = gold.records[:64]
    texts = [r.text(True) for r in recs]
    y = [gold.labels["symptom"][i] for i in range(64)]
    lower = LowerStates(None, 1, 64)
    cfg = FineTuneConfig(top_layers=1, epochs=3, batch_size=8, max_seq_length=64, lr=2e-4)
    ft = FineTunedEncoder(lower, cfg)
    ft.layers = lower.top_copy()
    before = ft.encode(texts)
    ft.fit(texts, {"symptom": y})
    after = ft.encode(texts)
    assert np.allclose(np.linalg.norm(after, axis=1), 1, atol=1e-4)

    def separation(z):
        lab = np.array(y)
        sim = z @ z.T
        same = (lab[:, None] == lab[None, :]) & ~np.eye(len(lab), dtype=bool)
        diff = lab[:, None] != lab[None, :]
        return sim[same].mean() - sim[diff].mean()

    # Same-label records end closer together, relative to different-label ones, than before.
    assert separation(after) > separation(before) + 0.02
    # The shared frozen model is untouched: a fresh copy still gives the pretrained vectors.
    fresh = FineTunedEncoder(lower, cfg)
    fresh.layers = lower.top_copy()
    assert np.allclose(fresh.encode(texts), before, atol=1e-5)
