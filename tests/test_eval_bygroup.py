"""`classify eval --by`, --leave-group-out, --test-overlap, F1 figures, reference labels, codebook text,
on small constructed sets whose right answers are known (issue 22 item 3)."""

import json
import random

import pytest
import yaml

from classify.core.errors import ClassifyError
from classify.core.progress import Progress
from classify.evaluation.leaks import TestOverlapError
from classify.evaluation.metrics import dimension_report
from classify.evaluation.pipeline import run_eval

TAXONOMY = {
    "name": "tiny",
    "version": 1,
    "dimensions": {
        "kind": {
            "categories": [
                {"id": "a", "name": "Alpha kind", "definition": "Reports about alpha.", "include": ["alpha"]},
                {"id": "b", "name": "Beta kind", "definition": "Reports about beta.", "include": ["beta"]},
                # In words the training texts hold (TF-IDF is fit on them), but no labeled record has c.
                {"id": "c", "name": "Driver", "definition": "driver update", "include": ["driver update"]},
            ]
        }
    },
}
FILLER = "the kernel build fails on my machine with this version after an update of the driver".split()


def _row(i: int, group: str, word: str, label: str, coders: bool = False) -> dict:
    rng = random.Random(f"{group}{i}")
    body = " ".join(rng.sample(FILLER, 8))
    row = {"id": f"{group}-{i}", "repo": group, "title": f"{word} problem", "body": f"{word} {body} {i}", "kind": label}
    if coders:
        row |= {"coder_a": {"kind": label}, "coder_b": {"kind": label}}
    return row


def _group(group: str, n: int, flip: bool, coders: bool = False, start: int = 0) -> list[dict]:
    """n records: "alpha" texts are a and "beta" texts b, or the other way round when `flip`."""
    out = []
    for i in range(start, start + n):
        word = "alpha" if i % 2 == 0 else "beta"
        label = {"alpha": "a", "beta": "b"}[word]
        if flip:
            label = "b" if label == "a" else "a"
        out.append(_row(i, group, word, label, coders))
    return out


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def tiny(tmp_path):
    tax = tmp_path / "tiny.yaml"
    tax.write_text(yaml.safe_dump(TAXONOMY), encoding="utf-8")
    return tax


def _eval(tiny, tmp_path, gold_rows, **kw):
    gold = _write(tmp_path / "gold.jsonl", gold_rows)
    kw.setdefault("model", "tfidf-logreg")
    return run_eval(taxonomy=tiny, gold=gold, n_boot=100, out_dir=tmp_path / "evals", **kw)


def test_by_group_trains_one_model_per_group_and_leave_group_out_tests_on_the_unseen_group(tiny, tmp_path):
    # In repo x "alpha" means a; in repo y it means b. A model per repo learns each perfectly (kappa 1);
    # a model trained on the other repo has learned the opposite (kappa -1); a tiny repo z is left out.
    rows = _group("x", 20, flip=False) + _group("y", 20, flip=True) + _group("z", 3, flip=False)
    run = _eval(tiny, tmp_path, rows, by="repo")
    bg = run.metrics["by_group"]
    assert {g: r["dimensions"]["kind"]["kappa"]["kappa"] for g, r in bg["groups"].items()} == {"x": 1.0, "y": 1.0}
    assert bg["mean"]["kind"]["kappa"] == 1.0 and bg["mean"]["kind"]["n_groups"] == 2
    assert bg["skipped"] == {"z": "3 records, too few for 5-fold cross-validation"}
    assert run.metrics["dimensions"]["kind"]["n"] == 40  # pooled: the evaluated groups' predictions
    assert run.metrics["dimensions"]["kind"]["accuracy"] == 1.0
    report = (run.out_dir / "report.md").read_text()
    assert "## Per repo" in report and "| **mean of 2 groups** | | | 1.000 |" in report and "- z: 3 records" in report
    preds = [json.loads(line) for line in (run.out_dir / "predictions.jsonl").read_text().splitlines()]
    assert {p["id"].split("-")[0] == p["group"] for p in preds} == {True}

    lo = _eval(tiny, tmp_path, rows[:40], by="repo", leave_group_out=True)
    bg = lo.metrics["by_group"]
    # Its own row in the leaderboard, and a folder that says what it is.
    assert lo.out_dir.name.endswith("tfidf-logreg_leave-one-repo-out")
    assert json.loads((lo.out_dir / "metrics.json").read_text())["meta"]["label"] == "tfidf-logreg (leave-one-repo-out)"
    assert bg["leave_group_out"] and {g: r["n_train"] for g, r in bg["groups"].items()} == {"x": 20, "y": 20}
    assert {g: r["dimensions"]["kind"]["kappa"]["kappa"] for g, r in bg["groups"].items()} == {"x": -1.0, "y": -1.0}
    assert bg["mean"]["kind"]["kappa"] == -1.0 and bg["worst"]["kind"]["kappa"] == -1.0
    # Every record was predicted by the model of the other group only.
    res = lo.result
    for f, ids in res.train_ids.items():
        assert {r.id for r, ff in zip(res.gold.records, res.folds) if ff == f}.isdisjoint(ids)


