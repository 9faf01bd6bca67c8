"""Corpus report over a labels file: shares of each category with 95% intervals, per library and
overall, root-cause groups, a symptom x root-cause cross table, PNG plots and a self-contained HTML page.
"""

from __future__ import annotations

import base64
import html
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy.stats import binomtest

from classify.core.records import atomic_write_text, read_rows
from classify.core.taxonomy import Dimension, Taxonomy


def share_ci(k: int, n: int) -> dict[str, float]:
    """Share k/n with a Wilson score 95% interval (sane at 0 and near 100%, unlike the normal one)."""
    if n == 0:
        return {"k": k, "n": n, "share": float("nan"), "lo": float("nan"), "hi": float("nan")}
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return {"k": k, "n": n, "share": k / n, "lo": float(ci.low), "hi": float(ci.high)}


def library_of(row: dict[str, Any]) -> str:
    repo = row.get("repo")
    if isinstance(repo, str) and "/" in repo:
        return repo.split("/", 1)[1]
    rid = str(row.get("id", ""))
    return rid.rsplit("-", 1)[0] if "-" in rid else "unknown"


@dataclass
class Corpus:
    rows: list[dict[str, Any]]
    taxonomy: Taxonomy

    @property
    def labeled(self) -> list[dict[str, Any]]:
        """Rows that are failure reports (not screened out)."""
        return [r for r in self.rows if r.get("screening") in (None, "failure_report")]


def distribution(rows: list[dict], field: str, categories: list[str]) -> dict[str, Any]:
    vals = [r.get(field) for r in rows]
    present = [v for v in vals if v is not None]
    c = Counter(present)
    return {
        "n": len(present),
        "n_missing": len(vals) - len(present),
        "shares": {cat: share_ci(c.get(cat, 0), len(present)) for cat in categories},
    }


def corpus_stats(rows: list[dict[str, Any]], tax: Taxonomy) -> dict[str, Any]:
    corpus = Corpus(rows, tax)
    lab = corpus.labeled
    libs = sorted({library_of(r) for r in lab})
    out: dict[str, Any] = {
        "n_rows": len(rows),
        "n_failure_reports": len(lab),
        "n_screened_out": len(rows) - len(lab),
        "libraries": {lib: sum(1 for r in lab if library_of(r) == lib) for lib in libs},
        "models": sorted({str(r.get("model")) for r in rows if r.get("model")}),
        "taxonomies": sorted({str(r.get("taxonomy")) for r in rows if r.get("taxonomy")}),
        "dimensions": {},
    }
    for d, dim in tax.dimensions.items():
        fields: list[tuple[str, list[str], Dimension | None]] = [(d, dim.ids, None)]
        if dim.groups:
            fields.append((f"{d}_group", list(dim.groups), dim))
        for name, cats, gdim in fields:

            def value(r, d=d, gdim=gdim, dim=dim):
                v = r.get(d)
                if v is None or v not in dim.ids:
                    return None
                return gdim.group_of(v) if gdim is not None else v

            rows_v = [{name: value(r)} | {"_lib": library_of(r)} for r in lab]
            out["dimensions"][name] = {
                "overall": distribution(rows_v, name, cats),
                "by_library": {lib: distribution([r for r in rows_v if r["_lib"] == lib], name, cats) for lib in libs},
            }
    dims = tax.dimension_ids
    if len(dims) >= 2:
        import pandas as pd

        a, b = dims[0], dims[1]
        sub = [r for r in lab if r.get(a) is not None and r.get(b) is not None]
        if sub:
            ct = pd.crosstab(
                pd.Categorical([r[a] for r in sub], categories=tax.dimensions[a].ids),
                pd.Categorical([r[b] for r in sub], categories=tax.dimensions[b].ids),
                dropna=False,
            )
            out["crosstab"] = {
                "rows": a,
                "cols": b,
                "row_labels": list(ct.index.astype(str)),
                "col_labels": list(ct.columns.astype(str)),
                "matrix": ct.values.tolist(),
            }
    return out


