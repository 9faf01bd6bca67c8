"""What a chat-completion server sent, read defensively into ChatResults.

A server's body is untrusted input: every field is checked for its type and range here, once, so
nothing downstream (the cache, the request log, the labels file, confidence arithmetic) sees a
list where a string belongs, a token count of "lots" or 1e400, a positive logprob, a 30 MB
answer, or the API key a server echoed back. A field that cannot be read is dropped (usage: 0,
logprobs: none); an answer that cannot be an answer is `refused` with the reason, which the
classifier records as an invalid label (keeping a bounded excerpt).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from classify.core.http import redact

# An answer is at most max_tokens tokens; no tokenizer makes a token longer than this many
# characters, so an answer above max_tokens * CHARS_PER_TOKEN_MAX is not one the server was asked for.
CHARS_PER_TOKEN_MAX = 32
MIN_ANSWER_CHARS = 16_384  # the floor, for small max_tokens
EXCERPT_CHARS = 2_000  # what is kept of a refused answer (cache, log, labels file)
MAX_TOKEN_COUNT = 10**12  # a usage figure above this is not a count
_SURROGATE = re.compile("[\ud800-\udfff]")


class MalformedResponse(Exception):
    """The body is not a chat completion at all (no choices): worth another try."""


@dataclass
class ChatResult:
    content: str
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    logprobs: list[tuple[str, float]] | None = None
    model: str | None = None
    cached: bool = False
    refused: str | None = None  # why this answer cannot be used (content is then an excerpt)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "content": self.content,
            "finish_reason": self.finish_reason,
            "usage": self.usage,
            "logprobs": self.logprobs,
            "model": self.model,
        }
        if self.refused:
            d["refused"] = self.refused
        return d

    @classmethod
    def from_json(cls, d: Any, cached: bool = False) -> ChatResult:
        """From the cache; raises ValueError on a row that is not one this module wrote."""
        if not isinstance(d, dict):
            raise ValueError("not an object")
        content = d.get("content")
        if not isinstance(content, str):
            raise ValueError("content is not a string")
        refused = d.get("refused")
        usage = d.get("usage")
        return cls(
            content,
            _str_or_none(d.get("finish_reason")),
            {k: _count(v) for k, v in usage.items() if isinstance(k, str)} if isinstance(usage, dict) else {},
            _logprobs(d.get("logprobs"), content),
            _str_or_none(d.get("model")),
            cached,
            refused if isinstance(refused, str) else None,
        )


def max_answer_chars(max_tokens: int | None) -> int:
    return max(MIN_ANSWER_CHARS, (max_tokens or 0) * CHARS_PER_TOKEN_MAX)


def read_response(
    resp: Any, *, max_tokens: int | None = None, secrets: Iterable[str | None] = (), n: int = 1
) -> tuple[list[ChatResult], dict[str, int]]:
    """The choices of a response (an SDK object, or a decoded body from a batch output file; at
    most `n`, in index order) and the request's usage.

    Raises MalformedResponse when there is no choice to read."""
    choices = _field(resp, "choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedResponse("malformed: response has no choices")
    u = _field(resp, "usage")
    usage = (
        {
            "prompt_tokens": _count(_field(u, "prompt_tokens")),
            "completion_tokens": _count(_field(u, "completion_tokens")),
        }
        if u is not None
        else {}
    )
    model = _str_or_none(_field(resp, "model"))
    out = []
    for ch in choices[: max(1, n)]:
        content = _content(_field(_field(ch, "message"), "content"))
        lp = _token_logprobs(_field(_field(ch, "logprobs"), "content"))
        res = ChatResult(content, _str_or_none(_field(ch, "finish_reason")), {}, None, model)
        out.append(sanitize(res, max_tokens, secrets, lp))
    return out, usage


def sanitize(res: ChatResult, max_tokens: int | None, secrets: Iterable[str | None], lp: Any = None) -> ChatResult:
    """`res` (fresh, or read back from the cache) bounded in size, with no secret in it and only
    logprobs that are probabilities. `lp`: raw token logprobs to check (default: res's own)."""
    lp = res.logprobs if lp is None else lp
    limit = max_answer_chars(max_tokens)
    if len(res.content) > limit:
        res.refused = f"answer of {len(res.content)} characters, far above max_tokens={max_tokens}: refused"
        res.content, lp = res.content[:EXCERPT_CHARS], None
    clean = text_only(redact(res.content, [s for s in secrets if s and len(s) >= 4], keylike=False))
    if clean != res.content:  # a secret echoed, or no text: the tokens spell out what was removed
        res.content, lp = clean, None
    res.logprobs = _logprobs(lp, res.content)
    return res


def text_only(s: str) -> str:
    """`s` as text that UTF-8 files and SQLite hold: lone surrogates become U+FFFD, NULs go."""
    if "\x00" in s:
        s = s.replace("\x00", "")
    return _SURROGATE.sub("\ufffd", s)


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _str_or_none(v: Any) -> str | None:
    return v[:200] if isinstance(v, str) else None


def _count(v: Any) -> int:
    """A token count, or 0 when the server sent something that is not one."""
    if isinstance(v, bool):
        return 0
    if isinstance(v, int):
        return v if 0 <= v <= MAX_TOKEN_COUNT else 0
    if isinstance(v, float) and math.isfinite(v) and v.is_integer() and 0 <= v <= MAX_TOKEN_COUNT:
        return int(v)
    return 0


def _content(c: Any) -> str:
    """Message content as text: a string; a list of parts (OpenAI's format for some models) joined
    by their text; an object by its `text`, else as JSON (the answer object itself, validated later)."""
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        parts = []
        for p in c:
            if isinstance(p, str):
                parts.append(p)
            else:
                t = _field(p, "text")
                if isinstance(t, str):
                    parts.append(t)
        return "".join(parts)
    if isinstance(c, dict) and isinstance(c.get("text"), str):
        return c["text"]
    try:
        return json.dumps(c, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(type(c).__name__)


def _token_logprobs(lpc: Any) -> list[tuple[str, float]] | None:
    if not isinstance(lpc, list) or not lpc:
        return None
    return [(_field(t, "token"), _field(t, "logprob")) for t in lpc]


def _logprobs(lp: Any, content: str) -> list[tuple[str, float]] | None:
    """Token logprobs that can be probabilities: each token a string, each logprob a finite
    number <= 0, and the tokens spelling the content. Anything else: none (no confidence)."""
    if not isinstance(lp, list) or not lp:
        return None
    out = []
    for x in lp:
        if not isinstance(x, (list, tuple)) or len(x) != 2:
            return None
        tok, v = x
        if not isinstance(tok, str) or isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        if not math.isfinite(v) and v != -math.inf or v > 0:
            return None
        out.append((tok, float(v)))
    if "".join(t for t, _ in out) != content:
        return None
    return out
