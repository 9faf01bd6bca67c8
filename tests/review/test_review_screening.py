"""The review loop on the screening gold (`failure_report: true/false`): build, review, apply, eval again.

A real screening eval run (tfidf-logreg, 2 folds, on a subset of gold/screening.jsonl in tmp), the
real CLI, and the adjudication notes; the new gold version must keep the screening file's encoding.
"""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest
from review_helpers import read_jsonl, tree_state, unlabeled_subset
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.goldfile import load_gold_for
from classify.core.paths import DEFAULT_SCREENING, PROJECT_ROOT
from classify.core.screening import SCREENING_TAXONOMY, file_row, load_screening_gold, screening_taxonomy
from classify.core.taxonomy import load_taxonomy
from classify.review.apply import ApplyError, plan_apply
from classify.review.queue import build_queue, note_dimensions
from classify.review.schema import AddCategory, Decision, NewCategory, load_queue

runner = CliRunner()
NOTES = PROJECT_ROOT / "gold" / "adjudication.jsonl"
FLIP = "cutlass-980"  # gold true; its CODEBOOK note is about failure_report only ("Add to failure_report: ...")
# screening threads whose notes must not make screening items: a root_cause rule, and notes that
# only say "other" in prose ("some other configuration")
NOT_SCREENING_NOTES = ("bitsandbytes-1002", "flash-attention-830", "triton-5950")


def _cli(*args, input=None, code=0):
    res = runner.invoke(app, [str(a) for a in args], input=input)
    out = " ".join(res.output.split())
    assert res.exit_code == code, out
    return out


@pytest.fixture(scope="module")
def screening_run(tmp_path_factory):
    """A third of the screening gold (plus the threads the note tests need) and a real eval run on it."""
    tmp = tmp_path_factory.mktemp("screening")
    (tmp / "gold").mkdir()
    (tmp / "codebook").mkdir()
    lines = DEFAULT_SCREENING.read_text(encoding="utf-8").splitlines()
    keep = [ln for i, ln in enumerate(lines) if i % 3 == 0 or json.loads(ln)["id"] in (FLIP, *NOT_SCREENING_NOTES)]
    gp = tmp / "gold" / "screening.jsonl"
    gp.write_text("\n".join(keep) + "\n", encoding="utf-8")
    tp = tmp / "codebook" / "screening-v1.yaml"
    shutil.copy(SCREENING_TAXONOMY, tp)
    evals = tmp / "evals"
    _cli(
        "eval",
        "--task",
        "screening",
        "-m",
        "tfidf-logreg",
        "-g",
        gp,
        "-t",
        tp,
        "--folds",
        "2",
        "--n-boot",
        "100",
        "--out-dir",
        evals,
    )
    (run,) = list(evals.iterdir())
    return {"tmp": tmp, "gold": gp, "tax": tp, "run": run, "evals": evals}


