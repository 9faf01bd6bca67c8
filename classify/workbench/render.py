"""Issue text rendered for reading: markdown with raw HTML escaped (never passed through), code
blocks and stack traces in monospace, versions and error names marked so they are easy to spot."""

from __future__ import annotations

import re
from functools import lru_cache

from markupsafe import Markup, escape

# 2.4.1, v0.3.36, 12.4, cu124, sm_90: what a reader scans a report for
_VERSION = re.compile(r"(?<![\w.])(v?\d+\.\d+(?:\.\d+)*(?:[a-z0-9+]*)|cu\d{3}|sm_?\d{2,3}a?)(?![\w])")
_ERROR = re.compile(r"\b([A-Za-z_.]*(?:Error|Exception|Traceback|FAILED|Segmentation fault|illegal memory access)\b:?)")
_TEXT = re.compile(r">([^<]+)<")


@lru_cache(maxsize=1)
def _md():
    from markdown_it import MarkdownIt

    # html=False: raw HTML in an issue is shown as text, never interpreted
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def _mark(m: re.Match) -> str:
    text = m.group(1)  # already escaped by markdown-it: only wrapped here, never unescaped
    text = _ERROR.sub(r'<span class="err">\1</span>', text)
    text = _VERSION.sub(r'<span class="ver">\1</span>', text)
    return f">{text}<"


def render(text: str | None) -> Markup:
    html = _md().render(text or "")
    return Markup(_TEXT.sub(_mark, html))


def safe_url(url: str | None) -> str | None:
    """Only http(s) links to the original issue; anything else is not linked."""
    if url and re.match(r"^https?://", url):
        return str(escape(url))
    return None
