"""Load and validate a codebook (taxonomy) YAML file into typed objects.

Schema (see codebook/taxonomy-v1.yaml):

    name: str
    version: int | str
    dimensions:
      <dimension id>:
        question: str                     # optional
        groups: {<group id>: description} # optional
        categories:
          - id, name, definition, include: [..], exclude: [..], group (when groups exist)
    changelog: [...]                      # optional, written by `classify review apply`
"""

from __future__ import annotations

import difflib
import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from classify.core import paths
from classify.core.errors import ClassifyError
from classify.core.records import CORE_FIELDS
from classify.core.textio import read_text
from classify.core.yamlfile import load_yaml

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")


class TaxonomyError(ClassifyError, ValueError):
    """A taxonomy file is malformed. The message names the file, the place and the problem."""


@dataclass(frozen=True)
class Category:
    id: str
    name: str
    definition: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    group: str | None = None


@dataclass(frozen=True)
class Dimension:
    id: str
    question: str
    categories: tuple[Category, ...]
    groups: dict[str, str] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return [c.id for c in self.categories]

    def category(self, cid: str) -> Category:
        for c in self.categories:
            if c.id == cid:
                return c
        raise KeyError(f"unknown category {cid!r} in dimension {self.id!r}")

    def group_of(self, cid: str) -> str | None:
        return self.category(cid).group


