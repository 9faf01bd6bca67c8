"""The terminal session driven through its input stream, and the CSV round trip."""

from __future__ import annotations

import csv
import io
import json

import pytest
from review_helpers import fake_eval_run, gold_subset, read_jsonl, tree_state
from rich.console import Console
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.gold import load_gold
from classify.core.taxonomy import load_taxonomy
from classify.review.session import EndOfInput, Session, Terminal

runner = CliRunner()


def _cli(*args, input=None):
    res = runner.invoke(app, [str(a) for a in args], input=input)
    return res, " ".join(res.output.split())


@pytest.fixture
def setup(tmp_path):
    gp, tp = gold_subset(tmp_path)
    g = load_gold(gp, load_taxonomy(tp))
    first = lambda dim, lab: next(r.id for r, y in zip(g.records, g.labels[dim]) if y == lab)  # noqa: E731
    ids = {
        "s": first("symptom", "deployment_failure"),
        "api": first("root_cause", "api_misuse"),
        "sw": first("root_cause", "software_incompatibility"),
    }
    run = fake_eval_run(
        tmp_path,
        gp,
        tp,
        {
            (ids["s"], "symptom"): ("build_failure", 0.95),
            (ids["api"], "root_cause"): ("algorithm_logic", 0.9),
            (ids["sw"], "root_cause"): ("packaging_distribution", 0.8),
        },
    )
    qp = tmp_path / "review" / "queue.json"
    res, out = _cli("review", "build", "-e", run, "-g", gp, "-t", tp, "--no-cleanlab", "-o", qp)
    assert res.exit_code == 0, out
    assert "3 items" in out
    return {
        "tmp": tmp_path,
        "gold_path": gp,
        "tax_path": tp,
        "queue": qp,
        "dec": qp.parent / "decisions.jsonl",
        "ids": ids,
        "run": run,
    }


def test_scripted_session_resumes_and_applies(setup):
    s, ids = setup, setup["ids"]
    # item 1 (most confident disagreement): accept the model's label, a note, an include-cue proposal; then quit
    script1 = (
        "\n".join(["a", "compile step fails", "i", "", "setup.py compiles the extension and fails", "", "q"]) + "\n"
    )
    res, out = _cli("review", "session", "-q", s["queue"], "-r", "alice", input=script1)
    assert res.exit_code == 0, out
    assert f"[1/3] {ids['s']} . symptom" in out
    assert "gold symptom: deployment_failure" in out and "-> build_failure (0.95" in out
    assert "stopped: 1 decisions saved" in out and "2 items left of 3" in out
    rows = read_jsonl(s["dec"])
    assert len(rows) == 1 and rows[0]["action"] == "accept" and rows[0]["label"] == "build_failure"
    assert rows[0]["proposals"] == [
        {
            "dimension": "symptom",
            "kind": "add_cue",
            "category": "build_failure",
            "cue": "include",
            "text": "setup.py compiles the extension and fails",
        }
    ]

    # resume: a wrong key, then set a label that does not exist yet and create it; keep the third; input ends
    script2 = (
        "\n".join(
            [
                "z",  # unknown key: asked again
                "s",
                "documentation_defect",
                "y",
                "",
                "usage",
                "Wrong or inconsistent documentation or official examples.",
                "misspelled include in the quickstart",
                "quickstart typo",
                "",
                "k",
                "",
                "",
            ]
        )
        + "\n"
    )
    res, out = _cli("review", "-q", s["queue"], "-r", "bob", input=script2)  # no sub-command: the session
    assert res.exit_code == 0, out
    assert "resuming: 1 of 3 items decided" in out
    assert "unknown key 'z'" in out
    assert "queue done: 2 decisions saved" in out
    rows = read_jsonl(s["dec"])
    assert [r["action"] for r in rows] == ["accept", "set", "keep"]
    assert rows[1]["label"] == "documentation_defect" and rows[1]["reviewer"] == "bob"
    assert rows[1]["proposals"][0]["category"]["group"] == "usage"

    # nothing left: a third start decides nothing
    res, out = _cli("review", "session", "-q", s["queue"], "-r", "bob", input="")
    assert "queue done: 0 decisions saved" in out

    res, out = _cli("review", "apply", "-q", s["queue"], "--note", "test round")
    assert res.exit_code == 0, out
    g2, t2 = s["tmp"] / "gold" / "reports.v2.jsonl", s["tmp"] / "codebook" / "taxonomy-v2.yaml"
    for args in (("taxonomy", "validate", t2), ("gold", "validate", "-g", g2, "-t", t2)):
        res, out = _cli(*args)
        assert res.exit_code == 0 and out.startswith("ok:"), out
    tax2 = load_taxonomy(t2)
    gold2 = {r["id"]: r for r in read_jsonl(g2)}
    assert gold2[ids["s"]]["symptom"] == "build_failure"
    assert gold2[ids["api"]]["root_cause"] == "documentation_defect"
    assert gold2[ids["api"]]["review_history"][0]["reviewer"] == "bob"
    assert gold2[ids["sw"]]["review_history"][0]["action"] == "keep"
    changes = {e["change"]: e for e in tax2.changelog}
    assert changes["add_category"]["items"] == [f"{ids['api']}/root_cause"]
    assert changes["add_cue"]["notes"] == ["compile step fails"]
    # v1 files unchanged and loadable
    assert load_gold(s["gold_path"], load_taxonomy(s["tax_path"])).labels["symptom"].count("build_failure") == sum(
        1 for r in read_jsonl(s["gold_path"]) if r["symptom"] == "build_failure"
    )


