"""Embedding baselines: a frozen sentence encoder + one scikit-learn classifier per dimension.

Specs: embed-logreg (default), embed-knn, embed-centroid; tfidf-logreg is the lexical baseline.
Options (`--opt`): C (logistic regressions, default 10), k (embed-knn, default 10), backend
(the encoder's: torch, onnx, onnx-int8, model2vec).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
from pydantic import Field
from sklearn.base import BaseEstimator
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier, NearestCentroid

from classify.classifiers.base import Classifier, ModelOptions, Prediction, predictions_from_proba
from classify.classifiers.options import EncoderOptions, InverseRegularisation, OptionsModel
from classify.core.records import Record
from classify.core.taxonomy import Taxonomy
from classify.encoders.encoder import Encoder

# C=10: normalised 384-d sentence vectors are small; the default C=1 underfits them.
DEFAULT_C = 10.0


class LogRegOptions(OptionsModel):
    C: InverseRegularisation = DEFAULT_C


class EmbedLogRegOptions(EncoderOptions, LogRegOptions):
    pass


class EmbedKNNOptions(EncoderOptions):
    k: Annotated[int, Field(ge=1, description="neighbours that vote (fewer if training is smaller)")] = 10


def record_texts(records: list[Record], include_discussion: bool) -> list[str]:
    return [r.text(include_discussion) for r in records]


def one_point(X: Any) -> bool:
    """Every row of `X` (dense or sparse) is the same vector."""
    spread = X.max(axis=0) - X.min(axis=0)
    return not np.asarray(spread.todense() if hasattr(spread, "todense") else spread).any()


def fit_per_dimension(
    taxonomy: Taxonomy, X: Any, labels: dict[str, list[str | None]], make_estimator: Callable[[int], BaseEstimator]
) -> tuple[dict[str, Any], dict[str, int]]:
    """One fitted estimator per labeled dimension, trained on the rows that have a label.

    A dimension with one class in training gets a DummyClassifier (probability 1 for that class):
    scikit-learn's classifiers refuse a single class. So does one whose rows are all the same vector
    (duplicate or empty texts): no feature tells its classes apart, so it predicts their shares.
    `make_estimator(n_rows)` builds the rest.
    """
    estimators: dict[str, Any] = {}
    n_train: dict[str, int] = {}
    for dim in taxonomy.dimension_ids:
        ys = labels.get(dim)
        if ys is None:
            continue
        idx = [i for i, y in enumerate(ys) if y is not None]
        if not idx:
            raise ValueError(f"no training labels for dimension {dim!r}")
        y = np.array([ys[i] for i in idx])
        one_class = len(set(y)) == 1 or one_point(X[idx])
        est = DummyClassifier(strategy="prior") if one_class else make_estimator(len(idx))
        estimators[dim] = est.fit(X[idx], y)
        n_train[dim] = len(idx)
    return estimators, n_train


def predict_per_dimension(estimators: dict[str, Any], X: Any) -> dict[str, list[Prediction]]:
    return {
        dim: predictions_from_proba([str(c) for c in est.classes_], est.predict_proba(X))
        for dim, est in estimators.items()
    }


def text_kind(options: ModelOptions) -> str:
    return "title+body+discussion" if options.include_discussion else "title+body"


def make_encoder(options: ModelOptions, backend: str) -> Encoder:
    """The sentence encoder the run options ask for (it loads its model on first use)."""
    return Encoder(options.encoder, batch_size=options.batch_size, show_progress=options.show_progress, backend=backend)


def prepare_encoder(
    encoder: Encoder, records: list[Record], include_discussion: bool, progress: Callable[[int], None] | None
) -> None:
    """Encode (and cache) `records` in one length-sorted pass before a bulk run."""
    for i in range(0, len(records), 20_000):  # bounded memory on huge inputs
        encoder.encode(record_texts(records[i : i + 20_000], include_discussion), progress=progress)


class EmbeddingClassifier(Classifier):
    """Frozen sentence embeddings -> one scikit-learn classifier per dimension. Subclasses pick it."""

    encoder_: Encoder
    estimators_: dict[str, Any]
    n_train_: dict[str, int]

    def make_estimator(self, n_train: int) -> BaseEstimator:
        raise NotImplementedError

    def embed(self, records: list[Record]) -> np.ndarray:
        return self.encoder_.encode(record_texts(records, self.options.include_discussion))

    def prepare(self, records: list[Record], progress: Callable[[int], None] | None = None) -> None:
        """Encode (and cache) every record up front in one length-sorted pass: less padding than
        encoding chunk by chunk, and the progress bar shows the encoding itself."""
        self.check_fitted()
        prepare_encoder(self.encoder_, records, self.options.include_discussion, progress)

    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> EmbeddingClassifier:
        self.encoder_ = make_encoder(self.options, self.params.backend)
        self.estimators_, self.n_train_ = fit_per_dimension(
            self.taxonomy, self.embed(records), labels, self.make_estimator
        )
        return self

    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]:
        self.check_fitted()
        if not records:
            return {d: [] for d in self.estimators_}
        return predict_per_dimension(self.estimators_, self.embed(records))

    def provenance(self) -> dict[str, Any]:
        self.check_fitted()
        return {
            "model": self.spec,
            "encoder": self.encoder_.model_key,
            "text": text_kind(self.options),
            "options": self.params.model_dump(),
            "n_train": dict(self.n_train_),
        }

    def close(self) -> None:
        if hasattr(self, "encoder_"):
            self.encoder_.close()


class EmbedLogReg(EmbeddingClassifier):
    Options = EmbedLogRegOptions

    def make_estimator(self, n_train: int) -> BaseEstimator:
        return LogisticRegression(C=self.params.C, max_iter=5000, random_state=self.options.seed)


class EmbedKNN(EmbeddingClassifier):
    Options = EmbedKNNOptions

    def make_estimator(self, n_train: int) -> BaseEstimator:
        # Never more neighbours than training rows (a small gold set or fold).
        return KNeighborsClassifier(n_neighbors=min(self.params.k, n_train), weights="distance", metric="cosine")


class SpreadCentroid(NearestCentroid):
    """NearestCentroid that also fits when no class has a second training row (a tiny gold set, a
    rare dimension, a small fold): scikit-learn's within-class spread is then 0/0, NaN, and every
    distance scaled by it too ("Input contains NaN" at predict). Plain distances (unit spread) are
    used instead: the nearest single example wins."""

    within_class_std_dev_: np.ndarray

    def fit(self, X: Any, y: Any) -> SpreadCentroid:
        with np.errstate(invalid="ignore", divide="ignore"):
            super().fit(X, y)
        if not np.isfinite(self.within_class_std_dev_).all():
            self.within_class_std_dev_ = np.ones_like(self.within_class_std_dev_)
        return self


class EmbedCentroid(EmbeddingClassifier):
    Options = EncoderOptions

    def make_estimator(self, n_train: int) -> BaseEstimator:
        return SpreadCentroid()


class TfidfLogReg(Classifier):
    """TF-IDF word n-grams + logistic regression: the lexical baseline, no encoder needed."""

    Options = LogRegOptions
    uses_encoder = False

    vectorizer_: Any
    estimators_: dict[str, Any]
    n_train_: dict[str, int]

    def _texts(self, records: list[Record]) -> list[str]:
        return record_texts(records, self.options.include_discussion)

    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> TfidfLogReg:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer_ = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
        X = self.vectorizer_.fit_transform(self._texts(records))
        self.estimators_, self.n_train_ = fit_per_dimension(
            self.taxonomy,
            X,
            labels,
            lambda n: LogisticRegression(C=self.params.C, max_iter=5000, random_state=self.options.seed),
        )
        return self

    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]:
        self.check_fitted()
        if not records:
            return {d: [] for d in self.estimators_}
        return predict_per_dimension(self.estimators_, self.vectorizer_.transform(self._texts(records)))

    def provenance(self) -> dict[str, Any]:
        self.check_fitted()
        return {
            "model": self.spec,
            "features": "tfidf word 1-2grams",
            "options": self.params.model_dump(),
            "n_train": dict(self.n_train_),
            "text": text_kind(self.options),
        }
