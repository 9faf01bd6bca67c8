import json

import pandas as pd
import pytest
from conftest import write_jsonl

from classify.core.gold import GoldError, load_gold
from classify.core.paths import DEFAULT_GOLD
from classify.core.records import RecordsError, read_records


def test_shipped_gold(gold):
    # Expected sizes come from the raw lines, not constants: the shipped gold grows by appending.
    rows = [json.loads(line) for line in DEFAULT_GOLD.read_text().splitlines()]
    with_cause = sum(r["root_cause"] is not None for r in rows)
    assert 0 < with_cause < len(rows)  # both kinds present, so the null handling is exercised
    assert [r.id for r in gold.records] == [r["id"] for r in rows]
    idx, ys = gold.labeled("root_cause")
    assert len(idx) == with_cause and None not in ys
    assert gold.n_missing("root_cause") == len(rows) - with_cause and gold.n_missing("symptom") == 0
    assert set(gold.coders) == {"a", "b"}


def test_unknown_label_lists_ids(tmp_path, gold_rows, taxonomy):
    gold_rows[3]["symptom"] = "explosion"
    gold_rows[9]["symptom"] = "explosion"
    gold_rows[5]["root_cause"] = "gremlins"
    p = write_jsonl(tmp_path / "g.jsonl", gold_rows)
    with pytest.raises(GoldError) as e:
        load_gold(p, taxonomy)
    msg = str(e.value)
    assert "unknown symptom label 'explosion'" in msg and gold_rows[3]["id"] in msg and gold_rows[9]["id"] in msg
    assert "unknown root_cause label 'gremlins'" in msg and gold_rows[5]["id"] in msg


def test_missing_label_and_duplicate_id(tmp_path, gold_rows, taxonomy):
    del gold_rows[0]["symptom"]
    p = write_jsonl(tmp_path / "g.jsonl", gold_rows)
    with pytest.raises(GoldError, match=f"missing 'symptom' label for 1 records: {gold_rows[0]['id']}"):
        load_gold(p, taxonomy)
    rows = gold_rows[1:] + [gold_rows[1]]
    p = write_jsonl(tmp_path / "d.jsonl", rows)
    with pytest.raises(RecordsError, match=f"duplicated ids: {gold_rows[1]['id']}"):
        load_gold(p, taxonomy)


