import json

import pytest
from conftest import ROOT, write_jsonl
from typer.testing import CliRunner

from classify.cli.main import app
from classify.labeling.corpus import corpus_stats, share_ci


def test_wilson_interval():
    s = share_ci(82, 300)  # the study's 27.33% deployment failures
    assert s["share"] == pytest.approx(0.2733, abs=1e-4)
    assert s["lo"] == pytest.approx(0.2262, abs=2e-3) and s["hi"] == pytest.approx(0.3262, abs=2e-3)
    z = share_ci(0, 50)
    assert z["lo"] == 0 and 0 < z["hi"] < 0.1


def test_stats_per_library_groups_and_screening(taxonomy):
    rows = (
        [
            {"id": f"triton-{i}", "repo": "triton-lang/triton", "symptom": "crash", "root_cause": "compiler_defect"}
            for i in range(3)
        ]
        + [
            {
                "id": f"cutlass-{i}",
                "repo": "NVIDIA/cutlass",
                "symptom": "build_failure",
                "root_cause": "build_configuration",
            }
            for i in range(2)
        ]
        + [{"id": "cutlass-9", "repo": "NVIDIA/cutlass", "screening": "other", "symptom": None, "root_cause": None}]
        + [{"id": "xformers-1", "symptom": "hang", "root_cause": None}]
    )
    st = corpus_stats(rows, taxonomy)
    assert st["n_failure_reports"] == 6 and st["n_screened_out"] == 1
    assert st["libraries"] == {"cutlass": 2, "triton": 3, "xformers": 1}
    sym = st["dimensions"]["symptom"]["overall"]
    assert sym["n"] == 6 and sym["shares"]["crash"]["k"] == 3
    rc = st["dimensions"]["root_cause"]
    assert rc["overall"]["n"] == 5 and rc["overall"]["n_missing"] == 1
    assert st["dimensions"]["root_cause_group"]["overall"]["shares"]["compiler_build"]["k"] == 5
    assert st["dimensions"]["symptom"]["by_library"]["triton"]["shares"]["crash"]["share"] == 1.0
    ct = st["crosstab"]
    assert ct["matrix"][ct["row_labels"].index("crash")][ct["col_labels"].index("compiler_defect")] == 3


