"""What every command module shares: consoles, the one error exit, and option types declared once.

Commands parse, call one library function and print. Errors a user can cause are
`ClassifyError`s raised by the library; `classify.cli.main.main` prints them as one line and exits 2,
so commands do not wrap library calls in try/except.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional

import typer
from rich.console import Console
from typer.core import TyperGroup, TyperOption

from classify.classifiers.llm.choices import Strategy
from classify.core.errors import ClassifyError
from classify.core.goldfile import Task
from classify.core.paths import DEFAULTS_NOTE

if TYPE_CHECKING:
    # typer vendors click: TyperGroup.invoke takes typer's copy of click.Context, not click.Context
    from typer import _click

# Logs and CI are not terminals: give tables room instead of rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 160)
# Error messages hold paths and ids: never break them.
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160, soft_wrap=True)


def _flag_type_hidden(display: Callable[..., Any]) -> Callable[..., Any]:
    """typer's help prints `<bool>` beside every flag, which reads as if `--force true` were
    wanted (it is refused): show no type for flags, the usual one for everything else."""

    @functools.wraps(display)
    def wrapper(self: Any, ctx: Any) -> Any:
        return None if getattr(self, "is_flag", False) else display(self, ctx)

    return wrapper


if hasattr(TyperOption, "display_type_rich"):  # typer >= 0.20 shows a type column
    TyperOption.display_type_rich = _flag_type_hidden(TyperOption.display_type_rich)  # type: ignore[method-assign]


def fail(msg: str) -> NoReturn:
    """Print `error: msg` and exit 2 (the exit code of every user error)."""
    from rich.markup import escape

    from classify.core.http import redact_urls_text

    msg = redact_urls_text(msg)  # a URL quoted back (a bad spec, a refused --base-url) keeps no key
    # escape: messages quote user input such as `ensemble:a[embed=false]+b`, which rich would eat as a tag.
    err.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, markup=True, emoji=False)
    raise typer.Exit(2)


# -- help panels: `--help` groups a command's options under these headings -------------------------
PANEL_DATA = "Data"
PANEL_MODEL = "Model"
PANEL_LLM = "LLM (openai:, local: and ensembles with one)"
PANEL_TRUST = "Trust: routing to review"
PANEL_SCREEN = "Screening"


def plural(n: int, word: str, words: str | None = None) -> str:
    """`1 dimension`, `2 dimensions` (`words`: an irregular plural, e.g. categories)."""
    return f"{n} {word if n == 1 else words or word + 's'}"


# -- options shared by several commands, declared once --------------------------------------------
TaxonomyPath = Annotated[
    Optional[Path],
    typer.Option(
        "--taxonomy",
        "-t",
        help=f"Codebook YAML (default: codebook/taxonomy-v1.yaml {DEFAULTS_NOTE}).",
        rich_help_panel=PANEL_DATA,
    ),
]
GoldPath = Annotated[
    Optional[Path],
    typer.Option(
        "--gold",
        "-g",
        help="Gold set: JSONL, CSV, Parquet, or a Hugging Face dataset folder (default: gold/reports.jsonl "
        f"{DEFAULTS_NOTE}).",
        rich_help_panel=PANEL_DATA,
    ),
]
LabelColumns = Annotated[
    Optional[list[str]],
    typer.Option(
        "--label-column",
        help="DIMENSION=COLUMN: read the --gold (and --test) file's COLUMN as the labels of DIMENSION, "
        "e.g. issue_type=label; repeatable.",
    ),
]


def with_label_columns(gold: Path | None, test: Path | None, specs: list[str] | None) -> tuple[Any, Any]:
    """--gold and --test as GoldFiles that read their label columns as `specs` says (classify.core.gold)."""
    if not specs:
        return gold, test
    from classify.core.gold import GoldFile, parse_label_columns

    if gold is None and test is None:
        fail("--label-column: name the file it describes with --gold (or --test)")
    mapping = parse_label_columns(specs)
    return (GoldFile(gold, mapping) if gold else None), (GoldFile(test, mapping) if test else None)


ModelSpec = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="Model spec (see `classify models`), e.g. embed-logreg, tfidf-embed, openai:<model>, local:smollm2-135m.",
        rich_help_panel=PANEL_MODEL,
    ),
]
EncoderName = Annotated[
    Optional[str],
    typer.Option(
        "--encoder",
        help="sentence-transformers model path or name (default: packaged all-MiniLM-L6-v2).",
        rich_help_panel=PANEL_MODEL,
    ),
]
NoDiscussion = Annotated[
    bool,
    typer.Option(
        "--no-discussion",
        help="Encode title + body only (default: title + body + discussion).",
        rich_help_panel=PANEL_MODEL,
    ),
]
ModelOpts = Annotated[
    list[str],
    typer.Option(
        "--opt",
        help="Model option key=value (repeatable); `classify models --options SPEC` lists a spec's keys.",
        rich_help_panel=PANEL_MODEL,
    ),
]
Folds = Annotated[int, typer.Option("--folds", "-k", min=2, help="Cross-validation folds.")]
BatchSize = Annotated[int, typer.Option("--batch-size", min=1, help="Encoder batch size.", rich_help_panel=PANEL_MODEL)]
Seed = Annotated[int, typer.Option("--seed", help="Seed for folds, models and bootstrap.", rich_help_panel=PANEL_MODEL)]
NBoot = Annotated[int, typer.Option("--n-boot", min=100, help="Bootstrap resamples for kappa CIs.")]
TaskOpt = Annotated[
    Task,
    typer.Option(
        "--task",
        help="labels (symptom/root cause on gold/reports.jsonl) or screening (failure report or not, on gold/screening.jsonl).",
    ),
]


def parse_opts(opts: list[str], flag: str = "--opt") -> dict[str, Any]:
    """`key=value` strings to a dict; values are JSON when they parse as JSON, else strings.

    The model family's typed options validate and convert them (`C=0.001` -> float, `char=ture` refused).
    """
    out: dict[str, Any] = {}
    for o in opts:
        k, eq, v = o.partition("=")
        k = k.strip()
        if not eq or not k:
            fail(f"{flag} expects key=value, got {o!r}")
        if k in out:
            fail(f"{flag} {k} given twice")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


# -- the LLM flags: declared once, added to every command that can talk to an LLM --------------------
LLM_FLAGS: dict[str, Any] = {
    "base_url": Annotated[
        Optional[list[str]],
        typer.Option(
            "--base-url",
            help="OpenAI-compatible server, e.g. http://localhost:8000/v1; repeat it for replicas of one model "
            "(balanced, failing ones taken out).",
            rich_help_panel=PANEL_LLM,
        ),
    ],
    "api_key_env": Annotated[
        Optional[str],
        typer.Option(
            "--api-key-env",
            help="Environment variable holding the API key (default OPENAI_API_KEY).",
            rich_help_panel=PANEL_LLM,
        ),
    ],
    "strategy": Annotated[
        Optional[Strategy],
        typer.Option("--strategy", help="Zero-shot (default) or few-shot.", rich_help_panel=PANEL_LLM),
    ],
    "shots": Annotated[
        Optional[int],
        typer.Option("--shots", min=1, help="Few-shot: examples per issue (default 4).", rich_help_panel=PANEL_LLM),
    ],
    "rationale": Annotated[
        Optional[bool],
        typer.Option(
            "--rationale/--no-rationale", help="Ask for a short rationale before the labels.", rich_help_panel=PANEL_LLM
        ),
    ],
    "samples": Annotated[
        Optional[int],
        typer.Option(
            "--samples",
            min=1,
            help="Self-consistency samples per issue (confidence = vote share).",
            rich_help_panel=PANEL_LLM,
        ),
    ],
    "concurrency": Annotated[
        Optional[int],
        typer.Option("--concurrency", min=1, help="Requests in flight at once (default 4).", rich_help_panel=PANEL_LLM),
    ],
    "batch": Annotated[
        Optional[bool],
        typer.Option(
            "--batch",
            help="LLM: ask through the server's batch API (/v1/batches; half the price on OpenAI); resumable. "
            "--opt repair=batch re-asks invalid answers in the next batch.",
        ),
    ],
    "dry_run": Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the request count and estimated tokens/cost, send nothing.",
            rich_help_panel=PANEL_LLM,
        ),
    ],
}
# CLI flag name -> the LLM option key it sets (--shots is the few-shot `k`).
_LLM_KEYS = {
    "base_url": "base_url",
    "api_key_env": "api_key_env",
    "strategy": "strategy",
    "shots": "k",
    "rationale": "rationale",
    "samples": "samples",
    "concurrency": "concurrency",
    "batch": "batch",
}


class LLMFlags:
    """The LLM flags one command received; `given()` holds those set, as LLM option keys."""

    def __init__(self, **values: Any):
        self.values = values
        self.dry_run = bool(values.get("dry_run"))

    def given(self) -> dict[str, Any]:
        out = {}
        for flag, key in _LLM_KEYS.items():
            v = self.values.get(flag)
            if isinstance(v, (list, tuple)):  # a repeatable flag: one value stays a plain value
                v = (v[0] if len(v) == 1 else list(v)) if v else None
            if v is not None:
                out[key] = v.value if isinstance(v, Enum) else v
        return out

    def flag_names(self) -> list[str]:
        names = ["--" + f.replace("_", "-") for f, k in _LLM_KEYS.items() if self.values.get(f) not in (None, [], ())]
        return names + (["--dry-run"] if self.dry_run else [])


def with_llm_flags(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the LLM flags to a command; they reach it as one `llm: LLMFlags` argument."""
    sig = inspect.signature(fn, eval_str=True)  # __signature__ is read as is: no strings left for typer
    params = [p for p in sig.parameters.values() if p.name != "llm"]
    defaults = {"dry_run": False}
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=defaults.get(name), annotation=ann)
        for name, ann in LLM_FLAGS.items()
    ]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = LLMFlags(**{k: kwargs.pop(k, None) for k in LLM_FLAGS})
        return fn(*args, llm=flags, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=params + added)  # type: ignore[attr-defined]
    hints = {k: v for k, v in inspect.get_annotations(fn, eval_str=True).items() if k != "llm"}
    wrapper.__annotations__ = {**hints, **LLM_FLAGS}
    del wrapper.__wrapped__  # typer must read the new signature, not the wrapped one
    return wrapper


