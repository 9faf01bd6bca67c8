"""What `classify eval --test FILE` does with test records that repeat a training record.

A test record that is a gold record (same id, or same title and body under another id) is scored by
a model that learned its label. The user chooses (`--test-overlap`):
  refuse       (default) stop, listing every match;
  drop-train   train without the gold records the test file repeats, so the test file is scored whole;
  keep         train and score as given, with a warning; the report lists every match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from classify.core.errors import UsageError
from classify.core.gold import GoldSet
from classify.evaluation.bygroup import gold_part
from classify.evaluation.leaks import check_test_overlap, same_text_pairs

POLICIES = ("refuse", "drop-train", "keep")


def overlap_matches(gold: GoldSet, test: GoldSet) -> list[dict[str, str]]:
    """Every (test record, gold record) pair that repeats: by id, then by text under another id."""
    test_ids = set(test.ids)
    out = [{"test_id": i, "gold_id": i, "by": "id"} for i in gold.ids if i in test_ids]
    out += [
        {"test_id": t, "gold_id": g, "by": "text"}
        for t, g in same_text_pairs(gold.records, test.records)
        if t != g  # the same id is listed once, as an id match
    ]
    return out


@dataclass
class TestOverlap:
    __test__ = False  # not a pytest class, whatever its name

    train: GoldSet  # the gold set to train on
    report: dict[str, Any] | None  # metrics.json's "test_overlap"; None when nothing repeats


def resolve_test_overlap(
    gold: GoldSet, test: GoldSet, policy: str = "refuse", say: Callable[[str], None] | None = None
) -> TestOverlap:
    """The gold set to train on and the overlap report.

    `refuse` raises TestOverlapError naming every match; `drop-train` returns gold without the
    repeated records; `keep` returns gold as it is (the caller must then let evaluate_on_test score
    the repeats: allow_overlap)."""
    if policy not in POLICIES:
        raise UsageError(f"test overlap: {policy!r} is not one of {', '.join(POLICIES)}")
    if policy == "refuse":
        check_test_overlap(gold, test)
        return TestOverlap(gold, None)
    matches = overlap_matches(gold, test)
    if not matches:
        return TestOverlap(gold, None)
    say = say or (lambda m: None)
    repeated = {m["gold_id"] for m in matches}
    n_test = len({m["test_id"] for m in matches})
    report: dict[str, Any] = {"policy": policy, "n_test_records": n_test, "matches": matches}
    if policy == "drop-train":
        keep = [i for i, r in enumerate(gold.records) if r.id not in repeated]
        if not keep:
            raise UsageError(
                "--test-overlap drop-train: the test file repeats every gold record; nothing is left to train on"
            )
        gold = gold_part(gold, keep)
        report["n_dropped_from_training"] = len(repeated)
        say(
            f"{n_test} test records repeat {len(repeated)} gold records (listed in the report); "
            f"those gold records are left out of training ({len(gold)} remain)"
        )
    else:
        say(
            f"warning: {n_test} test records repeat {len(repeated)} gold records the model trains on (listed in "
            "the report); their scores are flattered"
        )
    return TestOverlap(gold, report)


def render_test_overlap(ov: dict[str, Any]) -> list[str]:
    """The report's list of every test record that repeats a gold record, and what was done."""
    done = (
        f"the {ov['n_dropped_from_training']} repeated gold records were left out of training (--test-overlap "
        "drop-train), so these test records are scored by a model that never saw them"
        if ov["policy"] == "drop-train"
        else "they were kept in training (--test-overlap keep): their scores are flattered"
    )
    return [
        "## Test records that repeat gold",
        "",
        f"{ov['n_test_records']} test records repeat a gold record (same id, or same title and body under "
        f"another id); {done}. Every match:",
        "",
        "| test id | gold id | same |",
        "|---|---|---|",
        *[f"| {m['test_id']} | {m['gold_id']} | {m['by']} |" for m in ov["matches"]],
        "",
    ]
