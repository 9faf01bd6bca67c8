"""`classify models` (the specs this installation knows) and `classify logs` (recent LLM requests)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.table import Table
from rich.text import Text

from classify.cli.common import console


def models_cmd(
    options: Annotated[
        Optional[str], typer.Option("--options", help="Show the --opt keys of this spec: type, default, meaning.")
    ] = None,
) -> None:
    """List the model specs this installation knows (built-in and plugins), or one spec's options."""
    from classify.classifiers.base import known_specs, options_schema

    if options is None:
        for s in known_specs():
            # a prefix spec takes a suffix: `openai:<model>`; an inline ensemble names its members
            suffix = "A+B[+...]" if s == "ensemble:" else "<model>"
            console.print(s + (suffix if s.endswith(":") else ""), highlight=False)
        return
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
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines with messages and responses.")] = False,
) -> None:
    """Recent LLM requests (newest first): outcome, HTTP status, tokens, latency. From the cache dir's llm.sqlite."""
    from classify.classifiers.llm.cache import default_db_path, format_logs, list_logs

    rows = list_logs(count, run_id=run_id, full=as_json)
    if as_json:
        for r in rows:
            console.print_json(json.dumps(r, ensure_ascii=False, default=str))
    else:
        console.print(format_logs(rows), highlight=False, markup=False, soft_wrap=True)
        console.print(f"({default_db_path()})", highlight=False)
