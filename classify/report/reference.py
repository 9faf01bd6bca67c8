"""Published shares beside ours: a reference table (YAML) read and checked against the taxonomy, and
compared with the report's shares."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from classify.core.taxonomy import Taxonomy
from classify.report.labels import ReportError


def load_reference(path: Path, tax: Taxonomy) -> dict[str, Any]:
    """A table of published shares (YAML): `source`, optional `taxonomy`, and `shares`, a list of
    {dimension, category, share, source?}; shares are fractions in [0, 1]."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path}: no such reference file") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: not a readable YAML file ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("shares"), list) or not doc["shares"]:
        raise ReportError(f"{path}: expected a mapping with a non-empty `shares` list")
    valid: dict[str, list[str]] = {}
    for d, dim in tax.dimensions.items():
        valid[d] = dim.ids
        if dim.groups:
            valid[f"{d}_group"] = list(dim.groups)
    out = []
    for i, entry in enumerate(doc["shares"], 1):
        where = f"{path}: shares entry {i}"
        if not isinstance(entry, dict):
            raise ReportError(f"{where}: expected a mapping with dimension, category, share")
        e: dict[str, Any] = entry
        unknown = set(e) - {"dimension", "category", "share", "source", "note"}
        if unknown:
            raise ReportError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        d, c, s = str(e.get("dimension")), e.get("category"), e.get("share")
        if d not in valid:
            raise ReportError(f"{where}: unknown dimension {d!r}; known: {', '.join(valid)}")
        if c not in valid[d]:
            raise ReportError(f"{where}: unknown {d} category {c!r}; known: {', '.join(valid[d])}")
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 <= s <= 1:
            hint = (
                "; it looks like a percentage: write 0.2733 for 27.33%" if isinstance(s, (int, float)) and s > 1 else ""
            )
            raise ReportError(f"{where}: share must be a fraction in [0, 1], got {s!r}{hint}")
        out.append(
            {
                "dimension": d,
                "category": c,
                "share": float(s),
                "source": str(e.get("source") or doc.get("source") or path.name),
                "note": e.get("note"),
            }
        )
    want = doc.get("taxonomy")
    warn = None
    if want and want != tax.label:
        warn = f"the reference is for taxonomy {want}, the labels for {tax.label}"
    return {"path": str(path), "source": doc.get("source"), "shares": out, "warning": warn}


def compare_reference(stats: dict[str, Any], ref: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for e in ref["shares"]:
        ours = stats["dimensions"][e["dimension"]]["overall"]["shares"][e["category"]]
        known = ours["lo"] is not None and not math.isnan(ours["lo"])
        inside = ours["lo"] <= e["share"] <= ours["hi"] if known else None
        rows.append(
            e
            | {
                "estimate": ours["estimate"],
                "naive": ours["naive"],
                "lo": ours["lo"],
                "hi": ours["hi"],
                "difference": ours["estimate"] - e["share"] if ours["estimate"] is not None else None,
                "inside": inside,
                "note": ours.get("note") or e.get("note"),
            }
        )
    return rows
