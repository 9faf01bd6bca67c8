"""Leak checks of an evaluation: a record predicted by a model whose fit() received it, a test
file that repeats gold, and near-duplicate texts across the train/test boundary (a warning: they
flatter agreement as a leak would).

    seen: set[str] = set(); spy_on_fit(clf, seen)   # record what every fit() receives
    train_test_leaks(result)                        # ids predicted by a model trained on them
    near_duplicates(records, folds, train_ids)      # pairs with (nearly) the same title + body
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from classify.core.errors import ClassifyError
from classify.core.gold import GoldSet
from classify.core.hashing import text_hash
from classify.core.records import Record

if TYPE_CHECKING:
    from classify.evaluation.crossval import EvalResult

# TF-IDF cosine (title + body) at or above which a training record counts as a near-duplicate of
# an evaluated one: the same report filed twice, or copied with a line changed.
NEAR_DUPLICATE_COSINE = 0.95


class TestOverlapError(ClassifyError, ValueError):
    """A --test file shares records with the gold set it is trained on: the scores would be a leak."""

    __test__ = False  # not a pytest class, whatever its name


def same_text_pairs(gold: list[Record], test: list[Record]) -> list[tuple[str, str]]:
    """(test id, gold id) pairs whose title + body are the same text once case, punctuation and
    spacing are dropped (by text hash): a gold report filed again under a new id. Every gold record
    a test text repeats is paired, not only the first."""
    by_hash: dict[str, list[str]] = {}
    for r in gold:
        t = _dup_text(r)
        if t:
            by_hash.setdefault(text_hash(t), []).append(r.id)
    out = []
    for r in test:
        t = _dup_text(r)
        if t:
            out += [(r.id, g) for g in by_hash.get(text_hash(t), [])]
    return out


def check_test_overlap(gold: GoldSet, test: GoldSet) -> None:
    """Refuse a test file that shares ids or texts with the gold set the model trains on, listing
    every match (classify.evaluation.testoverlap offers dropping them from training, or keeping them).

    A test record whose text is a gold record's (under any id) is scored by a model that learned its
    label: kappa near 1 that measures nothing. Texts that are only similar (an edited copy) stay a
    warning (near_duplicates).
    """
    overlap = set(gold.ids) & set(test.ids)
    choice = "or choose --test-overlap drop-train (train without them) or keep (score them, flattered)"
    if overlap:
        raise TestOverlapError(
            f"{test.path or 'test file'} shares {len(overlap)} ids with the gold set {gold.path or ''}: "
            f"{sorted(overlap)}; the model trains on all of gold, so these would be scored on their own labels: "
            f"remove them from the test file, {choice}"
        )
    same = same_text_pairs(gold.records, test.records)
    if same:
        shown = ", ".join(f"{t} = gold {g}" for t, g in same)
        raise TestOverlapError(
            f"{test.path or 'test file'}: {len({t for t, _ in same})} of {len(test)} records have the title and "
            f"body of a gold record under another id ({shown}); the model trains on all of gold, so their scores "
            f"would be a leak: remove them from the test file, {choice}"
        )


def train_test_leaks(res: EvalResult) -> list[str]:
    """Ids that were predicted by a model whose fit() received them (must be empty)."""
    return [
        r.id
        for i, r in enumerate(res.gold.records)
        if res.folds[i] in res.train_ids and r.id in res.train_ids[res.folds[i]]
    ]


def spy_on_fit(clf: Any, seen: set[str], _done: set[int] | None = None) -> bool:
    """Make every fit() of `clf` and of its members add the ids it receives to `seen`.

    Members a fit builds (an ensemble's, the fold models') are spied on when that fit returns, so
    a member refit later (on the records it predicts, say) is recorded too. False when fit cannot
    be wrapped (the caller then records what it passes instead).
    """
    done = _done if _done is not None else set()
    todo = [clf]
    while todo:
        m = todo.pop()
        if id(m) in done:
            continue
        done.add(id(m))
        todo.extend(getattr(m, "members", None) or [])
        orig = m.fit

        def fit(records, *args, _orig=orig, **kwargs):
            seen.update(r.id for r in records)
            out = _orig(records, *args, **kwargs)
            for member in getattr(out, "members", None) or []:
                spy_on_fit(member, seen, done)
            return out

        try:
            m.fit = fit
        except (AttributeError, TypeError):
            return False
    return True


def _dup_text(r: Record) -> str:
    """Title + body, lower-cased, punctuation and spacing dropped (the discussion is often absent)."""
    return " ".join(re.findall(r"\w+", f"{r.title}\n{r.body}".lower()))


def near_duplicates(
    records: list[Record], folds: list[int], train_ids: dict[int, set[str]], threshold: float = NEAR_DUPLICATE_COSINE
) -> list[dict[str, Any]]:
    """Pairs (evaluated record, record its fold's model trained on) whose title + body are identical
    after normalisation or have TF-IDF cosine >= `threshold`, most similar first.

    `folds[i]` is record i's fold (negative: not evaluated); `train_ids` as in EvalResult. Training ids
    that are not in `records` are not compared. The TF-IDF is fit on all of `records`: it only
    measures text overlap here and trains nothing.
    """
    texts = [_dup_text(r) for r in records]
    if not any(texts):
        return []
    # Word uni- and bigrams: two reports sharing a stack trace but not their prose stay apart.
    X = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"\w+").fit_transform(texts)
    index = {r.id: i for i, r in enumerate(records)}
    out: list[dict[str, Any]] = []
    for f, ids in sorted(train_ids.items()):
        test = [i for i, ff in enumerate(folds) if ff == f and texts[i]]
        train = sorted(index[t] for t in ids if t in index and texts[index[t]])
        if not test or not train:
            continue
        Xr = X[train].T.tocsc()
        for start in range(0, len(test), 256):  # bounded memory on large gold sets
            block = test[start : start + 256]
            sim = (X[block] @ Xr).toarray()
            for a, b in zip(*np.nonzero(sim >= threshold - 1e-9)):
                i, j = block[a], train[b]
                out.append(
                    {
                        "fold": f,
                        "id": records[i].id,
                        "train_id": records[j].id,
                        "similarity": round(float(min(sim[a, b], 1.0)), 4),
                        "identical": texts[i] == texts[j],
                    }
                )
    out.sort(key=lambda d: (-d["similarity"], d["fold"], d["id"], d["train_id"]))
    return out
