"""The answer contract: a JSON schema whose enums are the taxonomy ids, and a parser that
accepts nothing else.

Whatever the server did (schema-constrained decoding, plain JSON mode or free text), the answer
is parsed tolerantly (code fences, prose around the object) and then validated strictly: a value
counts only if it is a category id of its dimension (case, spaces and hyphens normalised, or the
category's exact display name). So no text in an issue can steer a label outside the taxonomy.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from classify.classifiers.llm.response import text_only
from classify.core.causeshown import NONE_SHOWN, asking_order, shown_partners
from classify.core.jsontext import too_deep_at
from classify.core.taxonomy import Taxonomy

RATIONALE_MAX_CHARS = 400
# Deeper than any answer object (labels, a rationale string): refused before json's recursive
# decoder sees it, which raises RecursionError on a few thousand levels.
MAX_NESTING = 32


def answer_schema(
    taxonomy: Taxonomy,
    rationale: bool = False,
    allow_null: bool = False,
    limit_rationale: bool = False,
    grammar: bool = False,
) -> dict[str, Any]:
    """The JSON schema of an answer. `grammar`: for servers that turn it into a decoding grammar
    (llama.cpp's json_object + schema), which read a type list before an enum: a nullable id is
    then written as a bare enum, or any string would pass (a small model copies the placeholder)."""
    props: dict[str, Any] = {}
    if rationale:
        props["rationale"] = {"type": "string"}
        if limit_rationale:  # grammar-based servers honour it; it stops a rambling small model
            props["rationale"]["maxLength"] = RATIONALE_MAX_CHARS
    # Property order is answer order under constrained decoding: a "shown" decision before its dimension.
    for d in asking_order(taxonomy):
        dim = taxonomy.dimensions[d]
        if allow_null and grammar:
            props[d] = {"enum": [*dim.ids, None]}
        elif allow_null:
            props[d] = {"type": ["string", "null"], "enum": [*dim.ids, None]}
        else:
            props[d] = {"type": "string", "enum": list(dim.ids)}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def response_format(style: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    if style == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "issue_labels", "schema": schema, "strict": True}}
    if style == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    if style == "json_object":
        return {"type": "json_object"}
    return None


@dataclass
class Answer:
    labels: dict[str, str | None]  # dimensions with a valid value
    errors: dict[str, str]  # dimension -> what is wrong with its value
    rationale: str | None = None
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # where each label sits in the raw text

    @property
    def ok(self) -> bool:
        return not self.errors

    def error_text(self) -> str:
        return "; ".join(f"{d}: {e}" for d, e in self.errors.items())


def _norm(s: str) -> str:
    return re.sub(r"[\s\-]+", "_", s.strip().strip("`'\"").lower())


def _objects(text: str):
    """JSON objects embedded in text, in order (handles fences and prose around them)."""
    dec = json.JSONDecoder()
    i = text.find("{")
    while i != -1:
        try:
            obj, end = dec.raw_decode(text, i)
        except (json.JSONDecodeError, RecursionError):
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            yield obj
        i = text.find("{", end)


def parse_answer(
    content: str | None, taxonomy: Taxonomy, allow_null: bool = False, refused: str | None = None
) -> Answer:
    """The labels in `content`. Null is valid where `allow_null`, and for a dimension whose
    `<dim>_shown` decision the same answer gives as `none_shown` (no cause shown, none named).
    `refused`: why the client would not take this answer at all (every dimension invalid)."""
    dims = asking_order(taxonomy)  # a "shown" decision is read before the null of its dimension
    if refused:
        return Answer({}, {d: refused for d in dims})
    partners = shown_partners(taxonomy)
    text = content or ""
    if too_deep_at(text, MAX_NESTING) is not None:  # prose around JSON: the same scan as every reader
        return Answer({}, {d: f"answer nested deeper than {MAX_NESTING} levels" for d in dims})
    obj: dict[str, Any] | None = None
    for cand in _objects(text):
        if any(d in cand for d in dims):
            obj = cand
            break
    if obj is None:
        # Last resort for models that ignore JSON mode: `symptom: crash` lines.
        obj = {}
        for d in dims:
            m = re.search(rf'["\']?{re.escape(d)}["\']?\s*[:=]\s*["\']?([A-Za-z0-9_\- ]+)', text)
            if m:
                obj[d] = m.group(1)
        if not obj:
            reason = "empty answer" if not text.strip() else "no JSON object with the dimension keys"
            return Answer({}, {d: reason for d in dims})
    labels: dict[str, str | None] = {}
    errors: dict[str, str] = {}
    for d in dims:
        dim = taxonomy.dimensions[d]
        if d not in obj:
            errors[d] = "missing"
            continue
        v = obj[d]
        if v is None or (isinstance(v, str) and v.strip().lower() in ("null", "none", "")):
            if allow_null or (d in partners and labels.get(partners[d]) == NONE_SHOWN):
                labels[d] = None
            elif d in partners:
                errors[d] = f"null only when {partners[d]} is {NONE_SHOWN}; pick the closest category"
            else:
                errors[d] = "null is not allowed; pick the closest category"
            continue
        if not isinstance(v, str):
            errors[d] = f"{json.dumps(v)[:60]} is not a category id string"
            continue
        by_norm = {_norm(c.id): c.id for c in dim.categories}
        by_norm.update({_norm(c.name): c.id for c in dim.categories})
        cid = by_norm.get(_norm(v))
        if cid is None:
            errors[d] = f"{v[:60]!r} is not one of the {d} ids"
        else:
            labels[d] = cid
    rationale = obj.get("rationale")
    rationale = text_only(rationale.strip()[:2000]) if isinstance(rationale, str) and rationale.strip() else None
    spans = {}
    for d in labels:
        m = re.search(rf'"{re.escape(d)}"\s*:\s*"([^"]*)"', text)
        if m:
            spans[d] = m.span(1)
    return Answer(labels, errors, rationale, spans)


def span_probability(tokens: list[tuple[str, float]] | None, content: str, span: tuple[int, int]) -> float | None:
    """exp(sum of logprobs) of the tokens covering content[span]: the model's probability of
    that label string given everything before it. None when token texts do not line up."""
    if not tokens:
        return None
    if "".join(t for t, _ in tokens) != content:
        return None
    pos, total, hit = 0, 0.0, False
    for tok, lp in tokens:
        start, end = pos, pos + len(tok)
        pos = end
        if end <= span[0] or start >= span[1]:
            continue
        if lp is None or not math.isfinite(lp) or lp > 0:  # a probability above 1 is no probability
            return None
        total += lp
        hit = True
    return min(1.0, math.exp(total)) if hit else None
