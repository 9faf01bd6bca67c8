"""The block function (classify.labeling.block): the rows every engine writes come from it alone."""

from __future__ import annotations

import builtins
import json
import os

import pytest

from classify.classifiers.base import make_classifier
from classify.core.paths import DEFAULT_INPUT
from classify.core.records import read_records
from classify.core.screening import load_screening_gold, screening_taxonomy
from classify.labeling.block import FittedRun, label_block
from classify.labeling.resumable import label_records


@pytest.fixture(scope="module")
def fitted(taxonomy, gold):
    s_tax = screening_taxonomy()
    sg = load_screening_gold(None, s_tax)
    clf = make_classifier("tfidf-logreg", taxonomy).fit(gold.records, gold.labels)
    s_clf = make_classifier("tfidf-logreg", s_tax).fit(sg.records, sg.labels)
    return clf, s_clf


def _screened_run(clf, s_clf, keep=("title", "url")) -> FittedRun:
    return FittedRun(
        clf,
        {"model": "tfidf-logreg", "marker": "prov"},
        clf.taxonomy.dimension_ids,
        keep,
        screen=lambda rs: s_clf.predict(rs)["screening"],
        screen_prepare=s_clf.prepare,
    )


def test_block_rows_are_the_local_loops_rows(fitted, tmp_path):
    clf, s_clf = fitted
    recs = read_records(DEFAULT_INPUT)[:30]
    out = tmp_path / "o.jsonl"
    label_records(
        clf,
        recs,
        out,
        {"model": "tfidf-logreg", "marker": "prov"},
        "S",
        chunk_size=7,
        screen=lambda rs: s_clf.predict(rs)["screening"],
        screen_prepare=s_clf.prepare,
    )
    local = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    rows = label_block(_screened_run(clf, s_clf), recs)  # one block of 30, the loop's chunks of 7
    assert rows == local
    assert len({r["screening"] for r in rows}) > 1 and "failure_report" in {
        r["screening"] for r in rows
    }  # both paths ran
    kept_out = [r for r in rows if r["screening"] != "failure_report"]
    assert all(r["symptom"] is None and "symptom_confidence" not in r for r in kept_out)
    assert all(r["marker"] == "prov" and r["title"] == rec.title for r, rec in zip(rows, recs))


def test_block_does_no_file_io(fitted, monkeypatch):
    clf, s_clf = fitted
    recs = read_records(DEFAULT_INPUT)[:12]
    expected = label_block(_screened_run(clf, s_clf), recs)
    opened: list[str] = []

    def refuse(name, *a, **k):
        opened.append(str(name))
        raise AssertionError(f"label_block opened {name}")

    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(os, "open", refuse)
    rows = label_block(_screened_run(clf, s_clf), recs)
    monkeypatch.undo()
    assert not opened and rows == expected


def test_block_of_nothing_and_kept_fields(fitted):
    clf, _ = fitted
    assert label_block(FittedRun(clf, {}, clf.taxonomy.dimension_ids), []) == []
    recs = read_records(DEFAULT_INPUT)[:3]
    rows = label_block(FittedRun(clf, {}, clf.taxonomy.dimension_ids, keep=()), recs)
    assert [r["id"] for r in rows] == [r.id for r in recs]
    assert not {"title", "url"} & set(rows[0])


# The local loop around the block function: its JSONL output is copied from the checkpoint line by line
# (issue 24 item 6), never gathered as one list of rows.


def test_local_jsonl_output_is_streamed_from_the_checkpoint(fitted, tmp_path, monkeypatch):
    from classify.labeling import resumable

    clf, _ = fitted
    recs = read_records(DEFAULT_INPUT)[:25]
    monkeypatch.setattr(resumable, "write_rows", lambda *a, **k: pytest.fail("rows gathered in memory"))
    s = label_records(clf, recs, tmp_path / "o.jsonl", {"p": 1}, "S", chunk_size=4)
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [r.id for r in recs] and s.total == s.labeled == 25
    assert rows == label_block(FittedRun(clf, {"p": 1}, clf.taxonomy.dimension_ids), recs)
    assert not resumable.partial_path(tmp_path / "o.jsonl").exists()


def test_a_checkpoint_out_of_input_order_still_gives_input_order(fitted, tmp_path):
    from classify.labeling.resumable import partial_path

    clf, _ = fitted
    recs = read_records(DEFAULT_INPUT)[:12]
    out = tmp_path / "o.jsonl"
    done = [{"id": r.id, "marker": "kept"} for r in recs[5:8]]  # not a prefix: written by hand, not by a run
    partial_path(out).write_text(json.dumps({"signature": "S"}) + "\n" + "".join(json.dumps(d) + "\n" for d in done))
    s = label_records(clf, recs, out, {}, "S", chunk_size=4)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [r.id for r in recs]
    assert [r["id"] for r in rows if r.get("marker") == "kept"] == [r.id for r in recs[5:8]]
    assert s.resumed == 3 and s.labeled == 9
