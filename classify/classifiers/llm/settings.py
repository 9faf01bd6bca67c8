"""LLM options, read from ModelOptions.extra (CLI: `--opt key=value`) and validated up front.

Unknown keys are an error, so a typo (`--opt temprature=0.5`) does not silently do nothing.
Keys may use `-` for `_` (`base-url`, `max-tokens`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator

from classify.classifiers.llm.choices import Dialect, Layout, Strategy, StructuredStyle
from classify.classifiers.llm.endpoint import check_url
from classify.classifiers.options import Backend, ModelSpecError, OptionsModel, parse_options
from classify.core.paths import PROMPTS_DIR


class SettingsError(ModelSpecError):
    pass


def _at_least(n: int, description: str) -> Any:
    return Field(ge=n, description=description)


def _resolve_prompts(p: str) -> Path:
    path = Path(p)
    if not path.is_absolute() and not path.exists() and (PROMPTS_DIR / path).exists():
        path = PROMPTS_DIR / path  # a bare set name: prompts/<name>
    return path


class LLMSettings(OptionsModel):
    kind: ClassVar[str] = "LLM "

    # endpoint (see endpoint.py); None = the dialect's default
    base_url: str | list[str] | None = None  # several: replicas of one model, balanced (pool.py)
    api_key_env: str | None = None
    dialect: Dialect | None = None
    structured: StructuredStyle | None = None
    fold_system: bool | None = None
    logprobs: bool | None = None
    timeout: Annotated[
        float | None,
        Field(gt=0, allow_inf_nan=False, description="seconds per request; default 120, 600 for local servers"),
    ] = None
    # prompting
    strategy: Strategy = "zero-shot"
    k: Annotated[int, _at_least(1, "few-shot examples per issue")] = 4
    rationale: bool = False  # ask for a short rationale before the labels
    allow_null: bool = False  # let the model answer null ("cannot tell") for a dimension
    layout: Layout = "cache-friendly"
    prompts: str = str(PROMPTS_DIR / "llm")  # template set folder
    max_chars: Annotated[int, _at_least(200, "issue text budget (title + body + discussion), characters")] = 6000
    example_chars: Annotated[int, _at_least(100, "characters per few-shot example")] = 1200
    # sampling
    samples: Annotated[int, _at_least(1, ">1: self-consistency, confidence = vote share")] = 1
    temperature: Annotated[float | None, Field(ge=0, allow_inf_nan=False)] = None  # default 0, 0.7 when samples > 1
    max_tokens: Annotated[int | None, Field(ge=1)] = None  # default 96, 320 with a rationale
    # robustness and cost
    concurrency: Annotated[int | None, _at_least(1, "requests in flight; default 4, 2 for local servers")] = None
    max_retries: Annotated[int, _at_least(0, "transport retries per request (429, 5xx, timeouts)")] = 6
    repair_retries: Annotated[int, _at_least(0, "re-asks with the validation error fed back, per sample")] = 2
    cache: bool = True  # read answers from the response cache (always written)
    batch: bool = False  # ask through the server's batch API (/v1/batches): half the price on OpenAI
    repair: Literal["interactive", "batch"] = "interactive"  # with batch: where invalid answers are re-asked
    batch_poll: Annotated[float, Field(gt=0, description="seconds between polls of a submitted batch")] = 30.0
    # USD per 1M prompt / completion tokens, for the dry-run estimate
    price_in: Annotated[float | None, Field(ge=0, allow_inf_nan=False)] = None
    price_out: Annotated[float | None, Field(ge=0, allow_inf_nan=False)] = None
    # local server
    n_ctx: Annotated[int, _at_least(512, "local server context size, tokens")] = 8192
    n_threads: int | None = None
    backend: Backend = "torch"  # embedding backend for few-shot selection

    @field_validator("base_url")
    @classmethod
    def _urls_usable(cls, v: str | list[str] | None) -> str | list[str] | None:
        for u in [v] if isinstance(v, str) else v or []:
            check_url(u)  # EndpointError is a ValueError: reported as this option's error
        if isinstance(v, list) and len(set(v)) != len(v):
            raise ValueError("the same URL is given twice")
        if isinstance(v, list) and not v:
            return None
        return v

    @field_validator("prompts")
    @classmethod
    def _prompts_exist(cls, v: str) -> str:
        if not _resolve_prompts(v).is_dir():
            raise ValueError(f"template folder {_resolve_prompts(v)} not found")
        return v

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
        return _resolve_prompts(self.prompts)


def is_llm_option(key: str) -> bool:
    """Whether `key` names an LLM setting (ensembles route such keys to their LLM members only)."""
    return key.strip().replace("-", "_") in LLMSettings.model_fields


def parse_settings(extra: dict[str, Any], spec: str | None = None) -> LLMSettings:
    try:
        return parse_options(LLMSettings, spec, extra)
    except SettingsError:
        raise
    except ModelSpecError as e:
        raise SettingsError(str(e)) from None
