"""An LLM asked the "cause shown" decision (classify.core.causeshown): votes, rationale, few-shot
examples and the repair of an answer that leaves it out. No model needed; the repair test runs
against the fake OpenAI-compatible server (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from fake_openai_server import FakeOpenAI, expected_labels

from classify.classifiers.base import ModelOptions, make_classifier
from classify.classifiers.llm.answer import parse_answer
from classify.classifiers.llm.cache import LLMStore
from classify.classifiers.llm.fewshot import ExampleSelector
from classify.core.causeshown import NONE_SHOWN, with_shown_dimensions
from classify.core.records import Record
from classify.evaluation.profile import compose
from classify.labeling.resumable import label_fields


@pytest.fixture(scope="module")
def shown_gold(gold):
    return with_shown_dimensions(gold)


def _samples(tax, texts):
    """What _one_sample hands back per sample: (answer, raw text, logprobs, transport error)."""
    return [(parse_answer(t, tax), t, None, None) for t in texts]


def test_votes_give_p_shown_and_p_cause_given_shown(shown_gold):
    tax = shown_gold.taxonomy
    clf = make_classifier("local:smollm2-135m", tax, ModelOptions(extra={"samples": 4, "rationale": True}))
    (plan,) = clf.plan([Record(id="a", title="t")])
    answers = [
        '{"rationale": "no fix found", "symptom": "crash", "root_cause_shown": "none_shown", "root_cause": null}',
        '{"rationale": "no fix", "symptom": "crash", "root_cause_shown": "none_shown", "root_cause": null}',
        '{"rationale": "the fix adds a bounds check", "symptom": "crash", "root_cause_shown": "shown", '
        '"root_cause": "memory_access"}',
        '{"rationale": "a misuse, unconfirmed", "symptom": "hang", "root_cause_shown": "none_shown", '
        '"root_cause": "api_misuse"}',
    ]
    out = clf._aggregate(plan, _samples(tax, answers))
    shown = out["root_cause_shown"]
    assert (shown.label, shown.confidence, shown.proba) == (NONE_SHOWN, 0.75, {NONE_SHOWN: 0.75, "shown": 0.25})
    cause = out["root_cause"]  # shares among the causes named (the nulls say "none shown", not "no cause")
    assert cause.status == "ok" and cause.proba == {"memory_access": 0.5, "api_misuse": 0.5}
    assert cause.label == "memory_access"  # a tie goes to the earliest answer
    assert "None" not in cause.proba
    both = compose(shown, cause)
    assert (
        both is not None
        and both.label == NONE_SHOWN
        and both.proba == pytest.approx({NONE_SHOWN: 0.75, "memory_access": 0.125, "api_misuse": 0.125})
    )
    # each label keeps the reasoning of an answer that chose it, and so does the labels file
    assert out["root_cause"].rationale == "the fix adds a bounds check"
    assert out["root_cause_shown"].rationale == "no fix found" and out["symptom"].rationale == "no fix found"
    row = label_fields(out)
    assert row["root_cause_rationale"] == "the fix adds a bounds check"
    assert row["root_cause_shown"] == NONE_SHOWN and row["root_cause_shown_proba"] == {NONE_SHOWN: 0.75, "shown": 0.25}


def test_no_cause_named_in_any_answer_is_a_valid_empty_label(shown_gold):
    tax = shown_gold.taxonomy
    clf = make_classifier("local:smollm2-135m", tax, ModelOptions())
    (plan,) = clf.plan([Record(id="a", title="t")])
    out = clf._aggregate(
        plan, _samples(tax, ['{"symptom": "crash", "root_cause_shown": "none_shown", "root_cause": null}'])
    )
    assert out["root_cause"].status == "ok" and out["root_cause"].label is None
    assert out["root_cause_shown"].label == NONE_SHOWN
    assert "root_cause_status" not in label_fields(out)  # not reported as invalid


class _WordHash:
    """A small deterministic text embedding (hashed bag of words): enough to rank examples."""

    def encode(self, texts, progress=None):
        X = np.zeros((len(texts), 64))
        for i, t in enumerate(texts):
            for w in t.lower().split():
                X[i, zlib.crc32(w.encode()) % 64] += 1.0
        return X


def test_few_shot_examples_include_threads_that_show_no_cause(shown_gold):
    g = shown_gold
    idx = [i for i, y in enumerate(g.labels["root_cause"]) if y is None][:3] + [
        i for i, y in enumerate(g.labels["root_cause"]) if y is not None
    ][:3]
    recs = [g.records[i] for i in idx]
    labels = {d: [g.labels[d][i] for i in idx] for d in g.taxonomy.dimension_ids}
    clf = make_classifier("local:smollm2-135m", g.taxonomy, ModelOptions())
    sel = ExampleSelector(recs, labels, g.taxonomy.dimension_ids, _WordHash(), partners=clf.partners)  # type: ignore[arg-type]
    assert len(sel.pool) == 6  # the three without a cause are complete answers: none shown
    assert [e.labels["root_cause_shown"] for e in sel.pool].count(NONE_SHOWN) == 3
    # without the decision, a null cause is an incomplete answer, as before
    plain = {d: labels[d] for d in ("symptom", "root_cause")}
    assert len(ExampleSelector(recs, plain, ["symptom", "root_cause"], _WordHash()).pool) == 3  # type: ignore[arg-type]


def test_an_answer_that_leaves_out_the_decision_is_repaired_then_invalid(shown_gold, tmp_path, taxonomy):
    # The fake server answers the codebook's own dimensions only, as a model ignoring the question would
    # (plain JSON mode: no schema in the request to tell it otherwise).
    recs = [Record(id=f"r{i}", title=f"r{i} kernel fails", body="body") for i in range(2)]
    opts = {"repair_retries": 1, "structured": "json_object"}
    with FakeOpenAI({d: dim.ids for d, dim in taxonomy.dimensions.items()}) as fake:
        clf = make_classifier(
            "openai:fake-model", shown_gold.taxonomy, ModelOptions(extra={"base_url": fake.base_url, **opts})
        )
        clf._store = LLMStore(tmp_path / "llm.sqlite")
        out = clf.fit([], {}).predict(recs)
        assert fake.n_requests == 2 * 2  # each answer re-asked once with the error fed back
        repair = [m["content"] for m in fake.log[-1]["body"]["messages"] if m["role"] == "user"][-1]
    assert "root_cause_shown: missing" in repair and "- root_cause_shown: shown, none_shown" in repair
    for p in out["root_cause_shown"]:
        assert p.status == "invalid" and p.extra["error"] == "missing" and p.raw
    assert all(p.status == "ok" for d in ("symptom", "root_cause") for p in out[d])


def test_null_votes_under_allow_null_lower_the_confidence_but_are_no_class(gold):
    tax = gold.taxonomy  # no "shown" decision: a null symptom means "cannot tell"
    clf = make_classifier("local:smollm2-135m", tax, ModelOptions(extra={"samples": 4, "allow_null": True}))
    (plan,) = clf.plan([Record(id="a", title="t")])
    answers = [
        '{"symptom": "crash", "root_cause": null}',
        '{"symptom": "crash", "root_cause": null}',
        '{"symptom": "hang", "root_cause": "memory_access"}',
        '{"symptom": null, "root_cause": null}',
    ]
    samples = [(parse_answer(t, tax, allow_null=True), t, None, None) for t in answers]
    out = clf._aggregate(plan, samples)
    sym = out["symptom"]
    assert sym.label == "crash" and sym.confidence == 0.5
    assert sym.proba == pytest.approx({"crash": 2 / 3, "hang": 1 / 3})
    cause = out["root_cause"]  # three of four answers could not tell: an abstention, no "None" class
    assert cause.label is None and cause.proba is None and cause.status == "ok"


def test_routed_run_without_confidences_still_suggests_the_models_answer(gold, tmp_path):
    # An LLM without logprobs and with one sample (the local: default, ollama, most servers) gives no
    # confidence: nothing can pass a threshold, so every label goes to review, and the reviewer needs
    # the model's answer: the cause it named, or none_shown where it said the thread shows none.
    import json

    from classify.core.causeshown import SHOWN
    from classify.labeling import label_file

    tax = gold.taxonomy
    caused = [r for r in gold.records if r.fields.get("root_cause")][:20]
    uncaused = [r for r in gold.records if not r.fields.get("root_cause")][:10]
    gold_path = tmp_path / "gold.jsonl"
    gold_path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in caused + uncaused), encoding="utf-8")
    inp = tmp_path / "in.jsonl"
    new = [{"id": f"n{k}", "title": f"n{k} kernel fails", "body": "body"} for k in range(8)]
    inp.write_text("".join(json.dumps(r) + "\n" for r in new), encoding="utf-8")
    dims = {d: dim.ids for d, dim in tax.dimensions.items()} | {"root_cause_shown": [SHOWN, NONE_SHOWN]}
    out = tmp_path / "labels.jsonl"
    with FakeOpenAI(dims, with_logprobs=False) as fake:
        opts = ModelOptions(extra={"base_url": fake.base_url, "logprobs": False}, show_progress=False)
        label_file("openai:fake-model", inp, out, taxonomy=None, gold=gold_path, options=opts, target_kappa=0.87)
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    answered = {r["id"]: expected_labels(r["id"], dims) for r in new}
    assert {a["root_cause_shown"] for a in answered.values()} == {SHOWN, NONE_SHOWN}  # both cases met
    rc = tax.dimensions["root_cause"]
    for r in rows:
        a = answered[r["id"]]
        want = a["root_cause"] if a["root_cause_shown"] == SHOWN else NONE_SHOWN
        assert r["root_cause_status"] == "review" and r["root_cause"] is None
        assert r["root_cause_suggestion"] == want
        assert r["root_cause_group_suggestion"] == (want if want == NONE_SHOWN else rc.group_of(want))
        assert r["symptom_status"] == "review" and r["symptom_suggestion"] == a["symptom"]
        assert "root_cause_invalid" not in r and "root_cause_shown_invalid" not in r
