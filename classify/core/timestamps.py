"""The one timestamp format of decisions, queues and the workbench: UTC, ISO 8601, whole seconds."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_timestamp() -> str:
    """Now, as `2026-01-31T12:00:00+00:00`."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
