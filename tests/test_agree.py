"""Issue 6: lexical+semantic, hierarchical, ensemble specs, leaderboard, packaged mpnet assembly.

The fast tests use TF-IDF-only members (no encoder load); fine-tuning and ONNX are in
test_finetune.py / test_onnx_backend.py.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from classify.classifiers.base import ModelOptions, ModelSpecError, make_classifier
from classify.core.gold import gold_from_records
from classify.evaluation.crossval import cross_validate
from classify.evaluation.leaks import train_test_leaks
from classify.evaluation.metrics import compute_metrics

LEXICAL = {"embed": False}  # TF-IDF words only: no sentence encoder needed
CHARS = {"embed": False, "tfidf": False, "char": True}


def _opts(**extra):
    return ModelOptions(show_progress=False, extra=dict(extra))


def _split(gold, n_test=60):
    idx = np.random.default_rng(0).permutation(len(gold))
    te, tr = sorted(idx[:n_test]), sorted(idx[n_test:])
    labels = {d: [gold.labels[d][i] for i in tr] for d in gold.taxonomy.dimension_ids}
    return [gold.records[i] for i in tr], labels, [gold.records[i] for i in te], te


def test_tfidf_only_spec_predicts_every_dimension_with_probabilities(gold, taxonomy):
    tr, labels, te, _ = _split(gold)
    clf = make_classifier("tfidf-embed", taxonomy, _opts(**LEXICAL)).fit(tr, labels)
    out = clf.predict(te)
    assert set(out) == set(taxonomy.dimension_ids)
    for d, preds in out.items():
        assert len(preds) == len(te)
        for p in preds:
            assert p.label in taxonomy.dimensions[d].ids
            assert abs(sum(p.proba.values()) - 1) < 1e-6
            assert p.confidence == pytest.approx(max(p.proba.values()))
    prov = clf.provenance()
    assert prov["features"] == "tfidf-word-1-2" and prov["codebook_examples"] is True
    # Fit on nothing but nulls for a dimension is refused with its name.
    with pytest.raises(ValueError, match="root_cause"):
        make_classifier("tfidf-embed", taxonomy, _opts(**LEXICAL)).fit(tr, {**labels, "root_cause": [None] * len(tr)})


def test_tfidf_vocabulary_comes_from_training_texts_only(gold, taxonomy):
    from dataclasses import replace

    tr, labels, te, _ = _split(gold)
    # Two made-up words, each in several reports (min_df=2 cannot be why one is missing): one only
    # in training texts, one only in the records the model will predict.
    seen, unseen = "zqxjkvseenmarker", "zqxjkvunseenmarker"
    tr = [replace(r, body=f"{r.body} {seen}") if i % 10 == 0 else r for i, r in enumerate(tr)]
    # At the very end of the text, so that no bigram of the original text is broken by it.
    marked_te = [
        replace(r, discussion=f"{r.discussion} {unseen}") if r.discussion else replace(r, body=f"{r.body} {unseen}")
        for r in te
    ]
    clf = make_classifier("tfidf-embed", taxonomy, _opts(**LEXICAL)).fit(tr, labels)
    before = clf.predict(te)
    marked = clf.predict(marked_te)
    assert seen in clf.vectorizer.vocabulary_  # the check can see a marker word at all
    assert unseen not in clf.vectorizer.vocabulary_  # predicting did not refit the vocabulary
    # ...and a word the model never trained on changes no probability.
    for d in before:
        assert [p.proba for p in marked[d]] == [p.proba for p in before[d]]
    train_words = set(clf.vectorizer.build_analyzer()(" ".join(r.text() for r in tr)))
    assert all(t in train_words for t in clf.vectorizer.vocabulary_ if " " not in t)


def test_hierarchical_label_lies_in_predicted_group(gold, taxonomy):
    tr, labels, te, _ = _split(gold)
    clf = make_classifier("hier-tfidf-embed", taxonomy, _opts(**LEXICAL)).fit(tr, labels)
    out = clf.predict(te)
    rc = taxonomy.dimensions["root_cause"]
    assert "symptom" in out and "root_cause" in out  # still the taxonomy's dimensions
    for p in out["root_cause"]:
        g = p.extra["group"]
        assert g in rc.groups
        assert rc.group_of(p.label) == g
        assert abs(sum(p.proba.values()) - 1) < 1e-6  # joint P(group) * P(category | group)
        assert p.extra["group_confidence"] == pytest.approx(max(p.extra["group_proba"].values()))
        in_group = sum(v for c, v in p.proba.items() if rc.group_of(c) == g)
        assert in_group == pytest.approx(p.extra["group_confidence"], abs=1e-6)
    # Symptom has no groups: a flat head, no group in extra.
    assert all("group" not in p.extra for p in out["symptom"])


def test_ensemble_agreement_confidence(gold, taxonomy):
    tr, labels, te, _ = _split(gold)
    spec = "ensemble:tfidf-embed[embed=false]+tfidf-embed[embed=false,tfidf=false,char=true]"
    ens = make_classifier(spec, taxonomy, _opts()).fit(tr, labels)
    out = ens.predict(te)
    members = [m.predict(te) for m in ens.members]
    for d in taxonomy.dimension_ids:
        for i, p in enumerate(out[d]):
            a, b = members[0][d][i], members[1][d][i]
            mean = {c: (a.proba.get(c, 0) + b.proba.get(c, 0)) / 2 for c in set(a.proba) | set(b.proba)}
            assert p.label == max(mean, key=mean.get)
            share = ((a.label == p.label) + (b.label == p.label)) / 2
            assert p.extra["agreement"] == share
            assert p.confidence == pytest.approx(mean[p.label] * share)
            assert p.extra["members"] == [a.label, b.label]
    # When the members disagree the agreement score is lower than the plain mean.
    split = [p for p in out["symptom"] if p.extra["agreement"] < 1]
    assert all(p.confidence < max(p.proba.values()) for p in split)
    mean_mode = make_classifier(spec, taxonomy, _opts(confidence="mean")).fit(tr, labels).predict(te)
    assert [p.confidence for p in mean_mode["symptom"]] == pytest.approx(
        [max(p.proba.values()) for p in out["symptom"]]
    )


@pytest.mark.parametrize(
    "spec,msg",
    [
        ("ensemble:tfidf-embed", "at least two"),
        ("ensemble:tfidf-embed+tfidf-embed[nokey]", "expected key=value"),
        ("ensemble:tfidf-embed+no-such-model", "unknown model spec"),
        ("ensemble:tfidf-embed+ensemble", "do not nest"),
    ],
)
def test_ensemble_spec_errors(taxonomy, spec, msg):
    with pytest.raises(ModelSpecError, match=msg):
        make_classifier(spec, taxonomy, _opts())


def test_new_specs_cross_validate_without_leaks(gold, taxonomy):
    # The quality floor on full gold (kappa > 0.2 on every level) is benchmarks/cv_quality.py.
    small = gold_from_records(gold.records[:150], taxonomy)
    res = cross_validate("hier-tfidf-embed", small, _opts(**LEXICAL), k=3, seed=0)
    assert train_test_leaks(res) == []
    m = compute_metrics(res, n_boot=100)
    assert {"symptom", "root_cause", "root_cause_group"} <= set(m["dimensions"])
    # Better than chance on every level, from words alone (150 records: root cause only just).
    kappa = {name: m["dimensions"][name]["kappa"]["kappa"] for name in ("symptom", "root_cause", "root_cause_group")}
    assert kappa["symptom"] > 0.2 and kappa["root_cause_group"] > 0.2 and kappa["root_cause"] > 0, kappa


def test_leaderboard_collects_runs(gold, taxonomy, tmp_path):
    from classify.evaluation.leaderboard import collect, render_markdown, rows
    from classify.evaluation.report import write_eval

    small = gold_from_records(gold.records[:150], taxonomy)
    for extra in (LEXICAL, CHARS):
        opts = _opts(**extra)
        res = cross_validate("tfidf-embed", small, opts, k=3)
        write_eval(
            res,
            compute_metrics(res, n_boot=100),
            tmp_path,
            extra_meta={"options": {"encoder": None, "include_discussion": True, "extra": extra}},
        )
    entries = collect([tmp_path])
    assert len(entries) == 2
    header, body = rows(entries)
    assert header[0] == "model" and "symptom kappa [95% CI]" in header and header[-1] == "s / 1000 rec"
    assert "root_cause_group @50% / @70%" in header
    labels = [r[0] for r in body]
    assert any("char=True" in line for line in labels) and any("embed=False" in line for line in labels)
    # Each kappa cell is the run's own number with its interval.
    doc = json.loads(next(tmp_path.glob("*/metrics.json")).read_text())
    k = doc["dimensions"]["symptom"]["kappa"]
    assert any(f"{k['kappa']:.3f} [{k['lo']:.3f}, {k['hi']:.3f}]" in r for r in body)
    md = render_markdown(entries)
    assert md.count("\n| ") >= 3
    with pytest.raises(FileNotFoundError):
        collect([tmp_path / "missing"])


def test_leaderboard_cli(gold, taxonomy, tmp_path):
    from typer.testing import CliRunner

    from classify.cli.main import app

    runner = CliRunner()
    out_root = tmp_path / "evals"
    small = tmp_path / "small.jsonl"
    small.write_text(
        "".join(
            json.dumps(
                {
                    "id": r.id,
                    "title": r.title,
                    "body": r.body,
                    "discussion": r.discussion,
                    **{k: v for k, v in r.fields.items() if k in ("symptom", "root_cause")},
                }
            )
            + "\n"
            for r in gold.records[:120]
        )
    )
    r = runner.invoke(
        app,
        [
            "eval",
            "--model",
            "tfidf-embed",
            "--gold",
            str(small),
            "--folds",
            "3",
            "--n-boot",
            "100",
            "--opt",
            "embed=false",
            "--out-dir",
            str(out_root),
        ],
    )
    assert r.exit_code == 0, r.output
    md = tmp_path / "lb.md"
    r = runner.invoke(app, ["leaderboard", str(out_root), "--out", str(md)])
    assert r.exit_code == 0, r.output
    text = md.read_text()
    assert "tfidf-embed embed=False" in text and "symptom kappa" in text
    r = runner.invoke(app, ["leaderboard", str(tmp_path / "nothing")])
    assert r.exit_code == 2


def _fake_st_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("all-mpnet-base-v2/", "")
        z.writestr("all-mpnet-base-v2/model.safetensors", b"\x00" * 5000)
        z.writestr("all-mpnet-base-v2/config.json", "{}")
        z.writestr("all-mpnet-base-v2/tokenizer.json", "{}")
        z.writestr("all-mpnet-base-v2/1_Pooling/config.json", "{}")
        z.writestr("all-mpnet-base-v2/desktop.ini", "junk")
        z.writestr(
            "all-mpnet-base-v2/modules.json",
            json.dumps(
                [
                    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
                ]
            ),
        )
    return buf.getvalue()


def _volumes(tmp_path: Path, data: bytes) -> list[Path]:
    cut = np.linspace(0, len(data), 6).astype(int)
    parts = []
    for i in range(5):
        p = tmp_path / f"all-mpnet-base-v2.zip.00{i + 1}"
        p.write_bytes(data[cut[i] : cut[i + 1]])
        parts.append(p)
    return parts


def test_mpnet_volumes_assemble_into_a_model_folder(tmp_path):
    from classify.encoders.packaged import assemble_mpnet

    parts = _volumes(tmp_path, _fake_st_zip())
    folder = assemble_mpnet(tmp_path / "enc", parts=parts)
    assert (folder / "model.safetensors").stat().st_size == 5000
    assert (folder / "2_Normalize").is_dir()  # listed in modules.json, absent from the archive
    assert not (folder / "desktop.ini").exists()
    # Second call reuses the folder without reading the parts.
    for p in parts:
        p.unlink()
    assert assemble_mpnet(tmp_path / "enc", parts=parts) == folder


def test_mpnet_damaged_or_missing_volume_is_a_clear_error(tmp_path):
    from classify.encoders.packaged import EncoderUnavailable, assemble_mpnet

    data = bytearray(_fake_st_zip())
    i = data.index(b"\x00" * 100) + 50  # inside the weights member: its CRC no longer matches
    data[i] = 1
    with pytest.raises(EncoderUnavailable, match="CRC"):
        assemble_mpnet(tmp_path / "a", parts=_volumes(tmp_path, bytes(data)))
    parts = _volumes(tmp_path, _fake_st_zip())
    with pytest.raises(EncoderUnavailable, match="valid zip"):
        assemble_mpnet(tmp_path / "b", parts=parts[:2] + parts[3:])  # one volume missing
    assert not (tmp_path / "b" / "all-mpnet-base-v2").exists()


def test_leaderboard_labels_tell_runs_apart():
    from classify.evaluation.leaderboard import run_label

    assert run_label({"model": "embed-logreg", "options": {"encoder": None, "extra": {}}}) == "embed-logreg"
    assert (
        run_label({"model": "embed-logreg", "options": {"encoder": "all-mpnet-base-v2", "extra": {"backend": "onnx"}}})
        == "embed-logreg --encoder all-mpnet-base-v2 backend=onnx"
    )
    # Older runs without options: the encoder and LLM strategy come from provenance; limits are flagged.
    assert (
        run_label({"model": "x", "provenance": {"encoder": "all-mpnet-base-v2|abc"}}) == "x --encoder all-mpnet-base-v2"
    )
    assert run_label({"model": "x", "provenance": {"encoder": "all-MiniLM-L6-v2|abc"}}) == "x"
    assert (
        run_label({"model": "l", "provenance": {"strategy": "few-shot", "k": 2}, "params": {"limit": 40}})
        == "l strategy=few-shot k=2 (40-record sample)"
    )


def test_cli_error_quotes_member_options_literally(tmp_path):
    from typer.testing import CliRunner

    from classify.cli.main import app

    r = CliRunner().invoke(app, ["eval", "--model", "ensemble:tfidf-embed[embed=false]", "--out-dir", str(tmp_path)])
    assert r.exit_code == 2
    # rich would swallow "[embed=false]" as a markup tag if the message were not escaped
    assert "ensemble:tfidf-embed[embed=false]: an ensemble needs at least two members" in r.output


def test_llm_flags_are_accepted_for_ensembles_with_an_llm_member_only():
    from classify.classifiers.ensemble import llm_members

    assert llm_members("ensemble:tfidf-embed[C=3]+openai:gpt-4o-mini+local:smollm2-135m@mpnet") == [
        "openai:gpt-4o-mini",
        "local:smollm2-135m",
    ]
    assert llm_members("ensemble:tfidf-embed+embed-logreg") == [] and llm_members("openai:x") == []


def test_malformed_ensemble_member_is_a_clear_cli_error(tmp_path):
    from typer.testing import CliRunner

    from classify.cli.main import app

    for cmd in (["eval"], ["run", "--out", str(tmp_path / "o.jsonl")]):
        r = CliRunner().invoke(app, [*cmd, "--model", "ensemble:tfidf-embed[embed]+openai:x", "--shots", "2"])
        assert r.exit_code == 2 and "expected key=value" in r.output, r.output
        assert not isinstance(r.exception, ModelSpecError)  # a message, not a traceback


def test_ensemble_routes_llm_options_to_llm_members_and_the_rest_to_trained_ones(taxonomy):
    # --shots arrives as k: it must not become embed-knn's neighbour count; C reaches the member that
    # has a C (embed-logreg), not the LLM and not embed-knn, which has none
    clf = make_classifier(
        "ensemble:embed-knn+embed-logreg+openai:gpt-4o-mini[base_url=http://127.0.0.1:9/v1]",
        taxonomy,
        _opts(k=3, strategy="few-shot", C=5),
    )
    knn, logreg, llm = clf.make_members()  # fit builds them; constructors do no work
    assert knn.options.extra == {} and knn.params.k == 10
    assert logreg.options.extra == {"C": 5} and logreg.params.C == 5
    assert llm.settings.k == 3 and llm.settings.strategy == "few-shot"
    # A key no member takes is refused, naming the keys that some member would take.
    with pytest.raises(ModelSpecError, match=r"unknown option 'bogus'; allowed: C, .*confidence"):
        make_classifier("ensemble:embed-knn+embed-logreg", taxonomy, _opts(bogus=1))


def test_leaderboard_names_the_gold_of_each_row_when_runs_differ():
    from classify.evaluation.leaderboard import Entry, rows

    def entry(run, gold_hash):
        return Entry(
            run=run,
            label=run,
            created_at="",
            mode="cv",
            kappa={"symptom": {"kappa": 0.5, "lo": 0.4, "hi": 0.6}},
            selective={},
            seconds_per_1000=1.0,
            gold_hash=gold_hash,
        )

    header, body = rows([entry("a", "g1"), entry("b", "g1")])
    assert "gold" not in header
    header, body = rows([entry("a", "g1"), entry("b", "g2")])
    assert header[-1] == "gold" and sorted(r[-1] for r in body) == ["g1", "g2"]
