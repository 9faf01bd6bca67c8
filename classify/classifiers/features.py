"""Lexical + semantic classifiers for rare classes, flat or hierarchical.

Specs:
  tfidf-embed        TF-IDF word n-grams + frozen sentence embeddings, class-balanced
                     logistic regression per dimension.
  hier-tfidf-embed   the same features; dimensions with groups (root cause) are predicted group
                     first, then category within the predicted group.
  finetune           as tfidf-embed, but the embeddings come from an encoder whose top layers are
                     contrastively fine-tuned on the training records (classify.encoders.finetune).
  hier-finetune      finetune with the hierarchical head.
  setfit             as tfidf-embed, but the embeddings come from an encoder tuned with SetFit's
                     embedding phase (the `setfit` package) on each fit's training records
                     (classify.encoders.setfit_body); tfidf=false codebook=false is plain SetFit.

Every spec accepts `--encoder` (e.g. `all-mpnet-base-v2`) and these `--opt` keys (FeatureOptions):
  C=10               inverse regularisation of the logistic regressions
  tfidf=true         add TF-IDF word 1-2 grams (fit on the training texts of each fit call)
  codebook=true      add one pseudo-example per category (name, definition, include cues):
                     the codebook is not gold data, and it gives classes with 2-3 gold items an
                     anchor
  embed=true         add the sentence embeddings
  char=false         add TF-IDF character 2-5 grams
  backend=torch      encoder backend for the frozen specs (torch, onnx, onnx-int8, model2vec)
  ft_*               fine-tuning settings of the finetune specs, see FineTuneConfig (ft_epochs, ...)
  sf_*               SetFit settings of the setfit spec, see SetFitConfig (sf_iterations, ...)

Hierarchical predictions carry `extra["group"]`, `extra["group_confidence"]` and
`extra["group_proba"]`; the category label always lies within the predicted group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
from pydantic import Field, create_model, model_validator
from scipy import sparse
from sklearn.dummy import DummyClassifier
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion
from sklearn.preprocessing import FunctionTransformer

from classify.classifiers.base import Classifier, Prediction, SharedPool, predictions_from_proba
from classify.classifiers.baselines import DEFAULT_C, make_encoder, prepare_encoder, record_texts, text_kind
from classify.classifiers.options import EncoderOptions, InverseRegularisation, OptionsModel
from classify.core.records import Record
from classify.core.taxonomy import Dimension
from classify.encoders.encoder import Encoder
from classify.encoders.finetune import FineTuneConfig
from classify.encoders.setfit_body import SetFitConfig


def _flag(description: str) -> Any:
    return Field(description=description)


class FeatureOptions(OptionsModel):
    C: InverseRegularisation = DEFAULT_C
    tfidf: Annotated[bool, _flag("TF-IDF word 1-2 grams")] = True
    codebook: Annotated[bool, _flag("one pseudo-example per category from the codebook")] = True
    embed: Annotated[bool, _flag("sentence embeddings")] = True
    char: Annotated[bool, _flag("TF-IDF character 2-5 grams")] = False

    @model_validator(mode="after")
    def _some_features(self) -> FeatureOptions:
        if not (self.tfidf or self.embed or self.char):
            raise ValueError("tfidf, char and embed are all off; no features left")
        return self


class FrozenFeatureOptions(FeatureOptions, EncoderOptions):
    @model_validator(mode="after")
    def _backend_needs_embed(self) -> FrozenFeatureOptions:
        if not self.embed and "backend" in self.model_fields_set:
            raise ValueError("backend: only with embed=true (no sentence encoder runs with embed=false)")
        return self


# FineTuneConfig's fields as ft_<name> keys (seed excluded: it is the run's --seed).
_FT_FIELDS: dict[str, Any] = {
    f"ft_{k}": (f.annotation, f) for k, f in FineTuneConfig.model_fields.items() if k != "seed"
}
_FineTuneFields = create_model("_FineTuneFields", __base__=FeatureOptions, **_FT_FIELDS)


class FineTuneOptions(_FineTuneFields):  # type: ignore[misc,valid-type]  # a class made by create_model
    @model_validator(mode="after")
    def _ft_needs_embed(self) -> FineTuneOptions:
        given = sorted(k for k in self.model_fields_set if k.startswith("ft_"))
        if not self.embed and given:
            raise ValueError(f"{', '.join(given)}: only with embed=true (nothing is fine-tuned with embed=false)")
        return self


_SF_FIELDS: dict[str, Any] = {f"sf_{k}": (f.annotation, f) for k, f in SetFitConfig.model_fields.items() if k != "seed"}
_SetFitFields = create_model("_SetFitFields", __base__=FeatureOptions, **_SF_FIELDS)


class SetFitOptions(_SetFitFields):  # type: ignore[misc,valid-type]  # a class made by create_model
    @model_validator(mode="after")
    def _needs_embed(self) -> SetFitOptions:
        if not self.embed:
            raise ValueError("embed=false: spec setfit is its tuned embeddings; use tfidf-embed embed=false")
        return self


def _fit_lr(X: Any, y: np.ndarray, C: float, seed: int, sample_weight: np.ndarray | None = None) -> Any:
    if len(set(y)) == 1:  # LogisticRegression refuses one class; the prior gives it probability 1
        return DummyClassifier(strategy="prior").fit(X, y)
    # Balanced weights: a class with 3 items counts as much as one with 100 in the loss.
    return LogisticRegression(C=C, class_weight="balanced", max_iter=5000, random_state=seed).fit(
        X, y, sample_weight=sample_weight
    )


def _proba(est: Any, X: Any) -> tuple[list[str], np.ndarray]:
    return [str(c) for c in est.classes_], est.predict_proba(X)


def codebook_examples(dim: Dimension) -> list[tuple[str, str]]:
    """(text, category id) per category: name, definition and include cues."""
    return [(f"{c.name}. {c.definition} " + " ".join(c.include), c.id) for c in dim.categories]


class FlatHead:
    def __init__(self, C: float, seed: int):
        self.C, self.seed = C, seed

    def fit(self, X: Any, y: np.ndarray, w: np.ndarray | None = None) -> FlatHead:
        self.est = _fit_lr(X, y, self.C, self.seed, w)
        return self

    def predict(self, X: Any) -> list[Prediction]:
        return predictions_from_proba(*_proba(self.est, X))


class HierarchicalHead:
    """Group classifier, then one category classifier per group, trained on that group's items.

    P(category) = P(group) * P(category | group). The label is the best category inside the most
    probable group, so the group-level answer is the group classifier's own decision.
    """

    def __init__(self, dim: Dimension, C: float, seed: int):
        self.dim, self.C, self.seed = dim, C, seed

    def fit(self, X: Any, y: np.ndarray, w: np.ndarray | None = None) -> HierarchicalHead:
        groups = np.array([self.dim.group_of(v) for v in y])
        self.group_est = _fit_lr(X, groups, self.C, self.seed, w)
        self.within: dict[str, Any] = {}
        for g in sorted(set(groups)):
            m = groups == g
            self.within[g] = _fit_lr(X[np.flatnonzero(m)], y[m], self.C, self.seed, None if w is None else w[m])
        return self

    def predict(self, X: Any) -> list[Prediction]:
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


class FeatureClassifier(Classifier):
    """TF-IDF + dense embeddings -> one head per dimension. Subclasses supply the embedding."""

    Options = FeatureOptions

    @classmethod
    def takes_encoder(cls, params: Any) -> bool:
        return bool(params.embed)  # with embed=false no sentence encoder runs

    hierarchical = False
    heads_: dict[str, Any]
    n_train_: dict[str, int]
    features_: FeatureUnion

    # -- embedding: subclasses override -------------------------------------------------------
    def fit_embedder(self, texts: list[str], labels: dict[str, list[str | None]]) -> None:
        pass

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embedder_provenance(self) -> dict[str, Any]:
        return {}

    # -- features -----------------------------------------------------------------------------
    def _feature_union(self) -> FeatureUnion:
        """Word and character TF-IDF (fit on the training texts) beside the embeddings, side by side."""
        parts: list[tuple[str, Any]] = []
        if self.params.tfidf:
            # min_df=2: a token seen in one training report is noise for a linear model this small.
            parts.append(
                ("tfidf", TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=50000))
            )
        if self.params.char:
            # Character n-grams catch error identifiers (ptxas, libcudart.so.12, sm_90a) word tokens split.
            parts.append(
                (
                    "char",
                    TfidfVectorizer(
                        analyzer="char_wb", ngram_range=(2, 5), min_df=2, sublinear_tf=True, max_features=100000
                    ),
                )
            )
        if self.params.embed:
            # Stateless: the embedder is fitted (or frozen) before the union is.
            parts.append(("embed", FunctionTransformer(self.embed_texts, validate=False, accept_sparse=True)))
        return FeatureUnion(parts)

    def _features(self, texts: list[str]) -> sparse.csr_matrix:
        return sparse.csr_matrix(self.features_.transform(texts))

    @property
    def vectorizer(self) -> TfidfVectorizer | None:
        """The fitted word TF-IDF vectorizer (None when tfidf is off or before fit)."""
        return self.features_.named_transformers.get("tfidf") if hasattr(self, "features_") else None

    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> FeatureClassifier:
        texts = record_texts(records, self.options.include_discussion)
        dims = [d for d in self.taxonomy.dimension_ids if labels.get(d) is not None]
        for d in dims:
            if all(v is None for v in labels[d]):
                raise ValueError(f"no training labels for dimension {d!r}")
        self.fit_embedder(texts, {d: labels[d] for d in dims})
        features = self._feature_union()
        features.fit(texts)
        self.features_ = features
        self.heads_, self.n_train_ = {}, {}
        C, seed = self.params.C, self.options.seed
        X = self._features(texts)
        for d in dims:
            dim = self.taxonomy.dimensions[d]
            idx = [i for i, v in enumerate(labels[d]) if v is not None]
            Xd = X[idx]
            y = np.array([labels[d][i] for i in idx])
            w = np.ones(len(idx))
            if self.params.codebook:
                cb = codebook_examples(dim)
                Xd = sparse.vstack([Xd, self._features([t for t, _ in cb])]).tocsr()
                y = np.concatenate([y, [c for _, c in cb]])
                w = np.concatenate([w, np.ones(len(cb))])
            if self.hierarchical and dim.groups:
                head: Any = HierarchicalHead(dim, C, seed)
            else:
                head = FlatHead(C, seed)
            self.heads_[d] = head.fit(Xd, y, w)
            self.n_train_[d] = len(idx)
        return self

    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]:
        self.check_fitted()
        if not records:
            return {d: [] for d in self.heads_}
        X = self._features(record_texts(records, self.options.include_discussion))
        return {d: head.predict(X) for d, head in self.heads_.items()}

    def provenance(self) -> dict[str, Any]:
        self.check_fitted()
        p = self.params
        return {
            "model": self.spec,
            "text": text_kind(self.options),
            "features": "+".join(
                f
                for f, on in (
                    ("tfidf-word-1-2", p.tfidf),
                    ("tfidf-char-2-5", p.char),
                    ("embedding", p.embed),
                )
                if on
            ),
            "codebook_examples": p.codebook,
            "hierarchical": self.hierarchical,
            "C": p.C,
            "n_train": dict(self.n_train_),
            **self.embedder_provenance(),
        }


class TfidfEmbed(FeatureClassifier):
    """Frozen sentence embeddings (cached on disk) beside the TF-IDF features."""

    Options = FrozenFeatureOptions
    encoder_: Encoder

    def fit_embedder(self, texts: list[str], labels: dict[str, list[str | None]]) -> None:
        self.encoder_ = make_encoder(self.options, self.params.backend)

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        return self.encoder_.encode(texts)

    def prepare(self, records: list[Record], progress: Callable[[int], None] | None = None) -> None:
        """Encode (and cache) every record in one length-sorted pass before a bulk run."""
        self.check_fitted()
        if self.params.embed:
            prepare_encoder(self.encoder_, records, self.options.include_discussion, progress)

    def embedder_provenance(self) -> dict[str, Any]:
        return {"encoder": self.encoder_.model_key} if self.params.embed else {}

    def close(self) -> None:
        if hasattr(self, "encoder_"):
            self.encoder_.close()


class HierTfidfEmbed(TfidfEmbed):
    hierarchical = True


# Frozen lower-layer states depend on the text only, so the folds of a cross-validation share them.
LOWER_STATES: SharedPool[Any] = SharedPool(keep_idle=1)


class FineTune(FeatureClassifier):
    """Embeddings from an encoder whose top layers are fine-tuned on each fit's training records."""

    Options = FineTuneOptions
    ft_: Any  # the FineTunedEncoder fit trained
    lower_key_: tuple | None  # the LOWER_STATES entry this classifier holds

    @property
    def ft_config(self) -> FineTuneConfig:
        ft = {k[len("ft_") :]: v for k, v in self.params.model_dump().items() if k.startswith("ft_")}
        return FineTuneConfig(**ft, seed=self.options.seed)

    def fit_embedder(self, texts: list[str], labels: dict[str, list[str | None]]) -> None:
        from classify.encoders.finetune import FineTunedEncoder, LowerStates

        cfg = self.ft_config
        self._release_lower()
        key = self.lower_key_ = (self.options.encoder, cfg.top_layers, cfg.max_seq_length)
        lower = LOWER_STATES.acquire(key, lambda: LowerStates(*key))
        self.ft_ = FineTunedEncoder(lower, cfg).fit(texts, labels)

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        return self.ft_.encode(texts)

    def embedder_provenance(self) -> dict[str, Any]:
        ft = self.ft_
        return {
            "encoder": ft.lower.model_key if ft else None,
            "finetune": {
                **self.ft_config.model_dump(),
                "steps": ft.log.steps if ft else 0,
                "seconds": round(ft.log.seconds, 1) if ft else None,
            },
        }

    def _release_lower(self) -> None:
        if getattr(self, "lower_key_", None) is not None:
            LOWER_STATES.release(self.lower_key_)
            self.lower_key_ = None

    def close(self) -> None:
        # The fitted layers stay (predict still works); the pool may free the frozen states once
        # no classifier holds them.
        self._release_lower()


