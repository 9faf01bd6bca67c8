"""`classify run`: bulk labeling, optionally routed by a target kappa (docs/trust.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from classify.classifiers.names import DEFAULT_MODEL, DEFAULT_SCREEN_MODEL
from classify.cli.common import (
    PANEL_DATA,
    PANEL_SCREEN,
    PANEL_TRUST,
    BatchSize,
    EncoderName,
    GoldPath,
    LabelColumns,
    LLMFlags,
    ModelOpts,
    ModelSpec,
    NoDiscussion,
    Seed,
    TaxonomyPath,
    console,
    err,
    fail,
    model_options,
    parse_opts,
    with_label_columns,
    with_llm_flags,
)
from classify.core import paths


@with_llm_flags
def run_cmd(
    model: ModelSpec = DEFAULT_MODEL,
    input: Annotated[
        Optional[Path],
        typer.Option(
            "--input",
            "-i",
            help=f"Records to label: JSONL, CSV, Parquet, or a Hugging Face dataset folder (default: data/issues.jsonl "
            f"{paths.DEFAULTS_NOTE}).",
            rich_help_panel=PANEL_DATA,
        ),
    ] = None,
    out: Annotated[
        str,
        typer.Option(
            "--out",
            "-o",
            help="Output file; format by extension (.jsonl default, .csv, .parquet; a folder ending in .hf: a Hugging Face "
            "dataset; with --engine ray, DIR/ keeps the Parquet parts as the output).",
            rich_help_panel=PANEL_DATA,
        ),
    ] = "labels.jsonl",
    engine: Annotated[
        str,
        typer.Option("--engine", help="local (this process, checkpointed) or ray (Ray Data workers; docs/scale.md)."),
    ] = "local",
    ray_address: Annotated[
        Optional[str],
        typer.Option("--ray-address", help="With --engine ray: a Ray cluster's address (default: a local Ray)."),
    ] = None,
    gold: GoldPath = None,
    label_column: LabelColumns = None,
    taxonomy: TaxonomyPath = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Overwrite an existing output and discard any checkpoint.", rich_help_panel=PANEL_DATA
        ),
    ] = False,
    chunk_size: Annotated[
        int, typer.Option("--chunk-size", min=1, help="Records per checkpointed chunk.", rich_help_panel=PANEL_DATA)
    ] = 256,
    screen: Annotated[
        bool,
        typer.Option(
            "--screen",
            help="Screen first (trained on gold/screening.jsonl); label only failure reports.",
            rich_help_panel=PANEL_SCREEN,
        ),
    ] = False,
    screen_model: Annotated[
        Optional[str],
        typer.Option(
            "--screen-model",
            help=f"Model spec for screening (default {DEFAULT_SCREEN_MODEL}).",
            rich_help_panel=PANEL_SCREEN,
        ),
    ] = None,
    screen_opt: Annotated[
        list[str],
        typer.Option(
            "--screen-opt",
            help="Screening model option key=value (repeatable); --opt is the labeling model's only.",
            rich_help_panel=PANEL_SCREEN,
        ),
    ] = [],  # noqa: B006
    target_kappa: Annotated[
        Optional[float],
        typer.Option(
            "--target-kappa",
            min=0.0,
            max=1.0,
            help="Give a label alone only where it keeps this kappa with the coders (95% guarantee; between 0 "
            "and 1, exclusive); the rest is marked review. Thresholds come from cross-validation on gold "
            "(cached). See docs/trust.md.",
            rich_help_panel=PANEL_TRUST,
        ),
    ] = None,
    target: Annotated[
        list[str],
        typer.Option(
            "--target",
            help="Per-dimension target kappa, dim=k (repeatable; overrides --target-kappa).",
            rich_help_panel=PANEL_TRUST,
        ),
    ] = [],  # noqa: B006
    keep: Annotated[
        Optional[str],
        typer.Option(
            "--keep",
            help="Input fields copied to every row, comma-separated (default: title,url).",
            rich_help_panel=PANEL_DATA,
        ),
    ] = None,
    no_keep: Annotated[
        bool, typer.Option("--no-keep", help="Copy no input field besides id and repo.", rich_help_panel=PANEL_DATA)
    ] = False,
    max_invalid: Annotated[
        float,
        typer.Option(
            "--max-invalid",
            min=0.0,
            max=1.0,
            help="Exit with status 1 when a dimension's share of invalid answers exceeds this (all invalid "
            "always fails). The rows are written either way.",
            rich_help_panel=PANEL_TRUST,
        ),
    ] = 0.2,
    seed: Seed = 0,
    encoder: EncoderName = None,
    no_discussion: NoDiscussion = False,
    batch_size: BatchSize = 32,
    opt: ModelOpts = [],  # noqa: B006
    *,
    llm: LLMFlags,
) -> None:
    """Train on gold and label every record of --input, with provenance on each row. Resumable."""
    from classify.classifiers.base import ModelOptions
    from classify.labeling.pipeline import Progress, estimate_labeling, label_file
    from classify.labeling.resumable import DEFAULT_KEEP

    if ray_address and engine != "ray":
        fail("--ray-address: only with --engine ray")
    options = model_options(
        encoder, no_discussion, opt, seed=seed, progress=False, batch_size=batch_size, llm=llm, model=model
    )
    targets = {k: _kappa_value(k, v) for k, v in parse_opts(target, "--target").items()}
    if keep is not None and no_keep:
        fail("--keep and --no-keep: give one")
    if keep is not None and not keep.strip(","):
        fail("--keep: give field names (comma-separated), or --no-keep for none")
    kept = () if no_keep else tuple(f.strip() for f in keep.split(",") if f.strip()) if keep else DEFAULT_KEEP
    gold, _ = with_label_columns(gold, None, label_column)
    if (screen_opt or screen_model) and not screen:
        fail(f"{'--screen-opt' if screen_opt else '--screen-model'}: only with --screen")
    screen_options = ModelOptions(
        seed=seed, show_progress=False, batch_size=batch_size, extra=parse_opts(screen_opt, "--screen-opt")
    )
    if llm.dry_run:
        for text in estimate_labeling(
            model,
            input or paths.default_input(),
            taxonomy=taxonomy,
            gold=gold,
            options=options,
            screen=screen,
            routed=target_kappa is not None or bool(targets),
        ):
            console.print(text)
        return
    # Each bar starts when its phase does (training the fold models comes first and takes its own time),
    # so its clock and rate are that phase's; cached embeddings are read, not encoded, and the bar says so.
    enc_bar = PhaseBar("embeddings (encoded, or read from the cache)")
    bar = PhaseBar("labeling")

    def set_total(n: int) -> None:
        enc_bar.total = bar.total = n

    try:
        summary = label_file(
            model,
            input or paths.default_input(),
            out,
            taxonomy=taxonomy,
            gold=gold,
            options=options,
            force=force,
            chunk_size=chunk_size,
            screen=screen,
            screen_model=screen_model or DEFAULT_SCREEN_MODEL,
            screen_options=screen_options,
            target_kappa=target_kappa,
            targets=targets,
            keep=kept,
            engine=engine,
            ray_address=ray_address,
            progress=Progress(
                log=lambda m: err.print(m, markup=False, highlight=False),
                encoded=enc_bar.update,
                total=set_total,
                labeled=bar.update,
            ),
        )
    except KeyboardInterrupt:
        from classify.labeling.resumable import kept_rows, partial_path

        if engine == "ray":
            err.print("interrupted: finished Parquet parts are kept; the same command resumes from them", markup=False)
            raise typer.Exit(130) from None

        part = partial_path(Path(out))
        n = kept_rows(Path(out))
        err.print(
            f"interrupted: {n} labeled rows are kept in {part}; the same command resumes from there"
            if n
            else "interrupted before any row was labeled",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(130) from None
    except Exception as e:
        from classify.classifiers.llm.client import LLMError

        if isinstance(e, LLMError):
            fail(
                f"{e}\n(finished chunks are kept in the checkpoint: the same command resumes; cached answers are "
                "not asked again)"
            )
        raise
    finally:
        enc_bar.close()
        bar.close()
    inv = ", ".join(f"{d} {n}" for d, n in summary.invalid.items() if n) or "none"
    scr = f"; screened out as not failure reports: {summary.screened_out}" if screen else ""
    err.print(
        f"wrote {summary.total} rows to {out} ({summary.labeled} labeled now, {summary.resumed} resumed "
        f"from a checkpoint; invalid: {inv}{scr}) in {summary.seconds:.1f} s",
        markup=False,
        highlight=False,
    )
    routing = summary.provenance.get("routing", {})
    for d, counts in summary.routing.items():
        n = sum(counts.values())
        r = routing.get(d) or {}
        line = f"{d}: auto {counts['auto']}/{n} ({counts['auto'] / n:.0%})"
        if r.get("threshold") is not None:
            line += f" at confidence >= {r['threshold']:.3f} (which made {r['gold_coverage']:.0%} of gold auto)"
        if counts["none_shown"]:
            line += f", none shown {counts['none_shown']} ({counts['none_shown'] / n:.0%})"
        line += f", review {counts['review']} ({counts['review'] / n:.0%})"
        if r.get("threshold") is not None:
            line += (
                f"; expected kappa of auto labels {r['expected_kappa']:.3f} (95% lower bound "
                f"{r['kappa_lower_bound']:.3f}, target {r['target_kappa']})"
            )
        elif r:
            line += f"; no threshold reaches kappa {r['target_kappa']} on gold"
        err.print(line, markup=False, highlight=False)
    st = summary.model_stats
    if st is not None:
        _print_stats(st)
    n_rows = max(1, summary.total - summary.screened_out)
    bad = {d: n for d, n in summary.invalid.items() if n and (n / n_rows > max_invalid or n == n_rows)}
    if bad:
        err.print(
            "error: too many invalid answers: "
            + ", ".join(f"{d} {n}/{n_rows} ({n / n_rows:.0%})" for d, n in bad.items())
            + f" > --max-invalid {max_invalid:.0%}. The rows are written, but this run is not a usable labeling "
            "(is the model server reachable and answering in the expected format? `classify logs` shows its answers).",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(1)


class PhaseBar:
    """A progress bar that appears, and starts its clock, at its phase's first update."""

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.total: int | None = None
        self.bar: Any = None

    def update(self, n: int) -> None:
        if self.bar is None:  # a tqdm bar on a terminal, plain lines in a log
            from classify.core.progress import progress_bar

            self.bar = progress_bar(self.desc, "rec", total=self.total)
        self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _print_stats(st) -> None:
    err.print(
        f"LLM requests: {st.requests} sent ({st.retries} retries, {st.failed} given up), "
        f"{st.cache_hits} answered from the cache; tokens in/out {st.prompt_tokens}/{st.completion_tokens}"
        + (
            f"; fallbacks (output style, logprobs, servers taken out): {'; '.join(st.fallbacks)}"
            if st.fallbacks
            else ""
        ),
        markup=False,
        highlight=False,
    )