def test_by_group_with_a_test_file(tiny, tmp_path):
    gold = _group("x", 20, flip=False) + _group("y", 20, flip=True)
    test = _write(
        tmp_path / "test.jsonl",
        _group("x", 6, flip=False, start=100) + _group("y", 6, flip=True, start=100) + _group("w", 4, False),
    )
    run = _eval(tiny, tmp_path, gold, by="repo", test=test)
    bg = run.metrics["by_group"]
    assert {g: r["dimensions"]["kind"]["kappa"]["kappa"] for g, r in bg["groups"].items()} == {"x": 1.0, "y": 1.0}
    assert {g: r["n_train"] for g, r in bg["groups"].items()} == {"x": 20, "y": 20}
    assert bg["skipped"] == {"w": "no gold record of this repo to train on"}
    assert run.result.mode == "test" and run.metrics["dimensions"]["kind"]["n"] == 12

    lo = _eval(tiny, tmp_path, gold, by="repo", test=test, leave_group_out=True)
    bg = lo.metrics["by_group"]
    # x and y are predicted by the other repo's model (wrong throughout); w by a model of both.
    assert bg["groups"]["x"]["dimensions"]["kind"]["kappa"]["kappa"] == -1.0
    assert bg["groups"]["y"]["dimensions"]["kind"]["kappa"]["kappa"] == -1.0
    assert {g: r["n_train"] for g, r in bg["groups"].items()} == {"x": 20, "y": 20, "w": 40}
    assert bg["worst"]["kind"]["kappa"] == -1.0


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"leave_group_out": True}, "--leave-group-out needs --by"),
        ({"by": "repo", "limit": 10}, "--by does not go with --limit"),
        ({"by": "nofield"}, "--by nofield: 40 of 40 gold records have no nofield value"),
        ({"by": "id"}, r"--by id: none of the 40 groups could be evaluated \(x-0: 1 records, too few"),
        ({"test_overlap": "keep"}, "--test-overlap keep: only with --test"),
    ],
)
def test_by_group_refuses_what_it_cannot_do(tiny, tmp_path, kw, message):
    with pytest.raises(ClassifyError, match=message):
        _eval(tiny, tmp_path, _group("x", 20, False) + _group("y", 20, True), **kw)


def _overlap_case(tmp_path):
    """Gold of 40; a test file of 8 whose t0 repeats gold x-0 (and its copy x-dup), t1 repeats x-1, and
    x-3 is repeated under its own id."""
    gold = _group("x", 40, flip=False)
    gold.append({**gold[0], "id": "x-dup"})
    test = _group("x", 5, flip=False, start=200)
    test += [{**gold[0], "id": "t0"}, {**gold[1], "id": "t1"}, dict(gold[3])]
    return gold, _write(tmp_path / "test.jsonl", test)


