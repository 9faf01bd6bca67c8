"""The one text hash of the package."""

from __future__ import annotations

import hashlib


def text_hash(text: str) -> str:
    """SHA-256 hex digest of the UTF-8 bytes of `text`.

    It keys the embedding cache on disk, so it must never change: a different digest would make
    every cached vector unreachable. The fine-tuning state cache and the few-shot self-exclusion
    use it too (in memory only).
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
