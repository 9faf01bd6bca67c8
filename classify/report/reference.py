"""Published shares beside ours: a reference table (YAML) read and checked against the taxonomy, and
compared with the report's shares."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from classify.core.taxonomy import Taxonomy
from classify.core.yamlfile import load_yaml
from classify.report.labels import ReportError

OF = {
    "all": "all failure reports",
    "shown": "the reports that show one (root cause: reports whose thread shows a cause)",
}
CLEAR = 0.10  # a difference interval reaching beyond +-10 points cannot tell agreement from a real difference


def _n(v: Any, where: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ReportError(
            f"{where}: n must be the number of reports the shares are of (a whole number >= 1), got {v!r}"
        )
    return v


def _of(v: Any, where: str) -> str:
    if v is None:
        return "all"
    if v not in OF:
        raise ReportError(f"{where}: of must be one of {', '.join(OF)} (what the share is a fraction of), got {v!r}")
    return str(v)


def load_reference(path: Path, tax: Taxonomy) -> dict[str, Any]:
    """A table of published shares (YAML): `source`, optional `taxonomy`, `n` (the reports the study
    coded) and `of` (`all` reports, the default, or only those that `shown` one), and `shares`, a list
    of {dimension, category, share, source?, n?, of?, note?}; shares are fractions in [0, 1]. A category
    given twice for one source, or shares of one dimension summing above 1, are refused."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{path}: no such reference file") from None
    except UnicodeDecodeError as exc:
        raise ReportError(f"{path}: not a readable YAML file ({str(exc).splitlines()[0]})") from None
    # duplicate keys, alias bombs and deep nesting are refused as in a codebook
    doc = load_yaml(text, str(path), ReportError)
    if not isinstance(doc, dict) or not isinstance(doc.get("shares"), list) or not doc["shares"]:
        raise ReportError(f"{path}: expected a mapping with a non-empty `shares` list")
    valid: dict[str, list[str]] = {}
    for d, dim in tax.dimensions.items():
        valid[d] = dim.ids
        if dim.groups:
            valid[f"{d}_group"] = list(dim.groups)
    top_n, top_of = _n(doc.get("n"), str(path)), _of(doc.get("of"), str(path))
    out = []
    seen: dict[tuple[str, str, str], int] = {}
    sums: dict[tuple[str, str, str], float] = {}
    for i, entry in enumerate(doc["shares"], 1):
        where = f"{path}: shares entry {i}"
        if not isinstance(entry, dict):
            raise ReportError(f"{where}: expected a mapping with dimension, category, share")
        e: dict[str, Any] = entry
        unknown = set(e) - {"dimension", "category", "share", "source", "note", "n", "of"}
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
        source = str(e.get("source") or doc.get("source") or path.name)
        of = _of(e.get("of"), where) if "of" in e else top_of
        key = (d, str(c), source)
        if key in seen:
            raise ReportError(f"{where}: {d} {c!r} is given twice for {source} (entries {seen[key]} and {i})")
        seen[key] = i
        sums[(d, source, of)] = sums.get((d, source, of), 0.0) + float(s)
        if sums[(d, source, of)] > 1 + 1e-6:
            raise ReportError(
                f"{where}: the {d} shares of {source} sum to {sums[(d, source, of)]:.4g} by here; shares of "
                f"one dimension are fractions of the same reports and cannot sum above 1"
            )
        out.append(
            {
                "dimension": d,
                "category": c,
                "share": float(s),
                "source": source,
                "n": _n(e.get("n"), where) if "n" in e else top_n,
                "of": of,
                "note": e.get("note"),
            }
        )
    want = doc.get("taxonomy")
    warn = None
    if want and want != tax.label:
        warn = (
            f"the reference is for taxonomy {want}, the labels for {tax.label}: its categories may not mean "
            f"the same as ours"
        )
    return {"path": str(path), "source": doc.get("source"), "shares": out, "warning": warn}