def test_test_overlap_refuse_lists_every_match(tiny, tmp_path):
    gold, test = _overlap_case(tmp_path)
    with pytest.raises(TestOverlapError) as e:
        _eval(tiny, tmp_path, gold, test=test)
    assert "shares 1 ids" in str(e.value) and "['x-3']" in str(e.value) and "--test-overlap" in str(e.value)
    gold = [r for r in gold if r["id"] != "x-3"]
    with pytest.raises(TestOverlapError) as e:
        _eval(tiny, tmp_path, gold, test=test)
    # Both gold records t0 repeats are named, not only the first.
    assert "2 of 8 records" in str(e.value) and "t0 = gold x-0, t0 = gold x-dup, t1 = gold x-1" in str(e.value)


def test_test_overlap_drop_train_scores_the_test_file_whole_and_keep_warns(tiny, tmp_path):
    gold, test = _overlap_case(tmp_path)
    said = []
    run = _eval(tiny, tmp_path, gold, test=test, test_overlap="drop-train", progress=Progress(log=said.append))
    assert run.metrics["dimensions"]["kind"]["n"] == 8  # the whole test file
    trained = run.result.train_ids[-1]
    assert len(trained) == 41 - 4 and trained.isdisjoint({"x-0", "x-dup", "x-1", "x-3"})
    ov = run.metrics["test_overlap"]
    assert ov["n_dropped_from_training"] == 4 and ov["n_test_records"] == 3
    assert {(m["test_id"], m["gold_id"], m["by"]) for m in ov["matches"]} == {
        ("x-3", "x-3", "id"),
        ("t0", "x-0", "text"),
        ("t0", "x-dup", "text"),
        ("t1", "x-1", "text"),
    }
    assert "| t0 | x-dup | text |" in (run.out_dir / "report.md").read_text()
    assert any("left out of training (37 remain)" in m for m in said)

    said.clear()
    kept = _eval(tiny, tmp_path, gold, test=test, test_overlap="keep", progress=Progress(log=said.append))
    assert kept.result.train_ids[-1] >= {"x-0", "x-dup", "x-1", "x-3"} and len(kept.result.train_ids[-1]) == 41
    assert kept.metrics["test_overlap"]["policy"] == "keep" and len(kept.metrics["test_overlap"]["matches"]) == 4
    assert any(m.startswith("warning: 3 test records repeat 4 gold records") for m in said)
    assert "scores are flattered" in (kept.out_dir / "report.md").read_text()


def test_weighted_and_macro_f1_beside_accuracy():
    # a: P=1, R=2/3, F1=0.8 (support 3); b: P=0.5, R=1, F1=2/3 (support 1).
    rep = dimension_report(["a", "a", "a", "b"], ["a", "a", "b", "b"], [0.9, 0.8, 0.7, 0.6], ["a", "b"], n_boot=100)
    assert rep["accuracy"] == 0.75
    assert rep["macro_f1"] == pytest.approx((0.8 + 2 / 3) / 2)
    assert rep["weighted_f1"] == pytest.approx((3 * 0.8 + 2 / 3) / 4)


def test_figures_in_metrics_json_and_report_and_reference_labels_without_coders(tiny, tmp_path):
    rows = _group("x", 20, flip=False)
    run = _eval(tiny, tmp_path, rows)
    doc = json.loads((run.out_dir / "metrics.json").read_text())
    kind = doc["dimensions"]["kind"]
    assert kind["weighted_f1"] == kind["macro_f1"] == kind["accuracy"] == 1.0
    assert doc["meta"]["gold_coders"] == []
    report = (run.out_dir / "report.md").read_text()
    assert "| weighted-F1 |" in report and "reference labels" in report
    assert "coder" not in report.lower()  # no coders to speak of

    with_coders = _eval(tiny, tmp_path, _group("x", 20, flip=False, coders=True))
    report = (with_coders.out_dir / "report.md").read_text()
    assert "coders' kappa" in report and "reference labels" not in report


