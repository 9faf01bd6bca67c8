"""Ingestion: fetch issues from the GitHub REST API or import exports, as record rows.

from classify.ingest import GitHubClient, fetch_repo_issues, write_fetched
with GitHubClient(token_from_env()) as gh:
    result = fetch_repo_issues(gh, "triton-lang/triton", state="closed", since="2024-01-01")
write_fetched("data/triton.jsonl", result.rows)
"""

from classify.ingest.cache import CacheError, ResponseCache, default_cache_path
from classify.ingest.client import (
    DEFAULT_API_URL,
    FetchError,
    FetchStats,
    GitHubClient,
    RateLimitError,
    RetryPolicy,
    token_from_env,
)
from classify.ingest.github import FetchResult, fetch_comments, fetch_issue_refs, fetch_repo_issues, normalize_since
from classify.ingest.importers import import_gh_json, import_table, parse_mapping, read_issue_refs
from classify.ingest.normalize import (
    RefError,
    gh_cli_issue_to_row,
    issue_id,
    parse_issue_ref,
    parse_repo,
    rest_issue_to_row,
)
from classify.ingest.output import WriteSummary, write_fetched

__all__ = [
    "CacheError",
    "ResponseCache",
    "default_cache_path",
    "DEFAULT_API_URL",
    "FetchError",
    "FetchStats",
    "GitHubClient",
    "RateLimitError",
    "RetryPolicy",
    "token_from_env",
    "FetchResult",
    "fetch_comments",
    "fetch_issue_refs",
    "fetch_repo_issues",
    "normalize_since",
    "import_gh_json",
    "import_table",
    "parse_mapping",
    "read_issue_refs",
    "RefError",
    "gh_cli_issue_to_row",
    "issue_id",
    "parse_issue_ref",
    "parse_repo",
    "rest_issue_to_row",
    "WriteSummary",
    "write_fetched",
]
