"""`classify merge`: a routed run plus what people coded -> one corpus file; every label says who made it."""

from __future__ import annotations

import json

import pytest
from conftest import write_jsonl
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.records import read_rows
from classify.core.taxonomy import load_taxonomy
from classify.labeling.merge import MergeError, merge_coded

runner = CliRunner()


def _labels(tmp_path):
    routing = {
        "symptom": {"target_kappa": 0.87, "threshold": 0.71},
        "root_cause": {"target_kappa": 0.87, "threshold": 0.9},
    }
    rows = [
        {
            "id": "a",
            "model": "m",
            "taxonomy": "gpu-kernel-issues@1",
            "symptom": "crash",
            "symptom_status": "auto",
            "root_cause": None,
            "root_cause_status": "review",
            "root_cause_suggestion": "api_misuse",
            "routing": routing,
        },
        {
            "id": "b",
            "model": "m",
            "taxonomy": "gpu-kernel-issues@1",
            "symptom": None,
            "symptom_status": "review",
            "root_cause": None,
            "root_cause_status": "none_shown",
            "routing": routing,
        },
        {
            "id": "c",
            "model": "m",
            "taxonomy": "gpu-kernel-issues@1",
            "symptom": None,
            "symptom_status": "review",
            "root_cause": None,
            "root_cause_status": "review",
            "routing": routing,
        },
    ]
    return write_jsonl(tmp_path / "labels.jsonl", rows)


def test_merge_says_who_made_every_label(tmp_path):
    labels = _labels(tmp_path)
    coded = write_jsonl(
        tmp_path / "coded.jsonl",
        [
            {
                "id": "a",
                "root_cause": "api_misuse",
                "coder_a": {"root_cause": "api_misuse"},
                "coder_b": {"root_cause": "api_misuse"},
            },
            {"id": "b", "symptom": "hang", "coded_by": ["ana", "ben"]},
        ],
    )
    s = merge_coded(labels, [coded], tmp_path / "corpus.jsonl")
    rows = {r["id"]: r for r in read_rows(tmp_path / "corpus.jsonl")}
    assert rows["a"]["symptom"] == "crash" and rows["a"]["symptom_by"].startswith("model m (auto at confidence >= 0.71")
    assert rows["a"]["root_cause"] == "api_misuse" and rows["a"]["root_cause_status"] == "coded"
    assert rows["a"]["root_cause_by"] == "coders coder_a+coder_b"
    api_group = load_taxonomy().dimensions["root_cause"].group_of("api_misuse")
    assert rows["a"]["root_cause_group"] == api_group and rows["a"]["root_cause_group_status"] == "coded"
    assert s.by_dimension["root_cause_group"]["coded"] == 1
    assert rows["b"]["symptom"] == "hang" and rows["b"]["symptom_coded_by"] == "ana, ben"
    assert rows["b"]["root_cause_status"] == "none_shown" and rows["b"]["root_cause"] is None
    assert rows["c"]["symptom_status"] == "review" and rows["c"]["symptom_by"] is None  # still waiting for people
    assert s.by_dimension["symptom"] == {"auto": 1, "coded": 1, "review": 1}
    assert s.by_dimension["root_cause"] == {"coded": 1, "none_shown": 1, "review": 1}


def test_merge_refuses_bad_codes_unknown_ids_conflicts_and_overwriting_inputs(tmp_path):
    labels = _labels(tmp_path)
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "a", "symptom": "explosion"}])
    with pytest.raises(
        MergeError,
        match="unknown symptom label 'explosion' \\(allowed: deployment_failure, build_failure.*or null for no label",
    ):
        merge_coded(labels, [bad], tmp_path / "o.jsonl")
    stray = write_jsonl(tmp_path / "stray.jsonl", [{"id": "zzz", "symptom": "crash"}])
    with pytest.raises(MergeError, match="1 coded ids are not in"):
        merge_coded(labels, [stray], tmp_path / "o.jsonl")
    one = write_jsonl(tmp_path / "one.jsonl", [{"id": "a", "symptom": "crash"}])
    two = write_jsonl(tmp_path / "two.jsonl", [{"id": "a", "symptom": "hang"}])
    with pytest.raises(MergeError, match="coded differently"):
        merge_coded(labels, [one, two], tmp_path / "o.jsonl")
    r = runner.invoke(app, ["merge", "--labels", str(labels), "--coded", str(one), "--out", str(labels)])
    assert r.exit_code == 2 and "error:" in r.output
    assert len(labels.read_text().splitlines()) == 3  # the input is untouched
    assert not (tmp_path / "o.jsonl").exists()


