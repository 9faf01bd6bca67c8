"""The corpus report does not overstate (issue 20, items 13-17; issue 21, items 17 and 19): screened
counts, like-for-like published comparisons, counts per library, a flag on weak models, plain words
and a Methods paragraph. Counted labels only (no gold profile): fast."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import ROOT, write_jsonl
from typer.testing import CliRunner

from classify.cli.main import app
from classify.report import quantify as qf
from classify.report.reference import compare_reference, load_reference
from classify.report.stats import SMALL_N, corpus_stats, gold_kappa


def _rows(n: int, lib: str, symptom: str, cause: str | None, **extra) -> list[dict]:
    return [
        {"id": f"{lib}-{i}", "repo": f"org/{lib}", "symptom": symptom, "root_cause": cause, **extra} for i in range(n)
    ]


def _report(tmp_path: Path, rows: list[dict], *args: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    labels = write_jsonl(tmp_path / "labels.jsonl", rows)
    out = tmp_path / "rep"
    r = CliRunner().invoke(app, ["report", str(labels), "--no-correct", "--out-dir", str(out), *args])
    return r, out


def test_main_job_screens_first():
    main = (ROOT / "scripts" / "main.sh").read_text()
    run = next(line for line in main.splitlines() if line.startswith("classify run "))
    assert "--screen" in run.split()


def test_unscreened_labels_say_so_in_the_header(tmp_path):
    r, out = _report(tmp_path, _rows(3, "triton", "crash", "compiler_defect"))
    assert r.exit_code == 0, r.output
    page = (out / "report.html").read_text()
    assert 'id="unscreened"' in page and "not screened" in page and "(0 screened out)" not in page
    assert "not screened" in r.output
    screened = _rows(3, "triton", "crash", "compiler_defect", screening="failure_report")
    screened += [{"id": "triton-9", "repo": "org/triton", "screening": "other", "symptom": None, "root_cause": None}]
    r, out = _report(tmp_path / "s", screened)
    page = (out / "report.html").read_text()
    assert r.exit_code == 0 and 'id="unscreened"' not in page and "1 screened out" in page


def test_rows_never_screened_in_a_screened_file_are_said(tmp_path):
    """A file joined from a screened and an unscreened run: the unscreened rows count as failure
    reports unchecked, and the header and terminal say how many."""
    rows = _rows(3, "triton", "crash", "compiler_defect", screening="failure_report")
    rows += [{"id": "triton-9", "repo": "org/triton", "screening": "other", "symptom": None, "root_cause": None}]
    rows += _rows(2, "xformers", "hang", None)  # from a run without --screen
    r, out = _report(tmp_path, rows)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "2 of 6 rows were never screened" in text and "2 never screened" in text
    page = (out / "report.html").read_text()
    assert "<b>2 never screened</b>" in page and "2 of 6 threads carry no screening decision" in page


def test_report_never_writes_over_the_labels_it_reads(tmp_path):
    labels = write_jsonl(tmp_path / "corpus.json", _rows(3, "triton", "crash", None))
    before = labels.read_bytes()
    r = CliRunner().invoke(app, ["report", str(labels), "--no-correct", "--out-dir", str(tmp_path)])
    assert r.exit_code == 2 and "--out-dir" in r.output and "one of the inputs" in " ".join(r.output.split())
    assert labels.read_bytes() == before and not (tmp_path / "report.html").exists()


def _routed(n_cause: int, n_none: int) -> list[dict]:
    rows = []
    for i in range(n_cause + n_none):
        none = i >= n_cause
        rows.append(
            {
                "id": f"triton-{i}",
                "repo": "org/triton",
                "symptom": "crash",
                "symptom_status": "auto",
                "root_cause": None if none else "compiler_defect",
                "root_cause_status": "none_shown" if none else "auto",
                "root_cause_suggestion": "none_shown" if none else "compiler_defect",
            }
        )
    return rows


def test_published_shares_of_all_reports_are_compared_over_all_reports(tmp_path, taxonomy):
    st = corpus_stats(_routed(10, 30), taxonomy)  # 10 of 40 reports show a cause, all compiler_defect
    rc = st["dimensions"]["root_cause_group"]
    assert rc["denominator"] == "shown" and rc["overall"]["n"] == 10
    assert rc["overall"]["shares"]["compiler_build"]["share"] == 1.0  # of the reports that show a cause
    assert rc["overall"]["of_all"]["compiler_build"]["share"] == pytest.approx(0.25)  # of all 40
    ref_file = tmp_path / "ref.yaml"
    shares = [{"dimension": "root_cause_group", "category": "compiler_build", "share": 0.27}]
    ref_file.write_text(yaml.safe_dump({"source": "study", "n": 300, "shares": shares}))
    row = compare_reference(st, load_reference(ref_file, taxonomy))[0]
    assert row["same_denominator"] and row["our_of"] == "all" and row["estimate"] == pytest.approx(0.25)
    assert row["difference"] == pytest.approx(-0.02) and row["difference_lo"] < -0.02 < row["difference_hi"]
    # 10 of 40 reports: the interval cannot tell a difference of 10 points from none, and says so
    assert row["verdict"] == "cannot tell: intervals too wide"
    # a share of the reports that show a cause is compared with ours over those reports
    ref_file.write_text(yaml.safe_dump({"source": "s", "of": "shown", "shares": shares}))
    row = compare_reference(st, load_reference(ref_file, taxonomy))[0]
    assert row["estimate"] == 1.0 and row["verdict"] == "ours higher"


def test_published_shares_of_all_reports_are_not_compared_with_ours_over_the_labeled_ones(tmp_path, taxonomy):
    """An unrouted run leaves a cause null where the model names none: those reports are not in our
    shares, so ours is over fewer reports than a study's share of all of them and reads high."""
    rows = _rows(10, "triton", "crash", "compiler_defect") + _rows(30, "xformers", "crash", None)
    st = corpus_stats(rows, taxonomy)
    assert st["dimensions"]["root_cause_group"]["overall"]["n_missing"] == 30
    ref_file = tmp_path / "ref.yaml"
    shares = [{"dimension": "root_cause_group", "category": "compiler_build", "share": 0.27}]
    ref_file.write_text(yaml.safe_dump({"source": "study", "n": 300, "shares": shares}))
    row = compare_reference(st, load_reference(ref_file, taxonomy))[0]
    assert row["estimate"] == 1.0  # 10 of the 10 labeled, though 10 of 40 reports
    assert not row["same_denominator"] and row["verdict"].startswith("not comparable")
    assert row["difference"] is None and row["difference_lo"] is None  # no difference of unlike shares
    r, out = _report(tmp_path / "r", rows, "--reference", str(ref_file))
    assert r.exit_code == 0, r.output
    assert "the reports with a label (30 without one left out)" in (out / "report.html").read_text()