class HierFineTune(FineTune):
    hierarchical = True


class SetFitFeatures(TfidfEmbed):
    """Embeddings from an encoder tuned by SetFit's embedding phase on each fit's training records.

    The tuned encoder is cached on disk per training set (classify.encoders.setfit_body), and its
    embeddings in the embedding cache like any encoder's, under the tuned weights' own key.
    """

    Options = SetFitOptions  # no backend key: the tuned encoder runs on torch
    body_: Any  # BodyLog of the tuned encoder

    @classmethod
    def takes_encoder(cls, params: Any) -> bool:
        return True

    @property
    def sf_config(self) -> SetFitConfig:
        sf = {k[len("sf_") :]: v for k, v in self.params.model_dump().items() if k.startswith("sf_")}
        return SetFitConfig(**sf, seed=self.options.seed)

    def fit_embedder(self, texts: list[str], labels: dict[str, list[str | None]]) -> None:
        from classify.core.causeshown import shown_partners
        from classify.encoders.setfit_body import train_body

        # The derived "cause shown" decisions are left to the head: their pairs would add ~70% to the
        # training steps, and the cause dimension's own pairs already separate its categories.
        derived = set(shown_partners(self.taxonomy).values())
        own = {d: v for d, v in labels.items() if d not in derived}
        folder, self.body_ = train_body(self.options.encoder, texts, own, self.sf_config)
        self.encoder_ = Encoder(
            str(folder), batch_size=self.options.batch_size, show_progress=self.options.show_progress
        )

    def embedder_provenance(self) -> dict[str, Any]:
        from classify.encoders.encoder import resolve_encoder

        b = self.body_
        return {
            "encoder": resolve_encoder(self.options.encoder)[1],
            "setfit": {
                **self.sf_config.model_dump(),
                "tuned_encoder": b.key,
                "steps": b.steps,
                "pairs": b.pairs,
                "train_seconds": round(b.seconds, 1),
                "from_cache": b.cached,
            },
        }
