"""Few-shot examples: the k training records most similar to an issue (cosine of sentence
embeddings, through the core's cached Encoder).

The pool is exactly the records given to fit(), so under cross-validation examples come only
from the training fold. A record is never its own example: pool entries with the same id or the
same text as the issue are skipped even if a caller passes overlapping data.
"""

from __future__ import annotations

import numpy as np

from classify.classifiers.llm.prompts import Example
from classify.core.causeshown import NONE_SHOWN
from classify.core.hashing import text_hash
from classify.core.records import Record
from classify.encoders.encoder import Encoder


def _text_key(r: Record) -> str:
    # NUL between the fields: ("a", "bc") and ("ab", "c") must not collide.
    return text_hash(f"{r.title}\0{r.body}\0{r.discussion}")


class ExampleSelector:
    def __init__(
        self,
        records: list[Record],
        labels: dict[str, list[str | None]],
        dims: list[str],
        encoder: Encoder,
        include_discussion: bool = True,
        require_complete: bool = True,
        partners: dict[str, str] | None = None,
    ):
        """`partners` ({dim: "<dim>_shown"}): a null `dim` is a complete answer where its decision
        is none_shown, so threads that show no cause are examples too."""
        partners = partners or {}

        def label(d: str, i: int) -> str | None:
            return labels.get(d, [None] * len(records))[i]

        def answered(d: str, i: int) -> bool:
            return label(d, i) is not None or (d in partners and label(partners[d], i) == NONE_SHOWN)

        idx = []
        for i in range(len(records)):
            got = [answered(d, i) for d in dims]
            if all(got) if require_complete else any(got):
                idx.append(i)
        if not idx:
            what = "labeled on every dimension" if require_complete else "with a label"
            raise ValueError(f"few-shot needs training records {what}; none among {len(records)}")
        self.pool = [Example(records[i], {d: label(d, i) for d in dims}) for i in idx]
        self.encoder = encoder
        self.include_discussion = include_discussion
        self._ids = np.array([e.record.id for e in self.pool], dtype=object)
        self._texts = np.array([_text_key(e.record) for e in self.pool], dtype=object)
        self.X = self._embed([e.record for e in self.pool])

    def _embed(self, records: list[Record]) -> np.ndarray:
        X = self.encoder.encode([r.text(self.include_discussion) for r in records])
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        return X / np.where(norms == 0, 1.0, norms)

    def select(self, records: list[Record], k: int) -> list[list[Example]]:
        """For each record, up to k examples, least similar first (the closest sits next to the issue)."""
        if not records:
            return []
        S = self._embed(records) @ self.X.T
        out = []
        for i, r in enumerate(records):
            s = S[i].copy()
            s[(self._ids == r.id) | (self._texts == _text_key(r))] = -np.inf
            order = np.argsort(-s, kind="stable")[: min(k, len(s))]
            keep = [j for j in order if np.isfinite(s[j])]
            out.append([self.pool[j] for j in reversed(keep)])
        return out
