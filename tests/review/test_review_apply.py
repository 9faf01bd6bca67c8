"""Decisions -> new gold and taxonomy versions: history, proposals, merges/splits, refusals."""

from __future__ import annotations

import json

import pytest
from review_helpers import fake_eval_run, gold_subset, read_jsonl, tree_state, unlabeled_subset
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.gold import load_gold
from classify.core.taxonomy import load_taxonomy
from classify.review.apply import ApplyError, next_gold_path, next_taxonomy_path, plan_apply, write_plan
from classify.review.decisions import DecisionsError, write_decisions
from classify.review.queue import build_queue
from classify.review.schema import AddCategory, AddCue, Decision, EditDefinition, Merge, NewCategory, Split, save_queue

runner = CliRunner()
WHEN = "2026-02-01T10:00:00+00:00"


@pytest.fixture
def setup(tmp_path):
    """A real gold subset, a queue from an eval run that disagrees on three items."""
    gp, tp = gold_subset(tmp_path)
    g = load_gold(gp, load_taxonomy(tp))
    first = lambda dim, lab: next(r.id for r, y in zip(g.records, g.labels[dim]) if y == lab)  # noqa: E731
    s_id = first("symptom", "deployment_failure")
    rc_api = first("root_cause", "api_misuse")
    rc_sw = first("root_cause", "software_incompatibility")
    run = fake_eval_run(
        tmp_path,
        gp,
        tp,
        {
            (s_id, "symptom"): ("build_failure", 0.95),
            (rc_api, "root_cause"): ("algorithm_logic", 0.9),
            (rc_sw, "root_cause"): ("packaging_distribution", 0.8),
        },
    )
    q, _ = build_queue(g, evals=[run], use_cleanlab=False)
    qp = tmp_path / "review" / "queue.json"
    save_queue(q, qp)
    return {
        "tmp": tmp_path,
        "gold": g,
        "gold_path": gp,
        "tax_path": tp,
        "queue": q,
        "queue_path": qp,
        "run": run,
        "s_id": s_id,
        "rc_api": rc_api,
        "rc_sw": rc_sw,
    }


def dec(item_id, dim, action, gold, label=None, proposal=None, note="", who="alice", more=()):
    props = ([proposal] if proposal else []) + list(more)
    return Decision(
        id=item_id,
        dimension=dim,
        action=action,
        gold=gold,
        label=label,
        proposals=props,
        note=note,
        reviewer=who,
        decided_at=WHEN,
        source="fake-model" if action == "accept" else None,
    )


