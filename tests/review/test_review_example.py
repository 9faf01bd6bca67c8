"""The worked example of docs/review.md stays reproducible: its decisions rebuild its taxonomy v2."""

from __future__ import annotations

import yaml
from review_helpers import gold_subset

from classify.core.gold import load_gold
from classify.core.paths import PROJECT_ROOT
from classify.core.taxonomy import load_taxonomy
from classify.review.apply import plan_apply
from classify.review.decisions import read_decisions
from classify.review.queue import build_queue

EXAMPLE = PROJECT_ROOT / "docs" / "review-example"


def test_example_decisions_rebuild_the_example_taxonomy(tmp_path):
    gp, tp = gold_subset(tmp_path, every=1)  # the whole gold set, in tmp
    g = load_gold(gp, load_taxonomy(tp))
    # every item of the example has a CODEBOOK note, so a notes-only queue holds them all
    q, _ = build_queue(g, notes=PROJECT_ROOT / "gold" / "adjudication.jsonl")
    decisions, _ = read_decisions(EXAMPLE / "decisions.jsonl")
    plan = plan_apply(q, decisions, g, when="2026-11-30")
    committed = yaml.safe_load((EXAMPLE / "taxonomy-v2.yaml").read_text(encoding="utf-8"))
    assert plan.taxonomy_raw["dimensions"] == committed["dimensions"]
    assert plan.taxonomy_raw["version"] == committed["version"] == 2
    ex = load_taxonomy(EXAMPLE / "taxonomy-v2.yaml")
    assert "EXAMPLE ONLY" in ex.changelog[0]["note"]
    assert [c["items"] for c in ex.changelog if c["change"] == "add_category"] == [["cutlass-88/root_cause"]]
    assert [r[:4] for r in plan.changed] == [("cutlass-88", "root_cause", "api_misuse", "documentation_defect")]