@dataclass(frozen=True)
class Taxonomy:
    name: str
    version: str
    dimensions: dict[str, Dimension]
    path: Path | None = None
    changelog: tuple[dict, ...] = ()
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def label(self) -> str:
        """`name@version`, the form recorded in provenance."""
        return f"{self.name}@{self.version}"

    @property
    def dimension_ids(self) -> list[str]:
        return list(self.dimensions)

    def fingerprint(self) -> str:
        """Hash of the content (not the file path), to tell two versions apart."""
        text = yaml.safe_dump(self.raw, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def validate_label(self, dim: str, label: Any) -> str | None:
        """Return an error message for a bad label, None when it is valid (null is valid)."""
        if label is None:
            return None
        if dim not in self.dimensions:
            return f"unknown dimension {dim!r}"
        if label not in self.dimensions[dim].ids:
            return f"unknown {dim} label {label!r}"
        return None


def _fail(path: Path | str, where: str, problem: str) -> TaxonomyError:
    return TaxonomyError(f"{path}: {where}: {problem}")


# Every key the loader reads; anything else is a typo (`inclde:`) whose content would silently
# never reach a prompt or a check.
TOP_KEYS = ("name", "version", "dimensions", "changelog")
DIMENSION_KEYS = ("question", "groups", "categories")
CATEGORY_KEYS = ("id", "name", "definition", "include", "exclude", "group")


def _unknown_keys(path, where: str, mapping: dict, known: tuple[str, ...]) -> None:
    for key in mapping:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise _fail(path, where, f"unknown key {key!r} ({hint}known keys: {', '.join(known)})")


def _text(path, where: str, value: Any, *, required: bool = False) -> str:
    """A text of the codebook (name, definition, question): a string, never a list or a number that
    `str()` would turn into something no one wrote (an alias bomb expands there)."""
    if value is None or value == "":
        if required:
            place, _, key = where.rpartition(".")
            raise _fail(path, place or "top level", f"missing {key}")
        return ""
    if not isinstance(value, str):
        raise _fail(path, where, f"must be text, not {type(value).__name__} ({str(value)[:40]!r}...)")
    return value


# Fields a labels row, a record or a routed run writes beside the labels: a dimension of the same
# name would overwrite them (or be overwritten). classify.labeling.pipeline.OWN_FIELDS lists the
# row's own ones; `screening` is allowed as the sole dimension of a screening codebook only.
RESERVED_FIELDS = set(CORE_FIELDS) | {
    "model", "taxonomy", "gold_hash", "run_options", "labeled_at", "provenance", "prompt_hash", "routing",
    "screening", "screening_model", "screening_options", "screening_taxonomy", "coded_by", "adjudication_note",
}  # fmt: skip
# Per-dimension fields: `<dim>_status`, `<dim>_confidence`, ... (routing, merge, the corpus report).
DIMENSION_SUFFIXES = ("group", "status", "by", "coded_by", "confidence", "proba", "suggestion")
SHOWN_IDS = {"shown", "none_shown"}  # the derived `<dim>_shown` decision (classify.core.causeshown)


def _collisions(path, data: dict, dims: dict[str, Dimension]) -> None:
    """Refuse dimension and category names that collide with the toolkit's own fields."""
    for d, dim in dims.items():
        where = f"dimensions.{d}"
        screening_only = d == "screening" and len(dims) == 1 and "failure_report" in dim.ids
        if d in RESERVED_FIELDS and not screening_only:
            raise _fail(path, where, f"{d!r} is a field the toolkit writes itself; give the dimension another id")
        for other in dims:
            for suffix in DIMENSION_SUFFIXES:
                if d == f"{other}_{suffix}":
                    raise _fail(
                        path, where, f"collides with the `{d}` field written for dimension {other!r}; rename it"
                    )
            if d == f"{other}_shown" and set(dim.ids) != SHOWN_IDS:
                raise _fail(path, where, f"collides with the derived `{d}` decision of dimension {other!r}; rename it")
        for c in dim.categories:
            if c.id in dim.groups:
                raise _fail(path, f"{where} ({c.id})", f"category id {c.id!r} is also a group id of {d}; rename one")
    version = data["version"]
    if isinstance(version, bool) or not isinstance(version, (str, int, float)):
        raise _fail(path, "version", f"must be a number or text, not {type(version).__name__}")
    if isinstance(version, float) and not math.isfinite(version):  # `.nan` would label every run name@nan
        raise _fail(path, "version", f"must be a finite number or text, not {version}")


def _str_list(path, where, value) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(path, where, "must be a list of strings")
    return tuple(value)


def parse_taxonomy(data: Any, path: Path | str = "<taxonomy>") -> Taxonomy:
    """Validate a parsed YAML document and build a Taxonomy."""
    if not isinstance(data, dict):
        raise _fail(path, "top level", "expected a mapping with name, version, dimensions")
    _unknown_keys(path, "top level", data, TOP_KEYS)
    for key in ("name", "version", "dimensions"):
        if key not in data or data[key] in (None, ""):
            raise _fail(path, "top level", f"missing required key {key!r}")
    dims_raw = data["dimensions"]
    if not isinstance(dims_raw, dict) or not dims_raw:
        raise _fail(path, "dimensions", "must be a non-empty mapping of dimension id -> spec")

    dims: dict[str, Dimension] = {}
    for dim_id, spec in dims_raw.items():
        where = f"dimensions.{dim_id}"
        if not isinstance(dim_id, str) or not _ID_RE.match(dim_id):
            raise _fail(path, where, "dimension id must be lowercase letters, digits, _ or -")
        if not isinstance(spec, dict):
            raise _fail(path, where, "must be a mapping with 'categories'")
        _unknown_keys(path, where, spec, DIMENSION_KEYS)
        groups = spec.get("groups") or {}
        if not isinstance(groups, dict):
            raise _fail(path, f"{where}.groups", "must be a mapping of group id -> description")
        for g, desc in groups.items():
            if not isinstance(g, str) or not _ID_RE.match(g):
                raise _fail(path, f"{where}.groups", f"bad group id {g!r} (lowercase letters, digits, _ or -)")
            _text(path, f"{where}.groups.{g}", desc)
        cats_raw = spec.get("categories")
        if not isinstance(cats_raw, list) or not cats_raw:
            raise _fail(path, f"{where}.categories", "empty dimension: needs at least one category")
        cats: list[Category] = []
        seen: dict[str, int] = {}
        for i, c in enumerate(cats_raw):
            cwhere = f"{where}.categories[{i}]"
            if not isinstance(c, dict):
                raise _fail(path, cwhere, "must be a mapping")
            cid = c.get("id")
            if not cid:
                raise _fail(path, cwhere, "missing category id")
            if not isinstance(cid, str) or not _ID_RE.match(cid):
                raise _fail(path, cwhere, f"bad category id {cid!r} (lowercase letters, digits, _ or -)")
            cwhere = f"{where}.categories[{i}] ({cid})"
            _unknown_keys(path, cwhere, c, CATEGORY_KEYS)
            if cid in seen:
                raise _fail(path, cwhere, f"duplicate category id {cid!r} (first at categories[{seen[cid]}])")
            seen[cid] = i
            definition = _text(path, f"{cwhere}.definition", c.get("definition"), required=True)
            name = _text(path, f"{cwhere}.name", c.get("name"))
            group = c.get("group")
            if groups and group is None:
                raise _fail(path, cwhere, f"missing group (one of {sorted(groups)})")
            if group is not None and (not isinstance(group, str) or group not in groups):
                raise _fail(path, cwhere, f"unknown group {group!r} (known: {sorted(groups) or 'none declared'})")
            cats.append(
                Category(
                    id=cid,
                    name=name or cid,
                    definition=" ".join(definition.split()),
                    include=_str_list(path, f"{cwhere}.include", c.get("include")),
                    exclude=_str_list(path, f"{cwhere}.exclude", c.get("exclude")),
                    group=group,
                )
            )
        used = {c.group for c in cats}
        for g in groups:
            if g not in used:
                raise _fail(path, f"{where}.groups.{g}", "group has no category")
        dims[dim_id] = Dimension(
            id=dim_id,
            question=_text(path, f"{where}.question", spec.get("question")),
            categories=tuple(cats),
            groups={k: v or "" for k, v in groups.items()},
        )
    changelog = data.get("changelog") or []
    if not isinstance(changelog, list):
        raise _fail(path, "changelog", "must be a list")
    _collisions(path, data, dims)
    return Taxonomy(
        name=_text(path, "name", data["name"], required=True),
        version=str(data["version"]),
        dimensions=dims,
        path=Path(path) if not str(path).startswith("<") else None,
        changelog=tuple(changelog),
        raw=data,
    )


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """Load a taxonomy YAML file; by default codebook/taxonomy-v1.yaml of the project folder, else
    the shipped one (classify.core.paths)."""
    path = Path(path) if path else paths.default_taxonomy()
    if not path.exists():
        raise TaxonomyError(f"{path}: file not found")
    return taxonomy_from_text(read_text(path, TaxonomyError), path)


def taxonomy_from_text(text: str, source: Path | str = "<taxonomy>") -> Taxonomy:
    """A codebook from its YAML text, with the same checks as a file (duplicate keys, alias bombs,
    deep nesting refused): a project's stored copy, a version about to be written."""
    return parse_taxonomy(load_yaml(text, str(source), TaxonomyError), source)
