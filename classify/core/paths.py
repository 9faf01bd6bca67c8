"""Where the project's shipped files, the user's own files and the user's caches live.

Defaults resolve against the folder you work in, not the install folder:

- the **project folder** is the nearest folder, from the current one upward, that holds a
  `classify.toml` (like `pyproject.toml` for Python tools); without one, the current folder. The
  file only marks the folder: it may be empty, and its content is not read.
- an **input** default (codebook, gold, screening gold, records to label) is that file's usual path
  inside the project folder (`codebook/taxonomy-v1.yaml`, `gold/reports.jsonl`, ...) when it
  exists there, else the copy shipped with the toolkit: a fresh folder works out of the box, and a
  project with its own `gold/` uses it.
- an **output** default (`evals/`) is always inside the project folder: user runs never land among
  the committed reference runs of the install folder.

The `DEFAULT_*` constants are the shipped files (tests and benchmarks mean those).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from classify.core.errors import ClassifyError, UsageError

# The package is used from a clone (editable install): shipped data sits beside it.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TAXONOMY = PROJECT_ROOT / "codebook" / "taxonomy-v1.yaml"
DEFAULT_GOLD = PROJECT_ROOT / "gold" / "reports.jsonl"
DEFAULT_SCREENING = PROJECT_ROOT / "gold" / "screening.jsonl"
DEFAULT_SCREENING_TAXONOMY = PROJECT_ROOT / "codebook" / "screening-v1.yaml"
DEFAULT_INPUT = PROJECT_ROOT / "data" / "issues.jsonl"
PROMPTS_DIR = PROJECT_ROOT / "prompts"
EVALS_DIR = PROJECT_ROOT / "evals"

PROJECT_FILE = "classify.toml"
# One phrase for every --help that shows a default path.
DEFAULTS_NOTE = f"of the project folder (nearest with {PROJECT_FILE}, else the current one), else the shipped one"


def project_dir(start: str | Path | None = None) -> Path:
    """The nearest folder from `start` (default: the current folder) upward holding classify.toml; else `start`."""
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / PROJECT_FILE).is_file():
            return d
    return here


def _input_default(shipped: Path) -> Path:
    """The project's copy of a shipped input file if it has one, else the shipped file."""
    own = project_dir() / shipped.relative_to(PROJECT_ROOT)
    return own if own.exists() else shipped


def default_taxonomy() -> Path:
    return _input_default(DEFAULT_TAXONOMY)


def default_gold() -> Path:
    return _input_default(DEFAULT_GOLD)


def default_screening_gold() -> Path:
    return _input_default(DEFAULT_SCREENING)


def default_screening_taxonomy() -> Path:
    return _input_default(DEFAULT_SCREENING_TAXONOMY)


def default_input() -> Path:
    return _input_default(DEFAULT_INPUT)


def evals_dir() -> Path:
    """Where eval runs are written by default: `evals/` in the project folder (never the install's)."""
    return project_dir() / "evals"


def leaderboard_dirs() -> list[Path]:
    """What `classify leaderboard` reads by default: the project's eval runs when it has any, else
    the shipped reference runs (a fresh folder still shows them)."""
    own = evals_dir()
    return [own] if own.is_dir() and any(own.iterdir()) else [EVALS_DIR]


def cache_dir() -> Path:
    """Embedding and LLM response caches: $CLASSIFY_CACHE_DIR, else ~/.cache/classify."""
    d = Path(os.environ.get("CLASSIFY_CACHE_DIR") or Path.home() / ".cache" / "classify")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or os.path.samefile(a, b)  # samefile: hard links too
    except OSError:
        return False


def refuse_output_over_inputs(
    out: str | Path,
    inputs: Iterable[str | Path | None],
    *,
    flag: str = "--out",
    error: type[ClassifyError] = UsageError,
) -> None:
    """Refuse an output that is one of the inputs, however the path is spelled (relative, `..`,
    a symlink or a hard link to it), or that lies inside an input folder (a dataset folder): writing
    it would destroy the file the command reads. An input that does not exist yet (a decisions file
    the command would create) still may not be the output; None is skipped."""
    out = Path(out)
    for p in inputs:
        if p is None:
            continue
        p = Path(p)
        if out.resolve() == p.resolve() or (out.exists() and p.exists() and _same(out, p)):
            raise error(f"{flag} {out} is one of the inputs ({p}); writing it would destroy that file")
        if p.is_dir() and p.resolve() in out.resolve().parents:
            raise error(f"{flag} {out} is inside the input {p}; writing it would change that input")
