import json

from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.paths import DEFAULT_INPUT, DEFAULT_SCREENING
from classify.core.screening import load_screening_gold

runner = CliRunner()


def test_screening_gold_maps_booleans_and_coders():
    g = load_screening_gold()
    # Expected counts come from the raw booleans, not constants: the shipped gold grows by appending.
    flags = [json.loads(line)["failure_report"] for line in DEFAULT_SCREENING.read_text().splitlines()]
    assert len(g) == len(flags) and True in flags and False in flags
    assert g.labels["screening"].count("failure_report") == flags.count(True)
    assert g.labels["screening"].count("other") == flags.count(False)
    assert set(g.coders) == {"a", "b"} and all(v in ("failure_report", "other") for v in g.coders["a"]["screening"])


def test_eval_task_screening(tmp_path):
    r = runner.invoke(
        app,
        [
            "eval",
            "--task",
            "screening",
            "--model",
            "tfidf-logreg",
            "--folds",
            "3",
            "--n-boot",
            "200",
            "--out-dir",
            str(tmp_path),
        ],
    )
    assert r.exit_code == 0, r.output
    (run,) = list(tmp_path.iterdir())
    m = json.loads((run / "metrics.json").read_text())
    n = len(load_screening_gold())
    assert m["dimensions"]["screening"]["n"] == n and m["coders"]["screening"]["n"] == n
    assert (run / "confusion_screening.png").exists()


def test_run_with_screening(tmp_path):
    out = tmp_path / "l.jsonl"
    r = runner.invoke(
        app,
        [
            "run",
            "--model",
            "tfidf-logreg",
            "--screen",
            "--screen-model",
            "tfidf-logreg",
            "--input",
            str(DEFAULT_INPUT),
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 141
    kept = [x for x in rows if x["screening"] == "failure_report"]
    dropped = [x for x in rows if x["screening"] == "other"]
    assert kept and dropped and len(kept) + len(dropped) == 141
    assert all(x["symptom"] is None and x["root_cause"] is None for x in dropped)
    assert all(x["symptom"] and x["root_cause"] and x["symptom_confidence"] for x in kept)
    assert all(0 < x["screening_confidence"] <= 1 and x["screening_model"].startswith("tfidf-logreg") for x in rows)


def test_screened_run_pre_encodes_blocks_with_the_screening_model(tmp_path, shared_cache):
    # The screening model reads every record, so it encodes each block up front; the labeling
    # model (same encoder) then finds the kept records cached. Nothing is encoded twice.
    from classify.classifiers.base import make_classifier
    from classify.core.gold import load_gold
    from classify.core.paths import DEFAULT_GOLD
    from classify.core.records import read_records
    from classify.core.screening import screening_taxonomy
    from classify.core.taxonomy import load_taxonomy
    from classify.labeling.resumable import label_records

    tax, s_tax = load_taxonomy(), screening_taxonomy()
    g, sg = load_gold(DEFAULT_GOLD, tax), load_screening_gold(None, s_tax)
    clf = make_classifier("embed-logreg", tax).fit(g.records, g.labels)
    s_clf = make_classifier("embed-logreg", s_tax).fit(sg.records, sg.labels)
    recs = read_records(DEFAULT_INPUT)[:30]
    for r in recs:
        r.title = f"never seen before {r.id}: {r.title}"  # not in the embedding cache yet
    blocks = []
    orig = s_clf.prepare
    s_clf.prepare = lambda rs, progress=None: (blocks.append(len(rs)), orig(rs, progress=progress))[1]
    before = (clf.encoder_.n_encoded, s_clf.encoder_.n_encoded)
    label_records(
        clf,
        recs,
        tmp_path / "o.jsonl",
        {},
        "S",
        chunk_size=4,
        screen=lambda rs: s_clf.predict(rs)["screening"],
        screen_prepare=s_clf.prepare,
    )
    assert blocks == [16, 14]  # blocks of 4 chunks of 4
    assert s_clf.encoder_.n_encoded - before[1] == 30  # each new text encoded once, by the screening model
    assert clf.encoder_.n_encoded == before[0]  # the labeling model found every kept record cached
