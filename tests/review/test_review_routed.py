"""Rows that `classify run --target-kappa` marked `review` become queue items, most informative first."""

from __future__ import annotations

import json

from review_helpers import gold_subset, unlabeled_subset

from classify.core.gold import load_gold
from classify.core.records import read_records
from classify.core.taxonomy import load_taxonomy
from classify.review.queue import build_queue


def _row(rid: str, **dims) -> dict:
    row = {"id": rid, "model": "tfidf-logreg", "taxonomy": "gpu-kernel-issues@1"}
    routing = {}
    for d, (status, sug, conf) in dims.items():
        row[d] = sug if status == "auto" else None
        row[f"{d}_status"], row[f"{d}_suggestion"], row[f"{d}_confidence"] = status, sug, conf
        routing[d] = {"target_kappa": 0.87, "threshold": 0.7}
    row["routing"] = routing
    return row


def view_detail(queue, rid: str, dim: str) -> str:
    (item,) = [it for it in queue.items if it.id == rid and it.dimension == dim]
    return item.reasons[0].detail


def test_review_rows_are_queued_lowest_confidence_and_rare_first(tmp_path):
    gold_path, tax_path = gold_subset(tmp_path)
    g = load_gold(gold_path, load_taxonomy(tax_path))
    inp = unlabeled_subset(tmp_path, 5)
    ids = [r.id for r in read_records(inp)]
    rows = [
        _row(ids[0], symptom=("review", "crash", 0.45), root_cause=("none_shown", "none_shown", 0.9)),
        _row(ids[1], symptom=("auto", "build_failure", 0.95), root_cause=("review", "software_incompatibility", 0.3)),
        _row(ids[2], symptom=("review", "hang", 0.45), root_cause=("review", "upstream_dependency_defect", 0.3)),
        _row(ids[3], symptom=("auto", "crash", 0.9), root_cause=("auto", "compiler_defect", 0.95)),
    ]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    queue, counts = build_queue(g, runs=[labels], inputs=[inp], use_cleanlab=False)
    got = [(it.id, it.dimension) for it in queue.items]
    # every review label is queued; auto and none_shown labels are not
    assert set(got) == {(ids[0], "symptom"), (ids[1], "root_cause"), (ids[2], "symptom"), (ids[2], "root_cause")}
    assert counts["routed"] == 4
    first = queue.items[0]
    # a category gold rarely holds (upstream_dependency_defect: none) outranks the same confidence
    assert (first.id, first.dimension) == (ids[2], "root_cause")
    assert "upstream_dependency_defect" in first.reasons[0].detail and "below the threshold" in first.reasons[0].detail
    # the reviewer sees the model's suggestion as its label
    view = {(it.id, it.dimension): it.models[0] for it in queue.items}
    assert view[(ids[0], "symptom")].label == "crash"
    assert "below the threshold for kappa 0.87" in view_detail(queue, ids[0], "symptom")
    scores = {(it.id, it.dimension): it.score for it in queue.items}
    assert scores[(ids[1], "root_cause")] > scores[(ids[0], "symptom")]  # confidence 0.3 < 0.45


def test_none_shown_is_not_rare_and_no_threshold_is_said_plainly(tmp_path):
    gold_path, tax_path = gold_subset(tmp_path)
    g = load_gold(gold_path, load_taxonomy(tax_path))
    inp = unlabeled_subset(tmp_path, 3)
    ids = [r.id for r in read_records(inp)]
    rows = [
        _row(ids[0], root_cause=("review", "none_shown", 0.9)),
        _row(ids[1], root_cause=("review", "software_incompatibility", 0.5)),
    ]
    for r in rows:
        r["routing"]["root_cause"]["threshold"] = None
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    queue, _ = build_queue(g, runs=[labels], inputs=[inp], use_cleanlab=False)
    detail = view_detail(queue, ids[0], "root_cause")
    assert "no confidence threshold reaches kappa 0.87" in detail and "of gold holds" not in detail
    # a doubtful cause outranks a confident "no cause shown"
    assert [it.id for it in queue.items][0] == ids[1]