def model_options(
    encoder: str | None,
    no_discussion: bool,
    opts: list[str],
    *,
    seed: int = 0,
    batch_size: int = 32,
    progress: bool = True,
    llm: LLMFlags | None = None,
    model: str | None = None,
):
    """ModelOptions from the shared flags. LLM flags are only for specs that talk to an LLM."""
    from classify.classifiers.base import ModelOptions, uses_llm

    extra = parse_opts(opts)
    if llm is not None and model is not None:
        given = llm.given()
        if (given or llm.dry_run) and not uses_llm(model):
            fail(
                f"{', '.join(llm.flag_names())}: only for LLM models (openai:<model>, local:<name>, or an ensemble "
                f"with one), not {model!r}"
            )
        both = sorted(set(given) & {k.replace("-", "_") for k in extra})
        if both:
            fail(f"{', '.join(both)} given both as a flag and as --opt; give it once")
        extra.update(given)
    return ModelOptions(
        encoder=encoder,
        include_discussion=not no_discussion,
        seed=seed,
        show_progress=progress,
        batch_size=batch_size,
        extra=extra,
    )


def _internal_error_log(e: BaseException) -> str:
    import traceback
    from datetime import datetime, timezone

    from classify.core.http import redact, redact_urls_text
    from classify.core.paths import cache_dir

    try:
        path = cache_dir() / "errors.log"
        with path.open("a", encoding="utf-8") as f:
            # the command line and the traceback may carry a --base-url key or a key-shaped token
            head = f"--- {datetime.now(timezone.utc).isoformat(timespec='seconds')} {' '.join(sys.argv)}\n"
            body = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            f.write(redact(redact_urls_text(head + body), keylike=False))
        return str(path)
    except OSError:
        return "(could not write the log)"


