import json

import pytest
from conftest import write_jsonl
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
