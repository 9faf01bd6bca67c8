"""The fixed choices of the LLM settings, declared once: the settings validate against them, the
endpoint keeps its per-dialect defaults under them, and the command line offers them."""

from __future__ import annotations

from typing import Literal, get_args

# how the server speaks (classify.classifiers.llm.endpoint.DIALECTS holds each one's defaults)
Dialect = Literal["openai", "vllm", "ollama", "llama-cpp", "generic"]
# how to ask for schema-constrained JSON, in the order the client falls back through
StructuredStyle = Literal["json_schema", "json_object_schema", "json_object", "none"]
Strategy = Literal["zero-shot", "few-shot"]
# "naive" puts the issue first (benchmark contrast only)
Layout = Literal["cache-friendly", "naive"]

DIALECT_NAMES: tuple[str, ...] = get_args(Dialect)
STRUCTURED_STYLES: tuple[str, ...] = get_args(StructuredStyle)
STRATEGIES: tuple[str, ...] = get_args(Strategy)
