"""The labels rows as the corpus report sees them: which library a row is from, where its label comes
from, and the label it counts. The row format itself is `classify.core.labelrow`'s."""

from __future__ import annotations

from typing import Any

from classify.core import labelrow
from classify.core.errors import ClassifyError
from classify.core.labelrow import Status
from classify.core.screening import DIM as SCREENING
from classify.core.screening import PASS as FAILURE_REPORT

# Where a row's label for a dimension comes from, as the report counts them.
ORIGINS = ("auto", "review", "coded", "none_shown", "unrouted")


class ReportError(ClassifyError):
    """A labels file or reference table the report cannot use."""


def library_of(row: dict[str, Any]) -> str:
    repo = row.get("repo")
    if isinstance(repo, str) and "/" in repo:
        return repo.split("/", 1)[1]
    rid = str(row.get("id", ""))
    return rid.rsplit("-", 1)[0] if "-" in rid else "unknown"


def origin(row: dict[str, Any], dim: str) -> str:
    """`auto` (the model's label stands), `review` (the model's suggestion, awaiting a person), `coded`
    (a person), `none_shown` (the model is sure the thread shows none), `unrouted` (a run without
    --target-kappa: the model's label)."""
    if labelrow.is_coded(row, dim):
        return "coded"
    st = labelrow.status(row, dim)
    return st.value if st in labelrow.ROUTED else "unrouted"


def counted_label(row: dict[str, Any], dim: str) -> str | None:
    """The label a report counts with: the label, or for a row awaiting review the model's suggestion
    (what the corrected shares count too, through the row's probabilities)."""
    return labelrow.label_or_suggestion(row, dim)


def counts_as_failure_report(row: dict[str, Any]) -> bool:
    """Kept by screening, or never screened; a screening decision awaiting review counts by the
    model's suggestion, as every other label awaiting review does."""
    return labelrow.label_or_suggestion(row, SCREENING) in (None, FAILURE_REPORT)


def awaits_review(row: dict[str, Any], dim: str) -> bool:
    return not labelrow.is_coded(row, dim) and labelrow.status(row, dim) is Status.REVIEW


def issue_url(r: dict[str, Any]) -> str | None:
    repo, rid = r.get("repo"), str(r.get("id", ""))
    num = r.get("number") or (rid.rsplit("-", 1)[1] if "-" in rid else None)
    if isinstance(repo, str) and repo.count("/") == 1 and num is not None and str(num).isdigit():
        return f"https://github.com/{repo}/issues/{num}"
    return None
