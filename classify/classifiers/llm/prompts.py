"""Render the prompt templates (a folder of Jinja2 files, prompts/llm/ by default) into messages.

Layout for prefix caching: the part that is the same for every issue (instructions and the
codebook, rendered from the taxonomy) comes first; per-issue parts (few-shot examples, then the
issue) come last. The "naive" layout puts the issue first and exists only as the benchmark's
contrast.

Issue text is untrusted: it is delimited by <issue> tags and any tag-like text inside it that
could close or open a delimiter is defused before rendering.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, TemplateNotFound, TemplateSyntaxError

from classify.classifiers.llm.response import text_only
from classify.core.causeshown import asking_order, shown_partners
from classify.core.errors import ClassifyError
from classify.core.records import Record
from classify.core.taxonomy import Taxonomy
from classify.core.textio import read_text

TEMPLATES = ("system.j2", "answer_form.j2", "examples.j2", "issue.j2", "task.j2", "repair.j2")

_DELIM = re.compile(r"<(\s*/?\s*)(issue|example)\b", re.IGNORECASE)


class PromptError(ClassifyError, ValueError):
    pass


def defuse(text: str | None) -> str:
    """Make delimiter look-alikes inside untrusted text inert (`</issue>` -> `‹/issue>`)."""
    return _DELIM.sub(lambda m: "\u2039" + m.group(1) + m.group(2), text or "")


def clip(text: str, n: int) -> str:
    text = (text or "").strip()
    if len(text) <= n:
        return text
    return text[:n].rstrip() + f" [... {len(text) - n} characters cut]"


def budget(record: Record, max_chars: int, include_discussion: bool) -> tuple[str, str, str]:
    """Title, body, discussion clipped to about max_chars together (body first, a third for discussion)."""
    title = clip(record.title, min(300, max_chars // 4))
    body = (record.body or "").strip()
    disc = (record.discussion or "").strip() if include_discussion else ""
    room = max(0, max_chars - len(title))
    if len(body) + len(disc) <= room:
        return title, body, disc
    disc_room = min(len(disc), room // 3)
    body_room = room - disc_room
    if len(body) < body_room:  # short body: the discussion gets the rest
        disc_room = room - len(body)
    return title, clip(body, body_room), clip(disc, disc_room)


@dataclass
class Example:
    record: Record
    labels: dict[str, str | None]


class PromptSet:
    def __init__(
        self,
        folder: str | Path,
        taxonomy: Taxonomy,
        *,
        rationale: bool = False,
        allow_null: bool = False,
        layout: str = "cache-friendly",
        fold_system: bool = False,
        max_chars: int = 6000,
        example_chars: int = 1200,
        include_discussion: bool = True,
    ):
        self.folder = Path(folder)
        self.taxonomy = taxonomy
        self.layout = layout
        self.fold_system = fold_system
        self.max_chars = max_chars
        self.example_chars = example_chars
        self.include_discussion = include_discussion
        loader = FileSystemLoader(str(self.folder))
        self.env = Environment(
            loader=loader,
            undefined=StrictUndefined,
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
        )
        self.env.filters["untrusted"] = defuse
        self.order = asking_order(taxonomy)
        self.common = {
            "taxonomy": taxonomy,
            # A "shown" decision (classify.core.causeshown) comes right before its dimension everywhere
            # the prompt lists dimensions: the model first says whether the thread shows a cause.
            "dimensions": [taxonomy.dimensions[d] for d in self.order],
            "shown_for": {s: d for d, s in shown_partners(taxonomy).items()},  # "<dim>_shown" -> dim
            "rationale": rationale,
            "allow_null": allow_null,
        }
        sources = []
        for name in TEMPLATES:
            try:
                src, _, _ = loader.get_source(self.env, name)
            except TemplateNotFound:
                raise PromptError(
                    f"{self.folder}: template {name} is missing (a set needs {', '.join(TEMPLATES)})"
                ) from None
            except UnicodeDecodeError:
                read_text(self.folder / name, PromptError)  # raises, naming the line
                raise
            try:
                self.env.get_template(name)  # compiled once here, so a syntax error names its template
            except TemplateSyntaxError as e:
                raise PromptError(
                    f"{self.folder / name}: line {e.lineno}: template syntax error: {e.message}"
                ) from None
            sources.append(f"{name}\n{src}")
        self.system_text = self._render("system.j2")
        # The hash covers the rendered system prompt (so a new codebook version changes it), every
        # template's source and the layout switches: equal hash, equal prompts.
        h = hashlib.sha256()
        for part in [
            self.system_text,
            *sources,
            f"layout={layout}",
            f"fold_system={fold_system}",
            f"max_chars={max_chars}",
            f"example_chars={example_chars}",
            f"discussion={include_discussion}",
        ]:
            h.update(part.encode("utf-8"))
            h.update(b"\0")
        self.hash = h.hexdigest()[:16]

    def _render(self, name: str, **ctx) -> str:
        return self.env.get_template(name).render(**self.common, **ctx).strip()

    def issue_block(self, record: Record, max_chars: int | None = None) -> str:
        title, body, disc = budget(record, max_chars or self.max_chars, self.include_discussion)
        return self._render("issue.j2", title=title, body=body, discussion=disc)

    def examples_block(self, examples: list[Example]) -> str:
        if not examples:
            return ""
        items = []
        for ex in examples:
            answer = {d: ex.labels.get(d) for d in self.order}
            items.append({"issue": self.issue_block(ex.record, self.example_chars), "answer": json.dumps(answer)})
        return self._render("examples.j2", examples=items)

    def task_text(self, record: Record, examples: Sequence[Example] = ()) -> str:
        ex = self.examples_block(list(examples))
        task = self._render("task.j2", issue=self.issue_block(record))
        return f"{ex}\n\n{task}" if ex else task

    def messages(self, record: Record, examples: Sequence[Example] = ()) -> list[dict[str, str]]:
        # an input's lone surrogate (a JSON escape) would stop the request's key, log and body
        task = text_only(self.task_text(record, examples))
        if self.layout == "naive":
            return [{"role": "user", "content": f"{task}\n\n{self.system_text}"}]
        if self.fold_system:
            return [{"role": "user", "content": f"{self.system_text}\n\n{task}"}]
        return [{"role": "system", "content": self.system_text}, {"role": "user", "content": task}]

    def repair_text(self, error: str) -> str:
        return self._render("repair.j2", error=error)