def test_merge_cli_prints_the_counts(tmp_path):
    labels = _labels(tmp_path)
    coded = write_jsonl(tmp_path / "coded.jsonl", [{"id": "c", "symptom": "crash", "root_cause": None}])
    r = runner.invoke(
        app, ["merge", "--labels", str(labels), "--coded", str(coded), "--out", str(tmp_path / "m.jsonl")]
    )
    assert r.exit_code == 0, r.output
    assert "wrote 3 rows" in r.output and "root_cause: review 1, none_shown 1, coded 1" in r.output
    row = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()][2]
    assert row["root_cause_status"] == "coded" and row["root_cause"] is None  # people said: no cause shown


def test_merge_reads_workbench_coders_and_group_codes(tmp_path):
    labels = _labels(tmp_path)
    tax = load_taxonomy()
    group = tax.dimensions["root_cause"].group_of("api_misuse")
    coded = write_jsonl(
        tmp_path / "coded.jsonl",
        [
            {"id": "a", "symptom": "crash", "coded_by": {"coder_a": "ana", "coder_b": "ben"}, "adjudication_note": "x"},
            {"id": "c", "root_cause_group": group},  # a group coded on its own
        ],
    )
    s = merge_coded(labels, [coded], tmp_path / "m.jsonl")
    rows = {r["id"]: r for r in read_rows(tmp_path / "m.jsonl")}
    assert rows["a"]["symptom_by"] == "coders ana, ben (adjudicated)"
    assert rows["c"]["root_cause_group"] == group and rows["c"]["root_cause_group_status"] == "coded"
    assert rows["c"]["root_cause_status"] == "review"  # the category still waits
    assert s.by_dimension["root_cause_group"]["coded"] == 1
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "c", "root_cause_group": "nonsense"}])
    with pytest.raises(MergeError, match="unknown root_cause_group 'nonsense'"):
        merge_coded(labels, [bad], tmp_path / "m2.jsonl")
    other = next(g for g in tax.dimensions["root_cause"].groups if g != group)
    clash = write_jsonl(tmp_path / "clash.jsonl", [{"id": "c", "root_cause": "api_misuse", "root_cause_group": other}])
    with pytest.raises(MergeError, match="is not the group of root_cause"):
        merge_coded(labels, [clash], tmp_path / "m3.jsonl")


# -- merge checks its inputs (issue 21, items 10 and 18) ------------------------------------------


def test_labels_row_without_id_is_a_clear_error(tmp_path):
    labels = _labels(tmp_path)
    rows = read_rows(labels)
    del rows[1]["id"]
    write_jsonl(labels, rows)
    coded = write_jsonl(tmp_path / "coded.jsonl", [{"id": "a", "symptom": "hang"}])
    r = runner.invoke(
        app, ["merge", "--labels", str(labels), "--coded", str(coded), "--out", str(tmp_path / "o.jsonl")]
    )
    assert r.exit_code == 2 and "labels.jsonl: row 2 has no usable id" in r.output
    assert "Traceback" not in r.output and "KeyError" not in r.output


def test_non_finite_and_out_of_range_confidences_are_nulled_with_a_warning(tmp_path, caplog):
    labels = _labels(tmp_path)
    text = labels.read_text().splitlines()
    text[0] = text[0][:-1] + ', "symptom_confidence": NaN, "symptom_proba": {"crash": Infinity}}'
    text[1] = text[1][:-1] + ', "symptom_confidence": -1.5}'
    text[2] = text[2][:-1] + ', "symptom_confidence": 0.4}'
    labels.write_text("\n".join(text) + "\n")
    coded = write_jsonl(tmp_path / "coded.jsonl", [{"id": "c", "symptom": "hang"}])
    out = tmp_path / "o.jsonl"
    merge_coded(labels, [coded], out)
    written = out.read_text()
    assert "NaN" not in written and "Infinity" not in written
    rows = {r["id"]: r for r in (json.loads(line) for line in written.splitlines())}
    assert rows["a"]["symptom_confidence"] is None and rows["a"]["symptom_proba"] == {"crash": None}
    assert rows["b"]["symptom_confidence"] is None and rows["c"]["symptom_confidence"] == 0.4
    assert "3 values are not finite numbers" in caplog.text and "symptom_confidence = -1.5" in caplog.text


