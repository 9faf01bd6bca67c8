"""Where requests go and how that server speaks: one Endpoint per classifier.

Servers differ in two ways that matter here, so both are settings with per-server defaults:
  structured  how to ask for schema-constrained JSON:
                json_schema         OpenAI, vLLM, Ollama >= 0.5 (response_format json_schema)
                json_object_schema  llama-cpp-python ({"type": "json_object", "schema": ...};
                                    it rejects json_schema)
                json_object         plain JSON mode, no schema
                none                no response_format; rely on the prompt and tolerant parsing
              The client falls back down this list when a server refuses a style, and the
              answer is always validated on the client side.
  fold_system put the system prompt into the first user turn, for chat templates that drop
              or mangle system messages.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

from classify.classifiers.llm.choices import STRUCTURED_STYLES, Dialect
from classify.core.errors import ClassifyError
from classify.core.http import redact_url

# dialect -> defaults. "generic" is any other OpenAI-compatible server: try json_schema and let
# the client fall back when the server refuses it.
DIALECTS: dict[Dialect, dict] = {
    "openai": {"structured": "json_schema", "fold_system": False, "logprobs": True},
    "vllm": {"structured": "json_schema", "fold_system": False, "logprobs": True},
    "ollama": {"structured": "json_schema", "fold_system": False, "logprobs": False},
    "llama-cpp": {"structured": "json_object_schema", "fold_system": False, "logprobs": True},
    "generic": {"structured": "json_schema", "fold_system": False, "logprobs": False},
}


class EndpointError(ClassifyError, ValueError):
    """The endpoint settings are unusable (unknown dialect, missing API key, ...)."""


def guess_dialect(base_url: str | None) -> str:
    if not base_url:
        return "openai"
    u = urlsplit(base_url)
    host = (u.hostname or "").lower()
    if host.endswith("openai.com"):
        return "openai"
    if u.port == 11434 or "ollama" in host:
        return "ollama"
    return "generic"


@dataclass
class Endpoint:
    model: str  # the model name the server expects
    base_url: str | None = None  # None: the openai client's default (OPENAI_BASE_URL or api.openai.com)
    more_urls: tuple[str, ...] = ()  # replicas of the same model, used as one server (pool.py)
    api_key_env: str = "OPENAI_API_KEY"
    dialect: str = "openai"
    structured: str = "json_schema"
    fold_system: bool = False
    logprobs: bool = True
    timeout: float = 120.0
    # What the response cache is keyed on instead of the URL (a local server's port changes per run).
    identity: str | None = None
    key_required: bool = True

    def __post_init__(self):
        if self.dialect not in DIALECTS:
            raise EndpointError(f"unknown dialect {self.dialect!r}; known: {', '.join(DIALECTS)}")
        if self.structured not in STRUCTURED_STYLES:
            raise EndpointError(
                f"unknown structured-output style {self.structured!r}; known: {', '.join(STRUCTURED_STYLES)}"
            )

    @property
    def url(self) -> str:
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"

    @property
    def urls(self) -> tuple[str, ...]:
        return (self.url, *self.more_urls)

    @property
    def cache_identity(self) -> str:
        # Replicas answer alike: one identity for the set, whatever order they were given in.
        return self.identity or f"{' '.join(sorted(str(redact_url(u)) for u in self.urls))}|{self.model}"

    def api_key(self) -> str:
        """The key from the named environment variable; never stored, logged or echoed."""
        if not self.api_key_env:  # a server we started ourselves: no key, and no user key sent to it
            return "not-needed"
        key = os.environ.get(self.api_key_env)
        if key:
            return key
        if self.key_required:
            raise EndpointError(
                f"no API key: environment variable {self.api_key_env} is not set "
                f"(pick another variable with api_key_env=NAME)"
            )
        return "not-needed"  # the openai client insists on a value; local servers ignore it

    def describe(self) -> dict:
        """Endpoint settings for provenance and logs: no key, no credentials in the URL."""
        return {
            "endpoint": self.identity or " ".join(str(redact_url(u)) for u in self.urls),
            "llm_model": self.model,
            "dialect": self.dialect,
            "structured": self.structured,
            "fold_system": self.fold_system,
        }


def check_reachable(urls: str | tuple[str, ...], timeout: float = 10.0) -> None:
    """Raise EndpointError when nothing answers at any of `urls` (connection refused, unknown host,
    timeout). Any HTTP answer, even 401 or 404, means a server is there: what it says is the run's
    business. With several, one answering is enough: the others are taken out while they fail."""
    why = []
    for url in [urls] if isinstance(urls, str) else urls:
        target = urlsplit(url)._replace(query="").geturl().rstrip("/") + "/models"
        try:
            with urllib.request.urlopen(urllib.request.Request(target, method="GET"), timeout=timeout):
                return
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, OSError, ValueError) as e:
            why.append(f"{redact_url(url)}: {getattr(e, 'reason', e)}")
    raise EndpointError(f"cannot reach the LLM server at {'; '.join(why)} (is it running? is --base-url right?)")


def check_url(url: str) -> str:
    """`url` if it can be a server's base URL; EndpointError (not naming any credential) if not."""
    try:
        u = urlsplit(url)
        u.port  # noqa: B018 (raises on a port that is not a number in 0-65535)
    except ValueError as e:
        raise EndpointError(f"base URL {redact_url(url)!r}: {e}; expected http(s)://host[:port]/path") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise EndpointError(f"base URL {redact_url(url)!r}: expected http(s)://host[:port]/path")
    if u.username or u.password:
        raise EndpointError(
            f"base URL {redact_url(url)}: user:password@ in the URL is not kept or sent; put the key in an "
            f"environment variable and name it with --api-key-env"
        )
    return url


def make_endpoint(
    model: str,
    base_url: str | list[str] | None = None,
    api_key_env: str | None = None,
    dialect: str | None = None,
    structured: str | None = None,
    fold_system: bool | None = None,
    logprobs: bool | None = None,
    timeout: float | None = None,
    identity: str | None = None,
    key_required: bool | None = None,
) -> Endpoint:
    """An Endpoint with the dialect's defaults for anything not given. Several base URLs: replicas."""
    urls = [check_url(u) for u in ([base_url] if isinstance(base_url, str) else base_url or []) if u]
    if not urls and os.environ.get("OPENAI_BASE_URL"):
        check_url(os.environ["OPENAI_BASE_URL"])  # used in their place: the same rules
    base_url = urls[0] if urls else None
    dialect = dialect or guess_dialect(base_url or os.environ.get("OPENAI_BASE_URL"))
    if dialect not in DIALECTS:
        raise EndpointError(f"unknown dialect {dialect!r}; known: {', '.join(DIALECTS)}")
    d = DIALECTS[dialect]
    if key_required is None:
        # Self-hosted servers usually need no key; OpenAI always does. An explicitly named
        # variable is required wherever the server is.
        key_required = dialect == "openai" or api_key_env is not None
    return Endpoint(
        model=model,
        base_url=base_url,
        more_urls=tuple(urls[1:]),
        api_key_env=api_key_env or "OPENAI_API_KEY",
        dialect=dialect,
        structured=structured or d["structured"],
        fold_system=d["fold_system"] if fold_system is None else bool(fold_system),
        logprobs=d["logprobs"] if logprobs is None else bool(logprobs),
        timeout=float(timeout) if timeout else 120.0,
        identity=identity,
        key_required=key_required,
    )