def test_report_command_escapes_issue_text(tmp_path):
    evil = "<script>alert(1)</script>"
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [
            {"id": "triton-1", "repo": "triton-lang/triton", "symptom": "crash", "root_cause": "compiler_defect"},
            {"id": "triton-2", "repo": "triton-lang/triton", "symptom": "hang", "root_cause": "synchronization"},
        ],
    )
    inp = write_jsonl(
        tmp_path / "in.jsonl",
        [{"id": "triton-1", "title": evil, "body": "b"}, {"id": "triton-2", "title": "ok", "body": "b"}],
    )
    r = CliRunner().invoke(app, ["report", str(labels), "--input", str(inp), "--out-dir", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "rep" / "report.html").read_text()
    assert evil not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "data:image/png;base64," in page  # self-contained
    doc = json.loads((tmp_path / "rep" / "corpus.json").read_text())
    assert doc["dimensions"]["symptom"]["overall"]["shares"]["hang"]["k"] == 1


# --- corrected shares, end to end: `classify run` then `classify report` -------------------------

REFERENCE = ROOT / "references" / "seed-study.yaml"


@pytest.fixture(scope="module")
def labeled(tmp_path_factory, shared_cache):
    """40 real unlabeled threads screened and labeled by tfidf-logreg; one row marked coded by a person."""
    d = tmp_path_factory.mktemp("corpus")
    rows = [json.loads(line) for line in (ROOT / "data" / "issues.jsonl").read_text(encoding="utf-8").splitlines()]
    inp = write_jsonl(d / "in.jsonl", rows[:40])
    out = d / "labels.jsonl"
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--model",
            "tfidf-logreg",
            "--screen",
            "--screen-model",
            "tfidf-logreg",
            "-i",
            str(inp),
            "-o",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    return d, inp, out


def _report(d, inp, labels, *extra):
    rep = d / ("rep" + "-".join(extra).replace("/", "_"))
    r = CliRunner().invoke(
        app, ["report", str(labels), "-i", str(inp), "--out-dir", str(rep), "--bootstrap", "200", *extra]
    )
    return r, rep


def test_report_corrects_shares_and_compares_with_the_study(labeled):
    d, inp, labels = labeled
    r, rep = _report(d, inp, labels, "--reference", str(REFERENCE))
    assert r.exit_code == 0, r.output
    doc = json.loads((rep / "corpus.json").read_text())
    assert doc["corrected"] is True
    for name in ("symptom", "root_cause", "root_cause_group"):
        dim = doc["dimensions"][name]
        c = dim["correction"]
        assert c["method"] in ("CC", "PCC", "ACC", "PACC", "EMQ") and c["error"] <= c["naive_error"]
        shares = dim["overall"]["shares"]
        assert sum(s["estimate"] for s in shares.values()) == pytest.approx(1.0, abs=1e-6)
        assert sum(s["naive"] for s in shares.values()) == pytest.approx(1.0, abs=1e-6)
        for s in shares.values():
            assert s["lo"] <= s["estimate"] + 1e-9 and s["estimate"] <= s["hi"] + 1e-9
        for lib in dim["by_library"].values():
            assert "warning" in lib  # 40 threads: every library is a small sample
    # no cause-shown decision in these labels: said plainly
    assert "all failure reports" in doc["dimensions"]["root_cause"]["scope"]
    assert any("as if each showed a cause" in c for c in doc["caveats"])
    ref = doc["reference"]["rows"]
    assert [(x["dimension"], x["category"]) for x in ref] == [
        ("symptom", "deployment_failure"),
        ("symptom", "build_failure"),
        ("symptom", "incorrect_functionality"),
        ("root_cause_group", "compiler_build"),
        ("root_cause_group", "runtime_environment"),
    ]
    assert ref[0]["share"] == pytest.approx(0.2733)
    assert all(isinstance(x["inside"], bool) for x in ref)
    assert "27.33%" in r.output and "published shares" in r.output


def test_human_coded_rows_are_counted_as_coded(labeled, tmp_path):
    d, inp, labels = labeled
    rows = [json.loads(x) for x in labels.read_text().splitlines()]
    fr = [r for r in rows if r.get("screening") == "failure_report"]
    for r in fr[:5]:  # five reports a person coded "hang" (no model would say so for these)
        r["symptom"], r["symptom_status"] = "hang", "human"
    lab2 = write_jsonl(tmp_path / "labels.jsonl", rows)
    r, rep = _report(tmp_path, inp, lab2)
    assert r.exit_code == 0, r.output
    ov = json.loads((rep / "corpus.json").read_text())["dimensions"]["symptom"]["overall"]
    assert ov["n_human"] == 5
    # at least the five coded reports, whatever the correction does with the rest
    assert ov["shares"]["hang"]["estimate"] >= 5 / ov["n"] - 1e-9
    assert ov["shares"]["hang"]["k"] >= 5


def test_labels_from_another_gold_are_counted_with_a_warning(labeled, tmp_path):
    d, inp, labels = labeled
    rows = [json.loads(x) | {"gold_hash": "000000000000"} for x in labels.read_text().splitlines()]
    lab2 = write_jsonl(tmp_path / "labels.jsonl", rows)
    r, rep = _report(tmp_path, inp, lab2)
    assert r.exit_code == 0, r.output
    assert "warning:" in r.output and "000000000000" in r.output
    doc = json.loads((rep / "corpus.json").read_text())
    assert doc["corrected"] is False and doc["dimensions"]["symptom"]["correction"]["method"] == "none"


@pytest.mark.parametrize(
    "entry,msg",
    [
        ({"dimension": "symptom", "category": "crash", "share": 27.33}, "looks like a percentage"),
        ({"dimension": "symptom", "category": "crashes", "share": 0.2}, "unknown symptom category 'crashes'"),
        ({"dimension": "cause", "category": "crash", "share": 0.2}, "unknown dimension 'cause'"),
        ({"dimension": "symptom", "category": "crash", "share": 0.2, "shar": 1}, "unknown key"),
    ],
)
def test_bad_reference_is_a_one_line_error_before_any_work(tmp_path, entry, msg):
    import yaml

    ref = tmp_path / "ref.yaml"
    ref.write_text(yaml.safe_dump({"source": "x", "shares": [entry]}))
    labels = write_jsonl(tmp_path / "labels.jsonl", [{"id": "triton-1", "symptom": "crash", "root_cause": None}])
    r = CliRunner().invoke(app, ["report", str(labels), "--reference", str(ref), "--out-dir", str(tmp_path / "o")])
    assert r.exit_code == 2 and "error:" in r.output and msg in r.output
    assert "Traceback" not in r.output and not (tmp_path / "o").exists()
