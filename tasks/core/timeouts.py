"""Connect and read timeouts of every call the autoscalers make, in one place.

A server that accepts the connection and never answers must fail the call, not stall the tick
(issue 14): Kubernetes (`tasks.adapters.kube`), AWS (`tasks.adapters.cloud`), Prometheus
(`tasks.adapters.prometheus`) and the load watcher (`tasks.load_aware.watcher`,
`tasks.steps.load_watcher`) all take theirs from here. The
read timeout bounds each wait for bytes of the answer, not the whole call: a paged list of
150,000 pods is 300 requests of 500 pods, each well inside it. A watch reads with the watch
silence limit instead (below): the server ends it sooner. A timed-out call is retried by the
step's Prefect retries (`tasks.core.retry`), the one retry layer.

`ELEVATOR_CONNECT_TIMEOUT_SECONDS` and `ELEVATOR_READ_TIMEOUT_SECONDS` override the defaults.

The bounds of a long-lived watch cache live here too (`watch_limits`): how long a watch may be
silent before it is replaced, and how old a cache a tick may decide on.
`ELEVATOR_WATCH_SILENCE_LIMIT_SECONDS` and `ELEVATOR_CACHE_FRESHNESS_BOUND_SECONDS` override them.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from kube_elevator.tasks.core.errors import InputError

CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_ENV = "ELEVATOR_CONNECT_TIMEOUT_SECONDS"
READ_TIMEOUT_ENV = "ELEVATOR_READ_TIMEOUT_SECONDS"
_MAX_SECONDS = 3600.0

# A watch that brought no event and no bookmark for this long is replaced by a new one from its
# resourceVersion. client-go notices a dead HTTP/2 connection in 45 s (ReadIdleTimeout 30 s, then
# PingTimeout 15 s; k8s.io/apimachinery/pkg/util/net/http.go); a healthy watch of ours is heard
# from at least every 30 s whatever the cluster does (`tasks.adapters.kube_watch`: the server
# ends each watch after two thirds of this, with a bookmark 2 s before), so 45 s is never a
# healthy watch, and a burst behind a frozen one is acted on within a minute.
WATCH_SILENCE_LIMIT_SECONDS = 45.0
# A tick decides on a kind of the cache only if the server was heard from on its watch within
# this long; past it, the tick reconnects that watch first (and lists the kind if it stays
# silent). As long as the silence limit: a healthy watch is never this old.
CACHE_FRESHNESS_BOUND_SECONDS = 45.0
WATCH_SILENCE_LIMIT_ENV = "ELEVATOR_WATCH_SILENCE_LIMIT_SECONDS"
CACHE_FRESHNESS_BOUND_ENV = "ELEVATOR_CACHE_FRESHNESS_BOUND_SECONDS"


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


@dataclass(frozen=True)
class WatchLimits:
    silence_limit_seconds: float = WATCH_SILENCE_LIMIT_SECONDS
    freshness_bound_seconds: float = CACHE_FRESHNESS_BOUND_SECONDS


def watch_limits() -> WatchLimits:
    """The watch cache's bounds: the defaults, or what the environment says."""
    return WatchLimits(_seconds(WATCH_SILENCE_LIMIT_ENV, WATCH_SILENCE_LIMIT_SECONDS),
                       _seconds(CACHE_FRESHNESS_BOUND_ENV, CACHE_FRESHNESS_BOUND_SECONDS))
