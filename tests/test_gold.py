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