def test_single_keystroke_terminal_and_bad_answers(setup):
    """The tty path: one key per choice (injected), lines for text."""
    from classify.review.schema import load_queue

    s = setup
    q = load_queue(s["queue"])
    tax = load_taxonomy(s["tax_path"])
    keys = iter(
        [
            "x",
            "s",
            "n",  # unknown key; set -> unknown id not created ("n")
            "?",
            "",  # ambiguous, no proposal (Enter)
            "a",
            "p",
        ]
    )  # accept + split proposal (invalid: split into one category) -> asked again
    lines = iter(
        [
            "nonsense_label",
            "",  # not created; Enter at the label prompt goes back to the item
            "unsure",  # note of the ambiguous decision
            "",  # no note on item 2, then the split: default category, one new id, its definition,
            "",
            "only_one",
            "def",
            "only_one",
            "",
        ]
    )  # this item's new label, no others

    def nxt(it):
        def f():
            try:
                return next(it)
            except StopIteration:
                raise EndOfInput from None

        return f

    buf = io.StringIO()
    con = Console(file=buf, width=120)
    sess = Session(q, tax, s["dec"], "carol", Terminal(con, key_fn=nxt(keys), line_fn=nxt(lines)), con)
    res = sess.run()
    text = buf.getvalue()
    assert "unknown key 'x'" in text
    assert "not a label; try again" in text
    assert "proposal not recorded" in text  # the split into one category is refused
    assert res.decided == 1 and res.stopped
    rows = read_jsonl(s["dec"])
    assert rows == [{**rows[0], "action": "ambiguous", "note": "unsure", "reviewer": "carol"}]


def test_torn_last_line_is_dropped_by_the_session_but_rejected_by_apply(setup):
    s = setup
    res, _ = _cli("review", "session", "-q", s["queue"], "-r", "a", input="k\n\n\n")
    assert res.exit_code == 0
    good = s["dec"].read_text()
    s["dec"].write_text(good + '{"id": "x", "dimen')  # killed mid-write
    before = tree_state(s["tmp"])
    res, out = _cli("review", "apply", "-q", s["queue"])
    assert res.exit_code == 2 and "not JSON" in out
    assert tree_state(s["tmp"]) == before
    res, out = _cli("review", "session", "-q", s["queue"], "-r", "a", input="q\n")
    assert res.exit_code == 0 and "dropped a torn last line" in out
    assert s["dec"].read_text() == good
    # a corrupt line in the middle stops the session instead of building on it
    s["dec"].write_text("garbage\n" + good)
    res, out = _cli("review", "session", "-q", s["queue"], "-r", "a", input="q\n")
    assert res.exit_code == 2 and "line 1: not JSON" in out


def _fill(path, fill: dict):
    text = path.read_text(encoding="utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    fields = list(rows[0].keys())
    for r in rows:
        r.update(fill.get(r["id"], {}))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields)
    w.writeheader()
    w.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return rows


