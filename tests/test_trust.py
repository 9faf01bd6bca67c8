"""Calibrated confidence, thresholds with a guarantee, and `run --target-kappa` routing (issue #12)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import write_jsonl

from classify.classifiers.base import ModelOptions, Prediction
from classify.core.causeshown import NONE_SHOWN, with_shown_dimensions
from classify.core.gold import gold_from_records, load_gold
from classify.core.records import Record
from classify.evaluation.calibration import apply_temperature, calibration_figures, fit_temperature
from classify.evaluation.profile import compose, gold_profile
from classify.evaluation.thresholds import accuracy_lower_bound, search_thresholds, slice_kappa
from classify.labeling.pipeline import label_file
from classify.labeling.routing import parse_targets

# -- the threshold search on constructed cases with known answers ------------------------------------


def _case(n_right: int, n_wrong: int):
    """Most confident first: `n_right` correct answers (two balanced classes), then `n_wrong` wrong ones."""
    y_true, y_pred = [], []
    for i in range(n_right):
        c = "a" if i % 2 else "b"
        y_true.append(c)
        y_pred.append(c)
    for i in range(n_wrong):
        y_true.append("a" if i % 2 else "b")
        y_pred.append("b" if i % 2 else "a")
    conf = list(np.linspace(0.99, 0.2, n_right + n_wrong))
    return y_true, y_pred, conf


def test_threshold_is_the_last_cut_whose_bound_passes():
    y_true, y_pred, conf = _case(100, 100)
    t87, t95 = search_thresholds(y_true, y_pred, conf, [0.87, 0.95])
    # pe = 0.5 (balanced on both sides); at 100/100 correct the exact one-sided bound is 0.05 ** (1/100).
    bound = (0.05 ** (1 / 100) - 0.5) / 0.5
    assert t87.n_auto == 100 and t87.coverage == 0.5
    assert t87.threshold == pytest.approx(conf[99])
    assert t87.kappa_lo == pytest.approx(bound, abs=1e-6)
    assert t87.kappa == pytest.approx(1.0) and t87.accuracy == 1.0 and t87.slice_kappa == pytest.approx(1.0)
    assert t87.coverage_lo < 0.5 < t87.coverage_hi
    # 0.95 needs more than 100 straight correct answers at this pe: nothing is auto, and the figures are n/a.
    assert bound < 0.95
    assert t95.threshold is None and t95.coverage == 0.0 and t95.kappa is None and t95.kappa_lo is None


def test_search_stops_at_the_first_failing_cut_even_if_a_later_one_passes():
    # 300 right, 60 wrong, then 1000 right: the pooled slice would pass later, but fixed-sequence testing
    # stops at the first failure.
    y1, p1, _ = _case(300, 60)
    y2, p2, _ = _case(1000, 0)
    y_true, y_pred = y1 + y2, p1 + p2
    conf = list(np.linspace(0.99, 0.2, len(y_true)))
    (t,) = search_thresholds(y_true, y_pred, conf, [0.8])
    assert 0 < t.n_auto <= 300
    assert t.kappa_lo is not None and t.kappa_lo >= 0.8
    pooled = (1300 / 1360 - 0.5) / 0.5
    assert pooled > 0.9  # the whole set would have passed on its own
    # Without the dip, the same search goes all the way.
    (t_all,) = search_thresholds(y1[:300] + y2, p1[:300] + p2, conf[:1300], [0.8])
    assert t_all.n_auto == 1300


def test_missing_confidence_and_invalid_answers_are_never_auto():
    y_true, y_pred, conf = _case(100, 0)
    conf[:10] = [None] * 10  # the most confident ten have no confidence at all: never auto
    y_pred[80:90] = [None] * 10  # invalid answers count as disagreements
    (t,) = search_thresholds(y_true, y_pred, conf, [0.3])
    assert t.n_auto == 90
    assert t.accuracy == pytest.approx(80 / 90)  # items 10..99 are auto; 80..89 are invalid


def test_in_slice_kappa_is_none_when_undefined_not_0_or_1():
    assert slice_kappa(["a"] * 30, ["a"] * 30) is None
    assert slice_kappa(["a", "b"], ["a", "b"]) == pytest.approx(1.0)
    assert accuracy_lower_bound(0, 10) == 0.0
    assert 0 < accuracy_lower_bound(10, 10) < 1


# -- calibration ------------------------------------------------------------------------------------


def test_temperature_scaling_recovers_an_overconfident_model():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3000, 4)) * 2
    p_true = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(4, p=p) for p in p_true])
    over = apply_temperature(p_true, 0.5)  # twice as sharp as the truth
    T = fit_temperature(over, y)
    assert T == pytest.approx(2.0, rel=0.15)
    conf_o, conf_c = over.max(axis=1), apply_temperature(over, T).max(axis=1)
    correct = over.argmax(axis=1) == y
    before = calibration_figures(conf_o, correct, over, y)
    after = calibration_figures(conf_c, correct, apply_temperature(over, T), y)
    assert after.ece < before.ece / 2
    assert after.brier < before.brier
    # The label never changes: temperature keeps each row's ranking.
    assert (apply_temperature(over, T).argmax(axis=1) == over.argmax(axis=1)).all()


def test_compose_multiplies_shown_by_the_cause():
    shown = Prediction("shown", 0.9, {"shown": 0.9, NONE_SHOWN: 0.1})
    cause = Prediction("a", 0.5, {"a": 0.5, "b": 0.5})
    p = compose(shown, cause)
    assert p is not None and p.proba is not None
    assert p.proba[NONE_SHOWN] == pytest.approx(0.1) and p.proba["a"] == pytest.approx(0.45)
    assert sum(p.proba.values()) == pytest.approx(1.0)
    unsure = compose(Prediction("none_shown", 0.7, {"shown": 0.3, NONE_SHOWN: 0.7}), cause)
    assert unsure is not None and unsure.label == NONE_SHOWN and unsure.confidence == pytest.approx(0.7)


def test_targets_are_validated_before_any_work():
    assert parse_targets(0.87, {"symptom": 0.9}, ["symptom", "root_cause"]) == {"symptom": 0.9, "root_cause": 0.87}
    with pytest.raises(ValueError, match="unknown dimension 'symtom'"):
        parse_targets(None, {"symtom": 0.9}, ["symptom", "root_cause"])
    with pytest.raises(ValueError, match="between 0 and 1"):
        parse_targets(1.5, {}, ["symptom"])


# -- a constructed gold set: causes that the text shows, and threads that show none ------------------

CAUSE_WORDS = {
    "compiler_defect": "nvcc miscompiles the kernel ptxas internal compiler error fixed in the compiler",
    "packaging_distribution": "the wheel on pypi was built without the sm90 kernels packaging mistake republished",
}
SYMPTOM_WORDS = {"build_failure": "compilation fails while building from source", "crash": "segfault at runtime"}


def _constructed_rows(n: int = 90, start: int = 0) -> list[dict]:
    rows = []
    for i in range(start, start + n):
        symptom = list(SYMPTOM_WORDS)[i % 2]
        kind = i % 3
        cause = list(CAUSE_WORDS)[kind] if kind < 2 else None
        tail = CAUSE_WORDS[cause] if cause else "no reply from maintainers closed as stale nobody knows why"
        rows.append(
            {
                "id": f"lib-{i}",
                "repo": "org/lib",
                "title": f"issue {i}: {SYMPTOM_WORDS[symptom]}",
                "body": f"{SYMPTOM_WORDS[symptom]}. {tail}. report number {i}",
                "symptom": symptom,
                "root_cause": cause,
            }
        )
    return rows


@pytest.fixture
def constructed(tmp_path: Path, taxonomy):
    gold = write_jsonl(tmp_path / "gold.jsonl", _constructed_rows(90))
    rows = _constructed_rows(30, start=1000)
    new = write_jsonl(tmp_path / "new.jsonl", [{k: r[k] for k in ("id", "repo", "title", "body")} for r in rows])
    return gold, new, {r["id"]: r for r in rows}


def test_run_target_kappa_routes_every_row_and_never_invents_a_cause(constructed, tmp_path, taxonomy):
    gold, new, truth = constructed
    out = tmp_path / "labels.jsonl"
    s = label_file("tfidf-logreg", new, out, gold=gold, target_kappa=0.8)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 30
    groups = set(taxonomy.dimensions["root_cause"].groups) | {NONE_SHOWN}
    for r in rows:
        assert r["root_cause_group_suggestion"] in groups
        for d in ("symptom", "root_cause", "root_cause_group"):
            assert r[f"{d}_status"] in ("auto", "review", "none_shown")
            assert r[f"{d}_suggestion"] is not None and 0 <= r[f"{d}_confidence"] <= 1
            if r[f"{d}_status"] == "auto":
                assert r[d] == r[f"{d}_suggestion"]
            else:  # the label is given only when auto
                assert r[d] is None
        if truth[r["id"]]["root_cause"] is not None:
            assert r["root_cause_status"] != "none_shown"
            assert r["root_cause_group_status"] != "none_shown"
        if r["root_cause_status"] == "none_shown":
            assert r["root_cause_suggestion"] == NONE_SHOWN
        assert r["routing"]["symptom"]["target_kappa"] == 0.8
    # The texts separate the classes: the guarantee lets most labels through, none of them wrong.
    auto = [r for r in rows if r["symptom_status"] == "auto"]
    assert len(auto) >= 15 and all(r["symptom"] == truth[r["id"]]["symptom"] for r in auto)
    assert sum(r["root_cause_status"] == "none_shown" for r in rows) >= 5
    assert s.routing["symptom"]["auto"] == len(auto)
    assert sum(s.routing["root_cause"].values()) == 30


def test_without_targets_rows_are_as_before(constructed, tmp_path):
    gold, new, _ = constructed
    out = tmp_path / "labels.jsonl"
    label_file("tfidf-logreg", new, out, gold=gold)
    row = json.loads(out.read_text().splitlines()[0])
    assert "symptom_status" not in row and "root_cause_suggestion" not in row
    assert row["symptom"] is not None and row["root_cause"] is not None and "routing" not in row


def test_thresholds_are_cached_and_invalidated_when_gold_or_options_change(constructed, tmp_path, taxonomy):
    gold_path, _, _ = constructed
    g = load_gold(gold_path, taxonomy)
    first = gold_profile("tfidf-logreg", g, ModelOptions())
    assert not first.from_cache
    again = gold_profile("tfidf-logreg", g, ModelOptions())
    assert again.from_cache
    assert again.thresholds({"symptom": 0.8}) == first.thresholds({"symptom": 0.8})
    assert not gold_profile("tfidf-logreg", g, ModelOptions(extra={"C": 0.5})).from_cache
    rows = _constructed_rows(90)
    rows[0]["symptom"] = "crash" if rows[0]["symptom"] != "crash" else "build_failure"
    changed = load_gold(write_jsonl(tmp_path / "gold2.jsonl", rows), taxonomy)
    assert changed.hash != g.hash
    assert not gold_profile("tfidf-logreg", changed, ModelOptions()).from_cache


def test_a_damaged_profile_cache_is_recomputed_with_a_warning(constructed, taxonomy, caplog):
    from classify.core.paths import cache_dir

    g = load_gold(constructed[0], taxonomy)
    gold_profile("tfidf-logreg", g, ModelOptions())
    (entry,) = (cache_dir() / "profiles").glob("*.json")
    entry.write_text('{"key": "x", "predic')
    prof = gold_profile("tfidf-logreg", g, ModelOptions())
    assert not prof.from_cache
    assert "damaged" in caplog.text
    assert json.loads(entry.read_text())["key"] == entry.stem  # rewritten whole
    # Valid JSON of the wrong shape, an entry that is a folder, a cache folder that is a file: the same.
    doc = json.loads(entry.read_text())
    doc["predictions"]["symptom"][0]["confidence"] = "abc"
    entry.write_text(json.dumps(doc))
    assert not gold_profile("tfidf-logreg", g, ModelOptions()).from_cache
    entry.unlink()
    entry.mkdir()
    assert not gold_profile("tfidf-logreg", g, ModelOptions()).from_cache
    assert entry.is_file()
    profiles = cache_dir() / "profiles"
    for p in profiles.iterdir():
        if p.is_dir():
            p.rmdir()
        else:
            p.unlink()
    profiles.rmdir()
    profiles.write_text("not a folder")
    assert not gold_profile("tfidf-logreg", g, ModelOptions()).from_cache
    assert profiles.is_dir() and gold_profile("tfidf-logreg", g, ModelOptions()).from_cache


def test_shown_dimension_follows_the_nulls(gold):
    g = with_shown_dimensions(gold)
    shown = g.labels["root_cause_shown"]
    assert all((s == "shown") == (y is not None) for s, y in zip(shown, gold.labels["root_cause"]))
    assert g.taxonomy.label == gold.taxonomy.label and g.taxonomy.fingerprint() != gold.taxonomy.fingerprint()
    assert "symptom_shown" not in g.taxonomy.dimensions  # symptom has no nulls


def test_eval_reports_coverage_calibration_and_the_reliability_diagram(tmp_path, gold, taxonomy):
    from classify.evaluation.pipeline import run_eval
    from classify.evaluation.report import render_markdown

    small = tmp_path / "small.jsonl"
    with open(gold.path, encoding="utf-8") as f:
        small.write_text("".join(f.readline() for _ in range(200)), encoding="utf-8")
    run = run_eval("tfidf-logreg", gold=small, n_boot=50, out_dir=tmp_path / "evals")
    sel = run.metrics["selective_labeling"]
    assert set(sel) == {"symptom", "root_cause", "root_cause_group"}
    assert sel["root_cause"]["n"] == 200  # every report: a null cause is the "none shown" class
    assert sel["symptom"]["calibration"]["method"].startswith("temperature")
    for rep in sel.values():
        assert set(rep["coverage"]) == {"0.80", "0.87", "0.95"}
        for c in rep["coverage"].values():
            assert (c["threshold"] is None) == (c["kappa_lo"] is None)
            if c["threshold"] is not None:
                assert c["kappa_lo"] >= float(c["target"]) and 0 < c["coverage"] <= 1
        assert 0 <= rep["calibration"]["after"]["ece"] <= 1
    # The group level's own figures, not its categories' (summing probabilities changes them).
    assert sel["root_cause_group"]["calibration"]["before"] != sel["root_cause"]["calibration"]["before"]
    assert run.out_dir is not None
    assert (run.out_dir / "reliability.png").stat().st_size > 5000
    text = (run.out_dir / "report.md").read_text()
    assert "## How much can the labels be trusted" in text and "reliability.png" in text
    assert "root_cause_shown" in run.metrics["dimensions"]
    doc = json.loads((run.out_dir / "metrics.json").read_text())
    assert render_markdown(doc, {"selective": "s.png", "reliability": "r.png", **_confusions(doc)}) == text.replace(
        "selective.png", "s.png"
    ).replace("reliability.png", "r.png").replace("](confusion_", "](c_")
    # No half-written run folder is left beside it.
    assert [p.name for p in (tmp_path / "evals").iterdir()] == [run.out_dir.name]


def _confusions(doc: dict) -> dict[str, str]:
    return {f"confusion_{n}": f"c_{n}.png" for n in doc["dimensions"]}


def test_leaderboard_skips_incomplete_runs_and_shows_coverage(tmp_path):
    from classify.evaluation.leaderboard import collect, rows

    done = tmp_path / "20260101-000000-a"
    done.mkdir()
    metrics = {
        "meta": {"model": "a", "created_at": "1", "gold_hash": "h"},
        "dimensions": {"symptom": {"kappa": {"kappa": 0.7, "lo": 0.6, "hi": 0.8, "n": 9}, "selective": []}},
        "selective_labeling": {
            "symptom": {
                "coverage": {"0.87": {"threshold": 0.8, "coverage": 0.6, "coverage_lo": 0.5, "coverage_hi": 0.7}}
            }
        },
    }
    (done / "metrics.json").write_text(json.dumps(metrics))
    (done / "report.md").write_text("#")
    half = tmp_path / "20260101-000001-b"
    half.mkdir()
    (half / "metrics.json").write_text(json.dumps({**metrics, "meta": {"model": "b", "created_at": "2"}}))
    entries = collect([tmp_path])
    assert [e.label for e in entries] == ["a"]
    header, body = rows(entries)
    assert "symptom auto share at kappa 0.87" in header
    assert body[0][header.index("symptom auto share at kappa 0.87")] == "60% [50%, 70%]"


def test_nan_safe_threshold_on_empty_input():
    assert search_thresholds([], [], [], [0.87])[0].threshold is None
    assert not math.isnan(search_thresholds([], [], [], [0.87])[0].coverage)


def test_a_dimension_null_everywhere_gets_no_shown_decision(taxonomy):
    recs = [Record(id=f"x{i}", title="t", body="b", fields={"symptom": "crash", "root_cause": None}) for i in range(3)]
    g = gold_from_records(recs, taxonomy)
    assert with_shown_dimensions(g) is g
