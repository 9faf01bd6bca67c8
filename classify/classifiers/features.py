"""Lexical + semantic classifiers for rare classes, flat or hierarchical.

Specs:
  tfidf-embed        TF-IDF word n-grams + frozen sentence embeddings, class-balanced
                     logistic regression per dimension.
  hier-tfidf-embed   the same features; dimensions with groups (root cause) are predicted group
                     first, then category within the predicted group.
  finetune           as tfidf-embed, but the embeddings come from an encoder whose top layers are
                     contrastively fine-tuned on the training records (classify.encoders.finetune).
  hier-finetune      finetune with the hierarchical head.

Every spec accepts `--encoder` (e.g. `all-mpnet-base-v2`) and these `--opt` keys:
  C=10               inverse regularisation of the logistic regressions
  tfidf=true         add TF-IDF word 1-2 grams (fit on the training texts of each fit call)
  codebook=true      add one pseudo-example per category (name, definition, include cues):
                     the codebook is not gold data, and it gives classes with 2-3 gold items an
                     anchor
  embed=true         add the sentence embeddings
  char=false         add TF-IDF character 2-5 grams
  backend=torch      encoder backend for the frozen specs (torch, onnx, onnx-int8, model2vec)
  ft_*               fine-tuning settings, see FineTuneConfig (ft_epochs, ft_top_layers, ...)

Hierarchical predictions carry `extra["group"]`, `extra["group_confidence"]` and
`extra["group_proba"]`; the category label always lies within the predicted group.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from classify.classifiers.baselines import record_texts
from classify.encoders.encoder import Encoder
from classify.classifiers.base import ModelOptions, Prediction, register
from classify.core.records import Record
from classify.core.taxonomy import Dimension, Taxonomy


def _flag(extra: dict, key: str, default: bool) -> bool:
    v = extra.get(key, default)
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


class _Constant:
    """Stands in when the training data holds a single class."""

    def __init__(self, label: str):
        self.classes_ = np.array([label])

    def predict_proba(self, X):
        return np.ones((X.shape[0], 1))


def _fit_lr(X, y: np.ndarray, C: float, seed: int, sample_weight=None):
    if len(set(y)) == 1:
        return _Constant(str(y[0]))
    # Balanced weights: a class with 3 items counts as much as one with 100 in the loss.
    return LogisticRegression(C=C, class_weight="balanced", max_iter=5000, random_state=seed).fit(
        X, y, sample_weight=sample_weight
    )


def _proba(est, X) -> tuple[list[str], np.ndarray]:
    return [str(c) for c in est.classes_], est.predict_proba(X)


def codebook_examples(dim: Dimension) -> list[tuple[str, str]]:
    """(text, category id) per category: name, definition and include cues."""
    return [(f"{c.name}. {c.definition} " + " ".join(c.include), c.id) for c in dim.categories]


class FlatHead:
    def __init__(self, C: float, seed: int):
        self.C, self.seed = C, seed

    def fit(self, X, y: np.ndarray, w=None) -> "FlatHead":
        self.est = _fit_lr(X, y, self.C, self.seed, w)
        return self

    def predict(self, X) -> list[Prediction]:
        classes, P = _proba(self.est, X)
        best = P.argmax(axis=1)
        return [
            Prediction(label=classes[b], confidence=float(p[b]), proba={c: float(v) for c, v in zip(classes, p)})
            for b, p in zip(best, P)
        ]


class HierarchicalHead:
    """Group classifier, then one category classifier per group, trained on that group's items.

    P(category) = P(group) * P(category | group). The label is the best category inside the most
    probable group, so the group-level answer is the group classifier's own decision.
    """

    def __init__(self, dim: Dimension, C: float, seed: int):
        self.dim, self.C, self.seed = dim, C, seed

    def fit(self, X, y: np.ndarray, w=None) -> "HierarchicalHead":
        groups = np.array([self.dim.group_of(v) for v in y])
        self.group_est = _fit_lr(X, groups, self.C, self.seed, w)
        self.within: dict[str, Any] = {}
        for g in sorted(set(groups)):
            m = groups == g
            self.within[g] = _fit_lr(X[np.flatnonzero(m)], y[m], self.C, self.seed, None if w is None else w[m])
        return self

    def predict(self, X) -> list[Prediction]:
        gclasses, PG = _proba(self.group_est, X)
        within = {g: _proba(self.within[g], X) for g in gclasses}
        out = []
        for i in range(X.shape[0]):
            joint: dict[str, float] = {}
            for gi, g in enumerate(gclasses):
                cl, P = within[g]
                for c, p in zip(cl, P[i]):
                    joint[c] = float(PG[i, gi] * p)
            gbest = gclasses[int(PG[i].argmax())]
            cl, P = within[gbest]
            label = cl[int(P[i].argmax())]
            out.append(
                Prediction(
                    label=label,
                    confidence=joint[label],
                    proba=joint,
                    extra={
                        "group": gbest,
                        "group_confidence": float(PG[i].max()),
                        "group_proba": {g: float(p) for g, p in zip(gclasses, PG[i])},
                    },
                )
            )
        return out


class FeatureClassifier:
    """TF-IDF + dense embeddings -> one head per dimension. Subclasses supply the embedding."""

    family = "tfidf-embed"

    def __init__(self, spec: str, taxonomy: Taxonomy, options: ModelOptions, hierarchical: bool):
        self.spec = spec
        self.taxonomy = taxonomy
        self.options = options
        self.hierarchical = hierarchical
        ex = options.extra
        self.C = float(ex.get("C", 10.0))
        self.use_tfidf = _flag(ex, "tfidf", True)
        self.use_codebook = _flag(ex, "codebook", True)
        self.use_embed = _flag(ex, "embed", True)
        self.use_char = _flag(ex, "char", False)
        if not (self.use_tfidf or self.use_embed or self.use_char):
            raise ValueError(f"{spec}: tfidf, char and embed are all off; no features left")
        self.heads: dict[str, Any] = {}
        self.n_train_: dict[str, int] = {}
        self.vectorizer: TfidfVectorizer | None = None
        self.char_vectorizer: TfidfVectorizer | None = None

    # -- embedding: subclasses override -------------------------------------------------------
    def fit_embedder(self, texts: list[str], labels: dict[str, list[str | None]]) -> None:
        pass

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embedder_provenance(self) -> dict[str, Any]:
        return {}

    # -- features -----------------------------------------------------------------------------
    def _features(self, texts: list[str]):
        parts = []
        if self.vectorizer is not None:
            parts.append(self.vectorizer.transform(texts))
        if self.char_vectorizer is not None:
            parts.append(self.char_vectorizer.transform(texts))
        if self.use_embed:
            parts.append(sparse.csr_matrix(self.embed_texts(texts)))
        return sparse.hstack(parts).tocsr()

    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> "FeatureClassifier":
        texts = record_texts(records, self.options.include_discussion)
        dims = [d for d in self.taxonomy.dimension_ids if labels.get(d) is not None]
        for d in dims:
            if all(v is None for v in labels[d]):
                raise ValueError(f"no training labels for dimension {d!r}")
        self.fit_embedder(texts, {d: labels[d] for d in dims})
        if self.use_tfidf:
            # min_df=2: a token seen in one training report is noise for a linear model this small.
            self.vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=50000)
            self.vectorizer.fit(texts)
        if self.use_char:
            # Character n-grams catch error identifiers (ptxas, libcudart.so.12, sm_90a) word tokens split.
            self.char_vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=2,
                                                   sublinear_tf=True, max_features=100000)
            self.char_vectorizer.fit(texts)
        X = self._features(texts)
        for d in dims:
            dim = self.taxonomy.dimensions[d]
            idx = [i for i, v in enumerate(labels[d]) if v is not None]
            Xd = X[idx]
            y = np.array([labels[d][i] for i in idx])
            w = np.ones(len(idx))
            if self.use_codebook:
                cb = codebook_examples(dim)
                Xd = sparse.vstack([Xd, self._features([t for t, _ in cb])]).tocsr()
                y = np.concatenate([y, [c for _, c in cb]])
                w = np.concatenate([w, np.ones(len(cb))])
            if self.hierarchical and dim.groups:
                head = HierarchicalHead(dim, self.C, self.options.seed)
            else:
                head = FlatHead(self.C, self.options.seed)
            self.heads[d] = head.fit(Xd, y, w)
            self.n_train_[d] = len(idx)
        return self

    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]:
        if not self.heads:
            raise RuntimeError(f"{self.spec}: call fit() before predict()")
        if not records:
            return {d: [] for d in self.heads}
        X = self._features(record_texts(records, self.options.include_discussion))
        return {d: head.predict(X) for d, head in self.heads.items()}

    def provenance(self) -> dict[str, Any]:
        return {
            "model": self.spec,
            "text": "title+body+discussion" if self.options.include_discussion else "title+body",
            "features": "+".join(f for f, on in (("tfidf-word-1-2", self.use_tfidf), ("tfidf-char-2-5", self.use_char),
                                                 ("embedding", self.use_embed)) if on),
            "codebook_examples": self.use_codebook,
            "hierarchical": self.hierarchical,
            "C": self.C,
            "n_train": dict(self.n_train_),
            **self.embedder_provenance(),
        }


class FrozenEmbedClassifier(FeatureClassifier):
    def __init__(self, spec, taxonomy, options, hierarchical):
        super().__init__(spec, taxonomy, options, hierarchical)
        self.encoder = Encoder(
            options.encoder, batch_size=options.batch_size, show_progress=options.show_progress,
            backend=options.extra.get("backend", "torch"),
        )

    def embed_texts(self, texts):
        return self.encoder.encode(texts)

    def embedder_provenance(self):
        return {"encoder": self.encoder.model_key} if self.use_embed else {}


class FineTunedClassifier(FeatureClassifier):
    def __init__(self, spec, taxonomy, options, hierarchical):
        super().__init__(spec, taxonomy, options, hierarchical)
        from classify.encoders.finetune import FineTuneConfig

        self.ft_config = FineTuneConfig.from_extra(options.extra)
        self.ft_config.seed = options.seed
        self.ft = None

    def fit_embedder(self, texts, labels):
        from classify.encoders.finetune import FineTunedEncoder, lower_states

        lower = lower_states(self.options.encoder, self.ft_config.top_layers, self.ft_config.max_seq_length)
        self.ft = FineTunedEncoder(lower, self.ft_config).fit(texts, labels)

    def embed_texts(self, texts):
        return self.ft.encode(texts)

    def embedder_provenance(self):
        from dataclasses import asdict

        return {
            "encoder": self.ft.lower.model_key if self.ft else None,
            "finetune": {**asdict(self.ft_config), "steps": self.ft.log.steps if self.ft else 0,
                         "seconds": round(self.ft.log.seconds, 1) if self.ft else None},
        }


def _factory(cls, hierarchical: bool) -> Callable[[str, Taxonomy, ModelOptions], FeatureClassifier]:
    def make(spec: str, taxonomy: Taxonomy, options: ModelOptions) -> FeatureClassifier:
        return cls(spec, taxonomy, options, hierarchical)

    return make


register("tfidf-embed")(_factory(FrozenEmbedClassifier, False))
register("hier-tfidf-embed")(_factory(FrozenEmbedClassifier, True))
register("finetune")(_factory(FineTunedClassifier, False))
register("hier-finetune")(_factory(FineTunedClassifier, True))
