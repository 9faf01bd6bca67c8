"""Embedding baselines: a frozen sentence encoder + one scikit-learn classifier per dimension.

Specs: embed-logreg (default), embed-knn, embed-centroid; tfidf-logreg is the lexical baseline.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier, NearestCentroid

from classify.encoders.encoder import Encoder
from classify.classifiers.base import ModelOptions, Prediction, register
from classify.core.records import Record
from classify.core.taxonomy import Taxonomy


def _logreg(opts: ModelOptions) -> BaseEstimator:
    # C=10: normalised 384-d sentence vectors are small; the default C=1 underfits them.
    return LogisticRegression(C=10.0, max_iter=5000, random_state=opts.seed)


def _knn(opts: ModelOptions) -> BaseEstimator:
    return KNeighborsClassifier(n_neighbors=int(opts.extra.get("k", 10)), weights="distance", metric="cosine")


def _centroid(opts: ModelOptions) -> BaseEstimator:
    return NearestCentroid()


ESTIMATORS: dict[str, Callable[[ModelOptions], BaseEstimator]] = {
    "embed-logreg": _logreg,
    "embed-knn": _knn,
    "embed-centroid": _centroid,
}


class _Constant:
    """Stands in when a dimension has a single class in the training data."""

    def __init__(self, label: str):
        self.classes_ = np.array([label])

    def predict_proba(self, X):
        return np.ones((len(X), 1))


def record_texts(records: list[Record], include_discussion: bool) -> list[str]:
    return [r.text(include_discussion) for r in records]


class EmbeddingClassifier:
    def __init__(self, spec: str, taxonomy: Taxonomy, options: ModelOptions, make_estimator):
        self.spec = spec
        self.taxonomy = taxonomy
        self.options = options
        self.make_estimator = make_estimator
        self.encoder = Encoder(
            options.encoder, batch_size=options.batch_size, show_progress=options.show_progress,
            backend=options.extra.get("backend", "torch"),
        )
        self.estimators_: dict[str, Any] = {}
        self.n_train_: dict[str, int] = {}

    def embed(self, records: list[Record]) -> np.ndarray:
        return self.encoder.encode(record_texts(records, self.options.include_discussion))

    def prepare(self, records: list[Record], progress=None) -> None:
        """Encode (and cache) every record up front in one length-sorted pass: less padding than
        encoding chunk by chunk, and the progress bar shows the encoding itself."""
        for i in range(0, len(records), 20_000):  # bounded memory on huge inputs
            self.encoder.encode(record_texts(records[i : i + 20_000], self.options.include_discussion), progress=progress)

    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> "EmbeddingClassifier":
        X = self.embed(records)
        return self.fit_embeddings(X, labels)

    def fit_embeddings(self, X: np.ndarray, labels: dict[str, list[str | None]]) -> "EmbeddingClassifier":
        for dim in self.taxonomy.dimension_ids:
            ys = labels.get(dim)
            if ys is None:
                continue
            idx = [i for i, y in enumerate(ys) if y is not None]
            if not idx:
                raise ValueError(f"no training labels for dimension {dim!r}")
            y = np.array([ys[i] for i in idx])
            if len(set(y)) == 1:
                est = _Constant(y[0])
            else:
                est = clone(self.make_estimator(self.options))
                if isinstance(est, KNeighborsClassifier):
                    est.set_params(n_neighbors=min(est.n_neighbors, len(idx)))
                est.fit(X[idx], y)
            self.estimators_[dim] = est
            self.n_train_[dim] = len(idx)
        return self

    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]:
        return self.predict_embeddings(self.embed(records))

    def predict_embeddings(self, X: np.ndarray) -> dict[str, list[Prediction]]:
        if not self.estimators_:
            raise RuntimeError(f"{self.spec}: call fit() before predict()")
        out: dict[str, list[Prediction]] = {}
        for dim, est in self.estimators_.items():
            P = est.predict_proba(X)
            classes = [str(c) for c in est.classes_]
            best = P.argmax(axis=1)
            out[dim] = [
                Prediction(
                    label=classes[b],
                    confidence=float(p[b]),
                    proba={c: float(v) for c, v in zip(classes, p)},
                )
                for b, p in zip(best, P)
            ]
        return out

    def provenance(self) -> dict[str, Any]:
        return {
            "model": self.spec,
            "encoder": self.encoder.model_key,
            "text": "title+body+discussion" if self.options.include_discussion else "title+body",
            "n_train": dict(self.n_train_),
        }


def _factory(spec: str, taxonomy: Taxonomy, options: ModelOptions) -> EmbeddingClassifier:
    return EmbeddingClassifier(spec, taxonomy, options, ESTIMATORS[spec])


for _spec in ESTIMATORS:
    register(_spec)(_factory)


class TfidfClassifier:
    """TF-IDF word n-grams + logistic regression: the lexical baseline, no encoder needed."""

    def __init__(self, spec: str, taxonomy: Taxonomy, options: ModelOptions):
        self.spec = spec
        self.taxonomy = taxonomy
        self.options = options
        self.vectorizer_ = None
        self.inner_ = EmbeddingClassifier(spec, taxonomy, options, _logreg)

    def _texts(self, records: list[Record]) -> list[str]:
        return record_texts(records, self.options.include_discussion)

    def fit(self, records: list[Record], labels: dict[str, list[str | None]]) -> "TfidfClassifier":
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer_ = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
        X = self.vectorizer_.fit_transform(self._texts(records))
        self.inner_.fit_embeddings(X, labels)
        return self

    def predict(self, records: list[Record]) -> dict[str, list[Prediction]]:
        if self.vectorizer_ is None:
            raise RuntimeError(f"{self.spec}: call fit() before predict()")
        return self.inner_.predict_embeddings(self.vectorizer_.transform(self._texts(records)))

    def provenance(self) -> dict[str, Any]:
        return {"model": self.spec, "features": "tfidf word 1-2grams", "n_train": dict(self.inner_.n_train_),
                "text": "title+body+discussion" if self.options.include_discussion else "title+body"}


register("tfidf-logreg")(lambda spec, taxonomy, options: TfidfClassifier(spec, taxonomy, options))