def draw(stats: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    files = []
    for name, d in stats["dimensions"].items():
        sh = d["overall"]["shares"]
        cats = list(sh)
        vals = np.array([100 * sh[c]["share"] for c in cats])
        lo = np.array([100 * sh[c]["lo"] for c in cats])
        hi = np.array([100 * sh[c]["hi"] for c in cats])
        fig, ax = plt.subplots(figsize=(7.5, 0.38 * len(cats) + 1.6))
        y = np.arange(len(cats))[::-1]
        ax.barh(y, vals, xerr=[vals - lo, hi - vals], color="#4C72B0", capsize=3)
        ax.set_yticks(y, cats)
        ax.set_xlabel("% of labeled failure reports (95% Wilson interval)")
        ax.set_title(f"{name} (n={d['overall']['n']})")
        fig.tight_layout()
        fn = f"distribution_{name}.png"
        fig.savefig(out / fn, dpi=110)
        plt.close(fig)
        files.append(fn)
    ct = stats.get("crosstab")
    if ct:
        m = np.array(ct["matrix"])
        fig, ax = plt.subplots(figsize=(0.55 * len(ct["col_labels"]) + 3, 0.45 * len(ct["row_labels"]) + 2.5))
        ax.imshow(m, cmap="Blues")
        ax.set_xticks(range(len(ct["col_labels"])), ct["col_labels"], rotation=60, ha="right")
        ax.set_yticks(range(len(ct["row_labels"])), ct["row_labels"])
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                if m[i, j]:
                    ax.text(
                        j,
                        i,
                        str(m[i, j]),
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white" if m[i, j] > m.max() / 2 else "black",
                    )
        ax.set_title(f"{ct['rows']} x {ct['cols']}")
        fig.tight_layout()
        fig.savefig(out / "crosstab.png", dpi=110)
        plt.close(fig)
        files.append("crosstab.png")
    return files


def _pct(s: dict) -> str:
    if s["n"] == 0:
        return "-"
    return f"{100 * s['share']:.2f}% [{100 * s['lo']:.1f}, {100 * s['hi']:.1f}]"


def render_html(stats: dict[str, Any], pngs: list[str], out: Path, examples: dict[str, list[dict]]) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>classify corpus report</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse;"
        "font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child,th:first-child"
        "{text-align:left}img{max-width:100%}</style></head><body>",
        "<h1>Corpus report</h1>",
        f"<p>{stats['n_rows']} rows; {stats['n_failure_reports']} failure reports labeled; "
        f"{stats['n_screened_out']} screened out. Models: {e(', '.join(stats['models']))}; "
        f"taxonomy: {e(', '.join(stats['taxonomies']))}. Shares with 95% Wilson intervals.</p>",
    ]
    libs = list(stats["libraries"])
    for name, d in stats["dimensions"].items():
        parts.append(f"<h2>{e(name)}</h2><table><tr><th>category</th><th>overall (n={d['overall']['n']})</th>")
        parts += [f"<th>{e(lib)} (n={d['by_library'][lib]['n']})</th>" for lib in libs]
        parts.append("</tr>")
        for cat, s in d["overall"]["shares"].items():
            parts.append(f"<tr><td>{e(cat)}</td><td>{e(_pct(s))}</td>")
            parts += [f"<td>{e(_pct(d['by_library'][lib]['shares'][cat]))}</td>" for lib in libs]
            parts.append("</tr>")
        parts.append("</table>")
        if name in examples:
            parts.append("<details><summary>examples</summary><ul>")
            for ex in examples[name]:
                parts.append(
                    f"<li><b>{e(str(ex['label']))}</b>: {e(str(ex['id']))} {e(str(ex.get('title') or ''))}</li>"
                )
            parts.append("</ul></details>")
    for fn in pngs:
        b64 = base64.b64encode((out / fn).read_bytes()).decode()
        parts.append(f"<h3>{e(fn)}</h3><img alt='{e(fn)}' src='data:image/png;base64,{b64}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_corpus_report(labels_path: Path, tax: Taxonomy, out: Path, input_path: Path | None = None) -> dict[str, Any]:
    rows = read_rows(labels_path)
    stats = corpus_stats(rows, tax)
    out.mkdir(parents=True, exist_ok=True)
    titles = {}
    if input_path:
        titles = {str(r.get("id")): r.get("title") for r in read_rows(input_path)}
    examples: dict[str, list[dict]] = {}
    for d in tax.dimension_ids:
        seen: Counter = Counter()
        for r in rows:
            lab = r.get(d)
            if lab is not None and seen[lab] < 3:
                seen[lab] += 1
                examples.setdefault(d, []).append(
                    {"label": lab, "id": r.get("id"), "title": titles.get(str(r.get("id")))}
                )
    atomic_write_text(out / "corpus.json", json.dumps(stats, indent=2) + "\n")
    pngs = draw(stats, out)
    atomic_write_text(out / "report.html", render_html(stats, pngs, out, examples))
    return stats
