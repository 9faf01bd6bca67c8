"""The Python API the README shows: the same functions the commands call, the same behaviour."""

import json
import os

import pytest
from conftest import write_jsonl
from typer.testing import CliRunner

from classify.classifiers.base import ModelOptions
from classify.cli.main import app
from classify.core.paths import DEFAULT_GOLD, DEFAULT_INPUT

runner = CliRunner()


def test_top_level_names_resolve_lazily():
    import classify

    assert sorted(classify.__all__) == sorted(classify._API)
    for name in classify.__all__:
        assert getattr(classify, name) is not None
    with pytest.raises(AttributeError):
        classify.no_such_thing  # noqa: B018


def test_run_eval_writes_the_same_report_the_command_does(tmp_path, gold):
    from classify import Progress, run_eval

    logged = []
    run = run_eval("tfidf-logreg", folds=3, n_boot=100, out_dir=tmp_path, progress=Progress(log=logged.append))
    assert run.out_dir is not None and run.out_dir.parent == tmp_path
    assert {"metrics.json", "report.md", "predictions.jsonl"} <= {p.name for p in run.out_dir.iterdir()}
    on_disk = json.loads((run.out_dir / "metrics.json").read_text())
    assert on_disk["dimensions"]["symptom"]["kappa"] == run.metrics["dimensions"]["symptom"]["kappa"]
    assert run.metrics["dimensions"]["symptom"]["n"] == len(gold)
    score = run.scores["symptom"]  # the typed view of the same figures
    assert (score.kappa, score.kappa_lo, score.kappa_hi) == tuple(
        on_disk["dimensions"]["symptom"]["kappa"][k] for k in ("kappa", "lo", "hi")
    )
    assert score.n == len(gold) and score.level == "category" and 0 <= score.accuracy <= 1
    assert any("3-fold cross-validation" in m for m in logged)
    # every gold record predicted by a model of another fold
    assert set(run.result.folds) == {0, 1, 2}


def test_run_eval_without_out_dir_writes_nothing(tmp_path):
    from classify import run_eval

    run = run_eval("tfidf-logreg", folds=2, n_boot=100, out_dir=None, limit=30)
    assert run.out_dir is None
    assert run.metrics["dimensions"]["symptom"]["n"] == 30


def test_library_errors_are_classify_errors():
    from classify import ClassifyError, run_eval

    with pytest.raises(ClassifyError, match="task must be one of"):
        run_eval("tfidf-logreg", task="nope", out_dir=None)
    with pytest.raises(ClassifyError, match="unknown model spec"):
        run_eval("no-such-model", out_dir=None)
    with pytest.raises(ClassifyError, match="folds must be at least 2"):
        run_eval("tfidf-logreg", folds=1, out_dir=None)


def test_label_file_writes_rows_with_provenance(tmp_path, gold, taxonomy):
    from classify import label_file
    from classify.labeling import Progress

    inp = write_jsonl(tmp_path / "in.jsonl", [json.loads(x) for x in DEFAULT_INPUT.read_text().splitlines()[:12]])
    out = tmp_path / "labels.jsonl"
    seen = []
    summary = label_file("tfidf-logreg", inp, out, chunk_size=5, progress=Progress(labeled=seen.append))
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert summary.total == len(rows) == 12 and sum(seen) == 12
    assert all(r["symptom"] in taxonomy.dimensions["symptom"].ids and r["gold_hash"] == gold.hash for r in rows)


@pytest.mark.parametrize("spelling", ["same", "dotted", "relative"])
def test_output_that_is_the_input_is_refused(tmp_path, spelling, monkeypatch):
    rows = [json.loads(x) for x in DEFAULT_INPUT.read_text().splitlines()[:3]]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    before = inp.read_bytes()
    monkeypatch.chdir(tmp_path)
    out = {"same": str(inp), "dotted": str(tmp_path / "sub" / ".." / "in.jsonl"), "relative": "in.jsonl"}[spelling]
    (tmp_path / "sub").mkdir()
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--input", str(inp), "--out", out, "--force"])
    assert r.exit_code == 2 and "is one of the inputs" in r.output, r.output
    assert inp.read_bytes() == before


def test_output_that_is_the_gold_is_refused(tmp_path):
    copy = tmp_path / "gold.jsonl"
    copy.write_bytes(DEFAULT_GOLD.read_bytes())
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--gold", str(copy), "--out", str(copy), "--force"])
    assert r.exit_code == 2 and "is one of the inputs" in r.output
    assert copy.read_bytes() == DEFAULT_GOLD.read_bytes()


def test_screen_opt_needs_screen(tmp_path):
    r = runner.invoke(
        app, ["run", "--model", "tfidf-logreg", "--screen-opt", "C=1", "--out", str(tmp_path / "o.jsonl")]
    )
    assert r.exit_code == 2 and "--screen-opt: only with --screen" in r.output


def test_opt_given_twice_is_refused(tmp_path):
    r = runner.invoke(
        app, ["eval", "--model", "tfidf-logreg", "--opt", "C=1", "--opt", "C=2", "--out-dir", str(tmp_path)]
    )
    assert r.exit_code == 2 and "--opt C given twice" in r.output
    assert not os.listdir(tmp_path)


