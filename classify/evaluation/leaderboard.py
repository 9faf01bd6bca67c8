"""One table of several evaluation runs: `classify leaderboard`.

Reads the metrics.json of each run folder under evals/ (written by `classify eval`) and keeps,
per model label (spec plus encoder/options when they differ), the newest run. Columns per
dimension: kappa with its bootstrap 95% CI, kappa on the 50% and 70% most confident
predictions; then the evaluation's wall time per 1,000 records (training on every fold
included, so fine-tuned models pay for their training here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from classify.evaluation.runfolder import METRICS, RunFolder, RunFolderError, read_run, run_folders


@dataclass
class Entry:
    label: str
    run: str
    created_at: str
    mode: str
    kappa: dict[str, dict[str, Any]] = field(default_factory=dict)  # dim -> {kappa, lo, hi, n}; None: undefined
    selective: dict[str, dict[int, float | None]] = field(default_factory=dict)  # dim -> {50: k, 70: k}
    seconds_per_1000: float | None = None
    gold_hash: str | None = None
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)  # dim -> coverage at kappa 0.87


def run_label(meta: dict[str, Any]) -> str:
    """The model spec, plus the encoder, backend and options that make this run differ from the default."""
    label = str(meta.get("model", "?"))
    opts = meta.get("options") or {}
    enc = opts.get("encoder")
    if not enc:
        # Runs written without options: the encoder key in provenance is "<name>|<weights sig>[|backend]".
        key = str((meta.get("provenance") or {}).get("encoder") or "")
        parts = key.split("|")
        if parts[0] and parts[0] != "all-MiniLM-L6-v2":
            enc = parts[0]
    if enc:
        label += f" --encoder {Path(str(enc)).name}"
    for k, v in sorted((opts.get("extra") or {}).items()):
        label += f" {k}={v}"
    if opts.get("include_discussion") is False:
        label += " --no-discussion"
    prov = meta.get("provenance") or {}
    if not opts and prov.get("strategy"):
        # LLM runs written before options were recorded: their prompting strategy tells them apart.
        label += f" strategy={prov['strategy']}" + (f" k={prov['k']}" if "k" in prov else "")
    limit = (meta.get("params") or {}).get("limit")
    if limit:
        label += f" ({limit}-record sample)"  # --limit: a seeded sample of gold, not its first records
    if meta.get("mode") == "test":  # trained on gold, scored on another file: not the spec's CV row
        label += f" (test {Path(str(meta.get('gold') or '?')).name})"
    by = (meta.get("params") or {}).get("by")
    if by:  # per-group figures are not those of a plain cross-validation: another row, named so
        label += f" (leave-one-{by}-out)" if meta["params"].get("leave_group_out") else f" (per {by})"
    return label


def entry_of(run: RunFolder) -> Entry:
    meta = run.meta
    e = Entry(
        label=run_label(meta),
        run=run.name,
        created_at=str(meta.get("created_at", "")),
        mode=str(meta.get("mode", "")),
        seconds_per_1000=meta.get("seconds_per_1000"),
        gold_hash=meta.get("gold_hash"),
    )
    try:
        for name, rep in run.dimensions.items():
            e.kappa[name] = rep["kappa"]
            e.selective[name] = {
                int(r["coverage"]): None if r.get("kappa") is None else float(r["kappa"])
                for r in rep.get("selective", [])
            }
        for name, rep in (run.doc.get("selective_labeling") or {}).items():
            c = rep.get("coverage", {}).get("0.87")
            if c is not None:
                e.coverage[name] = c
    except (KeyError, TypeError, ValueError, AttributeError) as ex:
        raise RunFolderError(f"{run.path / METRICS}: unreadable ({ex!r})") from None
    return e


def collect(paths: list[Path], latest_only: bool = True) -> list[Entry]:
    """Runs found in `paths` (run folders, or folders holding run folders); newest per label."""
    folders: list[Path] = []
    for p in paths:
        if (p / METRICS).exists():
            folders.append(p)
        elif p.is_dir():
            folders.extend(run_folders(p))
        else:
            raise FileNotFoundError(f"{p}: no {METRICS} here or in its subfolders")
    entries = [entry_of(read_run(f)) for f in folders]
    if latest_only:
        newest: dict[str, Entry] = {}
        for e in entries:
            if e.label not in newest or e.created_at >= newest[e.label].created_at:
                newest[e.label] = e
        entries = list(newest.values())
    return entries


def dimensions(entries: list[Entry]) -> list[str]:
    seen: list[str] = []
    for e in entries:
        for d in e.kappa:
            if d not in seen:
                seen.append(d)
    return seen


def _k(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _kci(k: dict[str, Any]) -> str:
    if k.get("kappa") is None:
        return "n/a"
    return f"{k['kappa']:.3f} [" + ("n/a" if k.get("lo") is None else f"{k['lo']:.3f}, {k['hi']:.3f}") + "]"


def rows(entries: list[Entry], sort_by: str | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and text cells, best first by kappa on `sort_by` (default: first dimension); n/a last."""
    dims = dimensions(entries)
    key = sort_by or (dims[0] if dims else None)

    def rank(e: Entry) -> float:
        k = e.kappa.get(key, {}).get("kappa") if key else 0.0
        return -(float("-inf") if k is None else k)

    entries = sorted(entries, key=rank)
    header = ["model"]
    for d in dims:
        header += [f"{d} kappa [95% CI]", f"{d} @50% / @70%"]
    cov_dims = [d for d in dims if any(d in e.coverage for e in entries)]
    header += [f"{d} auto share at kappa 0.87" for d in cov_dims]
    header += ["s / 1000 rec"]
    # Runs on different gold sets are not comparable row by row: say which gold each row used.
    mixed = len({e.gold_hash for e in entries}) > 1
    if mixed:
        header.append("gold")
    out = []
    for e in entries:
        cells = [e.label]
        for d in dims:
            k = e.kappa.get(d)
            s = e.selective.get(d, {})
            cells.append(_kci(k) if k else "-")
            cells.append(f"{_k(s[50])} / {_k(s[70])}" if 50 in s and 70 in s else "-")
        for d in cov_dims:
            c = e.coverage.get(d)
            if c is None:
                cells.append("-")
            elif c.get("threshold") is None:
                cells.append("0% (n/a)")
            else:
                cells.append(f"{c['coverage']:.0%} [{c['coverage_lo']:.0%}, {c['coverage_hi']:.0%}]")
        cells.append(f"{e.seconds_per_1000:.1f}" if e.seconds_per_1000 is not None else "-")
        if mixed:
            cells.append(e.gold_hash or "-")
        out.append(cells)
    return header, out