def test_apply_writes_new_versions_with_history_and_changelog(setup):
    s = setup
    decisions = [
        dec(
            s["s_id"],
            "symptom",
            "accept",
            "deployment_failure",
            "build_failure",
            note="compile step fails",
            proposal=AddCue(
                dimension="symptom", category="build_failure", cue="include", text="setup.py compiles and fails"
            ),
        ),
        dec(
            s["rc_api"],
            "root_cause",
            "set",
            "api_misuse",
            "documentation_defect",
            note="quickstart typo",
            proposal=AddCategory(
                dimension="root_cause",
                category=NewCategory(
                    id="documentation_defect", group="usage", definition="Wrong documentation or official examples."
                ),
            ),
        ),
        dec(
            s["rc_sw"],
            "root_cause",
            "keep",
            "software_incompatibility",
            proposal=EditDefinition(
                dimension="root_cause",
                category="packaging_distribution",
                definition="A published artifact deviates from what it is documented to contain.",
            ),
        ),
    ]
    plan = plan_apply(s["queue"], decisions, s["gold"], when="2026-02-01", release_note="test")
    out_gold = next_gold_path(s["gold_path"])
    out_tax = next_taxonomy_path(s["tax_path"], plan.taxonomy.version)
    assert out_gold.name == "reports.v2.jsonl" and out_tax.name == "taxonomy-v2.yaml"
    before = tree_state(s["gold_path"], s["tax_path"])
    write_plan(plan, out_gold, out_tax, s["tax_path"])
    assert tree_state(s["gold_path"], s["tax_path"]) == before  # previous versions untouched

    tax2 = load_taxonomy(out_tax)
    assert tax2.version == "2" and "documentation_defect" in tax2.dimensions["root_cause"].ids
    assert tax2.dimensions["root_cause"].group_of("documentation_defect") == "usage"
    assert "setup.py compiles and fails" in tax2.dimensions["symptom"].category("build_failure").include
    assert (
        tax2.dimensions["root_cause"].category("packaging_distribution").definition.startswith("A published artifact")
    )
    log = list(tax2.changelog)
    assert log[0]["change"] == "release" and log[0]["note"] == "test"
    by_change = {e["change"]: e for e in log[1:]}
    assert by_change["add_category"]["items"] == [f"{s['rc_api']}/root_cause"]
    assert by_change["add_cue"]["items"] == [f"{s['s_id']}/symptom"]
    assert by_change["edit_definition"]["items"] == [f"{s['rc_sw']}/root_cause"]

    g2 = load_gold(out_gold, tax2)
    assert len(g2) == len(s["gold"])
    rows = {r["id"]: r for r in read_jsonl(out_gold)}
    h = rows[s["s_id"]]["review_history"]
    assert h == [
        {
            "dimension": "symptom",
            "old": "deployment_failure",
            "new": "build_failure",
            "action": "accept",
            "reason": "model label accepted in review (fake-model); queued for: model_disagrees",
            "reviewer": "alice",
            "date": "2026-02-01",
            "taxonomy": "gpu-kernel-issues@2",
            "note": "compile step fails",
            "source": "fake-model",
        }
    ]
    assert rows[s["rc_api"]]["root_cause"] == "documentation_defect"
    kept = rows[s["rc_sw"]]["review_history"][0]
    assert kept["old"] == kept["new"] == "software_incompatibility" and kept["action"] == "keep"
    untouched = [r for r in rows.values() if r["id"] not in (s["s_id"], s["rc_api"], s["rc_sw"])]
    assert all("review_history" not in r for r in untouched)
    # old versions still load side by side
    assert load_gold(s["gold_path"], load_taxonomy(s["tax_path"])).hash == s["gold"].hash
    # a version is never overwritten
    with pytest.raises(ApplyError, match="already exist"):
        write_plan(plan, out_gold, out_tax, s["tax_path"])


def test_merge_remaps_gold_and_coder_labels(setup):
    s = setup
    g = s["gold"]
    m = Merge(
        dimension="root_cause",
        categories=["software_incompatibility", "packaging_distribution"],
        into="software_incompatibility",
    )
    plan = plan_apply(
        s["queue"],
        [dec(s["rc_sw"], "root_cause", "keep", "software_incompatibility", proposal=m)],
        g,
        when="2026-02-01",
    )
    tax2 = plan.taxonomy
    assert "packaging_distribution" not in tax2.dimensions["root_cause"].ids
    had = [r.id for r, y in zip(g.records, g.labels["root_cause"]) if y == "packaging_distribution"]
    assert had
    rows = {r["id"]: r for r in plan.gold_rows}
    for rid in had:
        assert rows[rid]["root_cause"] == "software_incompatibility"
        assert rows[rid]["review_history"][-1]["action"] == "remap"
        assert rows[rid]["review_history"][-1]["old"] == "packaging_distribution"
    coder_labels = {r.get(c, {}).get("root_cause") for r in plan.gold_rows for c in ("coder_a", "coder_b")}
    assert "packaging_distribution" not in coder_labels
    # cues pointing at the merged-away category now point at its successor
    raw = plan.taxonomy_raw
    cues = [
        t for c in raw["dimensions"]["root_cause"]["categories"] for t in c.get("exclude", []) + c.get("include", [])
    ]
    assert not any("packaging_distribution" in t for t in cues)
    assert plan.gold is not None and len(plan.gold) == len(g)


