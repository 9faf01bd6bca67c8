"""`classify fetch ...`: get issues into a records file (GitHub API, gh exports, tables).

The token is read from GITHUB_TOKEN (or GH_TOKEN) only, never from an option, so it does not
show up in shell history, `ps` or help output. classify.ingest (httpx) is imported inside the
commands so that `classify --help` stays fast.
"""

from __future__ import annotations

import logging
from enum import Enum
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer

from classify.cli.common import echo_logs, fail

fetch_app = typer.Typer(help="Fetch issues from GitHub or import exports into a records file.", no_args_is_help=True)
log = logging.getLogger("classify.fetch")


class State(str, Enum):
    open = "open"
    closed = "closed"
    all = "all"


class Comments(str, Enum):
    auto = "auto"
    bulk = "bulk"
    per_issue = "per-issue"


def _setup_logging(quiet: bool) -> None:
    echo_logs(log, logging.WARNING if quiet else logging.INFO)


def _fail(e: Exception) -> NoReturn:
    # Exit 2 as every user error; 1 is kept for `urls` finishing with some references failed.
    fail(str(e))


Output = Annotated[Path, typer.Option("--output", "-o", help="Records file to write (.jsonl, .csv or .parquet).")]
Overwrite = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help="Replace the output file instead of merging into it by id (merging keeps fields added later, e.g. labels).",
    ),
]
BaseUrl = Annotated[
    Optional[str],
    typer.Option("--base-url", envvar="GITHUB_API_URL", help="API root (GitHub Enterprise: https://HOST/api/v3)."),
]
UseCache = Annotated[
    bool, typer.Option("--cache/--no-cache", help="Conditional requests with stored ETags (a refresh costs little).")
]
CacheFile = Annotated[
    Optional[Path], typer.Option("--cache-file", help="ETag store; default: OUTPUT.etags.sqlite beside the output.")
]
SkipBots = Annotated[
    bool, typer.Option("--skip-bot-comments", help="Leave comments by bot accounts out of the discussion.")
]
MaxAttempts = Annotated[
    int, typer.Option("--max-attempts", min=1, help="Attempts per request (5xx, connection errors, rate limits).")
]
MaxWait = Annotated[
    float, typer.Option("--max-wait", min=0, help="Longest single rate-limit wait in seconds before giving up.")
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Only warnings and the summary.")]


def _check_paths(output: Path, inputs: list[Path | None], cache: bool, cache_file: Path | None) -> None:
    """Refuse, before any request, an output or ETag store that is one of the inputs or each other."""
    from classify.core.errors import UsageError
    from classify.core.paths import refuse_output_over_inputs
    from classify.ingest import default_cache_path

    if cache_file is not None and not cache:
        _fail(ValueError(f"--cache-file {cache_file}: no ETag store is used with --no-cache"))
    try:
        refuse_output_over_inputs(output, inputs, flag="--output")
        if cache:
            store = cache_file or default_cache_path(output)
            refuse_output_over_inputs(store, [output, *inputs], flag="--cache-file" if cache_file else "the ETag store")
    except UsageError as e:
        _fail(e)


def _client(
    base_url: str | None, cache: bool, cache_file: Path | None, output: Path, max_attempts: int, max_wait: float
):
    from classify.ingest import GitHubClient, ResponseCache, RetryPolicy, default_cache_path, token_from_env

    token = token_from_env()
    if not token:
        log.warning("GITHUB_TOKEN is not set: unauthenticated requests are limited to 60 an hour")
    store = ResponseCache(cache_file or default_cache_path(output)) if cache else None
    return GitHubClient(
        token=token, base_url=base_url, cache=store, policy=RetryPolicy(max_attempts=max_attempts, max_wait=max_wait)
    )


def _close(client) -> None:
    client.close()
    if client.cache is not None:
        client.cache.close()


@fetch_app.command("github")
def github_cmd(
    repo: Annotated[list[str], typer.Option("--repo", "-r", help="OWNER/NAME; repeat for several repositories.")],
    output: Output,
    since: Annotated[
        Optional[str], typer.Option(help="Only issues updated at or after this date (YYYY-MM-DD or ISO time).")
    ] = None,
    state: Annotated[State, typer.Option(help="Issue state.")] = State.all,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Stop after this many issues per repository.")] = None,
    per_page: Annotated[int, typer.Option(min=1, max=100, help="Page size (GitHub allows up to 100).")] = 100,
    base_url: BaseUrl = None,
    cache: UseCache = True,
    cache_file: CacheFile = None,
    overwrite: Overwrite = False,
    skip_bot_comments: SkipBots = False,
    comments: Annotated[
        Comments,
        typer.Option(
            help="How to get comments: per issue, or the repository-wide listing (100 a request); auto picks the cheaper."
        ),
    ] = Comments.auto,
    max_attempts: MaxAttempts = 6,
    max_wait: MaxWait = 3900.0,
    quiet: Quiet = False,
) -> None:
    """Pull the issues of one or more repositories, with their comments; pull requests are skipped."""
    from classify.core.records import RecordsError
    from classify.ingest import CacheError, FetchError, RefError, fetch_repo_issues, normalize_since, write_fetched

    _setup_logging(quiet)
    try:
        since_iso = normalize_since(since) if since else None
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--since") from None
    _check_paths(output, [], cache, cache_file)
    try:
        client = _client(base_url, cache, cache_file, output, max_attempts, max_wait)
    except (CacheError, FetchError) as e:
        _fail(e)
    try:
        # Written after each repository: a later failure (e.g. a rate limit too long to wait
        # for) keeps what came before; pages already fetched stay in the ETag cache.
        for i, r in enumerate(repo):

            def progress(n: int, prs: int, r: str = r) -> None:
                log.info("%s: %d issues so far (%d pull requests skipped)", r, n, prs)

            res = fetch_repo_issues(
                client,
                r,
                state=state.value,
                since=since_iso,
                limit=limit,
                per_page=per_page,
                skip_bot_comments=skip_bot_comments,
                comments=comments.value,
                progress=progress,
            )
            summary = write_fetched(output, res.rows, overwrite=overwrite and i == 0)
            typer.echo(
                f"{r}: {len(res.rows)} issues, {len(res.skipped_prs)} pull requests skipped; {summary}", err=True
            )
    except (FetchError, RecordsError, RefError, ValueError) as e:
        _fail(e)
    finally:
        _close(client)
    typer.echo(client.stats.summary(), err=True)


@fetch_app.command("urls")
def urls_cmd(
    output: Output,
    refs: Annotated[Optional[list[str]], typer.Argument(help="Issue URLs or OWNER/NAME#N.")] = None,
    from_file: Annotated[
        Optional[Path],
        typer.Option(
            "--from",
            "-f",
            help="A .txt file with one URL a line, or a CSV/JSONL/Parquet table whose other columns (labels) are kept.",
        ),
    ] = None,
    url_column: Annotated[str, typer.Option(help="URL column of a --from table.")] = "url",
    host: Annotated[
        Optional[list[str]],
        typer.Option(
            "--host",
            help="Also accept issue URLs on this web host (repeatable). Default: github.com for the public API, "
            "else the --base-url host; URLs on any other host are refused.",
        ),
    ] = None,
    base_url: BaseUrl = None,
    cache: UseCache = True,
    cache_file: CacheFile = None,
    overwrite: Overwrite = False,
    skip_bot_comments: SkipBots = False,
    max_attempts: MaxAttempts = 6,
    max_wait: MaxWait = 3900.0,
    quiet: Quiet = False,
) -> None:
    """Fetch single issues by URL (e.g. a gold spreadsheet holding only URLs and labels).

    Missing issues and pull requests are listed and left out; the rest is written and the exit
    code is 1 if any reference failed.
    """
    from classify.core.records import RecordsError
    from classify.ingest import CacheError, FetchError, RefError, fetch_issue_refs, read_issue_refs, write_fetched

    _setup_logging(quiet)
    items: list = [(r, {}) for r in refs or []]
    try:
        if from_file:
            items += read_issue_refs(from_file, url_column)
    except RecordsError as e:
        _fail(e)
    if not items:
        raise typer.BadParameter("give issue URLs as arguments or a file with --from")
    _check_paths(output, [from_file], cache, cache_file)
    try:
        client = _client(base_url, cache, cache_file, output, max_attempts, max_wait)
    except (CacheError, FetchError) as e:
        _fail(e)
    try:
        res = fetch_issue_refs(
            client,
            items,
            hosts=host or (),
            skip_bot_comments=skip_bot_comments,
            progress=lambda i, n: log.info("%d/%d references done", i, n) if i % 50 == 0 or i == n else None,
        )
        summary = write_fetched(output, res.rows, overwrite=overwrite) if res.rows else None
    except (FetchError, RecordsError, RefError, ValueError) as e:
        _fail(e)
    finally:
        _close(client)
    for ref in res.skipped_prs:
        typer.echo(f"skipped pull request: {ref}", err=True)
    for ref, why in res.failures:
        typer.echo(f"failed: {ref}: {why}", err=True)
    typer.echo(client.stats.summary(), err=True)
    typer.echo(str(summary) if summary else "nothing fetched; output not written", err=True)
    if res.failures:
        raise typer.Exit(1)


@fetch_app.command("gh-json")
def gh_json_cmd(
    path: Annotated[
        Path, typer.Argument(help="Output of `gh issue list --json number,title,body,url,createdAt,comments,...`.")
    ],
    output: Output,
    repo: Annotated[Optional[str], typer.Option(help="OWNER/NAME, if the export has no `url` field.")] = None,
    overwrite: Overwrite = False,
    skip_bot_comments: SkipBots = False,
    quiet: Quiet = False,
) -> None:
    """Import a `gh issue list/view --json ...` export (or `gh api` REST JSON)."""
    from classify.core.records import RecordsError
    from classify.ingest import RefError, import_gh_json, write_fetched

    _setup_logging(quiet)
    _check_paths(output, [path], False, None)
    try:
        rows = import_gh_json(path, repo=repo, skip_bot_comments=skip_bot_comments)
        summary = write_fetched(output, rows, overwrite=overwrite)
    except (RecordsError, RefError, ValueError) as e:
        _fail(e)
    typer.echo(str(summary), err=True)


@fetch_app.command("csv")
def csv_cmd(
    path: Annotated[Path, typer.Argument(help="A CSV (or JSONL/Parquet) table of issues.")],
    output: Output,
    map_: Annotated[
        Optional[list[str]],
        typer.Option(
            "--map", "-m", help="FIELD=COLUMN pairs, comma-separated or repeated: --map title=Title,body=Description."
        ),
    ] = None,
    repo: Annotated[
        Optional[str], typer.Option(help="OWNER/NAME for all rows, to derive ids from a number column.")
    ] = None,
    drop_unmapped: Annotated[
        bool, typer.Option("--drop-unmapped", help="Keep only record fields, not the table's other columns.")
    ] = False,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Import a table with a column mapping; ids are derived from URLs or repo + number when absent."""
    from classify.core.records import RecordsError
    from classify.ingest import RefError, import_table, parse_mapping, write_fetched

    _setup_logging(quiet)
    try:
        mapping = parse_mapping(map_ or [])
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--map") from None
    _check_paths(output, [path], False, None)
    try:
        rows = import_table(path, mapping, repo=repo, keep_unmapped=not drop_unmapped)
        summary = write_fetched(output, rows, overwrite=overwrite)
    except (RecordsError, RefError, ValueError) as e:
        _fail(e)
    typer.echo(str(summary), err=True)
