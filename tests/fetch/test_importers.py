"""Importers (gh exports, mapped tables, URL lists) and merging into an existing records file."""

from __future__ import annotations

import json

import pytest

from classify.core.records import RecordsError, read_records, read_rows
from classify.core.writer import write_rows
from classify.ingest import import_gh_json, import_table, parse_mapping, read_issue_refs, write_fetched

GH_LIST = [
    {
        "author": {"id": "MDQ6VXNlcjE=", "is_bot": False, "login": "alice", "name": "Alice"},
        "body": "Backward pass crashes\r\non sm_90 with head dim 256.",
        "closedAt": "2024-05-09T12:00:00Z",
        "comments": [
            {
                "id": "IC_kwDOH1",
                "author": {"login": "tridao"},
                "authorAssociation": "MEMBER",
                "body": "Can you share a repro?",
                "createdAt": "2024-05-02T10:00:00Z",
                "includesCreatedEdit": False,
                "isMinimized": False,
                "minimizedReason": "",
                "reactionGroups": [],
                "url": "https://github.com/Dao-AILab/flash-attention/issues/58#issuecomment-1",
                "viewerDidAuthor": False,
            },
            {
                "id": "IC_kwDOH2",
                "author": {"login": "stale[bot]"},
                "authorAssociation": "NONE",
                "body": "This issue is stale.",
                "createdAt": "2024-05-08T10:00:00Z",
            },
        ],
        "createdAt": "2024-05-01T09:00:00Z",
        "labels": [{"id": "LA_kwDO1", "name": "bug", "description": "", "color": "d73a4a"}],
        "number": 58,
        "state": "CLOSED",
        "stateReason": "COMPLETED",
        "title": "Backward crash on H100",
        "updatedAt": "2024-05-09T12:00:00Z",
        "url": "https://github.com/Dao-AILab/flash-attention/issues/58",
    },
    {
        "author": {"login": "bob", "is_bot": False},
        "body": "",
        "comments": [],
        "createdAt": "2024-06-01T00:00:00Z",
        "labels": [],
        "number": 19,
        "state": "OPEN",
        "title": "FP8 GEMM wrong results",
        "url": "https://github.com/deepseek-ai/DeepGEMM/issues/19",
    },
]


def test_gh_issue_list_export(tmp_path):
    src = tmp_path / "gh.json"
    src.write_text(json.dumps(GH_LIST, indent=2))
    rows = import_gh_json(src)
    a, b = rows
    assert a["id"] == "flash-attention-58" and a["repo"] == "Dao-AILab/flash-attention" and a["number"] == 58
    assert b["id"] == "deepgemm-19" and b["repo"] == "deepseek-ai/DeepGEMM"  # ids like the gold set's
    assert a["body"] == "Backward pass crashes\non sm_90 with head dim 256."
    assert (
        a["discussion"]
        == "tridao (2024-05-02):\nCan you share a repro?\n\nstale[bot] (2024-05-08):\nThis issue is stale."
    )
    assert (a["state"], a["state_reason"], a["labels"], a["author"]) == ("closed", "completed", ["bug"], "alice")
    assert a["created_at"] == "2024-05-01T09:00:00Z" and a["closed_at"] == "2024-05-09T12:00:00Z"
    assert "stale" not in import_gh_json(src, skip_bot_comments=True)[0]["discussion"]
    out = tmp_path / "out.jsonl"
    write_fetched(out, rows)
    assert [r.id for r in read_records(out)] == ["flash-attention-58", "deepgemm-19"]


def test_gh_export_without_url_needs_repo(tmp_path):
    src = tmp_path / "gh.json"
    src.write_text(json.dumps([{"number": 7, "title": "t", "body": "b"}]))
    with pytest.raises(RecordsError, match=r"item 1: .*--repo"):
        import_gh_json(src)
    (row,) = import_gh_json(src, repo="triton-lang/triton")
    assert row["id"] == "triton-7" and row["url"] == "https://github.com/triton-lang/triton/issues/7"


def test_gh_view_object_and_rest_paginate_output(tmp_path):
    one = tmp_path / "view.json"
    one.write_text(json.dumps(GH_LIST[1]))
    assert [r["id"] for r in import_gh_json(one)] == ["deepgemm-19"]

    def rest(n, pr=False):
        d = {
            "html_url": f"https://github.com/o/kern/{'pull' if pr else 'issues'}/{n}",
            "number": n,
            "title": f"t{n}",
            "body": "b",
            "user": {"login": "u"},
            "labels": [{"name": "bug"}],
            "state": "open",
            "comments": 0,
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "closed_at": None,
        }
        if pr:
            d["pull_request"] = {"url": "x"}
        return d

    pages = tmp_path / "api.json"  # `gh api --paginate` prints one array per page, back to back
    pages.write_text(json.dumps([rest(1), rest(2, pr=True)]) + json.dumps([rest(3)]) + "\n")
    rows = import_gh_json(pages)
    assert [r["id"] for r in rows] == ["kern-1", "kern-3"] and rows[0]["labels"] == ["bug"]


