"""The corpus report as one self-contained HTML page a researcher can read, print and cite from:
a summary (model, taxonomy, agreement with gold, caveats), share tables with category names, the
correction method and its measured error, published shares beside ours, per-library shares, a
symptom x root-cause cross table, examples with links, the screened-out list, and figures.

Jinja2 with autoescape renders it, so no issue text reaches the page unescaped; links are only
ever http(s) URLs; figures are embedded PNGs.
"""

from __future__ import annotations

import base64
import math
from pathlib import Path
from typing import Any

from classify.core.causeshown import NONE_SHOWN
from classify.core.taxonomy import Taxonomy
from classify.report.methods import methods_text, plain_method
from classify.report.reference import CLEAR
from classify.report.stats import SMALL_N, WEAK_KAPPA

TITLES = {"symptom": "Symptoms", "root_cause": "Root causes", "root_cause_group": "Root-cause groups"}


def category_names(tax: Taxonomy) -> dict[str, dict[str, str]]:
    """Display names: category ids to names, groups to the text before their description's dash."""
    out: dict[str, dict[str, str]] = {}
    for d, dim in tax.dimensions.items():
        out[d] = {c.id: c.name for c in dim.categories} | {NONE_SHOWN: "None shown"}
        if dim.groups:
            out[f"{d}_group"] = {g: desc.split(" - ", 1)[0].strip() or g for g, desc in dim.groups.items()}
    return out


def title_of(name: str) -> str:
    return TITLES.get(name, name.replace("_", " ").capitalize())


def pct(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{100 * float(v):.{digits}f}%"


def safe_url(u: Any) -> str | None:
    return u if isinstance(u, str) and (u.startswith("https://") or u.startswith("http://")) else None


def _pc(v: Any) -> float:
    return float("nan") if v is None else 100 * float(v)


def fig_title(name: str, d: dict[str, Any]) -> str:
    return f"{title_of(name)}: share of {d['scope'].split(' (')[0].split(':')[0]} (n={d['overall']['n']})"


def figure(name: str, d: dict[str, Any], names: dict[str, dict[str, str]], corrected: bool) -> tuple[Any, Any]:
    """One dimension's figure: the (corrected) share with its interval and, when corrected, the count
    of model labels; categories that cannot be estimated are marked n/a, not drawn as 0."""
    import matplotlib

    matplotlib.use("Agg")

    # QuaPy's plot module sets font.size 18 and dpi 200 globally when imported: draw at the defaults
    with matplotlib.rc_context({"font.size": 10.0, "figure.dpi": 100.0, "figure.figsize": [6.4, 4.8]}):
        return _figure(name, d, names, corrected)


def _figure(name: str, d: dict[str, Any], names: dict[str, dict[str, str]], corrected: bool) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt
    import numpy as np

    sh = d["overall"]["shares"]
    cats = list(sh)
    est = np.array([_pc(sh[c]["estimate"]) for c in cats])
    lo = np.array([_pc(sh[c]["lo"]) for c in cats])
    hi = np.array([_pc(sh[c]["hi"]) for c in cats])
    naive = np.array([_pc(sh[c]["naive"]) for c in cats])
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(cats) + 1.8))
    y = np.arange(len(cats))[::-1]
    ok = np.isfinite(est)
    ax.barh(y[ok], est[ok], color="#4C72B0", alpha=0.85, label="corrected estimate" if corrected else "share")
    both = ok & np.isfinite(lo) & np.isfinite(hi)
    ax.errorbar(
        est[both],
        y[both],
        xerr=[np.maximum(est[both] - lo[both], 0), np.maximum(hi[both] - est[both], 0)],
        fmt="none",
        ecolor="#222",
        capsize=3,
        lw=1,
    )
    if corrected:
        ax.scatter(naive, y, marker="D", color="#DD8452", zorder=3, s=22, label="count of model labels")
    ax.set_yticks(y, [names.get(name, {}).get(c, c) for c in cats])
    ax.set_xlabel("% of reports (95% interval)")
    # the axis covers every bar, interval end and count marker, whichever reaches furthest
    shown = np.concatenate([v[np.isfinite(v)] for v in (est, hi, naive if corrected else est)])
    right = float(shown.max()) if len(shown) else 100.0
    ax.set_xlim(0, min(100.0, max(5.0, right * 1.08 + 1)))
    for yi in y[~ok]:  # beside the count marker at 0, not on it
        ax.text(ax.get_xlim()[1] * 0.03, yi, "n/a: no gold examples", va="center", fontsize=8, color="#8a5a00")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    # a left-aligned title starts at the axes, right of long category names: wrap it at the figure's edge
    ax.set_title(fig_title(name, d), fontsize=10, loc="left", wrap=True)
    fig.tight_layout()
    return fig, ax


