"""model2vec static-embedding backend: the "instant" encoder tier (`--opt backend=model2vec`).

A static model is a lookup table: one vector per word piece of the encoder's own vocabulary,
and a text's vector is the mean of its tokens' vectors. It is made once from the same weights as
the other backends with model2vec's own `model2vec.distill.distill` (works offline on the local
folder with transformers 5.x; only its `[distill]` extra pins transformers < 5.4, so the project
depends on `model2vec` and `skeletoken` directly instead): every vocabulary token is run through
the transformer alone (as `[CLS] token [SEP]`) and mean-pooled, the table is reduced by PCA,
and each row is scaled by a SIF weight from the token's Zipf rank (vocabulary order stands in
for frequency). Inference uses model2vec's `StaticModel`: tokenizer + table lookup, torch never imported.

The table lives in <cache dir>/model2vec/<weights key + distill settings>/ (StaticModel's
`save_pretrained` layout) and is distilled once, atomically (~1 min for MiniLM's 30k word pieces
on 2 cores). The embedding cache key names the settings too, so changing them never serves
vectors of another table.

Settings: model2vec's defaults (256 PCA dims, SIF 1e-4, max 512 tokens per text) except that
the table is kept in float32 (30 MB instead of 15 MB: averaging float16 rows in numpy measured
~15% slower, and float32 keeps the distilled values unrounded). Speed and agreement: docs/agreement.md.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np

from classify.core.errors import ClassifyError
from classify.core.paths import cache_dir

PCA_DIMS = 256
SIF_COEFFICIENT = 1e-4
DTYPE = "float32"
MAX_LENGTH = 512  # tokens per text at inference (model2vec's default); MiniLM itself reads 256
ENCODE_BATCH = 1024  # texts per StaticModel call; the transformer batch size does not apply here
log = logging.getLogger(__name__)


class StaticBackendError(ClassifyError, ValueError):
    pass


def settings_tag() -> str:
    """The distillation and inference settings, as part of cache keys."""
    return f"pca{PCA_DIMS}-sif{SIF_COEFFICIENT:g}-{DTYPE}-max{MAX_LENGTH}"


def static_dir(weights_key: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{weights_key}|{settings_tag()}")
    return cache_dir() / "model2vec" / safe


def _require_model2vec(distill: bool = False) -> None:
    try:
        import model2vec  # noqa: F401

        if distill:
            import skeletoken  # noqa: F401
    except ModuleNotFoundError as e:
        raise StaticBackendError(
            f"the model2vec backend needs {e.name}: pip install model2vec 'skeletoken>=0.6,<0.7' "
            "(not model2vec[distill], which would downgrade transformers)"
        ) from None


def distill_static(folder: str | Path, out: Path) -> tuple[Path, bool]:
    """Distill a StaticModel from the sentence-transformers folder into `out` unless it is there.

    Returns (out, whether this call distilled it).
    """
    if (out / "model.safetensors").exists():
        return out, False
    _require_model2vec(distill=True)
    folder = Path(folder)
    if not (folder / "config.json").exists():
        raise StaticBackendError(f"{folder}: not a local transformer folder; model2vec distils from local weights only")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from model2vec.distill import distill

    log.warning("distilling a model2vec static model from %s (once, about a minute)...", folder)
    t0 = time.perf_counter()
    from classify.encoders.encoder import quiet_loading

    with quiet_loading():
        model = distill(
            str(folder), pca_dims=PCA_DIMS, sif_coefficient=SIF_COEFFICIENT, quantize_to=DTYPE, device="cpu"
        )
    seconds = time.perf_counter() - t0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    (tmp / "distill_seconds.txt").write_text(f"{seconds:.1f}\n")
    try:
        os.rename(tmp, out)  # atomic; fails if another process finished first
    except OSError:
        if not (out / "model.safetensors").exists():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
        return out, False
    log.warning("model2vec static model distilled in %.0f s: %s", seconds, out)
    return out, True


class StaticSentenceEncoder:
    """The subset of SentenceTransformer.encode the project uses, on a model2vec StaticModel."""

    def __init__(self, folder: str | Path, weights_key: str):
        _require_model2vec()
        self.path, self.distilled = distill_static(folder, static_dir(weights_key))
        from model2vec import StaticModel

        self.model = StaticModel.from_pretrained(
            str(self.path), normalize=True, max_length=MAX_LENGTH, force_download=False
        )

    def encode(
        self,
        texts: list[str],
        batch_size: int = 32,
        show_progress_bar: bool = False,
        convert_to_numpy: bool = True,
        normalize_embeddings: bool = False,
    ) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.model.dim), dtype=np.float32)
        # Threads off: results are the same either way, and the machine has 2 cores.
        v = self.model.encode(
            list(texts),
            batch_size=max(batch_size, ENCODE_BATCH),
            show_progress_bar=show_progress_bar,
            normalize=False,
            use_multiprocessing=False,
        )
        v = np.asarray(v, dtype=np.float32)
        if normalize_embeddings or self.model.normalize:
            # A text with no known word piece has a zero vector and stays zero.
            v /= np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)
        return v