def test_llm_flags_are_declared_once_and_refused_for_trained_specs():
    from classify.cli.common import LLM_FLAGS

    for cmd in ("eval", "run"):
        r = runner.invoke(app, [cmd, "--help"])
        assert r.exit_code == 0
        for flag in ("--base-url", "--strategy", "--shots", "--dry-run"):
            assert flag in r.output
    assert set(LLM_FLAGS) >= {"base_url", "api_key_env", "strategy", "shots", "rationale", "samples", "concurrency"}
    r = runner.invoke(app, ["eval", "--model", "tfidf-logreg", "--strategy", "few-shot"])
    assert r.exit_code == 2 and "--strategy: only for LLM models" in r.output
    r = runner.invoke(app, ["eval", "--model", "openai:x", "--strategy", "three-shot"])
    assert r.exit_code == 2  # an Enum choice: typer refuses it before any work


def test_empty_input_is_refused_before_training(tmp_path):
    inp = tmp_path / "empty.jsonl"
    inp.write_text("\n\n")
    out = tmp_path / "o.jsonl"
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--input", str(inp), "--out", str(out)])
    assert r.exit_code == 2 and ("no records" in r.output or "empty" in r.output), r.output
    assert not out.exists() and not (tmp_path / "o.jsonl.partial.jsonl").exists()


def test_screen_model_needs_screen(tmp_path):
    r = runner.invoke(
        app, ["run", "--model", "tfidf-logreg", "--screen-model", "tfidf-logreg", "--out", str(tmp_path / "o")]
    )
    assert r.exit_code == 2 and "--screen-model: only with --screen" in r.output


def test_a_key_given_twice_however_spelled_is_refused(tmp_path):
    r = runner.invoke(app, ["eval", "-m", "tfidf-logreg", "--opt", "C=2", "--opt", "C =3", "--out-dir", str(tmp_path)])
    assert r.exit_code == 2 and "--opt C given twice" in r.output
    r = runner.invoke(app, ["eval", "-m", "openai:x", "--opt", "k=2", "--shots", "3", "--dry-run"])
    assert r.exit_code == 2 and "k given both as a flag and as --opt" in r.output


def test_error_messages_keep_colon_words(tmp_path):
    # rich turns `:x:` into an emoji unless told not to; a spec like openai:x: must print as typed
    r = runner.invoke(
        app, ["run", "--model", "openai:x:", "--opt", "price_in=abc", "--dry-run", "--out", str(tmp_path / "o")]
    )
    assert r.exit_code == 2 and "openai:x:" in r.output, r.output


def test_gold_stats_task_screening():
    r = runner.invoke(app, ["gold", "stats", "--task", "screening", "--n-boot", "100"])
    assert r.exit_code == 0 and "screening@1" in r.output and "a vs b" in r.output, r.output


def test_screening_options_are_in_the_provenance(tmp_path):
    from classify import label_file
    from classify.classifiers.base import ModelOptions

    inp = write_jsonl(tmp_path / "in.jsonl", [json.loads(x) for x in DEFAULT_INPUT.read_text().splitlines()[:4]])
    out = tmp_path / "o.jsonl"
    label_file(
        "tfidf-logreg",
        inp,
        out,
        screen=True,
        screen_model="tfidf-logreg",
        screen_options=ModelOptions(extra={"C": 0.5}),
    )
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(r["screening_options"]["extra"] == {"C": 0.5} for r in rows)


@pytest.mark.parametrize("kind", ["folder", "hf-file"])
def test_an_output_that_cannot_be_written_is_refused_up_front(tmp_path, kind):
    out = tmp_path / ("existing" if kind == "folder" else "labels.hf")
    out.mkdir() if kind == "folder" else out.write_text("x")
    r = runner.invoke(app, ["run", "--model", "tfidf-logreg", "--out", str(out), "--force"])
    assert r.exit_code == 2 and ("is a folder" in r.output or "is a file" in r.output), r.output
    assert not list(tmp_path.glob("*.partial.jsonl"))


def test_the_plugin_page_example_works_as_a_spec(gold, taxonomy):
    import re

    from conftest import ROOT

    from classify import NotFittedError, make_classifier, register
    from classify.core.gold import gold_from_records
    from classify.evaluation.crossval import cross_validate
    from classify.evaluation.leaks import train_test_leaks

    code = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "plugins.md").read_text(), re.S).group(1)
    ns: dict = {}
    exec(compile(code, "docs/plugins.md", "exec"), ns)
    register("test-docs-majority", ns["Majority"])
    clf = make_classifier("test-docs-majority", taxonomy, ModelOptions(extra={"smoothing": 1}))
    with pytest.raises(NotFittedError):
        clf.predict(gold.records[:1])
    small = gold_from_records(gold.records[:60], taxonomy)
    res = cross_validate(clf, small, k=3)  # a clone per fold
    assert train_test_leaks(res) == [] and res.provenance == {
        "model": "test-docs-majority",
        "options": {"smoothing": 1.0},
    }
    assert all(p is not None and p.label in taxonomy.dimensions["symptom"].ids for p in res.predictions["symptom"])


VALIDATED: list[str] = []


def test_run_eval_validates_the_options_once(tmp_path):
    from classify import register, run_eval
    from classify.classifiers.baselines import TfidfLogReg

    @register("test-counted")
    class Counted(TfidfLogReg):
        @classmethod
        def check(cls, spec, taxonomy, options):
            VALIDATED.append(spec)
            return super().check(spec, taxonomy, options)

    small = tmp_path / "gold.jsonl"
    small.write_text("".join(DEFAULT_GOLD.read_text().splitlines(True)[:90]))
    run = run_eval("test-counted", gold=small, folds=3, n_boot=100, out_dir=None)
    assert VALIDATED == ["test-counted"]  # not once more per fold: each fold trains a clone
    assert set(run.result.folds) == {0, 1, 2} and run.scores["symptom"].n == 90
