"""Timestamps as the API server's audit log and the processes' JSON logs write them."""

from datetime import datetime


def epoch_seconds(stamp: str) -> float:
    """An RFC 3339 timestamp (``2026-01-02T03:04:05.678901Z``, or with an offset) in
    seconds since the epoch."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