def source_line(st: dict[str, int] | None) -> str:
    """ "7 auto, 3 await review, 3 coded by people": where a dimension's labels come from."""
    if not st:
        return "unknown"
    parts = [
        (st.get("auto", 0), "auto (the model's label stands)"),
        (st.get("review", 0), "await review (the model's suggestion counts)"),
        (st.get("coded", 0), "coded by people"),
        (st.get("none_shown", 0), "routed as showing no cause"),
        (st.get("unrouted", 0), "model labels without routing"),
    ]
    shown = [f"{n} {what}" for n, what in parts if n]
    return ", ".join(shown) or "none"


def draw(stats: dict[str, Any], tax: Taxonomy, out: Path) -> list[dict[str, str]]:
    """One figure per dimension: the corrected share with its interval, and the naive count."""
    import matplotlib.pyplot as plt

    names = category_names(tax)
    figs = []
    for name, d in stats["dimensions"].items():
        if not d["overall"]["n"]:
            continue
        corrected = bool(stats.get("corrected") and d["correction"].get("method") != "none")
        fig, _ = figure(name, d, names, corrected)
        fn = f"distribution_{name}.png"
        fig.savefig(out / fn, dpi=120)
        plt.close(fig)
        figs.append({"file": fn, "title": fig_title(name, d)})
    return figs