def test_published_comparison_page_says_what_it_can_tell(tmp_path):
    ref = tmp_path / "ref.yaml"
    shares = [{"dimension": "symptom", "category": "crash", "share": 0.5}]
    ref.write_text(yaml.safe_dump({"source": "study", "n": 300, "taxonomy": "other@2", "shares": shares}))
    r, out = _report(
        tmp_path, _rows(4, "triton", "crash", None) + _rows(4, "xformers", "hang", None), "--reference", str(ref)
    )
    assert r.exit_code == 0, r.output
    page = (out / "report.html").read_text()
    assert "inside?" not in page and 'class="yes"' not in page
    assert "cannot tell: intervals too wide" in page and 'id="reference-summary"' in page
    # the taxonomy mismatch is in the terminal too, not only in the HTML
    assert "warning: the reference is for taxonomy other@2" in " ".join(r.output.split())


@pytest.mark.parametrize(
    "shares,msg",
    [
        (
            [{"dimension": "symptom", "category": "crash", "share": 0.2}] * 2,
            "symptom 'crash' is given twice for s",
        ),
        (
            [
                {"dimension": "symptom", "category": "crash", "share": 0.95},
                {"dimension": "symptom", "category": "hang", "share": 1.0},
            ],
            "symptom shares of s sum to 1.95",
        ),
        ([{"dimension": "symptom", "category": "crash", "share": 0.2, "of": "most"}], "of must be one of"),
    ],
)
def test_reference_that_cannot_be_right_is_refused(tmp_path, taxonomy, shares, msg):
    ref = tmp_path / "ref.yaml"
    ref.write_text(yaml.safe_dump({"source": "s", "shares": shares}))
    r, out = _report(tmp_path, _rows(2, "triton", "crash", None), "--reference", str(ref))
    assert r.exit_code == 2 and msg in " ".join(r.output.split()) and "Traceback" not in r.output


