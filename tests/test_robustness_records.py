"""Issue #11, records: CSV formula injection (items 2), id and column types (item 11), and an output
that is one of the inputs (item 1), at the records layer every writer shares."""

from __future__ import annotations

import csv
import json
import os
import re

import pytest
from conftest import write_jsonl

from classify.core.errors import ClassifyError
from classify.core.paths import refuse_output_over_inputs
from classify.core.records import RecordsError, escape_formula, read_records, read_rows, unescape_formula
from classify.core.writer import write_rows

NASTY = [
    '=HYPERLINK("http://evil","x")',
    "+1+2",
    "-2+3",
    "@SUM(A1)",
    "\t=1",
    "\r=1",
    "'=already quoted",
    "''=twice",
    "plain",
    "",
    "a=b",
]


@pytest.mark.parametrize("text", NASTY)
def test_formula_escape_round_trips_exactly(text):
    assert unescape_formula(escape_formula(text)) == text


def test_formula_cells_are_neutralised_in_a_written_csv_and_restored_on_read(tmp_path):
    rows = [{"id": f"r{i}", "title": t, "body": "b", "n": i} for i, t in enumerate(NASTY)]
    out = tmp_path / "x.csv"
    write_rows(out, rows)
    with open(out, encoding="utf-8", newline="") as f:
        cells = [r["title"] for r in csv.DictReader(f)]
    # What a spreadsheet program sees: no cell starts with a formula trigger.
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert cells[0] == "'" + NASTY[0]
    back = read_rows(out)
    assert [r["title"] or "" for r in back] == NASTY
    assert [int(r["n"]) for r in back] == list(range(len(NASTY)))  # numbers are not escaped


def test_nested_json_cells_survive_escaping(tmp_path):
    out = tmp_path / "x.csv"
    write_rows(out, [{"id": "a", "title": "t", "coder_a": {"symptom": "-crash"}}])
    assert read_rows(out)[0]["coder_a"] == {"symptom": "-crash"}


# ---------------------------------------------------------------- item 11: id and column types


@pytest.mark.parametrize(
    ("value", "what"),
    [(True, "a boolean"), (1.0, "a float"), ({"a": 1}, "an object"), ([1], "a list")],
)
def test_ids_that_are_not_text_or_integers_are_refused(tmp_path, value, what):
    f = write_jsonl(tmp_path / "x.jsonl", [{"id": "ok", "title": "t"}, {"id": value, "title": "t"}])
    with pytest.raises(
        RecordsError, match=r"x.jsonl: values of the wrong type \(1\): row 2: id " + re.escape(f"{value!r} is {what}")
    ):
        read_records(f)


def test_integer_ids_are_fine_and_1_and_1_0_do_not_collide_silently(tmp_path):
    f = write_jsonl(tmp_path / "x.jsonl", [{"id": 1, "title": "t"}, {"id": "2", "title": "t"}])
    assert [r.id for r in read_records(f)] == ["1", "2"]
    f = write_jsonl(tmp_path / "y.jsonl", [{"id": 1, "title": "t"}, {"id": 1.0, "title": "t"}])
    with pytest.raises(RecordsError, match="is a float"):
        read_records(f)


@pytest.mark.parametrize(("field", "value"), [("title", ["a", "b"]), ("body", {"x": 1}), ("discussion", 12)])
def test_text_fields_of_the_wrong_type_are_refused_not_stringified(tmp_path, field, value):
    f = write_jsonl(tmp_path / "x.jsonl", [{"id": "a", "title": "t", field: value}])
    with pytest.raises(RecordsError, match=rf"row 1: {field} is .*, not text"):
        read_records(f)


def test_parquet_with_a_list_title_or_bytes_body_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = tmp_path / "x.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "title": [["x"], ["y"]], "body": ["b", "c"]}), f)
    with pytest.raises(RecordsError, match=r"row 1: title is a list, not text"):
        read_records(f)
    pq.write_table(pa.table({"id": ["a"], "title": ["t"], "body": [b"\x00bytes"]}), f)
    with pytest.raises(RecordsError, match=r"row 1: body is bytes, not text"):
        read_records(f)


def test_parquet_integer_ids_with_a_gap_stay_integers(tmp_path):
    # pandas turns an int column with a null into floats (1.0); the id check must not blame the user.
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = tmp_path / "x.parquet"
    pq.write_table(pa.table({"id": pa.array([1, None, 3], pa.int64()), "title": ["a", "b", "c"]}), f)
    with pytest.raises(RecordsError) as e:
        read_records(f)
    assert "1 records without id (rows 2)" in str(e.value) and "float" not in str(e.value)


def test_parquet_round_trip_keeps_values(tmp_path):
    f = tmp_path / "x.parquet"
    rows = [{"id": "a", "title": "=1", "body": "b", "n": 3, "coder_a": {"symptom": "crash"}}]
    write_rows(f, rows)
    assert read_rows(f) == rows


# ---------------------------------------------------------------- item 1: the shared check


def test_output_over_an_input_is_refused_however_spelled(tmp_path, monkeypatch):
    inp = tmp_path / "in.jsonl"
    inp.write_text("{}\n")
    (tmp_path / "sub").mkdir()
    link = tmp_path / "link.jsonl"
    link.symlink_to(inp)
    hard = tmp_path / "hard.jsonl"
    os.link(inp, hard)
    monkeypatch.chdir(tmp_path / "sub")
    for spelled in ("../in.jsonl", str(inp), str(link), str(hard), "../sub/../in.jsonl"):
        with pytest.raises(ClassifyError, match="is one of the inputs"):
            refuse_output_over_inputs(spelled, [inp], flag="--out")
    refuse_output_over_inputs(tmp_path / "other.jsonl", [inp, None, tmp_path / "missing"], flag="--out")
    with pytest.raises(ClassifyError, match="is one of the inputs"):  # a file the command would create
        refuse_output_over_inputs(tmp_path / "missing", [tmp_path / "sub/../missing"], flag="--out")


def test_output_inside_an_input_dataset_folder_is_refused(tmp_path):
    folder = tmp_path / "gold.hf"
    folder.mkdir()
    with pytest.raises(ClassifyError, match="inside the input"):
        refuse_output_over_inputs(folder / "data.jsonl", [folder], flag="--out")


def test_json_fields_in_csv_keep_working(tmp_path):
    out = tmp_path / "x.csv"
    write_rows(out, [{"id": "a", "title": "t", "labels": ["x", "y"]}])
    assert json.loads(json.dumps(read_rows(out)[0]["labels"])) == ["x", "y"]
