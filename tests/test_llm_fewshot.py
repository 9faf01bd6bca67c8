"""Few-shot examples: chosen by embedding similarity from the training records only."""

from __future__ import annotations

import pytest
from fake_openai_server import FakeOpenAI

from classify.classifiers.base import ModelOptions, make_classifier
from classify.classifiers.llm.cache import LLMStore
from classify.core.gold import load_gold
from classify.core.paths import DEFAULT_GOLD
from classify.core.records import Record
from classify.core.taxonomy import load_taxonomy

pytestmark = pytest.mark.slow  # loads the sentence encoder

TAX = load_taxonomy()
DIMS = {d: dim.ids for d, dim in TAX.dimensions.items()}
FIRST = TAX.dimension_ids[0]


def _few_shot(fake, store, k=3):
    opts = {"base_url": fake.base_url, "strategy": "few-shot", "k": k, "concurrency": 8, "max_chars": 1500}
    c = make_classifier(f"openai:{fake.model}", TAX, ModelOptions(extra=opts, show_progress=False))
    c._store = store
    return c


def test_examples_come_only_from_the_training_fold_and_never_the_record_itself(tmp_path):
    gold = load_gold(DEFAULT_GOLD, TAX)
    # a slice with plenty of records labeled on both dimensions
    recs = [r for i, r in enumerate(gold.records) if gold.labels["root_cause"][i] is not None][:45]
    labels = {d: [r.fields[d] for r in recs] for d in TAX.dimension_ids}
    folds = [i % 3 for i in range(len(recs))]
    with FakeOpenAI(DIMS, model="fake-model") as fake:
        store = LLMStore(tmp_path / "llm.sqlite")
        for f in range(3):
            train = [i for i in range(len(recs)) if folds[i] != f]
            test = [i for i in range(len(recs)) if folds[i] == f]
            clf = _few_shot(fake, store)
            clf.fit([recs[i] for i in train], {d: [labels[d][i] for i in train] for d in labels})
            out = clf.predict([recs[i] for i in test])
            train_ids = {recs[i].id for i in train}
            for j, i in enumerate(test):
                for d in TAX.dimension_ids:
                    ex = out[d][j].extra["examples"]
                    assert len(ex) == 3
                    assert recs[i].id not in ex  # never its own example
                    assert set(ex) <= train_ids  # only from the training fold
            assert clf.provenance()["strategy"] == "few-shot" and clf.provenance()["k"] == 3
        # the prompts the server saw: examples inside <example> blocks, before the issue
        body = fake.log[0]["body"]["messages"][-1]["content"]
        assert body.count("<example>") == 3 and body.index("<example>") < body.rindex("<issue>")

        # even when a caller trains on the records it evaluates, a record is not its own example
        clf = _few_shot(fake, store)
        clf.fit(recs, labels)
        out = clf.predict(recs[:10])
        for j, r in enumerate(recs[:10]):
            assert r.id not in out[FIRST][j].extra["examples"]


def test_most_similar_training_record_is_chosen(tmp_path):
    gold = load_gold(DEFAULT_GOLD, TAX)
    recs = [r for i, r in enumerate(gold.records) if gold.labels["root_cause"][i] is not None][:30]
    labels = {d: [r.fields[d] for r in recs] for d in TAX.dimension_ids}
    target = recs[7]
    probe = Record(
        id="probe", title=target.title, body=target.body + " (same problem again)", discussion=target.discussion
    )
    with FakeOpenAI(DIMS) as fake:
        clf = _few_shot(fake, LLMStore(tmp_path / "llm.sqlite"), k=2)
        clf.fit(recs, labels)
        plan = clf.plan([probe])[0]
        assert plan.examples[-1].record.id == target.id  # closest sits next to the issue
        assert fake.n_requests == 0  # planning sends nothing