def test_screening_review_loop_keeps_the_file_encoding(screening_run):
    s = screening_run
    gp, tp, run, tmp = s["gold"], s["tax"], s["run"], s["tmp"]
    qp = tmp / "review" / "queue.json"
    _cli("review", "build", "--task", "screening", "-g", gp, "-t", tp, "-e", run, "--notes", NOTES, "-o", qp)
    q = load_queue(qp)
    assert q.meta.taxonomy == "screening@1" and {it.dimension for it in q.items} == {"screening"}
    preds = read_jsonl(run / "predictions.jsonl")
    wrong = {r["id"] for r in preds if r["screening"] != r["gold_screening"]}
    assert wrong and wrong <= {it.id for it in q.items}
    by = q.index()
    flip = by[(FLIP, "screening")]
    assert flip.gold == "failure_report" and flip.coders == {"a": "failure_report", "b": "other"}
    assert any(r.kind == "codebook_note" and r.detail.startswith("Add to failure_report") for r in flip.reasons)
    # screening gold has no notes of its own: the item shows the --notes file's adjudication note
    assert "CODEBOOK: Add to failure_report" in flip.adjudication_note
    for rid in NOT_SCREENING_NOTES:
        it = by.get((rid, "screening"))
        assert it is None or all(r.kind != "codebook_note" for r in it.reasons), rid

    # session: keep the top item's gold label and add a cue to its category; the sheet flips FLIP
    top = q.items[0]
    assert top.id != FLIP  # a notes-only item scores 0.3, below any confident model disagreement
    cue = "a notice that an optional dependency is missing, with nothing failing"
    _cli("review", "-q", qp, "-r", "lead", input="\n".join(["k", "coders agree", "i", top.gold, cue, "", "q"]) + "\n")
    sheet = tmp / "review" / "queue.csv"
    _cli("review", "export", "-q", qp, "-o", sheet)
    rows = list(csv.DictReader(io.StringIO(sheet.read_text(encoding="utf-8-sig"))))
    for r in rows:
        if r["id"] == FLIP:
            r.update(action="set", label="other", note="a feature request; the errors are the fix's motivation")
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    sheet.write_text(buf.getvalue(), encoding="utf-8")
    _cli("review", "import", sheet, "-q", qp, "-r", "dana")
    assert "2 decided (keep 1, set 1), 1 with a taxonomy proposal" in _cli("review", "status", "-q", qp)

    before = tree_state(gp, tp)
    out = _cli("review", "apply", "-q", qp)
    assert tree_state(gp, tp) == before  # version 1 untouched
    g2, t2 = gp.with_name("screening.v2.jsonl"), tp.with_name("screening-v2.yaml")
    assert f"classify eval --task screening -g {g2} -t {t2}" in out

    # the same encoding: failure_report booleans, bare-boolean coder passes, no `screening` field
    old_lines = gp.read_text(encoding="utf-8").splitlines()
    new_lines = g2.read_text(encoding="utf-8").splitlines()
    assert len(new_lines) == len(old_lines)
    new = {json.loads(ln)["id"]: json.loads(ln) for ln in new_lines}
    assert all("screening" not in r and isinstance(r["failure_report"], bool) for r in new.values())
    f = new[FLIP]
    assert f["failure_report"] is False and (f["coder_a"], f["coder_b"]) == (True, False)
    assert f["review_history"] == [
        {
            "dimension": "screening",
            "old": "failure_report",
            "new": "other",
            "action": "set",
            "reason": "label set in review; queued for: codebook_note",
            "reviewer": "dana",
            "date": f["review_history"][0]["date"],
            "taxonomy": "screening@2",
            "note": "a feature request; the errors are the fix's motivation",
        }
    ]
    k = new[top.id]
    assert k["failure_report"] is (top.gold == "failure_report")
    assert [(h["action"], h["old"], h["new"], h["reviewer"]) for h in k["review_history"]] == [
        ("keep", top.gold, top.gold, "lead")
    ]
    # every row no decision touched keeps its line byte for byte
    for old_ln, new_ln in zip(old_lines, new_lines):
        if json.loads(old_ln)["id"] not in (FLIP, top.id):
            assert new_ln == old_ln
    # the flipped row differs from its old one in failure_report and the history only
    old_f = next(json.loads(ln) for ln in old_lines if json.loads(ln)["id"] == FLIP)
    assert {key: v for key, v in f.items() if key not in ("failure_report", "review_history")} == {
        key: v for key, v in old_f.items() if key != "failure_report"
    }

    tax2 = screening_taxonomy(t2)
    assert tax2.version == "2" and cue in tax2.dimensions["screening"].category(top.gold).include
    entry = next(c for c in tax2.changelog if c["change"] == "add_cue")
    assert entry["items"] == [f"{top.id}/screening"] and entry["reviewers"] == ["lead"]
    gold2 = load_screening_gold(g2, tax2)
    gold1 = load_screening_gold(gp, screening_taxonomy(tp))
    changed = [i for i, (a, b) in enumerate(zip(gold1.labels["screening"], gold2.labels["screening"])) if a != b]
    assert [gold2.ids[i] for i in changed] == [FLIP]
    assert _cli("gold", "validate", "-g", g2, "-t", t2) == f"ok: {len(gold2)} records valid against screening@2"

    _cli(
        "eval",
        "--task",
        "screening",
        "-m",
        "tfidf-logreg",
        "-g",
        g2,
        "-t",
        t2,
        "--folds",
        "2",
        "--n-boot",
        "100",
        "--out-dir",
        s["evals"],
        "--compare",
        run,
    )
    (run2,) = [p for p in s["evals"].iterdir() if p != run]
    comp = json.loads((run2 / "metrics.json").read_text())["comparison"]
    assert comp["gold_labels_changed"] == {"screening": 1}
    assert comp["folds"] == f"folds of the earlier run reused ({len(gold2)} records)"


