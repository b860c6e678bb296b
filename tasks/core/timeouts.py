"""Connect and read timeouts of every call the autoscalers make, in one place.

A server that accepts the connection and never answers must fail the call, not stall the tick
(issue 14): Kubernetes (`tasks.adapters.kube`), AWS (`tasks.adapters.cloud`), Prometheus
(`tasks.adapters.prometheus`) and the load watcher (`tasks.load_aware.watcher`,
`tasks.steps.load_watcher`) all take theirs from here. The
read timeout bounds each wait for bytes of the answer, not the whole call: a paged list of
150,000 pods is 300 requests of 500 pods, each well inside it. A watch ends on the server's
`timeoutSeconds` and reads with that plus the read timeout. A timed-out call is retried by the
step's Prefect retries (`tasks.core.retry`), the one retry layer.

`ELEVATOR_CONNECT_TIMEOUT_SECONDS` and `ELEVATOR_READ_TIMEOUT_SECONDS` override the defaults.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from tasks.core.errors import InputError

CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_ENV = "ELEVATOR_CONNECT_TIMEOUT_SECONDS"
READ_TIMEOUT_ENV = "ELEVATOR_READ_TIMEOUT_SECONDS"
_MAX_SECONDS = 3600.0


@dataclass(frozen=True)
class Timeouts:
    connect_seconds: float = CONNECT_TIMEOUT_SECONDS
    read_seconds: float = READ_TIMEOUT_SECONDS

    @property
    def pair(self) -> tuple[float, float]:
        """(connect, read), as the kubernetes client's `_request_timeout` and requests take it."""
        return (self.connect_seconds, self.read_seconds)


def _seconds(variable: str, default: float) -> float:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= _MAX_SECONDS):
        raise InputError([f"{variable}: {text!r} must be a number of seconds in "
                          f"(0, {_MAX_SECONDS:.0f}]"])
    return value


def timeouts() -> Timeouts:
    """The defaults, or what the environment says."""
    return Timeouts(_seconds(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT_SECONDS),
                    _seconds(READ_TIMEOUT_ENV, READ_TIMEOUT_SECONDS))