def _num(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _verdict(diff: float | None, lo: float | None, hi: float | None, same: bool) -> str:
    if not same:
        return "not comparable: different denominators"
    if diff is None or lo is None or hi is None:
        return "cannot tell: no estimate"
    if lo > 0:
        return "ours higher"
    if hi < 0:
        return "ours lower"
    if lo < -CLEAR or hi > CLEAR:
        return "cannot tell: intervals too wide"
    return f"no difference beyond {100 * CLEAR:.0f} points"


def compare_reference(stats: dict[str, Any], ref: dict[str, Any]) -> list[dict[str, Any]]:
    """Per published share: ours over the same reports (all failure reports, or those that show a
    cause), the difference with a 95% interval (our bootstrap interval and, when the study's `n` is
    known, its binomial sampling error, combined), and a verdict in words."""
    rows = []
    for e in ref["shares"]:
        dim = stats["dimensions"][e["dimension"]]
        overall = dim["overall"]
        ours_of = dim.get("denominator", "all")
        table, our_n, same = overall["shares"], overall["n"], True
        if e["of"] == "all" and ours_of == "shown" and "of_all" in overall:
            table, our_n = overall["of_all"], overall.get("n_all", our_n)
        elif e["of"] == "all" and ours_of == "all_as_if_shown":
            same = False  # ours forces a cause on every report; theirs leaves some without one
        elif (e["of"] == "shown") != (ours_of == "shown"):
            same = False
        our_of = "all" if table is overall.get("of_all") else ours_of
        missing = int(overall.get("n_missing") or 0)
        if e["of"] == "all" and missing:
            # ours leaves out the reports without a usable label (e.g. an unrouted run's nulls), so it is
            # a share of fewer reports than theirs and reads high
            same, our_of = False, "labeled"
        ours = table[e["category"]]
        est, lo, hi = _num(ours["estimate"]), _num(ours["lo"]), _num(ours["hi"])
        diff = d_lo = d_hi = None
        if est is not None and same:  # over other reports a difference means nothing: none is given
            diff = est - e["share"]
            if lo is not None and hi is not None:
                # each side of our (often skewed) interval, widened by the study's own sampling error
                theirs = 1.96 * math.sqrt(e["share"] * (1 - e["share"]) / e["n"]) if e.get("n") else 0.0
                d_lo, d_hi = diff - math.hypot(est - lo, theirs), diff + math.hypot(hi - est, theirs)
        rows.append(
            e
            | {
                "estimate": est,
                "naive": ours["naive"],
                "lo": lo,
                "hi": hi,
                "our_n": our_n,
                "our_of": our_of,
                "our_missing": missing,
                "same_denominator": same,
                "difference": diff,
                "difference_lo": d_lo,
                "difference_hi": d_hi,
                "verdict": _verdict(diff, d_lo, d_hi, same),
                "note": ours.get("note") or e.get("note"),
            }
        )
    return rows


def reference_summary(rows: list[dict[str, Any]]) -> str:
    """One sentence on what the comparison can tell."""
    n = len(rows)
    wide = sum(r["verdict"].startswith("cannot tell") for r in rows)
    diff = sum(r["verdict"].startswith("ours") for r in rows)
    apart = sum(not r["same_denominator"] for r in rows)
    parts = []
    if diff:
        parts.append(f"{diff} of {n} differ beyond both intervals")
    if wide:
        parts.append(
            f"for {wide} of {n} the interval of the difference includes 0 but reaches beyond +-{100 * CLEAR:.0f} "
            f"points: too wide to tell agreement from a real difference"
        )
    if apart:
        parts.append(f"{apart} of {n} are not over the same reports and cannot be compared")
    same = n - diff - wide - apart
    if same:
        parts.append(f"{same} of {n} show no difference (within +-{100 * CLEAR:.0f} points)")
    return "; ".join(parts) + "."
