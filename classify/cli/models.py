"""`classify models` (the specs this installation knows) and `classify logs` (recent LLM requests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table
from rich.text import Text

from classify.cli.common import console

# What each built-in spec is, in one line; plugins describe themselves by their class docstring.
ABOUT = {
    "embed-logreg": "sentence embeddings (all-MiniLM-L6-v2) + logistic regression",
    "embed-knn": "sentence embeddings + k nearest neighbours (cosine)",
    "embed-centroid": "sentence embeddings + nearest category centroid",
    "tfidf-logreg": "TF-IDF word n-grams + logistic regression; lexical baseline, no encoder",
    "tfidf-embed": "TF-IDF + sentence embeddings, class-balanced logistic regression",
    "hier-tfidf-embed": "tfidf-embed, root-cause group first, then the category within it",
    "finetune": "MiniLM with its top layer fine-tuned on each training set + logistic regression",
    "hier-finetune": "finetune, root-cause group first, then the category within it",
    "setfit": "SetFit (setfit package): MiniLM tuned on pairs of training texts, + TF-IDF, logistic regression",
    "ensemble": "mean probability of three tfidf-embed variants (members chosen on CV results)",
    "ensemble:": "mean probability of the members you list, e.g. ensemble:tfidf-embed+openai:gpt-4o-mini",
    "openai:": "prompted LLM on an OpenAI-compatible server (OpenAI, vLLM, Ollama)",
    "local:": "prompted LLM on an embedded llama.cpp server, offline, e.g. local:smollm2-135m",
}
# Without a reference run: how fast a spec is, roughly (LLMs: per request, so it depends on the server).
SPEED = {"openai:": "server-bound", "local:": "slow (CPU LLM)", "ensemble:": "sum of members"}


def reference_figures(leaderboard: Path) -> dict[str, dict[str, str]]:
    """spec -> {"symptom", "root_cause", "speed"} from a leaderboard.md table (rows without options only)."""
    try:
        lines = leaderboard.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    out: dict[str, dict[str, str]] = {}
    header: list[str] | None = None
    for line in lines:
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        row = dict(zip(header, cells))
        model = row.get("model", "")
        if not model or " " in model or model in out:  # a run with options is not the spec's reference
            continue
        out[model] = {
            "symptom": row.get("symptom kappa [95% CI]", "").split(" ")[0],
            "root_cause": row.get("root_cause kappa [95% CI]", "").split(" ")[0],
            "speed": row.get("s / 1000 rec", ""),
        }
    return out


def strongest_line(leaderboard: Path) -> str | None:
    """The leaderboard's "Strongest spec" sentence (written by classify.evaluation.leaderboard), markdown stripped."""
    try:
        lines = leaderboard.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("Strongest spec:"):
            return line.replace("**", "").replace("`", "")
    return None


def _about(spec: str) -> str | None:
    """The spec's one-line description; None for a plugin that fails to load (left out of the list,
    as known_specs leaves it out; its warning says why). Only a plugin's own module is imported."""
    if spec in ABOUT:
        return ABOUT[spec]
    from classify.classifiers.base import family

    try:
        doc = (family(spec + ("x" if spec.endswith(":") else "")).__doc__ or "").strip()
    except Exception:
        return None
    return doc.splitlines()[0] if doc else "plugin"


def models_cmd(
    options: Annotated[
        Optional[str], typer.Option("--options", help="Show the --opt keys of this spec: type, default, meaning.")
    ] = None,
) -> None:
    """List the model specs this installation knows (built-in and plugins), or one spec's options."""
    from classify.classifiers.names import DEFAULT_MODEL, declared_spec_names
    from classify.core.paths import EVALS_DIR

    if options is None:
        ref = reference_figures(EVALS_DIR / "leaderboard.md")
        t = Table(box=None, pad_edge=False, show_edge=False)
        for col in ("spec", "what it is", "s / 1000 rec", "reference kappa"):
            t.add_column(col, no_wrap=col != "what it is")
        # built-ins are described by ABOUT: no classifier module is imported; a plugin that fails to load is
        # left out by _about (its warning says why)
        for s in declared_spec_names():
            about = _about(s)
            if about is None:
                continue
            # a prefix spec takes a suffix: `openai:<model>`; an inline ensemble names its members
            name = s + ("A+B[+...]" if s == "ensemble:" else "<model>" if s.endswith(":") else "")
            r = ref.get(s)
            kappa = f"symptom {r['symptom']}, root cause {r['root_cause']}" if r else "-"
            speed = (r["speed"] if r and r["speed"] else "") or SPEED.get(s, "-")
            if s == DEFAULT_MODEL:
                about += "; the default"
            t.add_row(name, about, speed, kappa)
        console.print(t, highlight=False)
        best = strongest_line(EVALS_DIR / "leaderboard.md")
        if best:
            console.print(best, highlight=False)
        console.print(
            "reference kappa and time: the spec's committed 5-fold CV run (evals/leaderboard.md names its gold); "
            "`classify models --options SPEC` lists a spec's --opt keys",
            highlight=False,
        )
        return
    from classify.classifiers.base import options_schema

    schema = options_schema(options)
    if not schema:
        console.print(f"{options}: no --opt keys", highlight=False)
        return
    t = Table(title=Text(f"{options}: --opt keys"))
    for col in ("key", "type", "default", "meaning"):
        t.add_column(col)
    for key, f in schema.items():
        t.add_row(key, f["type"], "-" if f["default"] is None else str(f["default"]), f["description"])
    console.print(t)


def logs_cmd(
    count: Annotated[int, typer.Option("--count", "-n", min=1, help="How many recent requests.")] = 20,
    run_id: Annotated[Optional[str], typer.Option("--run", help="Only this run id.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object a line (JSON lines), with messages and responses.")
    ] = False,
    endpoints: Annotated[
        bool,
        typer.Option(
            "--endpoints", help="Per server over the last --count requests (or the --run): outcomes, latency, tokens."
        ),
    ] = False,
) -> None:
    """Recent LLM requests (newest first): outcome, HTTP status, tokens, latency. From the cache dir's llm.sqlite."""
    from classify.classifiers.llm.cache import (
        default_db_path,
        endpoint_figures,
        format_endpoint_figures,
        format_logs,
        list_logs,
    )

    if endpoints:
        figures = endpoint_figures(run_id=run_id, last=count)
        if as_json:
            for f in figures:
                typer.echo(json.dumps(f, ensure_ascii=False, default=str))
        else:
            console.print(format_endpoint_figures(figures), highlight=False, markup=False, soft_wrap=True)
        return
    rows = list_logs(count, run_id=run_id, full=as_json)
    if as_json:
        # One object a line, unstyled: what `jq` and `pandas.read_json(lines=True)` read. (rich's
        # print_json would pretty-print each over many lines.)
        for r in rows:
            typer.echo(json.dumps(r, ensure_ascii=False, default=str))
    else:
        console.print(format_logs(rows), highlight=False, markup=False, soft_wrap=True)
        console.print(f"({default_db_path()})", highlight=False)
