"""Reading an eval run folder (evals/<timestamp>-<model>/, written by `evaluation.report.write_eval`):
its metrics.json (`meta` and per-dimension figures), predictions.jsonl, and the model options the run
was made with. The one reader of that folder: `classify eval --compare`, the leaderboard, the corpus
report and the review queue all go through here.

    run = read_run("evals/20261130-060933-embed-logreg")
    run.meta["model"], run.dimensions["symptom"]["kappa"], run.predictions()
    options, recorded = run.options()
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from classify.classifiers.base import ModelOptions
from classify.core.errors import ClassifyError
from classify.core.records import RecordsError, read_rows
from classify.core.textio import read_text

METRICS = "metrics.json"
PREDICTIONS = "predictions.jsonl"
REPORT = "report.md"  # written last: a folder holding it is complete


_MISSING = object()


class RunFolderError(ClassifyError, ValueError):
    """A folder that is not a readable eval run."""


@dataclass
class RunFolder:
    path: Path
    doc: dict[str, Any]  # metrics.json: {"meta": ..., "dimensions": ..., ...}
    _rows: list[dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def meta(self) -> dict[str, Any]:
        return self.doc["meta"]

    @property
    def dimensions(self) -> dict[str, Any]:
        return self.doc["dimensions"]

    def predictions(self, *, error: type[ClassifyError] = RunFolderError) -> list[dict[str, Any]]:
        """The out-of-fold predictions, one row per evaluated gold record ([] if the run kept none); read
        once."""
        if self._rows is not None:
            return self._rows
        f = self.path / PREDICTIONS
        if not f.exists():
            return []
        try:
            rows = read_rows(f)
        except RecordsError as e:
            raise error(f"{self.path}: cannot read the eval run: {e}") from e
        if any(r.get("id") is None for r in rows):
            raise error(f"{f}: rows without id")
        self._rows = rows
        return rows

    def options(self, seed: int | None = None) -> tuple[ModelOptions, bool]:
        """The ModelOptions the run was made with (its own seed), and whether it recorded them (older
        runs did not: the defaults then)."""
        run_seed = (self.meta.get("params") or {}).get("seed")
        seed = run_seed if isinstance(run_seed, int) and not isinstance(run_seed, bool) else (seed or 0)
        o = self.meta.get("options")
        if not isinstance(o, dict):
            return ModelOptions(seed=seed), False
        return options_from_meta(o, seed, where=str(self.path / METRICS)), True


def prediction_status(row: dict[str, Any], dim: str) -> str:
    """`ok`, or `invalid` where the model gave no valid answer (crossval.prediction_rows writes it)."""
    return str(row.get(f"{dim}_status") or "ok")


def options_from_meta(meta: dict[str, Any], seed: int = 0, *, where: str = "run options") -> ModelOptions:
    """The ModelOptions that `ModelOptions.run_meta()` recorded (an eval run's `meta.options`, a labels
    row's `run_options`). Missing keys take the defaults; a value of the wrong type is an error."""
    enc = meta.get("encoder")
    disc = meta.get("include_discussion", True)
    extra = meta.get("extra") or {}
    if enc is not None and not isinstance(enc, str):
        raise RunFolderError(f"{where}: encoder must be a name or null, got {enc!r}")
    if not isinstance(disc, bool):
        raise RunFolderError(f"{where}: include_discussion must be true or false, got {disc!r}")
    if not isinstance(extra, dict):
        raise RunFolderError(f"{where}: extra must be a mapping of --opt values, got {extra!r}")
    return ModelOptions(encoder=enc, include_discussion=disc, extra=dict(extra), seed=seed)


def read_run(path: str | Path, *, error: type[ClassifyError] = RunFolderError) -> RunFolder:
    """The run in folder `path` (or the folder of a metrics.json given itself)."""
    path = Path(path)
    folder = path.parent if path.name == METRICS and path.is_file() else path
    f = folder / METRICS
    try:
        doc = json.loads(read_text(f, error)) if f.is_file() else _MISSING
    except json.JSONDecodeError as e:
        raise error(f"{f}: not JSON: {e}") from e
    if doc is _MISSING:
        raise error(f"{folder}: no {METRICS} (not an eval run folder: give an evals/<run> folder)")
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("meta"), dict)
        or not isinstance(doc.get("dimensions"), dict)
    ):
        raise error(f"{f}: not an eval metrics file (needs meta and dimensions)")
    return RunFolder(folder, doc)


def run_folders(base: Path) -> list[Path]:
    """The complete run folders directly under `base` (half-written and hidden ones are skipped)."""
    if not base.is_dir():
        return []
    return sorted(q.parent for q in base.glob(f"*/{METRICS}") if (q.parent / REPORT).exists())


def newest_run(dirs: list[Path], *, model: str, gold_hash: str, mode: str = "cv") -> RunFolder | None:
    """The newest complete run of `model` on gold `gold_hash` under any of `dirs` (unreadable ones skipped)."""
    best: tuple[str, RunFolder] | None = None
    for base in dirs:
        for folder in run_folders(base):
            try:
                run = read_run(folder)
            except ClassifyError:
                continue
            m = run.meta
            if m.get("model") != model or m.get("gold_hash") != gold_hash or m.get("mode") != mode:
                continue
            key = str(m.get("created_at") or folder.name)
            if best is None or key > best[0]:
                best = (key, run)
    return best[1] if best else None
