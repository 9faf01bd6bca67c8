"""Queue building: eval disagreements, cleanlab's likely mislabels, run disagreements, coders' notes."""

from __future__ import annotations

import json

import pytest
from review_helpers import fake_eval_run, gold_subset, unlabeled_subset

from classify.core.gold import load_gold
from classify.core.taxonomy import load_taxonomy
from classify.review.queue import build_queue, note_dimensions
from classify.review.schema import QueueError, load_queue, save_queue


@pytest.fixture
def gold(tmp_path):
    gp, tp = gold_subset(tmp_path)
    return load_gold(gp, load_taxonomy(tp))


def _pick(g, dim, label, n=1):
    ids = [r.id for r, y in zip(g.records, g.labels[dim]) if y == label]
    assert len(ids) >= n, f"gold subset lacks {n} {dim}={label}"
    return ids[:n]


def test_eval_disagreements_ordered_by_confidence_with_everything_shown(tmp_path, gold):
    strong = _pick(gold, "symptom", "deployment_failure")[0]
    weak = _pick(gold, "symptom", "crash")[0]
    rc = _pick(gold, "root_cause", "api_misuse")[0]
    run = fake_eval_run(
        tmp_path,
        gold.path,
        gold.taxonomy.path,
        {
            (strong, "symptom"): ("build_failure", 0.95),
            (weak, "symptom"): ("hang", 0.40),
            (rc, "root_cause"): ("algorithm_logic", 0.7),
        },
    )
    q, counts = build_queue(gold, evals=[run])
    keys = [it.key for it in q.items]
    assert set(keys) == {(strong, "symptom"), (weak, "symptom"), (rc, "root_cause")}
    # confident disagreement first, the hesitant one last
    assert keys[0] == (strong, "symptom") and keys[-1] == (weak, "symptom")
    assert counts["model_disagrees"] == 3
    top = q.items[0]
    assert top.gold == "deployment_failure" and top.in_gold
    assert top.models[0].label == "build_failure" and top.models[0].confidence == 0.95
    assert top.models[0].p_gold == pytest.approx(0.05 / 5)
    assert top.record["title"] and top.record["body"]
    assert set(top.coders) == {"a", "b"}
    # cleanlab sees 0.95 on another class against a gold label the model otherwise learned well
    assert any(r.kind == "likely_mislabeled" for r in top.reasons)
    assert all(a.score >= b.score for a, b in zip(q.items, q.items[1:]))


def test_cleanlab_flags_on_its_own_and_can_be_switched_off(tmp_path, gold):
    sid = _pick(gold, "symptom", "build_failure")[0]
    run = fake_eval_run(tmp_path, gold.path, gold.taxonomy.path, {(sid, "symptom"): ("crash", 0.9)})
    q, _ = build_queue(gold, evals=[run])
    kinds = {r.kind for it in q.items for r in it.reasons}
    assert kinds == {"model_disagrees", "likely_mislabeled"}
    q2, _ = build_queue(gold, evals=[run], use_cleanlab=False)
    assert {r.kind for it in q2.items for r in it.reasons} == {"model_disagrees"}


def test_stale_eval_run_is_refused(tmp_path, gold):
    run = fake_eval_run(tmp_path, gold.path, gold.taxonomy.path, {})
    meta = json.loads((run / "metrics.json").read_text())
    meta["meta"]["gold_hash"] = "000000000000"
    (run / "metrics.json").write_text(json.dumps(meta))
    with pytest.raises(QueueError, match="hash 000000000000"):
        build_queue(gold, evals=[run])
    with pytest.raises(QueueError, match="not an eval run folder"):
        build_queue(gold, evals=[tmp_path])


def test_unlabeled_runs_disagreement_and_low_confidence(tmp_path, gold):
    inp = unlabeled_subset(tmp_path, 6)
    ids = [json.loads(x)["id"] for x in inp.read_text().splitlines()]

    def run_file(name, model, labels):
        rows = []
        for rid, (lab, conf) in zip(ids, labels):
            rows.append(
                {
                    "id": rid,
                    "symptom": lab,
                    "symptom_confidence": conf,
                    "root_cause": "api_misuse",
                    "root_cause_confidence": 0.9,
                    "model": model,
                    "taxonomy": gold.taxonomy.label,
                }
            )
        p = tmp_path / name
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return p

    a = run_file(
        "a.jsonl", "m1", [("crash", 0.9), ("crash", 0.3), ("hang", 0.8), ("crash", 0.9), ("crash", 0.9), ("crash", 0.9)]
    )
    b = run_file(
        "b.jsonl",
        "m2",
        [("build_failure", 0.8), ("crash", 0.9), ("hang", 0.9), ("crash", 0.9), ("crash", 0.9), ("crash", 0.9)],
    )
    q, counts = build_queue(gold, runs=[a, b], inputs=[inp], min_confidence=0.5)
    by = q.index()
    assert set(by) == {(ids[0], "symptom"), (ids[1], "symptom")}
    assert {r.kind for r in by[(ids[0], "symptom")].reasons} == {"models_disagree"}
    assert {r.kind for r in by[(ids[1], "symptom")].reasons} == {"low_confidence"}
    assert q.items[0].id == ids[0]  # both models confident yet different: teaches more than a hesitant one
    assert not q.items[0].in_gold and q.items[0].gold is None
    assert {m.model for m in q.items[0].models} == {"m1", "m2"}
    # a run made with another taxonomy version is refused
    c = tmp_path / "c.jsonl"
    c.write_text(json.dumps({"id": ids[0], "symptom": "crash", "taxonomy": "gpu-kernel-issues@9"}) + "\n")
    with pytest.raises(QueueError, match="gpu-kernel-issues@9"):
        build_queue(gold, runs=[a, c], inputs=[inp])
    # ids without text anywhere are refused
    with pytest.raises(QueueError, match="have no text"):
        build_queue(gold, runs=[a])


def test_codebook_notes_become_items_of_the_dimension_they_name(tmp_path, gold):
    from classify.core.paths import PROJECT_ROOT

    q, counts = build_queue(gold, notes=PROJECT_ROOT / "gold" / "adjudication.jsonl")
    assert counts["codebook_note"] == len(q.items) > 0
    in_gold = set(gold.ids)
    assert all(it.id in in_gold for it in q.items)
    for it in q.items:
        assert it.dimension in note_dimensions(it.reasons[0].detail, gold.taxonomy)
    tax = gold.taxonomy
    assert note_dimensions("Add a documentation_defect root-cause category", tax) == []
    assert note_dimensions("Under root_cause add: ...", tax) == ["root_cause"]
    assert note_dimensions("Add to crash the include cue ...", tax) == ["symptom"]


def test_queue_file_round_trip_and_bad_file(tmp_path, gold):
    sid = _pick(gold, "symptom", "crash")[0]
    run = fake_eval_run(tmp_path, gold.path, gold.taxonomy.path, {(sid, "symptom"): ("hang", 0.9)})
    q, _ = build_queue(gold, evals=[run])
    save_queue(q, tmp_path / "q.json")
    assert load_queue(tmp_path / "q.json") == q
    (tmp_path / "bad.json").write_text('{"meta": {}, "items": []}')
    with pytest.raises(QueueError, match="not a review queue"):
        load_queue(tmp_path / "bad.json")
    with pytest.raises(QueueError, match="nothing to review"):
        build_queue(gold)
