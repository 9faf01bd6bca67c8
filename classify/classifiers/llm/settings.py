"""LLM options, read from ModelOptions.extra (CLI: `--opt key=value`) and validated up front.

Unknown keys are an error, so a typo (`--opt temprature=0.5`) does not silently do nothing.
"""

from __future__ import annotations

from classify.core.errors import ClassifyError
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from classify.core.paths import PROMPTS_DIR

STRATEGIES = ("zero-shot", "few-shot")
LAYOUTS = ("cache-friendly", "naive")


class SettingsError(ClassifyError, ValueError):
    pass


@dataclass
class LLMSettings:
    # endpoint (see endpoint.py); None = the dialect's default
    base_url: str | None = None
    api_key_env: str | None = None
    dialect: str | None = None
    structured: str | None = None
    fold_system: bool | None = None
    logprobs: bool | None = None
    timeout: float | None = None  # seconds per request; default 120, 600 for local servers
    # prompting
    strategy: str = "zero-shot"
    k: int = 4  # few-shot examples per issue
    rationale: bool = False  # ask for a short rationale before the labels
    allow_null: bool = False  # let the model answer null ("cannot tell") for a dimension
    layout: str = "cache-friendly"  # "naive" puts the issue first (benchmark contrast only)
    prompts: str = str(PROMPTS_DIR / "llm")  # template set folder
    max_chars: int = 6000  # issue text budget (title + body + discussion), characters
    example_chars: int = 1200  # per few-shot example
    # sampling
    samples: int = 1  # >1: self-consistency, confidence = vote share
    temperature: float | None = None  # default 0, or 0.7 when samples > 1
    max_tokens: int | None = None  # default 96, 320 with a rationale
    # robustness and cost
    concurrency: int | None = None  # default 4; 2 for local servers (they answer one request at a time)
    max_retries: int = 6  # transport retries per request (429, 5xx, timeouts, connection)
    repair_retries: int = 2  # re-asks with the validation error fed back, per sample
    cache: bool = True  # read answers from the response cache (always written)
    price_in: float | None = None  # USD per 1M prompt tokens, for the dry-run estimate
    price_out: float | None = None  # USD per 1M completion tokens
    # local server
    n_ctx: int = 8192
    n_threads: int | None = None
    # accepted so a CLI may pass them for any model; used elsewhere
    backend: str = "torch"  # embedding backend for few-shot selection
    dry_run: bool = False

    @property
    def eff_temperature(self) -> float:
        if self.temperature is not None:
            return self.temperature
        return 0.7 if self.samples > 1 else 0.0

    @property
    def eff_max_tokens(self) -> int:
        if self.max_tokens is not None:
            return self.max_tokens
        return 320 if self.rationale else 96

    @property
    def prompts_dir(self) -> Path:
        p = Path(self.prompts)
        if not p.is_absolute() and not p.exists() and (PROMPTS_DIR / p).exists():
            p = PROMPTS_DIR / p  # a bare set name: prompts/<name>
        return p


def _as_bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        return v.lower() in ("true", "yes", "on", "1")
    raise SettingsError(f"option {key}: expected true/false, got {v!r}")


def _as_num(key: str, v: Any, typ) -> Any:
    try:
        out = typ(v)
    except (TypeError, ValueError):
        raise SettingsError(f"option {key}: expected a number, got {v!r}") from None
    if typ is int and isinstance(v, float) and v != int(v):
        raise SettingsError(f"option {key}: expected a whole number, got {v!r}")
    return out


_ALIASES = {"base-url": "base_url", "api-key-env": "api_key_env", "fold-system": "fold_system",
            "max-retries": "max_retries", "max-tokens": "max_tokens", "repair-retries": "repair_retries"}


def is_llm_option(key: str) -> bool:
    """Whether `key` names an LLM setting (ensembles route such keys to their LLM members only)."""
    return _ALIASES.get(key, key).replace("-", "_") in {f.name for f in fields(LLMSettings)}


def parse_settings(extra: dict[str, Any]) -> LLMSettings:
    known = {f.name: f for f in fields(LLMSettings)}
    kwargs: dict[str, Any] = {}
    for key, v in (extra or {}).items():
        name = _ALIASES.get(key, key).replace("-", "_")
        if name not in known:
            raise SettingsError(f"unknown LLM option {key!r}; known: {', '.join(sorted(known))}")
        if v is None:
            continue
        typ = known[name].type
        if "bool" in str(typ):
            v = _as_bool(key, v)
        elif "int" in str(typ):
            v = _as_num(key, v, int)
        elif "float" in str(typ):
            v = _as_num(key, v, float)
        else:
            v = str(v)
        kwargs[name] = v
    s = LLMSettings(**kwargs)
    if s.strategy not in STRATEGIES:
        raise SettingsError(f"option strategy: {s.strategy!r} is not one of {', '.join(STRATEGIES)}")
    if s.layout not in LAYOUTS:
        raise SettingsError(f"option layout: {s.layout!r} is not one of {', '.join(LAYOUTS)}")
    for name, lo in (("k", 1), ("samples", 1), ("concurrency", 1), ("max_chars", 200), ("example_chars", 100),
                     ("n_ctx", 512)):
        if getattr(s, name) is not None and getattr(s, name) < lo:
            raise SettingsError(f"option {name}: must be at least {lo}, got {getattr(s, name)}")
    for name in ("max_retries", "repair_retries"):
        if getattr(s, name) < 0:
            raise SettingsError(f"option {name}: must be 0 or more")
    if s.timeout is not None and s.timeout <= 0:
        raise SettingsError("option timeout: must be positive (seconds)")
    if not s.prompts_dir.is_dir():
        raise SettingsError(f"option prompts: template folder {s.prompts_dir} not found")
    return s
