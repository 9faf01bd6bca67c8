"""`classify run --engine ray` (classify.labeling.rayengine) on a local 2-CPU Ray: the same rows as the
local engine, resumable part by part, read back by the labels reader; a clear error without Ray."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.paths import DEFAULT_INPUT
from classify.core.records import read_rows
from classify.core.writer import write_rows

N = 40  # records: with --chunk-size 4 (batches of 16) three parts


@pytest.fixture
def small(tmp_path) -> Path:
    return write_rows(tmp_path / "in.jsonl", read_rows(DEFAULT_INPUT)[:N]) or tmp_path / "in.jsonl"


@pytest.fixture
def gold(tmp_path) -> Path:
    """A third of gold: the same paths, faster training and cross-validation."""
    g = tmp_path / "gold.jsonl"
    g.write_text("".join((Path(__file__).parent.parent / "gold" / "reports.jsonl").read_text().splitlines(True)[:200]))
    return g


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


def _norm(rows: list[dict]) -> list[dict]:
    """A row without its run's clock; a key one row lacks reads back from Parquet as null (as from any
    Parquet labels file), so null and absent are the same here."""
    return [{k: v for k, v in r.items() if v is not None and k != "labeled_at"} for r in rows]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_without_ray_the_engine_is_a_one_line_error(small, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setitem(sys.modules, "ray.data", None)
    out = tmp_path / "o.jsonl"
    r = CliRunner().invoke(app, ["run", "--model", "tfidf-logreg", "-i", str(small), "-o", str(out), "--engine", "ray"])
    assert r.exit_code == 2, r.output
    assert "pip install 'classify[ray]'" in r.output and "Traceback" not in r.output
    assert not out.exists()
    r = CliRunner().invoke(app, ["run", "-i", str(small), "-o", str(out), "--engine", "spark"])
    assert r.exit_code == 2 and "unknown engine" in r.output


def test_ray_rows_are_the_local_rows_routed_and_screened(ray_local, small, gold, tmp_path):
    from classify.labeling.pipeline import label_file

    # routed labels (the symptom) and screening; a routed screening too would cross-validate 755 more records
    kw = dict(gold=gold, chunk_size=4, screen=True, screen_model="tfidf-logreg", targets={"symptom": 0.6})
    local = label_file("tfidf-logreg", small, tmp_path / "local.jsonl", **kw)
    on_ray = label_file("tfidf-logreg", small, tmp_path / "ray.jsonl", engine="ray", **kw)
    a, b = _jsonl(tmp_path / "local.jsonl"), _jsonl(tmp_path / "ray.jsonl")
    assert [r["id"] for r in b] == [r["id"] for r in a]  # input order, one row each
    assert _norm(b) == _norm(a)
    assert any(r.get("symptom_status") == "screened_out" for r in a)  # screening and routing both at work
    assert any(r.get("symptom_status") in ("auto", "review") for r in a)
    assert on_ray.routing == local.routing and on_ray.screened_out == local.screened_out
    assert not (tmp_path / "ray.jsonl.parts").exists()  # the parts are gone once the file is written


def test_partitioned_output_resumes_skipping_finished_parts(ray_local, small, gold, tmp_path):
    from classify.core import labelparts, labelrow
    from classify.labeling.pipeline import label_file
    from classify.labeling.resumable import RunError

    inp = write_rows(tmp_path / "in.parquet", read_rows(small)) or tmp_path / "in.parquet"  # read by Ray itself
    folder = tmp_path / "labels"
    s = label_file("tfidf-logreg", inp, f"{folder}/", engine="ray", chunk_size=4, gold=gold)
    parts = labelparts.parts(folder)
    assert s.total == N and s.labeled == N and len(parts) >= 2
    rows = labelrow.read_label_rows(folder)  # what `classify report` reads
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in read_rows(small))

    # A driver killed before the end: one part never written, the run not marked complete.
    lost = parts[0]
    n_lost = len(labelparts.part_ids(lost))
    lost.unlink()
    run = labelparts.read_run(folder)
    labelparts.write_run(folder, run["signature"], run["parts"], complete=False)
    with pytest.raises(labelrow.LabelRowError, match="not finished"):
        labelrow.read_label_rows(folder)
    kept = {p.name: p.stat().st_mtime_ns for p in parts[1:]}
    with pytest.raises(RunError, match="different arguments"):
        label_file("tfidf-logreg", inp, f"{folder}/", engine="ray", chunk_size=4, gold=gold, keep=())
    s2 = label_file("tfidf-logreg", inp, f"{folder}/", engine="ray", chunk_size=4, gold=gold)
    assert s2.resumed == N - n_lost and s2.labeled == n_lost
    assert {p.name: p.stat().st_mtime_ns for p in labelparts.parts(folder) if p.name in kept} == kept  # untouched
    again = labelrow.read_label_rows(folder)
    key = lambda r: r["id"]  # noqa: E731
    assert _norm(sorted(again, key=key)) == _norm(sorted(rows, key=key))
    with pytest.raises(RunError, match="finished run"):
        label_file("tfidf-logreg", inp, f"{folder}/", engine="ray", chunk_size=4, gold=gold)


def test_a_parts_folder_is_only_for_the_ray_engine(small, tmp_path):
    from classify.core.errors import UsageError
    from classify.labeling.pipeline import label_file

    with pytest.raises(UsageError, match="--engine ray"):
        label_file("tfidf-logreg", small, f"{tmp_path / 'labels'}/")


def test_a_folder_of_other_files_is_neither_used_nor_removed(ray_local, small, tmp_path):
    from classify.labeling.pipeline import label_file
    from classify.labeling.resumable import RunError

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    for force in (False, True):
        with pytest.raises(RunError, match="holds no classify run"):
            label_file("tfidf-logreg", small, f"{folder}/", engine="ray", force=force)
    assert (folder / "notes.txt").read_text() == "keep me"