def test_csv_round_trip(setup):
    s, ids = setup, setup["ids"]
    sheet = s["tmp"] / "review" / "sheet.csv"
    res, out = _cli("review", "export", "-q", s["queue"], "-o", sheet)
    assert res.exit_code == 0, out
    rows = _fill(
        sheet,
        {
            ids["s"]: {"action": "a", "note": "compiles then fails"},
            ids["api"]: {
                "action": "set",
                "label": "documentation_defect",
                "proposal": "add_category",
                "proposal_category": "documentation_defect",
                "proposal_group": "usage",
                "proposal_text": "Wrong or inconsistent documentation or official examples.",
            },
            ids["sw"]: {
                "action": "keep",
                "proposal": "merge",
                "proposal_category": "software_incompatibility, packaging_distribution",
                "proposal_into": "software_incompatibility",
                "note": "hard to tell apart",
                "more_proposals": json.dumps(
                    [
                        {
                            "kind": "add_cue",
                            "dimension": "root_cause",
                            "category": "software_incompatibility",
                            "cue": "include",
                            "text": "published wheel lacks the user's platform",
                        }
                    ]
                ),
            },
        },
    )
    assert {r["id"] for r in rows} == set(ids.values())
    assert all(r["title"] and r["models"] for r in rows)
    res, out = _cli("review", "import", sheet, "-q", s["queue"], "-r", "dana")
    assert res.exit_code == 0, out
    assert "3 new or changed decisions, 0 unchanged" in out
    # export again: the decisions come back prefilled, and re-importing adds nothing
    res, _ = _cli("review", "export", "-q", s["queue"], "-o", sheet)
    again = list(csv.DictReader(io.StringIO(sheet.read_text(encoding="utf-8-sig"))))
    assert {r["id"]: r["action"] for r in again} == {ids["s"]: "accept", ids["api"]: "set", ids["sw"]: "keep"}
    res, out = _cli("review", "import", sheet, "-q", s["queue"], "-r", "dana")
    assert "0 new or changed decisions, 3 unchanged" in out
    assert len(read_jsonl(s["dec"])) == 3

    res, out = _cli("review", "apply", "-q", s["queue"])
    assert res.exit_code == 0, out
    tax2 = load_taxonomy(s["tmp"] / "codebook" / "taxonomy-v2.yaml")
    g2 = load_gold(s["tmp"] / "gold" / "reports.v2.jsonl", tax2)
    rc = tax2.dimensions["root_cause"].ids
    assert "documentation_defect" in rc and "packaging_distribution" not in rc
    assert "packaging_distribution" not in g2.labels["root_cause"]
    assert g2.labels["root_cause"][g2.ids.index(ids["api"])] == "documentation_defect"
    assert (
        "published wheel lacks the user's platform"
        in tax2.dimensions["root_cause"].category("software_incompatibility").include
    )
    merge = next(e for e in tax2.changelog if e["change"] == "merge")
    assert merge["items"] == [f"{ids['sw']}/root_cause"] and merge["notes"] == ["hard to tell apart"]


@pytest.mark.parametrize(
    "fill,expect",
    [
        ({"action": "maybe"}, "unknown action 'maybe'"),
        ({"action": "set", "label": "kernel_panic"}, "unknown symptom label 'kernel_panic'"),
        ({"action": "set", "label": ""}, "set needs a label"),
        ({"action": "keep", "gold": "crash"}, "stale sheet"),
        ({"action": "keep", "id": "nobody-1"}, "not in this queue"),
        ({"action": "keep", "proposal": "merge", "proposal_category": "crash"}, "categories"),
        ({"action": "keep", "proposal": "rename"}, "unknown proposal 'rename'"),
        ({"action": "keep", "more_proposals": '[{"kind": "add_cue"}]'}, "dimension"),
    ],
)
def test_bad_sheet_changes_nothing(setup, fill, expect):
    s, ids = setup, setup["ids"]
    sheet = s["tmp"] / "review" / "sheet.csv"
    _cli("review", "export", "-q", s["queue"], "-o", sheet)
    # one good decision already recorded
    _cli("review", "session", "-q", s["queue"], "-r", "a", input="k\n\n\n")
    _fill(sheet, {ids["s"]: fill, ids["sw"]: {"action": "keep"}})
    before = tree_state(s["tmp"])
    res, out = _cli("review", "import", sheet, "-q", s["queue"])
    assert res.exit_code == 2, out
    assert expect in out and "nothing changed" in out
    assert tree_state(s["tmp"]) == before


def test_queue_from_unlabeled_runs_via_cli(setup, tmp_path):
    s = setup
    inp = tmp_path / "in.jsonl"
    from review_helpers import unlabeled_subset

    inp = unlabeled_subset(tmp_path, 4)
    ids = [json.loads(x)["id"] for x in inp.read_text().splitlines()]
    for name, lab in (("a", "crash"), ("b", "hang")):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "id": i,
                        "symptom": lab,
                        "symptom_confidence": 0.9,
                        "model": name,
                        "taxonomy": "gpu-kernel-issues@1",
                    }
                )
                + "\n"
                for i in ids
            )
        )
    qp = tmp_path / "q2.json"
    res, out = _cli(
        "review",
        "build",
        "-l",
        tmp_path / "a.jsonl",
        "-l",
        tmp_path / "b.jsonl",
        "-i",
        inp,
        "-g",
        s["gold_path"],
        "-t",
        s["tax_path"],
        "-o",
        qp,
    )
    assert res.exit_code == 0, out
    assert "4 items" in out and "models_disagree 4" in out
    res, out = _cli(
        "review", "build", "-l", tmp_path / "a.jsonl", "-i", inp, "-g", s["gold_path"], "-t", s["tax_path"], "-o", qp
    )
    assert res.exit_code == 2 and "exists" in out