NOTE = (
    "Cohen's kappa against gold with a bootstrap 95% CI; `@50% / @70%`: kappa on the 50% / 70% most "
    "confident predictions (selective labeling). `auto share at kappa 0.87`: the share of reports the model "
    "may label alone with a 95% guarantee that those labels agree with coders at kappa >= 0.87 (docs/trust.md; "
    'root cause over all reports, "no cause shown" included). `s / 1000 rec`: the evaluation\'s wall time per 1,000 '
    "evaluated records (encoding, training every fold, predicting; 2 shared CPU cores, so noisy). n/a: undefined "
    "(one gold class, or no confidence to rank by), not zero. "
    "Regenerate with `classify leaderboard --write`."
)


STRONGEST = "Strongest spec"  # the line `classify models` reads (classify/cli/models.py)


def strongest(entries: list[Entry], dims: tuple[str, ...] = ("symptom", "root_cause")) -> tuple[Entry, float] | None:
    """The spec (default options, whole-gold cross-validation) with the highest mean kappa over `dims`,
    among runs on the gold of the newest such run: older gold sets are not comparable."""
    plain = [
        e
        for e in entries
        if " " not in e.label and e.mode == "cv" and all((e.kappa.get(d) or {}).get("kappa") is not None for d in dims)
    ]
    if not plain:
        return None
    gold = max(plain, key=lambda e: e.created_at).gold_hash
    scored = [(e, sum(float(e.kappa[d]["kappa"]) for d in dims) / len(dims)) for e in plain if e.gold_hash == gold]
    return max(scored, key=lambda t: t[1])


def strongest_line(entries: list[Entry]) -> str | None:
    best = strongest(entries)
    if best is None:
        return None
    e, mean = best
    return (
        f"{STRONGEST}: **{e.label}** (mean of symptom and root-cause kappa {mean:.3f}, its 5-fold CV run "
        f"`{e.run}` on gold {e.gold_hash or '?'}, the newest gold here; time not considered)."
    )


def render_markdown(entries: list[Entry], title: str = "Leaderboard", note: str = NOTE) -> str:
    header, body = rows(entries)
    hashes = sorted({e.gold_hash for e in entries if e.gold_hash})
    lines = [f"# {title}", ""]
    if note:
        lines += [note, ""]
    best = strongest_line(entries)
    if best:
        lines += [best, ""]
    if len(hashes) > 1:
        lines += [f"**Warning:** these runs used {len(hashes)} different gold sets ({', '.join(hashes)}).", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for r in body:
        lines.append("| " + " | ".join(r) + " |")
    lines += ["", "Runs: " + ", ".join(f"`{e.run}`" for e in entries), ""]
    return "\n".join(lines)


# Columns a narrow terminal drops first (the table keeps the model and each dimension's kappa).
DROP_ORDER = ("@50% / @70%", "s / 1000 rec", "auto share at kappa 0.87")
MODEL_MIN = 30  # the model column folds longer names onto several lines


def column_widths(header: list[str], body: list[list[str]]) -> list[int]:
    """Per column, the width it needs: the widest cell (headers wrap at spaces, so their longest word);
    the model column at most MODEL_MIN (longer names fold)."""
    out = []
    for i, h in enumerate(header):
        w = max([max(len(x) for x in h.split())] + [len(r[i]) for r in body])
        out.append(min(w, MODEL_MIN) if i == 0 else w)
    return out


def fit_columns(header: list[str], body: list[list[str]], width: int) -> tuple[list[int], list[str]]:
    """Which columns (indices) fit a terminal of `width` characters, and the names of those dropped."""
    widths = column_widths(header, body)
    cols = list(range(len(header)))
    dropped: list[str] = []

    def need() -> int:
        return 1 + sum(widths[i] + 3 for i in cols)

    for part in DROP_ORDER:
        for i in [i for i in cols if part in header[i]]:
            if need() <= width:
                return cols, dropped
            cols.remove(i)
            dropped.append(header[i])
    return cols, dropped