def test_small_libraries_get_counts_only(tmp_path, taxonomy):
    rows = _rows(SMALL_N, "triton", "crash", None) + _rows(3, "DeepGEMM", "performance_degradation", None)
    rows += _rows(3, "DeepGEMM-x", "crash", None)
    st = corpus_stats(rows, taxonomy)
    libs = st["dimensions"]["symptom"]["by_library"]
    assert "counts_only" not in libs["triton"] and libs["DeepGEMM"]["counts_only"] is True
    r, out = _report(tmp_path, rows)
    page = (out / "report.html").read_text()
    table = page[page.index('class="bylib"') : page.index("</table>", page.index('class="bylib"'))]
    assert "n = 3" in table and re.search(r"<td class=\"num\">3 <span class=\"ci\">\(100%\)", table)


def test_weak_model_is_flagged_in_the_header(tmp_path, taxonomy):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    chance = qf.Behaviour(["a", "b", "c"], rng.dirichlet(np.ones(3), 300), y, np.arange(300) % 5)
    good = qf.Behaviour(["a", "b", "c"], np.eye(3)[y] * 0.8 + 0.2 / 3, y, np.arange(300) % 5)
    assert abs(gold_kappa(chance)) < 0.1 and gold_kappa(good) == pytest.approx(1.0)
    from classify.report import html

    st = corpus_stats(_rows(3, "triton", "crash", None), taxonomy)
    page = html.render(st | {"weak_model": {"symptom": 0.03}}, taxonomy, [], tmp_path, {}, [])
    assert 'id="weak-model"' in page and "κ = 0.03" in page
    assert 'id="weak-model"' not in html.render(st, taxonomy, [], tmp_path, {}, [])


def test_counts_of_a_weak_model_are_flagged_from_its_eval_run(tmp_path, taxonomy):
    """--no-correct counts the model's labels as they are: when its eval run on this gold shows kappa
    near 0, the header and terminal say so as they do for a corrected report."""
    import json

    from classify.report import write_corpus_report

    run = tmp_path / "evals" / "run1"
    run.mkdir(parents=True)
    meta = {"model": "m", "gold_hash": "g1", "mode": "cv", "created_at": "2026-01-01T00:00:00+00:00"}
    dims = {"symptom": {"kappa": {"kappa": 0.04}}, "root_cause": {"kappa": {"kappa": 0.6}}}
    (run / "metrics.json").write_text(json.dumps({"meta": meta, "dimensions": dims}))
    (run / "report.md").write_text("done\n")
    rows = _rows(6, "triton", "crash", "compiler_defect", model="m", gold_hash="g1")
    labels = write_jsonl(tmp_path / "labels.jsonl", rows)
    st = write_corpus_report(labels, taxonomy, tmp_path / "rep", correct=False, eval_dirs=[tmp_path / "evals"])
    assert st["weak_model"] == {"symptom": pytest.approx(0.04)}
    page = (tmp_path / "rep" / "report.html").read_text()
    assert 'id="weak-model"' in page and "The labels counted here come from" in page