TEMPLATE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Corpus report: {{ model or "labels" }} on {{ taxonomy }}</title>
<style>
:root{--ink:#1d2330;--muted:#5b6475;--line:#dde1e8;--accent:#2f5d9e;--bg-alt:#f6f7f9}
*{box-sizing:border-box}
body{font:15px/1.5 -apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--ink);max-width:1080px;margin:2.5em auto;padding:0 1.2em}
h1{font-size:1.7em;margin:0 0 .2em}
h2{font-size:1.3em;margin:2em 0 .5em;padding-bottom:.2em;border-bottom:2px solid var(--line)}
h3{font-size:1.05em;margin:1.4em 0 .4em}
.sub{color:var(--muted);margin:0 0 1.4em}
.summary{display:grid;grid-template-columns:repeat(auto-fit,minmax(185px,1fr));gap:.8em;margin:1em 0}
.card{border:1px solid var(--line);border-radius:6px;padding:.7em .9em;background:#fff}
.card b{display:block;font-size:.78em;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
.card span{font-size:1.05em}
.caveats{background:#fff8e6;border:1px solid #f0d58a;border-radius:6px;padding:.6em 1em .6em 2em}
.warn{color:#8a5a00}
.alert{background:#fdecea;border:1px solid #f1aeb5;border-radius:6px;padding:.6em 1em;color:#7a1c12}
abbr{text-decoration:underline dotted;cursor:help}
.methods{background:var(--bg-alt);border-left:3px solid var(--accent);padding:.6em 1em}
table.crosstab th.rot{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;text-align:left;vertical-align:bottom;font-size:12px;padding:6px 2px}
table.crosstab td{padding:3px 4px}
table.crosstab{width:auto}
.na{color:#8a5a00}
table{border-collapse:collapse;width:100%;margin:.4em 0 1em;font-size:13.5px}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:right;vertical-align:top}
th{background:var(--bg-alt);font-weight:600}
td:first-child,th:first-child,.txt{text-align:left}
tbody tr:nth-child(even){background:#fbfbfc}
.wrap{overflow-x:auto}
.num{font-variant-numeric:tabular-nums;white-space:nowrap}
.ci{color:var(--muted);font-size:.92em}
.method{color:var(--muted);font-size:.92em;margin:.2em 0 .6em}
.yes{color:#1a7f37}.no{color:#b42318}
figure{margin:1em 0;break-inside:avoid}
figure img{max-width:100%;height:auto;border:1px solid var(--line)}
figcaption{font-size:.92em;color:var(--muted)}
ul.ex{margin:.2em 0 .8em;padding-left:1.2em}
a{color:var(--accent)}
details summary{cursor:pointer;color:var(--accent)}
@media print{body{margin:0;max-width:none;font-size:11pt}h2{break-after:avoid}table,figure{break-inside:avoid}details{display:block}a{color:inherit}}
</style></head>
<body>
<h1>Corpus report</h1>
<p class="sub">{% if was_screened %}{{ n_fail }} failure reports out of {{ n_rows }} threads ({{ n_screened }} screened out as not failure reports{% if n_screened_review %}, {{ n_screened_review }} of them on the screening model's suggestion, awaiting review{% endif %}{% if n_unscreened %}; <b>{{ n_unscreened }} never screened</b>, counted as failure reports{% endif %}){% else %}{{ n_rows }} threads, <b>not screened</b>{% endif %} from {{ libraries|length }} {{ "library" if libraries|length == 1 else "libraries" }}.</p>
{% if not was_screened %}<p class="alert" id="unscreened">These labels were not screened: every thread counts as a failure report, though questions, feature requests and other threads may be among them, so every share below is of threads of any kind. Label with <code>classify run --screen</code> to keep failure reports only.</p>{% endif %}
{% if weak_model %}<p class="alert" id="weak-model">{{ "The correction rests on" if corrected else "The labels counted here come from" }} a model that barely agrees with the coders beyond chance on gold ({% for d, k in weak_model.items() %}{{ dim_titles.get(d, d) }}: κ = {{ "%.2f"|format(k) }}{{ "; " if not loop.last }}{% endfor %}; under {{ "%.1f"|format(weak_kappa) }} is "slight" agreement). Its {{ "corrected shares" if corrected else "labels" }} say little about the corpus: treat them as a rough guess, or improve the model first.</p>{% endif %}

<div class="summary" id="summary">
 <div class="card"><b>Model</b><span>{{ model or "unknown" }}</span></div>
 <div class="card"><b>Taxonomy</b><span>{{ taxonomy }}</span></div>
 <div class="card"><b>Agreement with gold</b>
 {% if eval_run %}{% for d, k in eval_run.dimensions.items() if k.kappa is not none and d in dim_titles %}<span>{{ dim_titles[d] }}: κ = {{ "%.2f"|format(k.kappa) }}{% if k.lo is not none %} <span class="ci">[{{ "%.2f"|format(k.lo) }}, {{ "%.2f"|format(k.hi) }}]</span>{% endif %}{% if k["coverage_at_0.80"] %}; κ ≥ 0.80 on the {{ k["coverage_at_0.80"] }}% most confident{% endif %}</span><br>{% endfor %}
 <span class="ci">eval run {{ eval_run.path.split("/")[-1] }}</span>
 {% else %}<span>no eval run found for this model and gold</span>{% endif %}</div>
 <div class="card" id="label-sources"><b>Where the labels come from</b>
 {% for name, d in dims.items() if not name.endswith("_group") %}{% set st = d.status %}<span>{{ dim_titles.get(name, name) }}: {{ source_line(st) }}</span><br>{% endfor %}
 {% if any_review %}<span class="warn">for reports that await review, the shares count the model's suggestion, which no person has checked yet</span>{% endif %}</div>
 <div class="card"><b>Shares</b><span>{% if corrected %}corrected for the model's errors measured on gold, with 95% intervals; counts beside them (see <a href="#methods">Methods</a>){% else %}counts of model labels with 95% intervals, not corrected (see <a href="#methods">Methods</a>){% endif %}</span></div>
</div>

{% if caveats or warnings %}<h3>Caveats</h3><ul class="caveats">
{% for w in warnings %}<li class="warn">{{ w }}</li>{% endfor %}
{% for c in caveats %}<li>{{ c }}</li>{% endfor %}
</ul>{% endif %}

{% if reference %}<h2 id="reference">Published shares beside ours</h2>
{% if reference.warning %}<p class="warn">{{ reference.warning }}</p>{% endif %}
{% set sources = reference.rows|map(attribute="source")|unique|list %}<p class="method">Source: {{ sources|join("; ") }}. Each published share is compared with ours over the same reports (all failure reports, or only those that show a cause). The difference (ours minus published) has a 95% interval that combines our interval{% if reference.rows|selectattr("n")|list %} with the sampling error of the study's own count{% endif %}; where that interval includes 0 but reaches beyond ±{{ "%.0f"|format(100 * clear) }} points, the comparison cannot tell agreement from a real difference.</p>
<p id="reference-summary"><b>What this comparison can tell:</b> {{ reference.summary }}</p>
<div class="wrap"><table class="reference"><thead><tr><th class="txt">dimension</th><th class="txt">category</th><th>published</th><th>ours <span class="ci">[95% interval]</span></th><th class="txt">share of</th><th>difference <span class="ci">[95% interval]</span></th><th class="txt">what it tells</th>{% if sources|length > 1 %}<th class="txt">source</th>{% endif %}</tr></thead><tbody>
{% for r in reference.rows %}<tr><td class="txt">{{ dim_titles.get(r.dimension, r.dimension) }}</td><td class="txt">{{ names[r.dimension].get(r.category, r.category) }}</td><td class="num">{{ pct(r.share, 1) }}{% if r.n %} <span class="ci">of {{ r.n }}</span>{% endif %}</td><td class="num">{% if r.estimate is not none %}<b>{{ pct(r.estimate) }}</b> <span class="ci">[{{ pct(r.lo) }}, {{ pct(r.hi) }}]</span>{% else %}n/a{% if r.note %} <span class="ci">({{ r.note }})</span>{% endif %}{% endif %}</td><td class="txt ci">{% if r.same_denominator %}{{ "all failure reports" if r.of == "all" else "reports that show one" }}{% else %}<span class="warn">theirs: {{ "all reports" if r.of == "all" else "reports that show one" }}; ours: {{ "all, each counted as showing a cause" if r.our_of == "all_as_if_shown" else ("the reports with a label (" ~ r.our_missing ~ " without one left out)" if r.our_of == "labeled" else ("reports that show one" if r.our_of == "shown" else "all failure reports")) }}</span>{% endif %}</td><td class="num">{% if r.difference is not none %}{{ "%+.1f"|format(100 * r.difference) }} points{% if r.difference_lo is not none %} <span class="ci">[{{ "%+.1f"|format(100 * r.difference_lo) }}, {{ "%+.1f"|format(100 * r.difference_hi) }}]</span>{% endif %}{% else %}n/a{% endif %}</td><td class="txt verdict">{{ r.verdict }}</td>{% if sources|length > 1 %}<td class="txt">{{ r.source }}</td>{% endif %}</tr>{% endfor %}
</tbody></table></div>{% endif %}

{% for name, d in dims.items() %}
<h2 id="dim-{{ name }}">{{ dim_titles.get(name, name) }}</h2>
<p class="method">Over {{ d.scope }}; n = {{ d.overall.n }}{% if d.overall.n_human %} ({{ d.overall.n_human }} coded by people, counted as coded){% endif %}{% if d.overall.n_none_shown %}; {{ d.overall.n_none_shown }} where the model sees no cause shown (routed so, or its suggestion for review){% endif %}{% if d.overall.n_missing %}; {{ d.overall.n_missing }} without a usable label{% endif %}.
{% if d.correction.method != "none" %}Estimated as the <b><abbr title="{{ d.correction.method }}: {{ d.correction.method_name }}">{{ plain_method(d.correction.method) }}</abbr></b>, {% if d.correction.chosen_by == "user" %}as the user asked (--method){% else %}the correction that erred least{% endif %} when <abbr title="{{ d.correction.protocol }}">tested on {{ d.correction.n_samples }} samples of held-out gold reports whose category shares were shifted away from gold's</abbr>: it missed the true shares by {{ "%.1f"|format(100 * d.correction.error) }} <abbr title="total variation distance between estimated and true shares, in percentage points: half the sum of the absolute differences over all categories">percentage points</abbr> on average{% if d.correction.measured_on == "groups" %} on the groups{% endif %}, against {{ "%.1f"|format(100 * d.correction.naive_error) }} for counting the labels.{% else %}Counts of the model's labels.{% endif %}</p>
<p class="method labels">Labels{% if name.endswith("_group") %} (of the root causes the groups sum){% endif %}: {{ source_line(d.status) }}.{% if d.status.review %} <span class="warn">For {{ d.status.review }} of {{ d.status.values()|sum }} reports these shares count the model's suggestion, which no person has checked yet and which the model was not confident enough to give alone; they change as people code those reports.</span>{% endif %}</p>
<div class="wrap"><table class="shares"><thead><tr><th>category</th><th>count</th><th>count share</th><th>{{ "corrected estimate" if d.correction.method != "none" else "share" }}</th><th>95% interval</th></tr></thead><tbody>
{% for c, s in d.overall.shares.items() %}<tr data-category="{{ c }}"><td>{{ names[name].get(c, c) }}</td><td class="num">{{ s.k }}</td><td class="num">{{ pct(s.naive) }}</td>{% if s.estimate is none and s.note %}<td class="num na" colspan="2">n/a <span class="ci">({{ s.note }})</span></td>{% else %}<td class="num"><b>{{ pct(s.estimate) }}</b></td><td class="num ci">{{ pct(s.lo) }} – {{ pct(s.hi) }}</td>{% endif %}</tr>{% endfor %}
{% if d.overall.none_shown %}<tr><td><i>Reports that show no cause</i> (of {{ d.overall.none_shown.n }})</td><td></td><td class="num">{{ pct(d.overall.none_shown.naive) }}</td><td class="num">{{ pct(d.overall.none_shown.estimate) }}</td><td class="num ci">{{ pct(d.overall.none_shown.lo) }} – {{ pct(d.overall.none_shown.hi) }}</td></tr>{% endif %}
</tbody></table></div>
{% if d.by_library %}<h3>By library</h3>
<p class="method">Each cell: the number of reports with that label out of the library's total{% if d.correction.method != "none" %}, and for libraries of at least {{ small_n }} reports the corrected estimate with its 95% interval{% endif %}.{% set few = d.by_library.items()|selectattr("1.counts_only")|map(attribute="0")|list %}{% if few and d.correction.method != "none" %} <span class="warn">Counts only for {{ few|join(", ") }}: under {{ small_n }} reports, a correction estimated on one library's reports swings too far to print (3 of 6 labels can come out as 78%).</span>{% endif %}</p>
<div class="wrap"><table class="bylib"><thead><tr><th>category</th>{% for lib, ld in d.by_library.items() %}<th>{{ lib }}<br><span class="ci">n = {{ ld.n }}</span></th>{% endfor %}</tr></thead><tbody>
{% for c in d.overall.shares %}<tr><td>{{ names[name].get(c, c) }}</td>{% for lib, ld in d.by_library.items() %}{% set s = ld.shares[c] %}<td class="num">{{ s.k }}{% if ld.counts_only or d.correction.method == "none" %}{% if ld.n %} <span class="ci">({{ pct(s.naive, 0) }})</span>{% endif %}{% elif s.estimate is none %} <span class="na" title="{{ s.note }}">n/a</span>{% else %} <span class="ci">·</span> {{ pct(s.estimate, 0) }} <span class="ci">[{{ pct(s.lo, 0) }}, {{ pct(s.hi, 0) }}]</span>{% endif %}</td>{% endfor %}</tr>{% endfor %}
</tbody></table></div>{% endif %}
{% if examples.get(name) and examples[name].values()|select|list %}<details><summary>Examples per category (most confident first{% if d.status.review %}; suggestions awaiting review marked{% endif %})</summary>
{% for c, exs in examples[name].items() if exs %}<h3>{{ names[name].get(c, c) }}</h3><ul class="ex">
{% for ex in exs %}<li>{% if safe_url(ex.url) %}<a href="{{ safe_url(ex.url) }}" rel="noopener noreferrer">{{ ex.id }}</a>{% else %}{{ ex.id }}{% endif %}{% if ex.title %}: {{ ex.title }}{% endif %} <span class="ci">({% if ex.human %}coded by a person{% elif ex.suggestion %}suggestion, awaiting review{% if ex.confidence is not none %}; confidence {{ "%.2f"|format(ex.confidence) }}{% endif %}{% elif ex.confidence is not none %}confidence {{ "%.2f"|format(ex.confidence) }}{% else %}no confidence{% endif %})</span></li>{% endfor %}
</ul>{% endfor %}</details>{% endif %}
{% endfor %}

{% if crosstab %}<h2 id="crosstab">{{ dim_titles.get(crosstab.rows) }} × {{ dim_titles.get(crosstab.cols)|lower }}</h2>
<p class="method">Counts of model labels (not corrected){% if crosstab.suggestions %}, with the model's suggestion for the reports that await review{% endif %}.</p>
<div class="wrap"><table class="crosstab"><thead><tr><th></th>{% for c in crosstab.col_labels %}<th class="rot" title="{{ names[crosstab.cols].get(c, c) }}">{{ names[crosstab.cols].get(c, c) }}</th>{% endfor %}<th class="rot">total</th></tr></thead><tbody>
{% for r in crosstab.row_labels %}{% set row = crosstab.matrix[loop.index0] %}<tr><td>{{ names[crosstab.rows].get(r, r) }}</td>{% for v in row %}<td class="num">{{ v if v else "" }}</td>{% endfor %}<td class="num"><b>{{ row|sum }}</b></td></tr>{% endfor %}
</tbody></table></div>{% endif %}

<h2 id="methods">Methods</h2>
<p class="methods">{{ methods }}</p>

{% if figures %}<h2 id="figures">Figures</h2>
{% for f in figures %}<figure><img alt="{{ f.title }}" src="data:image/png;base64,{{ f.b64 }}"><figcaption>Figure {{ loop.index }}. {{ f.title }}{% if corrected %}: bars are the corrected estimates with 95% intervals, diamonds the counts of model labels{% endif %}.</figcaption></figure>{% endfor %}{% endif %}

<h2 id="screened">Screened out ({{ screened|length if was_screened else "not screened" }})</h2>
{% if not was_screened %}<p class="method">The labels were not screened: no thread was set aside as not a failure report.</p>{% elif screened %}<p class="method">Threads the screening step judged not to be failure reports; listed for audit.</p>
<div class="wrap"><table class="screened"><thead><tr><th>issue</th><th>title</th><th>screening</th><th>confidence</th></tr></thead><tbody>
{% for s in screened %}<tr><td>{% if safe_url(s.url) %}<a href="{{ safe_url(s.url) }}" rel="noopener noreferrer">{{ s.id }}</a>{% else %}{{ s.id }}{% endif %}</td><td style="text-align:left">{{ s.title or "" }}</td><td>{{ s.screening }}{% if s.awaits_review %} <span class="ci">(suggestion, awaiting review)</span>{% endif %}</td><td class="num">{{ "%.2f"|format(s.confidence) if s.confidence is not none else "" }}</td></tr>{% endfor %}
</tbody></table></div>{% else %}<p class="method">None.</p>{% endif %}
</body></html>
"""


def render(
    stats: dict[str, Any],
    tax: Taxonomy,
    figures: list[dict[str, str]],
    out: Path,
    examples: dict[str, dict[str, list[dict]]],
    screened: list[dict[str, Any]],
) -> str:
    import jinja2

    env = jinja2.Environment(autoescape=True)
    tpl = env.from_string(TEMPLATE)
    figs = [f | {"b64": base64.b64encode((out / f["file"]).read_bytes()).decode()} for f in figures]
    dim_titles = {d: title_of(d) for d in stats["dimensions"]}
    return tpl.render(
        model=stats.get("model"),
        taxonomy=", ".join(stats["taxonomies"]) or tax.label,
        n_rows=stats["n_rows"],
        n_fail=stats["n_failure_reports"],
        n_screened=stats["n_screened_out"],
        n_screened_review=stats.get("n_screened_out_review", 0),
        n_unscreened=stats.get("n_unscreened", 0) if stats.get("screened", True) else 0,
        libraries=stats["libraries"],
        eval_run=stats.get("eval_run"),
        corrected=stats.get("corrected"),
        caveats=stats.get("caveats") or [],
        warnings=stats.get("warnings") or [],
        reference=stats.get("reference"),
        dims=stats["dimensions"],
        dim_titles=dim_titles,
        names=category_names(tax),
        examples=examples,
        crosstab=stats.get("crosstab"),
        figures=figs,
        screened=screened,
        pct=pct,
        safe_url=safe_url,
        small_n=SMALL_N,
        was_screened=stats.get("screened", True),
        weak_model=stats.get("weak_model") or {},
        weak_kappa=WEAK_KAPPA,
        clear=CLEAR,
        plain_method=plain_method,
        methods=methods_text(stats),
        source_line=source_line,
        any_review=any((d.get("status") or {}).get("review") for d in stats["dimensions"].values()),
    )
