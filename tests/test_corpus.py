import json
import re

import pytest
from conftest import ROOT, write_jsonl
from typer.testing import CliRunner

from classify.cli.main import app
from classify.report.html import category_names
from classify.report.stats import corpus_stats, share_ci


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
        # a category gold never holds is not estimated (null); the model never predicts it either
        known = [s for s in shares.values() if s["estimate"] is not None]
        assert sum(s["estimate"] for s in known) == pytest.approx(1.0, abs=1e-6)
        assert sum(s["naive"] for s in shares.values()) == pytest.approx(1.0, abs=1e-6)
        for s in known:
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
    # like with like: the study's root-cause groups are shares of all its reports; these labels force a
    # cause on every report, so the two are said not to be comparable rather than compared
    assert [x["same_denominator"] for x in ref] == [True, True, True, False, False]
    assert [x["verdict"] for x in ref[3:]] == ["not comparable: different denominators"] * 2
    for x in ref[:3]:  # the difference with its interval (ours and the study's n=300 sampling error)
        assert x["difference_lo"] < x["difference"] < x["difference_hi"]
        assert x["difference_hi"] - x["difference_lo"] > x["hi"] - x["lo"]
        assert x["verdict"] in (
            "ours higher",
            "ours lower",
            "cannot tell: intervals too wide",
            "no difference beyond 10 points",
        )
        if x["verdict"].startswith("no difference"):
            assert -0.1 <= x["difference_lo"] and x["difference_hi"] <= 0.1
    assert "inside" not in ref[0] and doc["reference"]["summary"].endswith(".")
    assert "27.33%" in r.output and "published shares" in r.output and "what it tells" in r.output
    # plain words on the page; technical names only in tooltips and in the Methods paragraph
    page = (rep / "report.html").read_text()
    methods = re.search(r'<p class="methods">(.*?)</p>', page, re.S).group(1)
    assert "bootstrap" in methods and "assume" in methods and "shifted away from gold" in methods
    text = re.sub(
        r'title="[^"]*"|<style>.*?</style>|data:image/png;base64,[^"]*', "", page.replace(methods, ""), flags=re.S
    )
    for jargon in ("EMQ", "PCC", "PACC", "total variation", "QuaPy", "TV"):
        assert jargon not in text, jargon
    assert "percentage points" in text and "TV pts" not in r.output


def test_method_chosen_by_the_user_is_applied_and_said(labeled):
    d, inp, labels = labeled
    r, rep = _report(d, inp, labels, "--method", "acc")
    assert r.exit_code == 0, r.output
    doc = json.loads((rep / "corpus.json").read_text())
    for name in ("symptom", "root_cause"):
        c = doc["dimensions"][name]["correction"]
        assert c["method"] == "ACC" and c["chosen_by"] == "user"
        assert c["error"] == pytest.approx(c["errors"]["ACC"])
        warned = any(x.startswith(f"{name}: ACC (--method) erred more") for x in doc["caveats"])
        assert warned == (c["error"] > c["naive_error"])
    assert "(ACC, --method)" in r.output
    # a forced method that erred more than counting on shifted gold is said so (and only then)
    r2, rep2 = _report(d, inp, labels, "--method", "EMQ")
    assert r2.exit_code == 0, r2.output
    doc2 = json.loads((rep2 / "corpus.json").read_text())
    for name in ("symptom", "root_cause"):
        c = doc2["dimensions"][name]["correction"]
        warned = any(x.startswith(f"{name}: EMQ (--method) erred more than counting") for x in doc2["caveats"])
        assert warned == (c["error"] > c["naive_error"])
    assert "as the user asked (--method)" in (rep / "report.html").read_text()
    for bad, msg in ((["--method", "XYZ"], "unknown --method"), (["--method", "PCC", "--no-correct"], "--no-correct")):
        r, rep = _report(d, inp, labels, *bad)
        assert r.exit_code != 0 and msg in r.output and "Traceback" not in r.output
        assert not (rep / "corpus.json").exists()


def test_method_without_a_gold_profile_is_refused_not_ignored(tmp_path):
    # labels that carry no model (or no run_options, or another gold's hash) can only be counted:
    # a method the user fixed would silently not be applied
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [{"id": "triton-1", "repo": "triton-lang/triton", "symptom": "crash", "root_cause": "compiler_defect"}],
    )
    rep = tmp_path / "rep"
    r = CliRunner().invoke(app, ["report", str(labels), "--method", "pacc", "--out-dir", str(rep)])
    out = " ".join(r.output.split())
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "--method PACC cannot be applied: the labels carry no `model`" in out
    assert not (rep / "corpus.json").exists()
    r = CliRunner().invoke(app, ["report", str(labels), "--out-dir", str(rep)])
    assert r.exit_code == 0, r.output  # without --method: counts, with the warning


def test_human_coded_rows_are_counted_as_coded(labeled, tmp_path):
    d, inp, labels = labeled
    rows = [json.loads(x) for x in labels.read_text().splitlines()]
    fr = [r for r in rows if r.get("screening") == "failure_report"]
    for r in fr[:5]:  # five reports a person coded "hang" (no model would say so for these)
        r["symptom"], r["symptom_status"] = "hang", "coded"
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


# --- reviewer's defects (group error, routing, absent categories, figures, default folder) ------


def test_group_error_is_measured_on_groups(labeled):
    d, inp, labels = labeled
    r, rep = _report(d, inp, labels)
    assert r.exit_code == 0, r.output
    dims = json.loads((rep / "corpus.json").read_text())["dimensions"]
    cat, grp = dims["root_cause"]["correction"], dims["root_cause_group"]["correction"]
    assert grp["measured_on"] == "groups" and cat["measured_on"] == "categories"
    # moving a report between two causes of one group is no error on groups: a different figure
    assert (grp["error"], grp["naive_error"]) != (cat["error"], cat["naive_error"])
    assert grp["error"] <= grp["naive_error"] + 0.02