class UserErrorGroup(TyperGroup):
    """The root command group: a ClassifyError from any command below becomes `error: ...`, exit 2."""

    def invoke(self, ctx: _click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ClassifyError as e:
            fail(str(e))
        except ValueError as e:
            # Bad input that reached a library below ours (scikit-learn on a 3-record gold set, say).
            if os.environ.get("CLASSIFY_DEBUG"):
                raise
            fail(f"{e} (set CLASSIFY_DEBUG=1 for the traceback)")
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            # `classify run --help | head`: the reader left. Not a bug: typer's main exits quietly.
            raise
        except Exception as e:
            from typer._click.exceptions import ClickException

            # Usage errors are typer's to print; anything else is our bug, not the user's: one line,
            # and the traceback in a log file to attach to a report.
            if isinstance(e, ClickException) or os.environ.get("CLASSIFY_DEBUG"):
                raise
            err.print(
                f"internal error: {type(e).__name__}: {e} (traceback in {_internal_error_log(e)}; please "
                "report it; CLASSIFY_DEBUG=1 shows it here)",
                markup=False,
                highlight=False,
            )
            raise typer.Exit(1) from None


class EchoHandler(logging.Handler):
    """Log lines to stderr as plain text; resolves stderr at emit time (typer's test runner swaps
    streams per invocation)."""

    def emit(self, record: logging.LogRecord) -> None:
        typer.echo(self.format(record), err=True)


def echo_logs(logger: logging.Logger, level: int) -> None:
    """Show `logger`'s lines from `level` up on stderr, once (a second call only sets the level)."""
    if not any(isinstance(h, EchoHandler) for h in logger.handlers):
        logger.addHandler(EchoHandler())
        logger.propagate = False
    logger.setLevel(level)