def test_split_without_full_mapping_is_refused_with_the_items(setup):
    s = setup
    g = s["gold"]
    api = [r.id for r, y in zip(g.records, g.labels["root_cause"]) if y == "api_misuse"]
    coder_api = [
        r.id
        for r in g.records
        if "api_misuse" in (r.fields["coder_a"].get("root_cause"), r.fields["coder_b"].get("root_cause"))
    ]
    split = Split(
        dimension="root_cause",
        category="api_misuse",
        into=[
            NewCategory(id="api_misuse", definition="User calls the library wrongly."),
            NewCategory(id="documentation_defect", definition="The documentation is wrong."),
        ],
        mapping={s["rc_api"]: "documentation_defect"},
    )
    with pytest.raises(ApplyError) as e:
        plan_apply(s["queue"], [dec(s["rc_api"], "root_cause", "keep", "api_misuse", proposal=split)], g)
    msg = str(e.value)
    for rid in set(api + coder_api) - {s["rc_api"]}:
        assert rid in msg
    assert "add these items to the split mapping" in msg
    # with every concerned item mapped it goes through, gold and coders consistently
    full = split.model_copy(
        update={
            "mapping": {
                rid: ("documentation_defect" if rid == s["rc_api"] else "api_misuse") for rid in set(api + coder_api)
            }
        }
    )
    plan = plan_apply(s["queue"], [dec(s["rc_api"], "root_cause", "keep", "api_misuse", proposal=full)], g)
    rows = {r["id"]: r for r in plan.gold_rows}
    assert rows[s["rc_api"]]["root_cause"] == "documentation_defect"
    assert {rows[s["rc_api"]][c]["root_cause"] for c in ("coder_a", "coder_b")} <= {
        "documentation_defect",
        None,
        "algorithm_logic",
    }
    assert [c.id for c in plan.taxonomy.dimensions["root_cause"].categories][-2:] == [
        "api_misuse",
        "documentation_defect",
    ]


def test_conflicting_and_impossible_proposals_are_refused(setup):
    s = setup
    a = EditDefinition(dimension="root_cause", category="api_misuse", definition="one")
    b = EditDefinition(dimension="root_cause", category="api_misuse", definition="two")
    with pytest.raises(DecisionsError, match="conflicting"):
        plan_apply(
            s["queue"],
            [
                dec(s["rc_api"], "root_cause", "keep", "api_misuse", proposal=a),
                dec(s["rc_sw"], "root_cause", "keep", "software_incompatibility", proposal=b),
            ],
            s["gold"],
        )
    # a cue on a category that does not exist
    bad = AddCue(dimension="root_cause", category="no_such_cause", cue="include", text="x")
    with pytest.raises(DecisionsError, match="no category 'no_such_cause'"):
        plan_apply(s["queue"], [dec(s["rc_api"], "root_cause", "keep", "api_misuse", proposal=bad)], s["gold"])
    # a new category in a grouped dimension needs a group
    nogroup = AddCategory(dimension="root_cause", category=NewCategory(id="new_cause", definition="d"))
    with pytest.raises(DecisionsError, match="needs a group"):
        plan_apply(s["queue"], [dec(s["rc_api"], "root_cause", "keep", "api_misuse", proposal=nogroup)], s["gold"])
    # identical proposals on two items become one change naming both
    cue = AddCue(dimension="root_cause", category="api_misuse", cue="exclude", text="docs wrong")
    plan = plan_apply(
        s["queue"],
        [
            dec(s["rc_api"], "root_cause", "keep", "api_misuse", proposal=cue),
            dec(s["rc_sw"], "root_cause", "keep", "software_incompatibility", proposal=cue),
        ],
        s["gold"],
    )
    assert len(plan.changes) == 1 and len(plan.changes[0].items) == 2
    # one item may motivate several changes (an include cue and the matching exclude cue)
    inc = AddCue(
        dimension="root_cause", category="algorithm_logic", cue="include", text="a finite sentinel is reachable"
    )
    exc = AddCue(
        dimension="root_cause", category="numerical_precision", cue="exclude", text="a finite sentinel is reachable"
    )
    plan = plan_apply(
        s["queue"], [dec(s["rc_api"], "root_cause", "keep", "api_misuse", proposal=inc, more=[exc])], s["gold"]
    )
    assert [c.proposal for c in plan.changes] == [inc, exc]
    rc = plan.taxonomy.dimensions["root_cause"]
    assert "a finite sentinel is reachable" in rc.category("algorithm_logic").include
    assert "a finite sentinel is reachable" in rc.category("numerical_precision").exclude