def _kappa_value(dim: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(f"--target {dim}={value}: the target must be a number between 0 and 1")
    assert isinstance(value, (int, float))
    return float(value)


def merge_cmd(
    labels: Annotated[Path, typer.Option("--labels", help="A labels file from `classify run --target-kappa`.")],
    coded: Annotated[
        list[Path],
        typer.Option(
            "--coded",
            help="What people coded, in the gold format (workbench export, review-loop gold, or id + dimensions); "
            "repeatable.",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The merged corpus file (.jsonl, .csv, .parquet, .hf).")],
    taxonomy: TaxonomyPath = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing output.")] = False,
    only_labeled: Annotated[
        bool,
        typer.Option(
            "--only-labeled",
            help="Take only the codes of rows in the labels file (a review-loop gold version also holds the gold "
            "reports); without it, a coded id that is not a row is an error.",
        ),
    ] = False,
) -> None:
    """One corpus file: the model's auto labels and people's codes, each label saying who made it."""
    from classify.labeling.merge import merge_coded

    s = merge_coded(labels, coded, out, taxonomy=taxonomy, force=force, only_labeled=only_labeled)
    err.print(f"wrote {s.rows} rows to {out}", markup=False, highlight=False)
    for d, c in s.by_dimension.items():
        parts = [f"{k} {v}" for k, v in c.items() if v]
        err.print(f"{d}: " + (", ".join(parts) or "no labels"), markup=False, highlight=False)