def test_gh_export_errors_are_clear(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"number": 1,\n "title": }]')
    with pytest.raises(RecordsError, match="invalid JSON at line 2"):
        import_gh_json(bad)
    with pytest.raises(RecordsError, match="not found"):
        import_gh_json(tmp_path / "missing.json")
    odd = tmp_path / "odd.json"
    odd.write_text('[1, {"url": "https://example.com/nope", "number": 2, "title": "x"}]')
    with pytest.raises(RecordsError, match=r"2 unusable items: item 1: not a JSON object; item 2: not an issue URL"):
        import_gh_json(odd)


def test_parse_mapping():
    assert parse_mapping(["title=Title,body=Description", "url = Link"]) == {
        "title": "Title",
        "body": "Description",
        "url": "Link",
    }
    assert parse_mapping(["body=Col=with=equals"]) == {"body": "Col=with=equals"}
    for bad in (["title"], ["=Title"], ["title=A,title=B"]):
        with pytest.raises(ValueError):
            parse_mapping(bad)


def _csv(path, header, rows):
    import csv

    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_csv_with_mapping_derives_ids_and_keeps_other_columns(tmp_path):
    src = _csv(
        tmp_path / "sheet.csv",
        ["Link", "Title", "Description", "Symptom", "title"],
        [
            [
                "https://github.com/deepseek-ai/DeepGEMM/issues/19",
                "FP8 GEMM wrong",
                "Results differ",
                "wrong_output",
                "old",
            ],
            ["https://github.com/NVIDIA/cutlass/issues/7", "Build fails", "nvcc error", "build_failure", "old"],
        ],
    )
    rows = import_table(src, parse_mapping(["url=Link,title=Title,body=Description"]))
    assert [r["id"] for r in rows] == ["deepgemm-19", "cutlass-7"]
    r = rows[0]
    assert (r["repo"], r["number"], r["title"], r["body"], r["Symptom"]) == (
        "deepseek-ai/DeepGEMM",
        19,
        "FP8 GEMM wrong",
        "Results differ",
        "wrong_output",
    )
    assert "Link" not in r and "Title" not in r and r["discussion"] == ""
    out = tmp_path / "out.parquet"
    write_fetched(out, rows)
    assert [x.fields["Symptom"] for x in read_records(out)] == ["wrong_output", "build_failure"]
    assert "Symptom" not in import_table(src, {"url": "Link", "title": "Title"}, keep_unmapped=False)[0]


def test_csv_ids_from_repo_and_number(tmp_path):
    src = _csv(tmp_path / "t.csv", ["Number", "Title"], [["12", "a"], ["13.0", "b"]])
    rows = import_table(src, {"number": "Number", "title": "Title"}, repo="triton-lang/triton")
    assert [(r["id"], r["number"], r["repo"]) for r in rows] == [
        ("triton-12", 12, "triton-lang/triton"),
        ("triton-13", 13, "triton-lang/triton"),
    ]
    with pytest.raises(RecordsError, match=r"2 unusable rows: row 1: no id column value.*--repo"):
        import_table(src, {"number": "Number", "title": "Title"})
    with pytest.raises(RecordsError, match=r"mapped columns not found: \['Body'\]; columns are: \['Number', 'Title'\]"):
        import_table(src, {"body": "Body"}, repo="o/r")
    bad = _csv(tmp_path / "bad.csv", ["url", "title"], [["https://github.com/o/r/issues/x", "t"]])
    with pytest.raises(RecordsError, match="row 1: not an issue URL"):
        import_table(bad)


def test_duplicates_and_empty_rows_are_refused_not_written(tmp_path):
    src = _csv(
        tmp_path / "d.csv",
        ["url", "title"],
        [
            ["https://github.com/o/r/issues/1", "a"],
            ["https://github.com/o/r/issues/1", "b"],
            ["https://github.com/o/r/issues/2", ""],
        ],
    )
    rows = import_table(src)
    out = tmp_path / "out.jsonl"
    with pytest.raises(RecordsError, match=r"1 duplicated ids: r-1.*empty title and body: r-2"):
        write_fetched(out, rows)
    assert not out.exists()


def test_read_issue_refs(tmp_path):
    txt = tmp_path / "urls.txt"
    txt.write_text("# gold sample\nhttps://github.com/o/r/issues/1\n\n  o/r#2  \n")
    assert read_issue_refs(txt) == [("https://github.com/o/r/issues/1", {}), ("o/r#2", {})]
    sheet = _csv(tmp_path / "gold.csv", ["URL", "symptom"], [["https://github.com/o/r/issues/1", "crash"]])
    assert read_issue_refs(sheet, "URL") == [("https://github.com/o/r/issues/1", {"symptom": "crash"})]
    with pytest.raises(RecordsError, match=r"no column 'url'.*--url-column"):
        read_issue_refs(sheet)
    holes = _csv(tmp_path / "holes.csv", ["url"], [["https://github.com/o/r/issues/1"], [""]])
    with pytest.raises(RecordsError, match=r"1 rows with an empty 'url': rows \[2\]"):
        read_issue_refs(holes)