def test_codebook_text_as_training_data_is_stated_and_can_be_turned_off(tiny, tmp_path):
    from classify.classifiers.base import ModelOptions

    # No gold record is labeled c: only the codebook's pseudo-example of c ("Driver. driver update")
    # can teach the model that class, so a text about a driver update comes out c with it and never without.
    rows = _group("x", 20, flip=False)
    test = [{"id": f"t{i}", "title": "driver update", "body": "driver update", "kind": "a"} for i in range(4)]
    test = _write(tmp_path / "test.jsonl", test)
    on = _eval(tiny, tmp_path, rows, model="tfidf-embed", test=test, options=ModelOptions(extra={"embed": False}))
    assert {p.label for p in on.result.predictions["kind"]} == {"c"}
    assert "codebook text is training data" in (on.out_dir / "report.md").read_text()
    assert json.loads((on.out_dir / "metrics.json").read_text())["meta"]["codebook_training_text"] is True
    off = _eval(
        tiny,
        tmp_path,
        rows,
        model="tfidf-embed",
        test=test,
        options=ModelOptions(extra={"embed": False, "codebook": False}),
    )
    assert "c" not in {p.label for p in off.result.predictions["kind"]}
    assert "codebook text" not in (off.out_dir / "report.md").read_text()
    assert json.loads((off.out_dir / "metrics.json").read_text())["meta"]["codebook_training_text"] is False


def test_confusion_matrix_tick_labels_do_not_overlap():
    from classify.evaluation.report import confusion_figure

    labels = [f"category_{w}_with_a_long_identifier" for w in "abcdefghijklmno"]
    rep = {
        "confusion": {"labels": labels, "matrix": [[(i + j) % 4 for j in range(15)] for i in range(15)]},
        "kappa": {"kappa": 0.5, "lo": 0.4, "hi": 0.6},
        "n": 100,
    }
    fig = confusion_figure("root_cause", rep)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = []
    for ax in fig.axes:
        for t in ax.get_xticklabels() + ax.get_yticklabels():
            if t.get_text():
                boxes.append((t.get_text(), t.get_window_extent(renderer)))
    overlaps = [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1 :] if ba.overlaps(bb)]
    assert not overlaps, overlaps[:5]
    # Every tick label lies inside the figure (nothing cut off).
    W, H = fig.canvas.get_width_height()
    assert all(b.x0 >= 0 and b.y0 >= 0 and b.x1 <= W and b.y1 <= H for _, b in boxes)


def test_cli_by_leave_group_out_and_test_overlap(tiny, tmp_path):
    from typer.testing import CliRunner

    from classify.cli.main import app

    gold = _write(tmp_path / "gold.jsonl", _group("x", 20, flip=False) + _group("y", 20, flip=True))
    base = ["eval", "-m", "tfidf-logreg", "--taxonomy", str(tiny), "--gold", str(gold), "--n-boot", "100"]
    base += ["--out-dir", str(tmp_path / "evals")]
    r = CliRunner().invoke(app, base + ["--by", "repo", "--leave-group-out"])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "per repo: leave one repo out" in out and "worst" in out and "weighted-F1" in out
    assert "coders' kappa" not in out and "(reference labels)" in out
    r = CliRunner().invoke(app, base + ["--leave-group-out"])
    assert r.exit_code == 2 and "error: --leave-group-out needs --by" in r.output
    test = _write(tmp_path / "test.jsonl", [{**_group("x", 2, flip=False)[1], "id": "again"}])
    r = CliRunner().invoke(app, base + ["--test", str(test)])
    assert r.exit_code == 2 and "again = gold x-1" in " ".join(r.output.split())
    r = CliRunner().invoke(app, base + ["--test", str(test), "--test-overlap", "drop-train"])
    assert r.exit_code == 0 and "1 test records repeat gold (drop-train)" in " ".join(r.output.split()), r.output
