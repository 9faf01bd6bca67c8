"""`classify fetch ...` commands end to end against the local GitHub API."""

from __future__ import annotations

import json

from fetch_fixtures import N_ITEMS, PRS, TOKEN, gh, make_client  # noqa: F401 (fixtures)
from github_server import Fault
from typer.testing import CliRunner

from classify.cli.fetch import fetch_app
from classify.core.records import read_records

runner = CliRunner()
N_ISSUES = N_ITEMS - len(PRS)


def _run(args, token=TOKEN):
    env = {"GITHUB_TOKEN": token or "", "GH_TOKEN": "", "GITHUB_API_URL": ""}
    return runner.invoke(fetch_app, [str(a) for a in args], env=env)


def test_github_command_fetches_then_refreshes_cheaply(gh, tmp_path):
    out = tmp_path / "triton.jsonl"
    args = ["github", "--repo", "triton-lang/triton", "-o", out, "--base-url", gh.base_url, "--per-page", "5"]
    r = _run(args)
    assert r.exit_code == 0, r.output
    assert f"triton-lang/triton: {N_ISSUES} issues, {len(PRS)} pull requests skipped" in r.stderr
    assert f"({N_ISSUES} new, 0 updated, 0 unchanged)" in r.stderr
    assert len(read_records(out)) == N_ISSUES
    assert (tmp_path / "triton.jsonl.etags.sqlite").exists()
    n = len(gh.log)
    r = _run(args + ["--quiet"])
    assert r.exit_code == 0, r.output
    assert f"{n} requests, {n} not modified (304)" in r.stderr
    assert f"(0 new, 0 updated, {N_ISSUES} unchanged)" in r.stderr
    assert TOKEN not in r.output
    r = _run(args + ["--no-cache", "-q"])
    assert r.exit_code == 0 and "0 not modified" in r.stderr


def test_github_command_errors_are_one_line(gh, tmp_path):
    out = tmp_path / "o.jsonl"
    r = _run(
        ["github", "--repo", "triton-lang/triton", "-o", out, "--base-url", gh.base_url], token="ghp_not_the_right_one"
    )
    assert r.exit_code == 2 and "error: GET" in r.stderr and "Bad credentials" in r.stderr
    assert "Traceback" not in r.output and "ghp_not_the_right_one" not in r.output and not out.exists()
    r = _run(["github", "--repo", "triton-lang/triton", "-o", out, "--base-url", gh.base_url, "--since", "yesterday"])
    assert r.exit_code == 2 and "not a date" in r.output
    gh.faults.append(Fault.primary(r"/issues\?", reset=2**31))
    r = _run(["github", "--repo", "triton-lang/triton", "-o", out, "--base-url", gh.base_url, "--max-wait", "5"])
    assert r.exit_code == 2 and "run again later" in r.stderr


def test_urls_command_with_gold_sheet(gh, tmp_path):
    sheet = tmp_path / "gold.csv"
    sheet.write_text(
        "url,symptom\n"
        "https://github.com/triton-lang/triton/issues/5,crash\n"
        "https://github.com/triton-lang/triton/issues/404404,hang\n"
        "https://github.com/triton-lang/triton/pull/8,crash\n"
    )
    out = tmp_path / "gold.jsonl"
    # The local API stands in for api.github.com: its issue URLs are on github.com, so say so.
    r = _run(
        ["urls", "-o", out, "--from", sheet, "triton-lang/triton#6", "--base-url", gh.base_url, "--host", "github.com"]
    )
    assert r.exit_code == 1  # one reference failed; the rest is written
    assert "failed: https://github.com/triton-lang/triton/issues/404404" in r.stderr
    assert "skipped pull request: https://github.com/triton-lang/triton/pull/8" in r.stderr
    recs = {x.id: x for x in read_records(out)}
    assert set(recs) == {"triton-5", "triton-6"} and recs["triton-5"].fields["symptom"] == "crash"
    r = _run(["urls", "-o", out, "--base-url", gh.base_url])
    assert r.exit_code == 2 and "give issue URLs" in r.output


