"""Contrastive fine-tuning of the sentence encoder on the training records only.

Full fine-tuning of MiniLM costs ~3 forward passes per text per epoch; on 2 shared CPU cores that
is tens of minutes per cross-validation. We fine-tune only the top `top_layers` transformer
layers instead: the frozen lower layers' token states are computed once per text (no labels are
involved, so one cache serves every fold without leaking anything) and each training step runs
only the top layers forward and backward.

Objective: supervised contrastive loss (Khosla et al., 2020) per labeled dimension, the
batch-wise form of SetFit's pair objective: records with the same label pull together, others
push apart. Batches are drawn class-balanced so rare classes get positives.

Spec `finetune` (registered in classify.classifiers.features) puts the same lexical + semantic head as
`tfidf-embed` on top of the fine-tuned embeddings.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from classify.core.hashing import text_hash
from classify.encoders.encoder import load_sentence_transformer, resolve_encoder

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


class FineTuneConfig(BaseModel):
    """Fine-tuning settings; specs `finetune` / `hier-finetune` take each as `--opt ft_<name>=...`."""

    model_config = ConfigDict(extra="forbid")

    top_layers: Annotated[
        int, Field(ge=1, description="transformer layers trained; the ones below stay frozen (and cached)")
    ] = 1
    epochs: Annotated[int, Field(ge=1, description="passes over the training records")] = 3
    # At least 2: every batch is built from same-label pairs.
    batch_size: Annotated[int, Field(ge=2, description="records per contrastive batch")] = 16
    lr: Annotated[float, Field(gt=0, description="AdamW learning rate")] = 1e-4
    temperature: Annotated[float, Field(gt=0, description="supervised contrastive loss temperature")] = 0.1
    max_seq_length: Annotated[int, Field(ge=8, description="tokens per text (longer texts are cut)")] = 256
    seed: int = 0  # the run's --seed; not an option of its own
    threads: Annotated[int | None, Field(ge=1, description="torch threads (default: torch's own)")] = None


class LowerStates:
    """Frozen lower-layer token states of a BERT-family sentence encoder, cached in memory per text.

    Shared between folds (it depends on the text only). Holds the model's tokenizer and the
    pretrained top layers that each fine-tuning run copies.
    """

    def __init__(self, encoder: str | None, top_layers: int, max_seq_length: int = 256):
        import torch

        load_from, self.model_key = resolve_encoder(encoder)
        st = load_sentence_transformer(load_from, encoder)
        st.max_seq_length = max_seq_length
        self.st = st
        bert = st[0].auto_model
        layers = getattr(getattr(bert, "encoder", None), "layer", None)
        if not isinstance(bert, torch.nn.Module) or layers is None or not hasattr(bert, "embeddings"):
            raise ValueError(f"fine-tuning supports BERT-family encoders (MiniLM); {self.model_key} is not one")
        if not 1 <= top_layers <= len(layers):
            raise ValueError(f"top_layers must be in 1..{len(layers)}, got {top_layers}")
        self.bert = bert
        self.n_layers = len(layers)
        self.top_layers = top_layers
        self.max_seq_length = max_seq_length
        self._cache: dict[str, torch.Tensor] = {}
        self.bert.eval()

    def states(self, texts: list[str], batch_size: int = 32) -> list:
        """Per text: tensor [n_tokens, hidden] after the frozen layers (no padding kept)."""
        import torch

        keys = [text_hash(t) for t in texts]
        todo = [i for i, k in enumerate(keys) if k not in self._cache]
        with torch.inference_mode():
            for s in range(0, len(todo), batch_size):
                chunk = todo[s : s + batch_size]
                feats = self.st.tokenize([texts[i] for i in chunk])
                out = self.bert(
                    input_ids=feats["input_ids"],
                    attention_mask=feats["attention_mask"],
                    token_type_ids=feats.get("token_type_ids"),
                    output_hidden_states=True,
                )
                h = out.hidden_states[self.n_layers - self.top_layers]
                lens = feats["attention_mask"].sum(1).tolist()
                for j, i in enumerate(chunk):
                    self._cache[keys[i]] = h[j, : lens[j]].clone()
        return [self._cache[k] for k in keys]

    def top_copy(self):
        """A trainable copy of the top layers, detached from the shared frozen model."""
        import torch

        encoder: Any = self.bert.encoder  # torch types submodules as Tensor | Module
        layers = encoder.layer
        return torch.nn.ModuleList(copy.deepcopy(layers[self.n_layers - self.top_layers :]))


def _pad(states: list):
    import torch

    n = max(s.shape[0] for s in states)
    h = torch.zeros(len(states), n, states[0].shape[1])
    mask = torch.zeros(len(states), n, dtype=torch.long)
    for i, s in enumerate(states):
        h[i, : s.shape[0]] = s
        mask[i, : s.shape[0]] = 1
    return h, mask


def _forward_top(layers, config, h, mask):
    """Top layers + mean pooling + L2 norm, as the sentence-transformers model does."""
    import torch
    from transformers.masking_utils import create_bidirectional_mask

    attn = create_bidirectional_mask(config=config, inputs_embeds=h, attention_mask=mask)
    for layer in layers:
        out = layer(h, attention_mask=attn)
        h = out[0] if isinstance(out, tuple) else out
    m = mask.unsqueeze(-1).to(h.dtype)
    pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def supcon_loss(z, y, temperature: float):
    """Supervised contrastive loss over one batch of normalized embeddings `z` with int labels `y`."""
    import torch

    sim = z @ z.T / temperature
    n = len(y)
    eye = torch.eye(n, dtype=torch.bool)
    sim = sim.masked_fill(eye, float("-inf"))
    pos = (y[:, None] == y[None, :]) & ~eye
    has_pos = pos.any(1)
    if not has_pos.any():
        return None
    log_prob = sim - torch.logsumexp(sim, dim=1, keepdim=True)
    per_anchor = -(log_prob.masked_fill(~pos, 0).sum(1)) / pos.sum(1).clamp(min=1)
    return per_anchor[has_pos].mean()


def balanced_batches(y: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """One epoch of batches, each holding pairs of same-label items so every anchor has a positive.

    Classes are drawn in proportion to sqrt(frequency): rare classes appear more often than their
    share, frequent ones still dominate.
    """
    classes, counts = np.unique(y, return_counts=True)
    by_class = {c: np.flatnonzero(y == c) for c in classes}
    multi = [c for c in classes if len(by_class[c]) >= 2]
    if not multi:
        return []
    w = np.sqrt([len(by_class[c]) for c in multi])
    w = w / w.sum()
    n_batches = max(1, int(np.ceil(len(y) / batch_size)))
    per = max(1, batch_size // 2)
    out = []
    for _ in range(n_batches):
        picked = rng.choice(len(multi), size=per, p=w)
        idx: list[int] = []
        for ci in picked:
            idx.extend(rng.choice(by_class[multi[ci]], size=2, replace=False))
        out.append(np.array(idx))
    return out


@dataclass
class FineTuneLog:
    steps: int = 0
    seconds: float = 0.0
    losses: list[float] = field(default_factory=list)


class FineTunedEncoder:
    """Encode texts with the lower frozen layers and top layers fine-tuned on the given labels."""

    def __init__(self, lower: LowerStates, cfg: FineTuneConfig):
        self.lower = lower
        self.cfg = cfg
        self.layers: torch.nn.ModuleList | None = None
        # Hashes of every text a gradient step has used: the leak test checks this set.
        self.trained_on: set[str] = set()
        self.log = FineTuneLog()

    def fit(self, texts: list[str], labels: dict[str, list[str | None]]) -> FineTunedEncoder:
        import torch

        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        torch.manual_seed(self.cfg.seed)
        rng = np.random.default_rng(self.cfg.seed)
        t0 = time.perf_counter()
        states = self.lower.states(texts)
        log.info("lower-layer states for %d texts ready in %.1f s", len(texts), time.perf_counter() - t0)
        self.layers = self.lower.top_copy()
        self.layers.train()
        opt = torch.optim.AdamW(self.layers.parameters(), lr=self.cfg.lr, weight_decay=0.01)
        tasks = []
        for ys in labels.values():
            idx = np.array([i for i, v in enumerate(ys) if v is not None])
            if len(idx) < 2:
                continue
            names = sorted({ys[i] for i in idx})
            y = np.array([names.index(ys[i]) for i in idx])
            tasks.append((idx, y))
        config = self.lower.bert.config
        for _ in range(self.cfg.epochs):
            plans = [
                [(idx[b], torch.as_tensor(y[b])) for b in balanced_batches(y, self.cfg.batch_size, rng)]
                for idx, y in tasks
            ]
            # Interleave the dimensions' batches so one encoder serves both.
            for step in range(max((len(p) for p in plans), default=0)):
                loss = None
                for plan in plans:
                    if step >= len(plan):
                        continue
                    bi, by = plan[step]
                    self.trained_on.update(text_hash(texts[i]) for i in bi)
                    h, mask = _pad([states[i] for i in bi])
                    z = _forward_top(self.layers, config, h, mask)
                    part = supcon_loss(z, by, self.cfg.temperature)
                    if part is not None:
                        loss = part if loss is None else loss + part
                if loss is None:
                    continue
                opt.zero_grad()
                loss.backward()
                opt.step()
                self.log.steps += 1
                self.log.losses.append(float(loss.detach()))
            log.info(
                "fine-tune epoch done: %d steps, loss %.3f, %.1f s",
                self.log.steps,
                float(np.mean(self.log.losses[-20:])) if self.log.losses else float("nan"),
                time.perf_counter() - t0,
            )
        self.layers.eval()
        self.log.seconds = time.perf_counter() - t0
        return self

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        import torch

        if self.layers is None:
            raise RuntimeError("FineTunedEncoder: call fit() before encode()")
        states = self.lower.states(texts)
        out = []
        with torch.inference_mode():
            for s in range(0, len(states), batch_size):
                h, mask = _pad(states[s : s + batch_size])
                out.append(_forward_top(self.layers, self.lower.bert.config, h, mask).numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros((0, 0), np.float32)