def test_malformed_jsonl_names_lines(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"id": "a", "title": "t"}\n{broken\n[1, 2]\n')
    with pytest.raises(RecordsError, match=r"line 2: .*line 3: not a JSON object"):
        read_records(p)


def test_empty_text_and_missing_id(tmp_path):
    p = write_jsonl(tmp_path / "x.jsonl", [{"id": "a", "title": "", "body": " "}, {"title": "t"}])
    with pytest.raises(RecordsError) as e:
        read_records(p)
    assert "1 records without id (rows 2)" in str(e.value) and "empty title and body: a" in str(e.value)


def test_csv_and_parquet_give_same_gold(tmp_path, gold_rows, taxonomy, gold):
    df = pd.DataFrame(
        [{**r, "coder_a": json.dumps(r["coder_a"]), "coder_b": json.dumps(r["coder_b"])} for r in gold_rows]
    )
    df.to_csv(tmp_path / "g.csv", index=False)
    df.to_parquet(tmp_path / "g.parquet", index=False)
    for name in ("g.csv", "g.parquet"):
        g = load_gold(tmp_path / name, taxonomy)
        assert g.hash == gold.hash
        assert g.labels["root_cause"] == gold.labels["root_cause"]
        assert g.coders["b"]["root_cause"] == gold.coders["b"]["root_cause"]
        assert g.records[0].number == gold.records[0].number


# -- any labeled issue set (issue 22 item 3) and labels outside the codebook (issue 21 item 16) -----

TYPES = """name: types
version: 1
dimensions:
  issue_type:
    categories:
      - {id: bug, definition: Something is broken.}
      - {id: feature, definition: A request for something new.}
      - {id: question, definition: Someone asks how to do something.}
"""
WORDS = {"bug": "crash error broken fails", "feature": "please add support new option", "question": "how do I use"}


def _types_csv(path, n=8, label_column="label", ids=False, start=0):
    rows = []
    for i in range(n):
        for t, words in WORDS.items():
            row = {"title": f"{words} {i + start}", "body": f"report {t} {i + start}: {words}", label_column: t}
            rows.append({"id": f"{t}-{i}", **row} if ids else row)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture
def types_tax(tmp_path):
    from classify.core.taxonomy import load_taxonomy

    p = tmp_path / "types.yaml"
    p.write_text(TYPES)
    return load_taxonomy(p)


def test_files_without_id_column_get_content_hash_ids(tmp_path, caplog):
    from classify.core.records import content_id

    p = write_jsonl(
        tmp_path / "x.jsonl", [{"title": "a", "body": "one"}, {"title": "b"}, {"title": "a", "body": "one"}]
    )
    recs = read_records(p)
    ids = [r.id for r in recs]
    assert ids[0] == content_id({"title": "a", "body": "one"}) and ids[2] == ids[0] + "-2" and len(set(ids)) == 3
    assert all(r.fields["id_from"] == "content-hash" for r in recs)
    assert caplog.text.count("has no id column") == 1 and "hash of its title and body" in caplog.text
    read_records(p)
    assert caplog.text.count("has no id column") == 1  # said once per file
    # stable: the same report keeps its id when the file is reordered or grows
    p2 = write_jsonl(tmp_path / "y.jsonl", [{"title": "c"}, {"title": "b"}, {"title": "a", "body": "one"}])
    assert {r.title: r.id for r in read_records(p2)}["b"] == ids[1]
    csv = tmp_path / "x.csv"
    pd.DataFrame([{"title": "a", "body": "one"}]).to_csv(csv, index=False)
    pq = tmp_path / "x.parquet"
    pd.DataFrame([{"title": "a", "body": "one"}]).to_parquet(pq)
    assert read_records(csv)[0].id == read_records(pq)[0].id == ids[0]


def test_import_table_without_id_column_gets_content_ids(tmp_path):
    from classify.ingest import import_table

    csv = tmp_path / "t.csv"
    pd.DataFrame([{"Title": "a", "Body": "one"}, {"Title": "b", "Body": "two"}]).to_csv(csv, index=False)
    rows = import_table(csv, {"title": "Title", "body": "Body"})
    assert [r["id"][:2] for r in rows] == ["h-", "h-"] and rows[0]["id_from"] == "content-hash"


def test_label_column_by_name(tmp_path, types_tax):
    from classify.core.gold import GoldFile

    p = _types_csv(tmp_path / "g.csv")  # no id column, labels in `label`
    with pytest.raises(GoldError) as e:
        load_gold(p, types_tax)
    msg = str(e.value)
    assert "missing 'issue_type' label for 24 records" in msg
    assert "the other columns are: label;" in msg and "--label-column issue_type=COLUMN" in msg
    g = load_gold(GoldFile(p, {"issue_type": "label"}), types_tax)
    assert len(g) == 24 and g.labels["issue_type"][:3] == ["bug", "feature", "question"]
    assert "label" not in g.records[0].fields
    with pytest.raises(GoldError, match="no column 'type'; columns are: id, title, body, label$"):
        load_gold(GoldFile(p, {"issue_type": "type"}), types_tax)
    with pytest.raises(GoldError, match="'kind' is not a dimension of types@1"):
        load_gold(GoldFile(p, {"kind": "label"}), types_tax)


def test_label_column_through_eval_and_run(tmp_path):
    from typer.testing import CliRunner

    from classify.cli.main import app

    runner = CliRunner()
    tax = tmp_path / "types.yaml"
    tax.write_text(TYPES)
    gold = _types_csv(tmp_path / "g.csv", n=6, label_column="type")
    test = _types_csv(tmp_path / "t.csv", n=2, label_column="type", start=100)
    base = ["-t", str(tax), "--gold", str(gold), "--model", "tfidf-logreg"]
    r = runner.invoke(app, ["eval", *base, "--test", str(test), "--out-dir", str(tmp_path / "evals")])
    assert r.exit_code == 2 and "--label-column issue_type=COLUMN" in r.output and "type" in r.output
    args = ["eval", *base, "--test", str(test), "--label-column", "issue_type=type", "--out-dir", str(tmp_path / "ev")]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    inp = write_jsonl(tmp_path / "in.jsonl", [{"title": "how do I use it", "body": "question"}])
    out = tmp_path / "o.jsonl"
    r = runner.invoke(app, ["run", *base, "--label-column", "issue_type=type", "--input", str(inp), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["issue_type"] in WORDS
    r = runner.invoke(
        app, ["run", *base, "--label-column", "issue_type", "--input", str(inp), "--out", str(tmp_path / "p")]
    )
    assert r.exit_code == 2 and "DIMENSION=COLUMN" in r.output


def test_gold_label_field_not_in_the_taxonomy_is_warned(tmp_path, types_tax, caplog):
    p = _types_csv(tmp_path / "g.csv", label_column="issue_type", ids=True)
    df = pd.read_csv(p)
    df["area"] = ["kernels", "build", "docs"] * 8
    df["note"] = "free text that is not a label"
    df.to_csv(p, index=False)
    load_gold(p, types_tax)
    assert "'area' looks like labels, but types@1 has no such dimension (it has: issue_type)" in caplog.text
    assert "note" not in caplog.text.split("looks like")[0].split(":")[-1]
    caplog.clear()
    load_gold(DEFAULT_GOLD, __import__("classify.core.taxonomy").core.taxonomy.load_taxonomy())
    assert "looks like labels" not in caplog.text and "look like labels" not in caplog.text