def test_unlabeled_item_accepted_is_added_to_the_new_gold(tmp_path):
    gp, tp = gold_subset(tmp_path)
    g = load_gold(gp, load_taxonomy(tp))
    inp = unlabeled_subset(tmp_path, 3)
    ids = [json.loads(x)["id"] for x in inp.read_text().splitlines()]
    rows = [{"id": ids[0], "symptom": "crash", "symptom_confidence": 0.3, "model": "m", "taxonomy": g.taxonomy.label}]
    lab = tmp_path / "labels.jsonl"
    lab.write_text(json.dumps(rows[0]) + "\n")
    q, _ = build_queue(g, runs=[lab], inputs=[inp])
    assert [it.key for it in q.items] == [(ids[0], "symptom")]
    with pytest.raises(ApplyError, match="every decision is a skip"):
        plan_apply(q, [dec(ids[0], "symptom", "skip", None)], g)
    with pytest.raises(DecisionsError, match="has no gold label"):
        plan_apply(q, [dec(ids[0], "symptom", "keep", None)], g)
    plan = plan_apply(q, [dec(ids[0], "symptom", "accept", None, "crash")], g)
    assert plan.added == [ids[0]]
    new = plan.gold_rows[-1]
    assert new["id"] == ids[0] and new["symptom"] == "crash" and new["root_cause"] is None
    assert new["title"] and new["review_history"][0]["old"] is None
    assert len(plan.gold) == len(g) + 1


def _cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_cli_rejects_corrupt_or_stale_decisions_and_changes_nothing(setup):
    s = setup
    qp, dp = s["queue_path"], s["queue_path"].parent / "decisions.jsonl"
    good = dec(s["s_id"], "symptom", "accept", "deployment_failure", "build_failure")
    cases = {
        "malformed": good.model_dump_json() + "\n{not json\n",
        "missing field": json.dumps({"id": s["s_id"], "dimension": "symptom", "action": "keep"}) + "\n",
        "unknown action": good.model_dump_json().replace('"accept"', '"maybe"') + "\n",
        "not in queue": dec("nobody-1", "symptom", "keep", "crash").model_dump_json() + "\n",
        "unknown label": dec(s["s_id"], "symptom", "set", "deployment_failure", "kernel_panic").model_dump_json()
        + "\n",
        "stale gold": dec(s["s_id"], "symptom", "keep", "crash").model_dump_json() + "\n",
    }
    expect = {
        "malformed": "line 3: not JSON",
        "missing field": "reviewer",
        "unknown action": "action",
        "not in queue": "not in this queue",
        "unknown label": "unknown symptom label 'kernel_panic'",
        "stale gold": "stale",
    }
    for name, text in cases.items():
        dp.write_text(good.model_dump_json() + "\n" + text)
        before = tree_state(s["tmp"])
        res = _cli("review", "apply", "--queue", qp)
        assert res.exit_code == 2, (name, res.output)
        assert expect[name] in res.output.replace("\n", " "), (name, res.output)
        assert tree_state(s["tmp"]) == before, name  # nothing written, nothing edited
    # a queue built from another gold content is stale as a whole
    write_decisions(dp, [good])
    g2 = s["tmp"] / "gold" / "other.jsonl"
    lines = s["gold_path"].read_text().splitlines()
    g2.write_text("\n".join(lines[1:]) + "\n")
    res = _cli("review", "apply", "--queue", qp, "--gold", g2)
    assert res.exit_code == 2 and "build the queue again" in res.output.replace("\n", " ")
    # the good file applies
    res = _cli("review", "apply", "--queue", qp)
    assert res.exit_code == 0, res.output
    assert (s["tmp"] / "gold" / "reports.v2.jsonl").exists()
    assert not (s["tmp"] / "codebook" / "taxonomy-v2.yaml").exists()  # no proposal: the codebook stays v1
    res = _cli("review", "apply", "--queue", qp)
    assert res.exit_code == 2 and "never overwritten" in res.output.replace("\n", " ")