def test_category_absent_from_gold_is_not_estimated(labeled):
    d, inp, labels = labeled
    r, rep = _report(d, inp, labels)
    assert r.exit_code == 0, r.output
    rc = json.loads((rep / "corpus.json").read_text())["dimensions"]["root_cause"]
    s = rc["overall"]["shares"]["upstream_dependency_defect"]  # no gold item has it
    assert s["estimate"] is None and s["lo"] is None and s["hi"] is None
    assert "no gold examples" in s["note"]
    assert all(lib["shares"]["upstream_dependency_defect"]["estimate"] is None for lib in rc["by_library"].values())
    page = (rep / "report.html").read_text()
    assert "no gold examples: cannot be estimated" in page
    assert "0.0% – 0.0%" not in page


def _routed_rows():
    rows = []
    for i in range(12):
        st = ["auto", "auto", "review", "coded"][i % 4]
        rows.append(
            {
                "id": f"triton-{i}",
                "repo": "triton-lang/triton",
                "symptom": None if st == "review" else "crash",
                "symptom_status": st,
                "symptom_suggestion": "hang" if st == "review" else "crash",
                "symptom_confidence": 0.5 if st == "review" else 0.95,
                "root_cause": None,
                "root_cause_status": "none_shown" if i % 3 == 0 else "review",
                "root_cause_suggestion": "none_shown" if i % 3 == 0 else "compiler_defect",
                "root_cause_confidence": 0.4,
                "model": "tfidf-logreg",
            }
        )
    rows.append(rows[0] | {"id": "DeepGEMM-1", "repo": "deepseek-ai/DeepGEMM"})
    return rows


def test_routed_labels_say_what_is_auto_review_and_coded(tmp_path, taxonomy):
    rows = _routed_rows()
    st = corpus_stats(rows, taxonomy)
    sym = st["dimensions"]["symptom"]
    assert sym["status"] == {"auto": 7, "review": 3, "coded": 3, "none_shown": 0, "unrouted": 0}
    rc = st["dimensions"]["root_cause"]
    assert rc["status"] == {"auto": 0, "review": 8, "coded": 0, "none_shown": 5, "unrouted": 0}
    assert st["dimensions"]["root_cause_group"]["status"] == rc["status"]
    # review rows count with their suggestion (as the corrected path does with their probabilities)
    assert sym["overall"]["shares"]["hang"]["k"] == 3 and rc["overall"]["shares"]["compiler_defect"]["k"] == 8
    assert any("not yet checked by a person" in c and "root_cause" in c for c in st["caveats"])
    assert sym["by_library"]["DeepGEMM"]["counts_only"] is True and sym["by_library"]["DeepGEMM"]["n"] == 1
    labels = write_jsonl(tmp_path / "r.jsonl", rows)
    r = CliRunner().invoke(app, ["report", str(labels), "--no-correct", "--out-dir", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "3 await review" in page and "8 await review" in page
    assert "which no person has checked yet" in page and "unreviewed suggestions" not in page
    # root causes: all suggestions, shown as such; no empty examples block
    assert "suggestion, awaiting review" in page
    assert 'class="bylib"' in page and "n = 1" in page


def test_report_without_examples_has_no_empty_heading(tmp_path):
    labels = write_jsonl(tmp_path / "l.jsonl", [{"id": "triton-1", "symptom": "crash", "root_cause": None}])
    r = CliRunner().invoke(app, ["report", str(labels), "--out-dir", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "rep" / "report.html").read_text()
    assert page.count("Examples per category") == 1  # symptom only


def test_figures_cover_counts_and_intervals_and_titles_fit(tmp_path, taxonomy):
    from classify.report import html as report_html

    rows = [
        {"id": f"triton-{i}", "symptom": "crash" if i < 13 else "hang", "root_cause": "software_incompatibility"}
        for i in range(24)
    ]
    st = corpus_stats(rows, taxonomy)
    d = st["dimensions"]["root_cause"]
    d["scope"] = "reports that show a cause (the model's cause-shown decision composed with its cause)"
    sh = d["overall"]["shares"]["software_incompatibility"]
    sh.update(naive=0.542, estimate=0.24, lo=0.02, hi=0.38)  # the count far right of the interval
    st["corrected"] = True
    d["correction"] = {"method": "PCC"}
    import matplotlib

    # QuaPy's plot module sets font.size 18 globally on import (it is imported with its methods)
    with matplotlib.rc_context({"font.size": 18}):
        fig, ax = report_html.figure("root_cause", d, category_names(taxonomy), True)
    assert ax.get_xlim()[1] >= 54.2
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    box = fig.bbox
    t = ax._left_title.get_window_extent(r)
    assert t.x0 >= box.x0 - 1 and t.x1 <= box.x1 + 1 and t.y1 <= box.y1 + 1, (t, box)
    assert "n=24" in ax.get_title(loc="left")
    fig.savefig(tmp_path / "f.png", dpi=120)  # look at it: wrapped, nothing cut


def test_default_out_dir_matches_help(tmp_path):
    labels = write_jsonl(tmp_path / "plain.jsonl", [{"id": "triton-1", "symptom": "crash", "root_cause": None}])
    r = CliRunner().invoke(app, ["report", str(labels)])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "plain.report" / "report.html").exists()
    h = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "200"})
    assert "<labels>.report/" not in h.output
    assert "labels.jsonl -> labels.report/" in " ".join(h.output.split())