def test_out_over_the_codebook_is_refused_even_with_force(tmp_path):
    import shutil

    from classify.core.paths import DEFAULT_TAXONOMY

    tax = tmp_path / "tax.yaml"
    shutil.copy(DEFAULT_TAXONOMY, tax)
    before = tax.read_text()
    labels = _labels(tmp_path)
    coded = write_jsonl(tmp_path / "coded.jsonl", [{"id": "a", "symptom": "hang"}])
    args = ["merge", "--labels", str(labels), "--coded", str(coded), "--out", str(tax), "-t", str(tax), "--force"]
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and "is one of the inputs" in r.output
    assert tax.read_text() == before


def test_deeply_nested_coded_file_names_file_and_line(tmp_path):
    labels = _labels(tmp_path)
    coded = tmp_path / "coded.jsonl"
    coded.write_text('{"id": "a", "note": ' + "[" * 3000 + "]" * 3000 + "}\n")
    with pytest.raises(MergeError, match=r"coded.jsonl: malformed JSONL \(1 lines\): line 1: not JSON \(nested deeper"):
        merge_coded(labels, [coded], tmp_path / "o.jsonl")


def test_a_group_code_of_the_wrong_type_is_a_clear_error(tmp_path):
    labels = _labels(tmp_path)
    coded = write_jsonl(tmp_path / "coded.jsonl", [{"id": "a", "root_cause_group": ["usage"]}])
    with pytest.raises(MergeError, match=r"id a: unknown root_cause_group \['usage'\]"):
        merge_coded(labels, [coded], tmp_path / "o.jsonl")


def test_a_review_loop_gold_version_merges_its_codes_of_labeled_rows_with_only_labeled(tmp_path):
    # A gold version from `review apply` holds the gold reports beside the decided review rows: its codes
    # of the labels file's rows merge, the rest are left out, and only when the user says so.
    labels = _labels(tmp_path)
    coded = write_jsonl(
        tmp_path / "gold-v2.jsonl",
        [
            {"id": "gold-1", "title": "t", "body": "b", "symptom": "hang", "root_cause": None},
            {"id": "b", "title": "t", "body": "b", "symptom": "crash", "root_cause": None},
        ],
    )
    with pytest.raises(MergeError, match="--only-labeled"):
        merge_coded(labels, [coded], tmp_path / "out.jsonl")
    r = runner.invoke(
        app,
        ["merge", "--labels", str(labels), "--coded", str(coded), "--out", str(tmp_path / "o.jsonl"), "--only-labeled"],
    )
    assert r.exit_code == 0, r.output
    rows = {row["id"]: row for row in read_rows(tmp_path / "o.jsonl")}
    assert set(rows) == {"a", "b", "c"}
    assert rows["b"]["symptom"] == "crash" and rows["b"]["symptom_status"] == "coded"


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("symptom", ["crash"], r"id b: unknown symptom label \['crash'\]"),
        ("symptom", "gpu_meltdown", "id b: unknown symptom label 'gpu_meltdown'"),
        ("symptom_status", "bogus", "id b: unknown symptom_status 'bogus'"),
        ("symptom_status", ["auto"], "id b: unknown symptom_status"),
        ("routing", "lots", "id b: routing must map dimensions to their thresholds"),
        ("model", {"x": 1}, "id b: model must be the model's spec"),
    ],
)
def test_a_malformed_labels_row_is_refused_not_copied(tmp_path, field, value, message):
    # The labels file's own rows, not only the coded ones: what merge copies must be what run writes.
    labels = _labels(tmp_path)
    rows = read_rows(labels)
    rows[1][field] = value
    write_jsonl(labels, rows)
    coded = write_jsonl(tmp_path / "coded.jsonl", [{"id": "a", "symptom": "hang"}])
    out = tmp_path / "o.jsonl"
    r = runner.invoke(app, ["merge", "--labels", str(labels), "--coded", str(coded), "--out", str(out)])
    assert r.exit_code == 2 and "error:" in r.output and "internal error" not in r.output, r.output
    with pytest.raises(MergeError, match=message):
        merge_coded(labels, [coded], out)
    assert not out.exists()