def test_gh_json_and_csv_commands(tmp_path):
    export = tmp_path / "gh.json"
    export.write_text(
        json.dumps(
            [
                {
                    "number": 3,
                    "title": "Segfault in matmul",
                    "body": "",
                    "url": "https://github.com/triton-lang/triton/issues/3",
                    "createdAt": "2024-01-01T00:00:00Z",
                    "comments": [],
                    "state": "OPEN",
                    "labels": [],
                }
            ]
        )
    )
    out = tmp_path / "all.jsonl"
    from classify.cli.main import app  # mounted as `classify fetch ...`

    r = runner.invoke(app, ["fetch", "gh-json", str(export), "-o", str(out)])
    assert r.exit_code == 0, r.output
    sheet = tmp_path / "s.csv"
    sheet.write_text("Issue,Headline,Text\n7,Wrong result,fp16 output differs\n")
    r = _run(
        ["csv", sheet, "-o", out, "--map", "number=Issue,title=Headline", "-m", "body=Text", "--repo", "NVIDIA/cutlass"]
    )
    assert r.exit_code == 0, r.output
    assert "(1 new, 0 updated, 0 unchanged, 1 kept from the existing file)" in r.stderr
    assert [x.id for x in read_records(out)] == ["triton-3", "cutlass-7"]
    r = _run(["csv", sheet, "-o", out, "--map", "title"])
    assert r.exit_code == 2 and "FIELD=COLUMN" in r.output
    r = _run(["csv", sheet, "-o", out, "--map", "title=Nope"])
    assert r.exit_code == 2 and "mapped columns not found" in r.stderr


def test_github_command_keeps_earlier_repositories_when_a_later_one_fails(gh, tmp_path):
    other = gh.add_repo("NVIDIA/cutlass")
    other.add_issue(1, "CUTLASS build fails")
    out = tmp_path / "o.parquet"
    r = _run(["github", "-r", "NVIDIA/cutlass", "-r", "nobody/missing", "-o", out, "--base-url", gh.base_url])
    assert r.exit_code == 2 and "nobody/missing" in r.stderr and "404" in r.stderr
    assert [x.id for x in read_records(out)] == ["cutlass-1"]
    r = _run(
        [
            "github",
            "-r",
            "triton-lang/triton",
            "-r",
            "NVIDIA/cutlass",
            "-o",
            out,
            "--base-url",
            gh.base_url,
            "--overwrite",
            "-q",
        ]
    )
    assert r.exit_code == 0, r.output
    assert len(read_records(out)) == N_ISSUES + 1  # --overwrite replaces the file once, then merges


def test_gold_sheet_of_urls_and_labels_becomes_a_gold_set(gh, tmp_path):
    from classify.core.gold import load_gold
    from classify.core.paths import DEFAULT_GOLD
    from classify.core.records import read_rows
    from classify.core.taxonomy import load_taxonomy

    # Labels taken from the shipped gold set, so they are valid codes of the taxonomy.
    coded = [r for r in read_rows(DEFAULT_GOLD) if r["root_cause"]][:2] + [
        r for r in read_rows(DEFAULT_GOLD) if not r["root_cause"]
    ][:1]
    sheet = tmp_path / "sheet.csv"
    lines = ["URL,symptom,root_cause"] + [
        f"https://github.com/triton-lang/triton/issues/{n},{r['symptom']},{r['root_cause'] or ''}"
        for n, r in zip((1, 2, 3), coded)
    ]
    sheet.write_text("\n".join(lines) + "\n")
    out = tmp_path / "gold.jsonl"
    r = _run(
        ["urls", "--from", sheet, "--url-column", "URL", "-o", out, "--base-url", gh.base_url, "--host", "github.com"]
    )
    assert r.exit_code == 0, r.output
    gold = load_gold(out, load_taxonomy())
    assert gold.ids == ["triton-1", "triton-2", "triton-3"]
    assert gold.labels["symptom"] == [x["symptom"] for x in coded]
    assert gold.labels["root_cause"] == [x["root_cause"] for x in coded]  # empty cell = no label
    assert "comment 0 on issue 3" in gold.records[2].discussion
