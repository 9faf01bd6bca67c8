"""Streaming an input (issue 24 item 6): a chunked read gives the records and the errors of a whole read,
a run holds the input's ids and not its records, and resuming across chunks loses and doubles nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_jsonl

from classify.core import records as records_mod
from classify.core.paths import DEFAULT_INPUT
from classify.core.progress import Progress
from classify.core.records import RecordsError, iter_rows, read_records, read_rows, scan_records
from classify.core.writer import write_rows

ROWS = [
    {
        "id": "a-1",
        "title": "crash on start",
        "body": "segfault\u2028in init",
        "url": "u1",
        "extra": {"k": [1, 2]},
        "note": '{"looks": "like JSON"}',
    },
    {"id": "7", "title": "=SUM(A1)", "body": "line one\r\nline two\rthree", "repo": "r/x", "number": 12},
    {"id": "a-3", "title": "{not json", "body": "", "discussion": "later", "symptom": "crash"},
    {"id": "a-4", "title": "hang", "body": "waits forever", "created_at": "2024-01-02T03:04:05"},
    {"id": "a-5", "title": "'=quoted", "body": "b\n\nc", "extra": None},
]


def _chunked(path: Path, size: int) -> list:
    return [r for chunk in scan_records(path, chunk_size=size).chunks(size) for r in chunk]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet", ".arrow", ".hf"])
def test_a_chunked_read_gives_the_records_of_a_whole_read(tmp_path, suffix):
    path = tmp_path / f"in{suffix}"
    # an integer id where a format allows mixed types (a table column has one type)
    write_rows(path, [ROWS[0], dict(ROWS[1], id=7), *ROWS[2:]] if suffix == ".jsonl" else ROWS)
    whole = read_records(path)
    assert [r.id for r in whole] == ["a-1", "7", "a-3", "a-4", "a-5"]
    assert whole[1].title == "=SUM(A1)" and whole[1].body == "line one\r\nline two\rthree"  # CSV escaping undone
    assert whole[0].fields["extra"] == {"k": [1, 2]} and whole[0].fields["note"] == '{"looks": "like JSON"}'
    for size in (1, 2, 3, 100):
        assert [row for chunk in iter_rows(path, size) for row in chunk] == read_rows(path)
        assert all(len(chunk) <= size for chunk in iter_rows(path, size))
        assert _chunked(path, size) == whole
    stream = scan_records(path, chunk_size=2)
    assert stream.ids == [r.id for r in whole] and stream.records is None  # ids kept, records not
    assert {"extra", "symptom"} <= stream.fields


def test_a_file_without_ids_gets_the_same_content_ids_chunk_by_chunk(tmp_path):
    rows = [{"title": "same", "body": "text"}, {"title": "other", "body": "x"}, {"title": "same", "body": "text"}]
    path = write_jsonl(tmp_path / "noid.jsonl", rows)
    whole = read_records(path)
    assert whole[2].id == whole[0].id + "-2" and whole[0].fields == {"id_from": "content-hash"}
    assert _chunked(path, 1) == whole
    assert "id_from" in scan_records(path).fields


def _same_error(path: Path, size: int = 2) -> str:
    with pytest.raises(RecordsError) as whole:
        read_records(path)
    with pytest.raises(RecordsError) as chunked:
        scan_records(path, chunk_size=size)
    assert str(chunked.value) == str(whole.value)
    return str(whole.value)


def test_a_chunked_read_refuses_what_a_whole_read_refuses_with_the_same_message(tmp_path):
    ok = [{"id": f"r{i}", "title": f"t{i}", "body": "b"} for i in range(6)]
    # a duplicate in another chunk (chunks of 2: rows 1 and 5), a record without id, an empty one
    rows = [*ok[:4], dict(ok[0]), {"title": "no id", "body": "b"}, {"id": "e", "title": " ", "body": ""}]
    msg = _same_error(write_jsonl(tmp_path / "dup.jsonl", rows))
    assert "1 duplicated ids: r0" in msg and "records without id (rows 6)" in msg and "empty title and body: e" in msg
    # wrong types, more than the ten a message lists, spread over chunks
    wrong = [{"id": True if i % 2 else [i], "title": "t", "body": {"x": i}} for i in range(8)]
    msg = _same_error(write_jsonl(tmp_path / "types.jsonl", wrong), size=3)
    assert "values of the wrong type (16)" in msg and "row 1: id [0] is a list" in msg
    # malformed lines in different chunks: every bad line counted, the first ten named
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"id": "a", "title": "t"}\n{"id": \n[1]\n{"id": "b", "title": "t"}\n{"id": "\xff"}\n')
    msg = _same_error(bad, size=1)
    assert "malformed JSONL (3 lines): line 2: not JSON" in msg and "line 3: not a JSON object" in msg
    assert "line 5: not valid UTF-8 (byte 0xff at column 9)" in msg
    # invalid UTF-8 in a CSV, named by line, as a whole read names it
    csv = tmp_path / "bad.csv"
    csv.write_bytes(b"id,title,body\r\na,t,b\r\nb,t\xe9,b\r\n")
    assert "bad.csv: line 3: not valid UTF-8 (byte 0xe9 at column 4)" in _same_error(csv)


def test_a_file_changed_after_its_scan_is_refused_not_mixed(tmp_path):
    path = write_jsonl(tmp_path / "in.jsonl", ROWS)
    stream = scan_records(path, chunk_size=2)
    write_jsonl(path, [ROWS[0], ROWS[2], ROWS[1], *ROWS[3:]])
    with pytest.raises(RecordsError, match="changed while it was being read"):
        list(stream.chunks(2))
    write_jsonl(path, [*ROWS, {"id": "late", "title": "t", "body": "b"}])  # an appended row too
    with pytest.raises(RecordsError, match="changed while it was being read"):
        list(stream.chunks(5))


@pytest.fixture
def small(tmp_path, gold_rows):
    """40 input records carrying a label (stripped) and a field to keep; a fifth of gold to train on."""
    rows = [{**r, "symptom": "hang", "team": f"t{i % 3}"} for i, r in enumerate(read_rows(DEFAULT_INPUT)[:40])]
    return write_jsonl(tmp_path / "in.jsonl", rows), write_jsonl(tmp_path / "gold.jsonl", gold_rows[:150])


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_run_reads_its_input_only_in_chunks_and_resumes_across_them(small, tmp_path, monkeypatch):
    from classify.labeling.pipeline import label_file
    from classify.labeling.resumable import kept_rows, partial_path

    inp, gold = small
    kw = dict(gold=gold, chunk_size=3, keep=("title", "team"))  # blocks of 12 records
    whole = label_file("tfidf-logreg", inp, tmp_path / "whole.jsonl", **kw)
    expected = [{k: v for k, v in r.items() if k != "labeled_at"} for r in _rows(tmp_path / "whole.jsonl")]
    assert whole.labeled == 40 and [r["team"] for r in expected[:3]] == ["t0", "t1", "t2"]

    # The input is never read whole again: only chunk by chunk (the scan's, then the blocks').
    whole_reads = []
    real_read_rows, real_iter_rows = records_mod.read_rows, records_mod.iter_rows
    sizes: list[int] = []

    def read_rows_spy(path):
        whole_reads.append(Path(path))
        return real_read_rows(path)

    def iter_rows_spy(path, chunk_size=records_mod.CHUNK_ROWS):
        for chunk in real_iter_rows(path, chunk_size):
            if Path(path) == inp:
                sizes.append(len(chunk))
            yield chunk

    monkeypatch.setattr(records_mod, "read_rows", read_rows_spy)
    monkeypatch.setattr(records_mod, "iter_rows", iter_rows_spy)

    out = tmp_path / "out.jsonl"
    seen = []

    def stop_after_two_chunks(n):
        seen.append(n)
        if len(seen) == 5:  # past the first block (4 chunks of 3) into the second
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        label_file("tfidf-logreg", inp, out, progress=Progress(labeled=stop_after_two_chunks), **kw)
    part = partial_path(out)
    done = [json.loads(line)["id"] for line in part.read_text().splitlines()[1:]]
    assert len(done) == 15 and not out.exists()
    with part.open("a") as f:  # a kill mid-write: a torn last line
        f.write('{"id": "' + done[-1][:2])
    assert kept_rows(out) == 15  # what the CLI says an interrupted run kept: the torn line is not one
    again = label_file("tfidf-logreg", inp, out, **kw)
    assert again.resumed == 15 and again.labeled == 25 and not part.exists()
    got = _rows(out)
    assert [r["id"] for r in got] == [r["id"] for r in expected]  # every id once, in input order
    assert [{k: v for k, v in r.items() if k != "labeled_at"} for r in got] == expected
    assert inp not in whole_reads
    # the scans read chunks of up to CHUNK_ROWS (all 40 here), the runs a block (4 x 3 records) at a time
    assert set(sizes) == {40, 12, 4}


def test_ray_output_is_merged_from_interleaved_parts_in_input_order(tmp_path):
    from classify.core import labelparts
    from classify.labeling.rayengine import _in_input_order

    ids = [f"r{i}" for i in range(10)]
    position = {rid: i for i, rid in enumerate(ids)}
    folder = tmp_path / "parts"
    folder.mkdir()
    # a first run's batches, a resumed run's batch filling a gap, and two batches whose rows interleave
    for batch in (["r0", "r1", "r2"], ["r5", "r6"], ["r3", "r4"], ["r7", "r9"], ["r8"]):
        labelparts.write_part(folder, [{"id": rid, "n": position[rid]} for rid in batch])
    merged = list(_in_input_order(folder, position))
    assert [r["id"] for r in merged] == ids and [r["n"] for r in merged] == list(range(10))


def test_ray_workers_get_the_unlabeled_records_from_spill_files(tmp_path):
    import pyarrow.parquet as pq

    from classify.core.records import RecordStream
    from classify.labeling.rayengine import _spill

    recs = read_records(write_jsonl(tmp_path / "in.jsonl", [dict(r, id=f"x{i}") for i, r in enumerate(ROWS * 5)]))
    done = {"x0", "x7", "x8"}
    files = _spill(RecordStream.of(recs), done, tmp_path / "spill", per_file=4)
    texts = [json.loads(t) for f in files for t in pq.read_table(f).column("text").to_pylist()]
    assert [pq.read_metadata(f).num_rows for f in files] == [4, 4, 4, 4, 4, 2]  # one batch each
    assert [t["id"] for t in texts] == [r.id for r in recs if r.id not in done]
    assert texts[0] == recs[1].to_dict()