def test_methods_paragraph_says_what_the_model_is_and_what_was_never_screened(taxonomy):
    from classify.report.methods import methods_text

    rows = _rows(3, "triton", "crash", None, screening="failure_report") + _rows(2, "xformers", "hang", None)
    st = corpus_stats(rows, taxonomy)
    assert "trained on the gold" in methods_text(st | {"model": "embed-logreg"})
    text = methods_text(st | {"model": "openai:gpt-4o-mini"})
    assert (
        "prompted language model, not trained on the gold" in text and "trained on the gold reports coded" not in text
    )
    assert "2 were never screened and count as failure reports" in text


def test_page_speaks_plain_words_and_has_a_methods_paragraph(tmp_path):
    rows = _routed(5, 2)
    rows[0]["symptom_status"], rows[0]["symptom"], rows[0]["symptom_suggestion"] = "review", None, "crash"
    r, out = _report(tmp_path, rows)
    assert r.exit_code == 0, r.output
    page = (out / "report.html").read_text()
    text = re.sub(r'title="[^"]*"', "", page)  # technical names may stand in tooltips only
    text = re.sub(r"<style>.*?</style>|data:image/png;base64,[^\"]*", "", text, flags=re.S)
    for jargon in ("EMQ", "PCC", "TV pts", "total variation", "QuaPy Dirichlet", "unreviewed suggestions count"):
        assert jargon not in text, jargon
    methods = page[page.index('id="methods"') :]
    para = methods[methods.index('<p class="methods">') : methods.index("</p>", methods.index('<p class="methods">'))]
    assert "Wilson" in para and "95%" in para and "assume" in para and "not screened" in para
    assert "suggestion" in para  # the reports that await review count with the model's suggestion


def test_report_refuses_a_duplicated_id_and_labels_outside_the_codebook(tmp_path):
    rows = _rows(2, "triton", "crash", None)
    r, out = _report(tmp_path, rows + [dict(rows[0])])
    assert r.exit_code == 2 and "duplicate ids" in r.output and "triton-0" in r.output and not out.exists()
    r, out = _report(tmp_path, rows + [{"id": "x-1", "symptom": "exploded"}])
    assert r.exit_code == 2 and "unknown symptom label 'exploded'" in " ".join(r.output.split())


def test_verdict_needs_the_whole_interval_within_ten_points(tmp_path, taxonomy):
    rows = _rows(500, "triton", "crash", None) + _rows(500, "xformers", "hang", None)
    st = corpus_stats(rows, taxonomy)
    ref_file = tmp_path / "ref.yaml"
    verdicts = {}
    for share in (0.5, 0.42, 0.38):
        shares = [{"dimension": "symptom", "category": "crash", "share": share}]
        ref_file.write_text(yaml.safe_dump({"source": "s", "n": 300, "shares": shares}))
        row = compare_reference(st, load_reference(ref_file, taxonomy))[0]
        verdicts[share] = row["verdict"]
        assert row["difference_lo"] < row["difference"] < row["difference_hi"]
    assert verdicts == {0.5: "no difference beyond 10 points", 0.42: "ours higher", 0.38: "ours higher"}
    # a difference of -11.6 points whose interval reaches 0 is not "no difference"
    from classify.report.reference import _verdict

    assert _verdict(-0.116, -0.191, 0.005, True) == "cannot tell: intervals too wide"


@pytest.mark.parametrize(
    ("text", "msg"),
    [
        ("source: s\nsource: t\nshares: []\n", "key 'source' repeats"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
            "source: s\nshares:\n  - {dimension: *f, category: crash, share: 0.2}\n",
            "expands to more than",
        ),
    ],
)
def test_reference_yaml_is_read_with_the_codebooks_checks(tmp_path, text, msg):
    # a repeated key must not replace the first silently; an alias bomb must not expand for seconds
    ref = tmp_path / "ref.yaml"
    ref.write_text(text)
    r, _ = _report(tmp_path, _rows(2, "triton", "crash", None), "--reference", str(ref))
    assert r.exit_code == 2 and "Traceback" not in r.output and str(ref.name) in r.output, r.output
    assert msg in " ".join(r.output.split())
