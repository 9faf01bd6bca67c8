"""Where the project's shipped files and the user's caches live."""

from __future__ import annotations

import os
from pathlib import Path

# The package is used from a clone (editable install): shipped data sits beside it.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TAXONOMY = PROJECT_ROOT / "codebook" / "taxonomy-v1.yaml"
DEFAULT_GOLD = PROJECT_ROOT / "gold" / "reports.jsonl"
DEFAULT_SCREENING = PROJECT_ROOT / "gold" / "screening.jsonl"
DEFAULT_INPUT = PROJECT_ROOT / "data" / "issues.jsonl"
PROMPTS_DIR = PROJECT_ROOT / "prompts"
EVALS_DIR = PROJECT_ROOT / "evals"


def cache_dir() -> Path:
    """Embedding and LLM response caches: $CLASSIFY_CACHE_DIR, else ~/.cache/classify."""
    d = Path(os.environ.get("CLASSIFY_CACHE_DIR") or Path.home() / ".cache" / "classify")
    d.mkdir(parents=True, exist_ok=True)
    return d
