"""JSON text from outside (records, answers from servers), parsed with its nesting bounded.

Python's parser raises RecursionError, which no caller expects, a few thousand levels deep; and a
value just under that limit makes later recursive code (json.dumps, deepcopy) fail far from where
it was read. Everything the package reads from a user's file or a server goes through `loads`.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Deeper than any record, gold row or GitHub answer (they nest 5-6 levels); a value that deep
# would also make later recursive code (json.dumps, deepcopy) fail far from where it was read.
MAX_JSON_DEPTH = 200
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def too_deep_at(text: str, limit: int = MAX_JSON_DEPTH) -> int | None:
    """The offset in `text` where JSON nesting first goes deeper than `limit`, else None."""
    if text.count("[") + text.count("{") <= limit:  # the common case, without a scan
        return None
    # Brackets inside strings do not nest: blank the strings (same length, so offsets hold).
    bare = _JSON_STRING.sub(lambda m: " " * len(m.group()), text)
    depth = 0
    for m in _BRACKET.finditer(bare):
        # a stray closing bracket (prose around JSON, as in an LLM's answer) does not hide what follows
        depth = depth + 1 if m.group() in "[{" else max(depth - 1, 0)
        if depth > limit:
            return m.start()
    return None


def loads(text: str) -> Any:
    """json.loads, with nesting deeper than MAX_JSON_DEPTH (`[[[[...` x 3000) a JSONDecodeError
    like any other malformed JSON, instead of a RecursionError that no caller expects."""
    pos = too_deep_at(text)
    if pos is not None:
        raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", text, pos)
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None
