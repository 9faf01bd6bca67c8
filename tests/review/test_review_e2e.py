"""The whole loop on a real (small) evaluation: eval -> queue -> session -> apply -> eval --compare."""

from __future__ import annotations

import json

import pytest
from review_helpers import gold_subset, read_jsonl
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.gold import load_gold
from classify.core.taxonomy import load_taxonomy
from classify.review.schema import load_queue

runner = CliRunner()


def _cli(*args, input=None):
    res = runner.invoke(app, [str(a) for a in args], input=input)
    out = " ".join(res.output.split())
    assert res.exit_code == 0, out
    return out


@pytest.mark.slow
def test_review_loop_on_a_real_eval(tmp_path, monkeypatch):
    monkeypatch.setenv("CLASSIFY_CACHE_DIR", str(tmp_path / "cache"))
    gp, tp = gold_subset(tmp_path, every=4)
    evals = tmp_path / "evals"
    _cli("eval", "-m", "embed-centroid", "-g", gp, "-t", tp, "--folds", "2", "--n-boot", "100", "--out-dir", evals)
    (run1,) = list(evals.iterdir())
    preds = read_jsonl(run1 / "predictions.jsonl")
    assert all("symptom_proba" in r for r in preds)

    qp = tmp_path / "review" / "queue.json"
    out = _cli("review", "build", "-e", run1, "-o", qp, "-g", gp, "-t", tp)
    q = load_queue(qp)
    kinds = {r.kind for it in q.items for r in it.reasons}
    assert "model_disagrees" in kinds
    # every gold item the model got wrong is in the queue, confident disagreements first
    wrong = {
        (r["id"], d)
        for r in preds
        for d in ("symptom", "root_cause")
        if r[f"gold_{d}"] is not None and r[d] != r[f"gold_{d}"]
    }
    assert wrong <= set(q.index())
    dis = [it for it in q.items if {r.kind for r in it.reasons} == {"model_disagrees"}]
    assert all(a.score >= b.score for a, b in zip(dis, dis[1:]))

    # review the first three items: accept, set another label with a cue, keep
    first = q.items[:3]
    alt = next(
        c
        for c in load_taxonomy(tp).dimensions[first[1].dimension].ids
        if c not in (first[1].gold, *first[1].model_labels())
    )
    script = [
        "a",
        "model is right",
        "",
        "s",
        alt,
        "",
        "i",
        alt,
        "a cue learned in review",
        "",
        "k",
        "",
        "",
        "q",
    ]
    out = _cli("review", "-q", qp, "-r", "tester", input="\n".join(script) + "\n")
    assert "stopped: 3 decisions saved" in out

    out = _cli("review", "apply", "-q", qp)
    g2, t2 = gp.with_name("reports.v2.jsonl"), tp.with_name("taxonomy-v2.yaml")
    tax2 = load_taxonomy(t2)
    gold2 = load_gold(g2, tax2)
    assert "a cue learned in review" in tax2.dimensions[first[1].dimension].category(alt).include
    assert gold2.labels[first[0].dimension][gold2.ids.index(first[0].id)] == first[0].model_labels()[0]
    assert gold2.labels[first[1].dimension][gold2.ids.index(first[1].id)] == alt

    out = _cli(
        "eval",
        "-m",
        "embed-centroid",
        "-g",
        g2,
        "-t",
        t2,
        "--folds",
        "2",
        "--n-boot",
        "100",
        "--out-dir",
        evals,
        "--compare",
        run1,
    )
    (run2,) = [p for p in evals.iterdir() if p != run1]
    m2 = json.loads((run2 / "metrics.json").read_text())
    assert m2["meta"]["taxonomy"] == "gpu-kernel-issues@2"
    comp = m2["comparison"]
    assert not comp["same_gold"] and not comp["same_taxonomy"] and comp["same_model"]
    # paired: the earlier run's split is reused, so only the labels differ between the two runs
    assert comp["folds"] == f"folds of the earlier run reused ({len(gold2)} records)"
    f1 = {r["id"]: r["fold"] for r in preds}
    assert all(r["fold"] == f1[r["id"]] for r in read_jsonl(run2 / "predictions.jsonl"))
    expected_changes = 1 + (first[0].model_labels()[0] != first[0].gold)
    assert sum(comp["gold_labels_changed"].values()) == expected_changes
    m1 = json.loads((run1 / "metrics.json").read_text())
    for d, row in comp["dimensions"].items():
        assert row["previous_kappa"] == m1["dimensions"][d]["kappa"]["kappa"]
        assert row["delta"] == pytest.approx(m2["dimensions"][d]["kappa"]["kappa"] - row["previous_kappa"])
    assert "## Compared with an earlier run" in (run2 / "report.md").read_text()
    assert "kappa vs" in out
