"""What every HTTP client of the package shares: how long a server asks us to wait, and keeping
secrets out of messages. Used by the LLM client (classify.classifiers.llm.client) and the GitHub
client (classify.ingest.client)."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit


def _header(headers: Mapping[str, str], name: str) -> str | None:
    v = headers.get(name)
    if v is None:  # a plain dict is case-sensitive; httpx.Headers is not
        v = next((val for k, val in headers.items() if k.lower() == name), None)
    return v.strip() if isinstance(v, str) and v.strip() else None


def _http_date(value: str) -> float | None:
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a response asks us to wait before the next request, or None if it does not say.

    `retry-after-ms` (OpenAI-compatible servers) wins; else `Retry-After` as delay-seconds or as an
    HTTP date (RFC 9110, section 10.2.3; GitHub and proxies send either). A date is measured from
    the response's own `Date` header when there is one, so a skewed local clock does not matter.
    """
    if headers is None:
        return None
    ms = _header(headers, "retry-after-ms")
    if ms is not None:
        try:
            v = float(ms)
            if math.isfinite(v):
                return max(0.0, v / 1000.0)
        except ValueError:
            pass
    ra = _header(headers, "retry-after")
    if ra is None:
        return None
    try:
        v = float(ra)
        return max(0.0, v) if math.isfinite(v) else None
    except ValueError:
        pass
    when = _http_date(ra)
    if when is None:
        return None
    date = _header(headers, "date")
    now = (_http_date(date) if date else None) or time.time()
    return max(0.0, when - now)


# A secret with a provider's prefix (OpenAI `sk-`, GitHub `ghp_`, `github_pat_`, ...): ordinary text
# never looks like this.
_PREFIXED = re.compile(r"\b(?:sk-|gh[pousr]_|github_pat_)[A-Za-z0-9_\-]{12,}")
# A word that announces a key (`key...`, `token...`, `Bearer ...`) followed by a long run. Broader,
# and it can also hit an ordinary name (a repository called `keystone-authentication`).
_ANNOUNCED = re.compile(r"\b(sk|key|token|Bearer)[-_ ]?[A-Za-z0-9_\-\.]{12,}", re.IGNORECASE)
MASK = "[redacted]"


def redact(text: str, secrets: Iterable[str | None] = (), *, keylike: bool = True) -> str:
    """`text` with every given secret and anything shaped like an API key or token blanked.

    `keylike=False` skips the broad `key.../token...` pattern, for messages that carry repository
    names and URLs (the GitHub client), where it would blank parts of a name.
    """
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, MASK)
    text = _PREFIXED.sub(MASK, text)
    return _ANNOUNCED.sub(MASK, text) if keylike else text


def redact_url(url: str | None) -> str | None:
    """`url` without user:password and query string (some gateways take keys there): what may be kept."""
    if not url:
        return url
    try:
        u = urlsplit(url)
        netloc = u.hostname or ""
        if u.port:
            netloc += f":{u.port}"
    except ValueError:  # a port that is not a number, a broken [IPv6] host: no userinfo, no query
        scheme, _, rest = url.partition("://")
        where = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[2]
        return f"{scheme}://{where or MASK}"
    return urlunsplit((u.scheme, netloc, u.path, "", ""))


# A URL inside longer text (a model spec's `[base_url=...]`, a command line): up to a space, a
# quote, or what ends an ensemble member's option (`,` `]` `+`).
_KEYISH = re.compile(r"key|token|secret|pass|auth|sig|cred|code|session", re.IGNORECASE)
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9.\-]*://[^\s,\[\]+'\"<>]+")


def redact_urls_text(text: str) -> str:
    """`text` with every URL in it stripped of user:password@ and of query parameters named like a
    credential (`api-key`, `token`, `sig`, `code`...); other parameters (`?page=3`) stay, as they
    say which request failed. The same object when nothing changes, so a classifier's spec stays
    sklearn-clonable."""

    def clean(m: re.Match[str]) -> str:
        u = m.group(0)
        scheme, _, rest = u.partition("://")
        cut = re.search(r"[/?#]", rest)
        authority, tail = (rest[: cut.start()], rest[cut.start() :]) if cut else (rest, "")
        path, q, query = tail.partition("?")
        kept = [p for p in re.split(r"[&;]", query) if p and not _KEYISH.search(p.partition("=")[0])]
        return f"{scheme}://{authority.rpartition('@')[2]}{path}{'?' + '&'.join(kept) if kept else ''}"

    out = _URL_IN_TEXT.sub(clean, text)
    return text if out == text else out


def url_secrets(url: str | None) -> list[str]:
    """The credential-bearing parts of `url` (password, query values), to blank from messages."""
    if not url:
        return []
    u = urlsplit(url)
    found = [v for _, v in parse_qsl(u.query, keep_blank_values=False)] + ([u.password] if u.password else [])
    return [s for s in found if len(s) >= 4]


def redact_urls_in(options: Mapping[str, Any]) -> dict[str, Any]:
    """Options with every `*base_url` value (a URL or a list of them) through redact_url."""

    def clean(v: Any) -> Any:
        if isinstance(v, str):
            return redact_url(v)
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    return {k: clean(v) if k.replace("-", "_").endswith("base_url") else v for k, v in options.items()}