def _row(n, title="t", **kw):
    return {
        "id": f"r-{n}",
        "repo": "o/r",
        "number": n,
        "url": f"https://github.com/o/r/issues/{n}",
        "title": title,
        "body": "b",
        "discussion": "",
        "created_at": None,
        **kw,
    }


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_merge_keeps_labels_and_rows_not_refetched(tmp_path, suffix):
    out = tmp_path / f"issues.{suffix}"
    s = write_fetched(out, [_row(1), _row(2), _row(3)])
    assert (s.total, s.new) == (3, 3)
    # Someone labels the file afterwards; a refresh must not lose that.
    rows = read_rows(out)
    rows[0]["symptom"] = "crash"
    write_rows(out, rows)
    s = write_fetched(out, [_row(1, title="edited"), _row(2), _row(4)])
    assert (s.total, s.new, s.updated, s.unchanged, s.kept) == (4, 1, 1, 1, 1)
    recs = {r.id: r for r in read_records(out)}
    assert list(recs) == ["r-1", "r-2", "r-3", "r-4"]
    assert recs["r-1"].title == "edited" and recs["r-1"].fields["symptom"] == "crash"
    s = write_fetched(out, [_row(5)], overwrite=True)
    assert [r.id for r in read_records(out)] == ["r-5"] and s.total == 1


def test_wrong_types_in_imported_tables_are_refused_not_stringified(tmp_path):
    # issue #11 item 11: a boolean id, a list title or a fractional number would have been
    # stringified ("True", "['a']") or truncated (7.5 -> 7).
    src = tmp_path / "t.jsonl"
    src.write_text(
        json.dumps({"id": True, "title": "a"})
        + "\n"
        + json.dumps({"id": "x", "title": ["a", "b"]})
        + "\n"
        + json.dumps({"number": 7.5, "repo": "o/r", "title": "c"})
        + "\n"
        + json.dumps({"number": True, "repo": "o/r", "title": "d"})
        + "\n"
    )
    with pytest.raises(RecordsError) as e:
        import_table(src)
    msg = str(e.value)
    assert "4 unusable rows" in msg
    assert "row 1: id True is a boolean" in msg and "row 2: title is a list, not text" in msg
    assert "row 3: number 7.5 is not an integer" in msg and "row 4: number True is not an integer" in msg


def test_gh_export_number_must_be_an_integer(tmp_path):
    src = tmp_path / "gh.json"
    src.write_text(json.dumps([{"number": True, "title": "t"}, {"number": "3", "title": "t"}]))
    with pytest.raises(RecordsError, match=r"item 1: `number` True is not an integer; item 2: `number` '3'"):
        import_gh_json(src, repo="o/r")


def test_fetched_rows_with_wrong_types_are_refused(tmp_path):
    with pytest.raises(RecordsError, match=r"fetched rows: .*row 1: id 1.0 is a float"):
        write_fetched(tmp_path / "o.jsonl", [{"id": 1.0, "title": "t"}])


def test_gh_json_deeply_nested_names_file_and_line(tmp_path):
    p = tmp_path / "gh.json"
    p.write_text('[{"number": 1, "title": "ok", "url": "https://github.com/o/n/issues/1"}]\n' + "[" * 3000 + "]" * 3000)
    with pytest.raises(RecordsError, match=r"gh.json: invalid JSON at line 2: nested deeper than 200 levels"):
        import_gh_json(p)


@pytest.mark.parametrize(
    "field, value, problem",
    [
        ("labels", "bug", "labels is text, not a list"),
        ("labels", [{"name": 3}], "label 1 is an object"),
        ("title", {"a": 1}, "title is an object, not text"),
        ("body", ["x"], "body is a list, not text"),
        ("author", "alice", "user .alice. is not a user object"),
        ("state", 3, "state is a number, not text"),
    ],
)
def test_gh_json_malformed_fields_are_refused_by_name(tmp_path, field, value, problem):
    item = {"number": 1, "title": "ok", "url": "https://github.com/o/n/issues/1", field: value}
    p = tmp_path / "gh.json"
    p.write_text(json.dumps([item]))
    with pytest.raises(RecordsError, match=rf"gh.json: 1 unusable items: item 1: {problem}"):
        import_gh_json(p)


def test_rest_export_labels_string_is_refused(tmp_path):
    item = {"number": 1, "title": "ok", "html_url": "https://github.com/o/n/issues/1", "labels": "bug"}
    p = tmp_path / "rest.json"
    p.write_text(json.dumps([item]))
    with pytest.raises(RecordsError, match="labels is text, not a list"):
        import_gh_json(p)
