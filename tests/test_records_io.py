"""Reading and writing records: the shared JSON-lines reader, invalid UTF-8 in every kind of input,
Hugging Face dataset folders and Arrow files, and the checkpoint's torn tail."""

from __future__ import annotations

import json

import pytest
from conftest import write_jsonl
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.gold import load_gold
from classify.core.jsonlines import read_json_lines
from classify.core.paths import DEFAULT_GOLD
from classify.core.records import RecordsError, read_records, read_rows
from classify.core.taxonomy import TaxonomyError, load_taxonomy
from classify.core.writer import write_rows

runner = CliRunner()
BAD = b"\xff\xfe"  # never valid in UTF-8


# ---------------------------------------------------------------- the shared JSON-lines reader


def test_json_lines_numbers_every_problem_and_keeps_line_text(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_bytes(b'{"id": "a"}\n\n{"id": "b",\n' + b'{"id": "' + BAD + b'"}\r\n[1]\n')
    got = read_json_lines(f)
    assert [(ln.number, ln.value) for ln in got.lines] == [(1, {"id": "a"}), (5, [1])]
    assert [n for n, _ in got.problems] == [3, 4]
    assert "not JSON" in got.problems[0][1] and "not valid UTF-8 (byte 0xff at column 9)" in got.problems[1][1]
    with pytest.raises(
        RecordsError,
        match=r"x.jsonl: malformed JSONL \(3 lines\): line 3: not JSON .*; line 4: not valid UTF-8.*; line 5: not a JSON object",
    ):
        read_rows(f)


def test_torn_tail_is_dropped_only_when_asked_and_only_at_the_end(tmp_path):
    f = tmp_path / "x.jsonl"
    # The last line was cut inside a two-byte character ("é" is c3 a9): a kill mid-write.
    f.write_bytes(b'{"id": "a"}\n{"id": "caf' + "é".encode()[:1])
    assert read_json_lines(f).problems and not read_json_lines(f).torn
    got = read_json_lines(f, drop_torn_tail=True)
    assert got.torn and [ln.value for ln in got.lines] == [{"id": "a"}] and not got.problems
    f.write_bytes(b'{"id": "a"}\n{"id": \n{"id": "c"}\n')  # damage before the end is not a torn tail
    got = read_json_lines(f, drop_torn_tail=True)
    assert not got.torn and got.problems == [(2, "not JSON (Expecting value)")]


def test_bom_is_not_part_of_the_first_row(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_bytes(b'\xef\xbb\xbf{"id": "a", "title": "t"}\n')
    assert read_rows(f) == [{"id": "a", "title": "t"}]


# ---------------------------------------------------------------- invalid UTF-8 anywhere: file and line


def test_invalid_utf8_csv_names_file_and_line(tmp_path):
    f = tmp_path / "in.csv"
    f.write_bytes(b"id,title,body\na,fine,ok\nb,caf" + BAD + b",ok\n")
    with pytest.raises(RecordsError, match=r"in.csv: line 3: not valid UTF-8 \(byte 0xff at column 6\)"):
        read_records(f)


def test_invalid_utf8_codebook_names_file_and_line(tmp_path):
    f = tmp_path / "tax.yaml"
    f.write_bytes(b"name: x\nversion: 1\n# caf" + BAD + b"\n")
    with pytest.raises(TaxonomyError, match=r"tax.yaml: line 3: not valid UTF-8"):
        load_taxonomy(f)


def test_invalid_utf8_gold_and_input_are_one_line_cli_errors(tmp_path, gold_rows):
    gold = tmp_path / "gold.jsonl"
    lines = [json.dumps(r).encode() for r in gold_rows[:30]]
    lines[6] = lines[6].replace(b'"title": "', b'"title": "' + BAD, 1)
    gold.write_bytes(b"\n".join(lines) + b"\n")
    r = runner.invoke(app, ["gold", "stats", "--gold", str(gold)])
    assert r.exit_code == 2 and "line 7: not valid UTF-8" in r.output and "gold.jsonl" in r.output
    assert "Traceback" not in r.output
    inp = tmp_path / "in.csv"
    inp.write_bytes(b"id,title\nx," + BAD + b"\n")
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--input", str(inp), "--out", str(tmp_path / "o.jsonl")])
    assert r.exit_code == 2 and "in.csv: line 2: not valid UTF-8" in r.output


def test_invalid_utf8_in_import_files_and_review_sheets(tmp_path):
    from classify.ingest.importers import import_gh_json, read_issue_refs
    from classify.review.decisions import DecisionsError, read_decisions

    refs = tmp_path / "urls.txt"
    refs.write_bytes(b"triton-lang/triton#1\n" + BAD + b"\n")
    with pytest.raises(RecordsError, match=r"urls.txt: line 2: not valid UTF-8"):
        read_issue_refs(refs)
    export = tmp_path / "gh.json"
    export.write_bytes(b'[\n{"number": 1,\n "title": "' + BAD + b'"}]')
    with pytest.raises(RecordsError, match=r"gh.json: line 3: not valid UTF-8"):
        import_gh_json(export, repo="o/r")
    dec = tmp_path / "decisions.jsonl"
    dec.write_bytes(b'{"id": "' + BAD + b'"}\n')
    with pytest.raises(DecisionsError, match=r"line 1: not valid UTF-8"):
        read_decisions(dec)


# ---------------------------------------------------------------- Hugging Face datasets


def test_gold_round_trips_through_a_dataset_folder_with_the_same_hash(tmp_path, taxonomy):
    gold = load_gold(DEFAULT_GOLD, taxonomy)
    folder = tmp_path / "gold.hf"
    write_rows(folder, read_rows(DEFAULT_GOLD))
    assert (folder / "state.json").is_file() and (folder / "dataset_info.json").is_file()
    again = load_gold(folder, taxonomy)
    assert again.hash == gold.hash and again.ids == gold.ids
    assert again.coders == gold.coders and again.coders  # nested coder passes survive as structs
    # ...and it is a real dataset for the Hugging Face tools
    import datasets

    ds = datasets.load_from_disk(str(folder))
    assert ds.num_rows == len(gold) and ds[0]["id"] == gold.ids[0]


def test_write_rows_to_a_dataset_folder_and_back(tmp_path):
    rows = [
        {"id": "a", "symptom": "crash", "symptom_confidence": 0.9, "provenance": {"encoder": "m", "n_train": {"s": 3}}},
        {
            "id": "b",
            "symptom": None,
            "symptom_confidence": None,
            "provenance": {"encoder": "m", "n_train": {"s": 3}},
            "symptom_status": "invalid",
        },  # a key that only a later row has is kept
    ]
    out = tmp_path / "labels.hf"
    write_rows(out, rows)
    back = read_rows(out)
    assert back[0] == {**rows[0], "symptom_status": None} and back[1] == rows[1]
    write_rows(out, rows[:1])  # an existing dataset folder is replaced, not appended to
    assert [r["id"] for r in read_rows(out)] == ["a"]
    assert [p.name for p in tmp_path.iterdir()] == ["labels.hf"]  # no temp or old folder left behind


def test_dataset_errors_are_clear(tmp_path):
    import datasets

    plain = tmp_path / "notes"
    plain.mkdir()
    (plain / "keep.txt").write_text("mine")
    with pytest.raises(RecordsError, match="notes: a folder, but not a Hugging Face dataset"):
        read_rows(plain)
    with pytest.raises(RecordsError, match="notes: exists and is not a Hugging Face dataset folder; refusing"):
        write_rows(plain, [{"id": "a"}])
    assert (plain / "keep.txt").read_text() == "mine"
    with pytest.raises(RecordsError, match=r"column 'number' cannot be a dataset column"):
        write_rows(tmp_path / "mixed.hf", [{"id": "a", "number": 1}, {"id": "b", "number": "two"}])
    assert not (tmp_path / "mixed.hf").exists()

    ds = datasets.Dataset.from_list([{"id": "a", "title": "t"}])
    datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(
        RecordsError, match=r"dd: a DatasetDict with splits .*train.*; give the folder of one split, e\.g\. .*dd/"
    ):
        read_rows(tmp_path / "dd")
    assert read_rows(tmp_path / "dd" / "train") == [{"id": "a", "title": "t"}]
    datasets.DatasetDict({"train": ds}).save_to_disk(str(tmp_path / "one"))
    assert read_rows(tmp_path / "one") == [{"id": "a", "title": "t"}]  # one split: no need to name it


def test_class_labels_read_as_names_and_arrow_files_in_both_layouts(tmp_path, taxonomy):
    import datasets
    import pyarrow as pa

    names = taxonomy.dimensions["symptom"].ids
    feats = datasets.Features(
        {"id": datasets.Value("string"), "title": datasets.Value("string"), "symptom": datasets.ClassLabel(names=names)}
    )
    ds = datasets.Dataset.from_dict({"id": ["a", "b"], "title": ["x", "y"], "symptom": [2, -1]}, features=feats)
    ds.save_to_disk(str(tmp_path / "cl"))
    want = [{"id": "a", "title": "x", "symptom": names[2]}, {"id": "b", "title": "y", "symptom": None}]
    assert read_rows(tmp_path / "cl") == want
    (arrow_file,) = (tmp_path / "cl").glob("*.arrow")  # the stream file datasets writes, ClassLabels in its metadata
    assert read_rows(arrow_file.rename(tmp_path / "cl.arrow")) == want
    table = pa.table({"id": ["a"], "title": ["x"]})
    with pa.ipc.new_file(str(tmp_path / "f.arrow"), table.schema) as w:  # the random-access layout
        w.write_table(table)
    assert read_rows(tmp_path / "f.arrow") == [{"id": "a", "title": "x"}]
    write_rows(tmp_path / "w.arrow", want)
    assert (
        read_rows(tmp_path / "w.arrow") == want and datasets.Dataset.from_file(str(tmp_path / "w.arrow")).num_rows == 2
    )
    (tmp_path / "junk.arrow").write_bytes(b"not arrow")
    with pytest.raises(RecordsError, match="junk.arrow: not an Arrow IPC file"):
        read_rows(tmp_path / "junk.arrow")


def test_run_reads_and_writes_dataset_folders(tmp_path, gold_rows):
    inp = tmp_path / "in.hf"
    write_rows(inp, [{k: r[k] for k in ("id", "title", "body")} for r in gold_rows[:25]])
    out = tmp_path / "labels.hf"
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--input", str(inp), "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = read_rows(out)
    assert [x["id"] for x in rows] == [x["id"] for x in gold_rows[:25]]
    assert all(x["symptom"] and x["model"] == "tfidf-logreg" for x in rows)
    assert not (tmp_path / "labels.hf.partial.jsonl").exists()


def test_review_writes_the_next_gold_version_of_a_dataset_as_a_dataset(tmp_path, taxonomy):
    from classify.core.goldfile import write_gold

    src = tmp_path / "gold"
    rows = read_rows(DEFAULT_GOLD)[:20]
    write_rows(src, rows, dataset=True)
    write_gold(tmp_path / "gold.v2", rows[:10], src)
    assert [r["id"] for r in read_rows(tmp_path / "gold.v2")] == [r["id"] for r in rows[:10]]


def test_write_gold_keeps_unchanged_lines_byte_for_byte(tmp_path, gold_rows):
    from classify.core.goldfile import write_gold

    src = tmp_path / "g.jsonl"
    lines = [json.dumps(r, ensure_ascii=True) for r in gold_rows[:5]]  # escaped, unlike what we write
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    changed = dict(gold_rows[1], symptom="hang" if gold_rows[1]["symptom"] != "hang" else "crash")
    write_gold(tmp_path / "g2.jsonl", [gold_rows[0], changed, *gold_rows[2:5]], src)
    new = (tmp_path / "g2.jsonl").read_text(encoding="utf-8").split("\n")
    assert new[0] == lines[0] and new[2:5] == lines[2:5] and new[1] != lines[1]


# ---------------------------------------------------------------- the run checkpoint


def _checkpoint(tmp_path, body: bytes):
    from classify.labeling.resumable import read_checkpoint

    part = tmp_path / "o.jsonl.partial.jsonl"
    part.write_bytes(body)
    return lambda: read_checkpoint(part, "S1")


def test_checkpoint_tolerates_a_tail_torn_inside_a_character(tmp_path):
    rows = [{"id": "a", "title": "café"}, {"id": "b"}]
    body = (
        json.dumps({"signature": "S1"}) + "\n" + "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    ).encode()
    read = _checkpoint(tmp_path, body + b'{"id": "c", "title": "caf' + "é".encode()[:1])
    assert read() == rows


def test_checkpoint_damage_is_a_clear_error(tmp_path):
    from classify.labeling.resumable import RunError

    header = json.dumps({"signature": "S1"}).encode() + b"\n"
    with pytest.raises(RunError, match="header is not a JSON object"):
        _checkpoint(tmp_path, b'["S1"]\n{"id": "a"}\n')()
    with pytest.raises(RunError, match=r"damaged checkpoint \(line 2: not JSON"):
        _checkpoint(tmp_path, header + b'{"id": \n{"id": "b"}\n')()
    with pytest.raises(RunError, match=r"line 2: not a row with an id"):
        _checkpoint(tmp_path, header + b'{"no_id": 1}\n')()
    with pytest.raises(RunError, match="different arguments"):
        _checkpoint(tmp_path, json.dumps({"signature": "S0"}).encode() + b"\n")()


def test_input_fingerprint_of_a_folder_follows_its_content(tmp_path):
    from classify.labeling.resumable import input_fingerprint

    inp = tmp_path / "in.hf"
    write_rows(inp, [{"id": "a", "title": "t"}])
    assert inp.is_dir()
    first = input_fingerprint(inp)
    assert input_fingerprint(inp) == first
    write_rows(inp, [{"id": "a", "title": "changed"}])
    assert input_fingerprint(inp) != first
    f = write_jsonl(tmp_path / "x.jsonl", [{"id": "a"}])
    import hashlib

    assert (
        input_fingerprint(f) == hashlib.sha256(f.read_bytes()).hexdigest()[:16]
    )  # files: unchanged, old checkpoints stay valid


DEEP = '{"id": "x", "title": "t", "extra": ' + "[" * 3000 + "]" * 3000 + "}"


def test_deeply_nested_json_line_names_file_and_line(tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text('{"id": "a", "title": "fine"}\n' + DEEP + "\n")
    with pytest.raises(RecordsError, match=r"in.jsonl: malformed JSONL \(1 lines\): line 2: not JSON \(nested deeper"):
        read_records(f)
    csv_file = tmp_path / "in.csv"  # a CSV cell holding JSON text is decoded too, and must not crash
    csv_file.write_text('id,title,extra\na,fine,"' + "[" * 3000 + '"\n')
    assert read_rows(csv_file)[0]["extra"].startswith("[[[")


def test_deeply_nested_input_is_a_one_line_run_error(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text(DEEP + "\n")
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--input", str(inp), "--out", str(tmp_path / "o.jsonl")])
    assert r.exit_code == 2 and "in.jsonl" in r.output and "line 1: not JSON (nested deeper" in r.output
    assert "Traceback" not in r.output and "RecursionError" not in r.output


def test_issue_number_beyond_a_float_is_no_crash(tmp_path):
    f = tmp_path / "n.jsonl"
    f.write_text('{"id": "a", "title": "t", "number": 1e400}\n{"id": "b", "title": "t", "number": Infinity}\n')
    assert [r.number for r in read_records(f)] == [None, None]


# ---------------------------------------------------------------- strings that look like JSON in flat tables

LOOKS_LIKE_JSON = [
    {
        "id": "a",
        "repo": '{"x": 1}',  # text that parses as JSON: still text
        "title": '{"a": 1}',
        "symptom": "crash",
        "symptom_rationale": "[1, 2]",
        "symptom_raw": {"symptom": "boom"},  # an object: read back as one
        "provenance": {"encoder": "m", "n_train": {"s": 3}},
        "symptom_proba": {"crash": 0.9, "hang": 0.1},
        "tags": ["x", "y"],
        "note": "'[quoted] and '{",
    },
    {
        "id": "b",
        "repo": "[]",
        "title": "t",
        "symptom": '"quoted"',
        "symptom_rationale": "{not json",
        "symptom_raw": '{"symptom": "boom"}',  # the same column, this time text
        "provenance": {"encoder": "m"},
        "symptom_proba": None,
        "tags": '["x", "y"]',
        "note": '"just quotes"',
    },
]


@pytest.mark.parametrize("ext", ["parquet", "csv"])
def test_strings_that_look_like_json_stay_strings_in_flat_tables(tmp_path, ext):
    out = tmp_path / f"labels.{ext}"
    write_rows(out, LOOKS_LIKE_JSON)
    assert read_rows(out) == LOOKS_LIKE_JSON
    rec = read_records(out)[1]
    assert rec.repo == "[]" and rec.fields["symptom_raw"] == '{"symptom": "boom"}'


def test_parquet_without_the_json_columns_mark_reads_nested_text_as_before(tmp_path):
    # a labels file written before the mark (or by pandas): its nested values were JSON text
    import pandas as pd

    out = tmp_path / "old.parquet"
    pd.DataFrame([{"id": "a", "title": "[t]", "provenance": json.dumps({"encoder": "m"})}]).to_parquet(out)
    assert read_rows(out) == [{"id": "a", "title": "[t]", "provenance": {"encoder": "m"}}]