def test_screening_eval_run_is_refused_for_other_gold(screening_run, tmp_path):
    run, qp = screening_run["run"], tmp_path / "q.json"
    # against the reports gold and taxonomy (the defaults without --task)
    out = _cli("review", "build", "-e", run, "-o", qp, code=2)
    assert "evaluated against taxonomy screening@1" in out and "the queue uses gpu-kernel-issues@1" in out
    # against the whole screening gold: same taxonomy, other gold content
    out = _cli("review", "build", "--task", "screening", "-e", run, "-o", qp, code=2)
    assert f"but the gold given has hash {load_screening_gold().hash}" in out
    out = _cli(
        "review",
        "build",
        "--task",
        "screening",
        "-t",
        PROJECT_ROOT / "codebook" / "taxonomy-v1.yaml",
        "-e",
        run,
        "-o",
        qp,
        code=2,
    )
    assert "--task screening does not fit" in out
    assert not qp.exists()


def test_notes_name_screening_by_its_words_not_by_everyday_other():
    st, rt = screening_taxonomy(), load_taxonomy()
    assert note_dimensions("Add to failure_report: a post withdrawn by its reporter is a request (false).", st) == [
        "screening"
    ]
    assert note_dimensions("once a maintainer states support, a follow-up still failing is a failure report", st) == [
        "screening"
    ]
    assert note_dimensions("such a thread asking for a workaround leaves the thread false", st) == ["screening"]
    assert note_dimensions("a hardware limit of some other configuration; use_cp=False", st) == []
    # and the screening words do not pull a note into symptom or root cause
    assert note_dimensions("Add to failure_report: a post withdrawn by its reporter is a request (false).", rt) == []
    g = load_screening_gold()
    q, counts = build_queue(g, notes=NOTES)
    ids = {it.id for it in q.items}
    assert counts["codebook_note"] == len(q.items) and {it.dimension for it in q.items} == {"screening"}
    assert {"cutlass-980", "flash-attention-1481", "bitsandbytes-107", "xformers-1156"} <= ids
    assert not ids & set(NOT_SCREENING_NOTES)


def test_labels_from_run_screen_become_screening_items(screening_run, tmp_path):
    s = screening_run
    inp = unlabeled_subset(tmp_path, 8)
    lab = tmp_path / "labels.jsonl"
    _cli("run", "-m", "tfidf-logreg", "--screen", "--screen-model", "tfidf-logreg", "-i", inp, "-o", lab)
    rows = read_jsonl(lab)
    assert all(r["taxonomy"] == "gpu-kernel-issues@1" and r["screening_taxonomy"] == "screening@1" for r in rows)
    qp = tmp_path / "review" / "queue.json"
    _cli(
        "review",
        "build",
        "--task",
        "screening",
        "-g",
        s["gold"],
        "-t",
        s["tax"],
        "-l",
        lab,
        "-i",
        inp,
        "--min-confidence",
        "0.999",
        "-o",
        qp,
    )
    q = load_queue(qp)
    assert {it.id for it in q.items} == {r["id"] for r in rows}  # every label is under 0.999
    it = q.items[0]
    assert not it.in_gold and it.models[0].model == "tfidf-logreg"  # the screening model, not the row's
    assert len({r["screening_gold_hash"] for r in rows}) == 1  # recorded as a field, not inside prose
    assert it.models[0].label == next(r["screening"] for r in rows if r["id"] == it.id)
    _cli("review", "-q", qp, "-r", "lead", input="a\n\n\nq\n")
    out_gold = tmp_path / "screening.v2.jsonl"
    _cli("review", "apply", "-q", qp, "--out-gold", out_gold)
    added = read_jsonl(out_gold)[-1]
    assert added["id"] == it.id and "screening" not in added
    assert added["failure_report"] is (it.models[0].label == "failure_report")
    assert len(load_gold_for(out_gold, screening_taxonomy(s["tax"]))) == len(load_screening_gold(s["gold"])) + 1

    # screening labels made with another screening codebook are refused; so is a file without any
    for r in rows:
        r["screening_taxonomy"] = "screening@9"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = _cli(
        "review",
        "build",
        "--task",
        "screening",
        "-g",
        s["gold"],
        "-t",
        s["tax"],
        "-l",
        bad,
        "-i",
        inp,
        "-o",
        tmp_path / "q2.json",
        code=2,
    )
    assert "labeled with taxonomy screening@9" in out
    plain = tmp_path / "plain.jsonl"
    plain.write_text(
        "".join(
            json.dumps({"id": r["id"], "symptom": "crash", "taxonomy": "gpu-kernel-issues@1"}) + "\n" for r in rows
        ),
        encoding="utf-8",
    )
    out = _cli(
        "review",
        "build",
        "--task",
        "screening",
        "-g",
        s["gold"],
        "-t",
        s["tax"],
        "-l",
        plain,
        "-i",
        inp,
        "-o",
        tmp_path / "q3.json",
        code=2,
    )
    assert "no screening labels in it" in out


