"""Each file format has one owner (docs/architecture.md): the labels row is written and read through
`classify.core.labelrow`, the eval run folder read through `classify.evaluation.runfolder`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import write_jsonl

from classify.classifiers.base import Prediction
from classify.core import labelrow
from classify.core.errors import ClassifyError
from classify.evaluation.runfolder import RunFolderError, options_from_meta, read_run
from classify.labeling.resumable import label_fields

PACKAGE = Path(__file__).resolve().parent.parent / "classify"

# The labels row's per-dimension fields (f"{d}_status"...); eval runs' prediction rows have a
# `<dim>_status` of their own, written by crossval and read through runfolder.
ROW_FIELD = re.compile(r"""\}_(invalid|suggestion|coded_by|status|taxonomy|model)["']""")
ROW_OWNERS = {"core/labelrow.py", "evaluation/crossval.py", "evaluation/runfolder.py"}
RUN_FILE = re.compile(r"""["'](metrics\.json|predictions\.jsonl)["']""")
RUN_OWNERS = {"evaluation/runfolder.py"}


def _offenders(pattern: re.Pattern, owners: set[str]) -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in owners or rel.startswith("workbench/"):  # the workbench's own tables, not these files
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line) and not line.lstrip().startswith("#"):
                out.append(f"{rel}:{i}: {line.strip()}")
    return out


def test_labels_row_fields_are_named_only_by_their_owner():
    assert _offenders(ROW_FIELD, ROW_OWNERS) == []


def test_eval_run_files_are_named_only_by_their_reader():
    assert _offenders(RUN_FILE, RUN_OWNERS) == []


def test_an_invalid_answer_is_one_flag_in_plain_and_routed_rows():
    plain = label_fields({"symptom": Prediction(label=None, status="invalid", raw="??")})
    assert plain["symptom_invalid"] is True and plain["symptom_raw"] == "??" and "symptom_status" not in plain
    assert labelrow.is_invalid(plain, "symptom") and labelrow.status(plain, "symptom") is None
    # a routed row's invalid answer goes to review: two facts, two fields
    routed = {
        **labelrow.answer_fields("symptom", invalid=True, raw="??", with_confidence=False),
        **labelrow.routed_fields(
            "symptom", label=None, status=labelrow.Status.REVIEW, suggestion=None, confidence=None
        ),
    }
    assert labelrow.is_invalid(routed, "symptom") and labelrow.status(routed, "symptom") is labelrow.Status.REVIEW
    # rows written before the flag said it in the status
    assert labelrow.is_invalid({"symptom_status": "invalid"}, "symptom")


def test_screening_model_is_recorded_field_by_field():
    f = labelrow.screening_fields("embed-logreg", "screening@1", "abc", {"encoder": None})
    row = {"taxonomy": "failures@1", "model": "tfidf-logreg", **f}
    assert labelrow.dimension_taxonomy(row, "screening") == "screening@1"
    assert labelrow.dimension_model(row, "screening") == "embed-logreg"
    assert labelrow.dimension_taxonomy(row, "symptom") == "failures@1"


def test_labels_file_with_a_duplicated_id_or_a_label_outside_the_codebook_is_refused(tmp_path, taxonomy):
    ok = {"id": "a-1", "symptom": "crash"}
    dup = write_jsonl(tmp_path / "dup.jsonl", [ok, {"id": "a-2", "symptom": "hang"}, dict(ok)])
    with pytest.raises(labelrow.LabelRowError, match="duplicate ids.*a-1"):
        labelrow.read_label_rows(dup, taxonomy)
    bad = write_jsonl(tmp_path / "bad.jsonl", [ok, {"id": "a-2", "symptom": "exploded"}])
    with pytest.raises(labelrow.LabelRowError, match="id a-2: unknown symptom label 'exploded'"):
        labelrow.read_label_rows(bad, taxonomy)
    bad_sug = write_jsonl(
        tmp_path / "sug.jsonl", [{"id": "a-3", "symptom_status": "review", "symptom_suggestion": "x"}]
    )
    with pytest.raises(labelrow.LabelRowError, match="unknown symptom label 'x'"):
        labelrow.read_label_rows(bad_sug, taxonomy)
    no_id = write_jsonl(tmp_path / "noid.jsonl", [{"symptom": "crash"}])
    with pytest.raises(labelrow.LabelRowError, match="row 1 has no usable id"):
        labelrow.read_label_rows(no_id, taxonomy)


def test_run_options_are_read_one_way(tmp_path):
    # a missing include_discussion is the default (True); before, one reader took None as False
    assert options_from_meta({}).include_discussion is True
    assert options_from_meta({"include_discussion": False}).include_discussion is False
    for bad in ({"include_discussion": None}, {"include_discussion": "false"}, {"extra": [1]}, {"encoder": 3}):
        with pytest.raises(RunFolderError):
            options_from_meta(bad)
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(
        json.dumps({"meta": {"options": {"include_discussion": False}, "params": {"seed": 7}}, "dimensions": {}})
    )
    options, recorded = read_run(run).options()
    assert recorded and options.seed == 7 and options.include_discussion is False
    (run / "metrics.json").write_text("[1]")
    with pytest.raises(ClassifyError, match="not an eval metrics file"):
        read_run(run)
