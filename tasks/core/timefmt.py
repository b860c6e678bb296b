"""Times on the wire: metav1.Time is RFC 3339 in UTC with whole seconds.

One formatter and one parser for every timestamp we write to or read from an API object. (The
Lease annotations keep sub-second precision on purpose: `tasks.core.lease_state.format_time`.)
"""

from __future__ import annotations

import math
from datetime import UTC, datetime


def rfc3339(unix_seconds: float) -> str:
    """metav1.Time on the wire: UTC, whole seconds."""
    return datetime.fromtimestamp(math.floor(unix_seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> float | None:
    """An RFC 3339 time as Unix seconds (a time without zone is UTC); None for none."""
    if not text:
        return None
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