def test_a_label_the_boolean_cannot_hold_is_refused(screening_run):
    s = screening_run
    g = load_gold_for(s["gold"], screening_taxonomy(s["tax"]))
    q, _ = build_queue(g, evals=[s["run"]], use_cleanlab=False)
    it = q.items[0]
    d = Decision(
        id=it.id,
        dimension="screening",
        action="set",
        gold=it.gold,
        label="unclear",
        reviewer="lead",
        decided_at="2026-02-01T10:00:00+00:00",
        proposals=[
            AddCategory(
                dimension="screening",
                category=NewCategory(id="unclear", definition="Too little of the thread to tell."),
            )
        ],
    )
    with pytest.raises(ApplyError, match=rf"failure_report: true/false.*{it.id} \('unclear' has no true/false form\)"):
        plan_apply(q, [d], g)


def test_file_row_keeps_each_fields_own_form():
    # a row holding both fields gets both updated; a coder pass with more fields stays a dict
    raw = {
        "id": "x",
        "failure_report": True,
        "screening": "failure_report",
        "coder_a": {"failure_report": True, "symptom": "crash"},
        "coder_b": "true",
    }
    row = {
        "id": "x",
        "failure_report": True,
        "screening": "other",
        "coder_a": {"failure_report": True, "symptom": "crash", "screening": "other"},
        "coder_b": {"screening": "failure_report"},
    }
    out = file_row(row, raw, boolean_file=True)
    assert out == {
        "id": "x",
        "failure_report": False,
        "screening": "other",
        "coder_a": {"failure_report": False, "symptom": "crash"},
        "coder_b": "true",
    }
    # label-valued screening rows stay label-valued, also when new
    assert file_row({"id": "y", "screening": "other"}, None, boolean_file=False) == {"id": "y", "screening": "other"}
    assert file_row({"id": "y", "screening": None, "title": "t"}, None, boolean_file=True) == {
        "id": "y",
        "failure_report": None,
        "title": "t",
    }


def test_a_file_row_without_either_field_takes_the_files_encoding():
    # a row in the file with no label yet, decided by review: a boolean in a boolean file
    raw = {"id": "z", "title": "t"}
    out = file_row({"id": "z", "title": "t", "screening": "other"}, raw, boolean_file=True)
    assert out == {"id": "z", "title": "t", "failure_report": False}


def test_new_gold_version_keeps_lines_with_unicode_line_separators(tmp_path):
    from classify.core.goldfile import write_gold

    src = tmp_path / "gold.jsonl"
    rows = [{"id": "a", "body": "first\u2028second\u0085third"}, {"id": "b", "body": "plain"}]
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    new = [rows[0], {"id": "b", "body": "changed"}]
    write_gold(tmp_path / "gold.v2.jsonl", new, src)
    lines = (tmp_path / "gold.v2.jsonl").read_text(encoding="utf-8").split("\n")
    assert lines[0] == src.read_text(encoding="utf-8").split("\n")[0]  # untouched row: same bytes
    assert [json.loads(line) for line in lines if line] == new
