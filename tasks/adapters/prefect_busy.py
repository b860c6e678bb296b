"""A Prefect API call that a busy server refuses, retried at once rather than after Prefect's
backoff: for the calls of a stop that has a deadline (`serve`'s pause of its schedules, and
its cancel of a run in flight past the grace).

A Prefect server on SQLite (the local one, `prefect server start`'s default) answers 503 when
another writer got to its database first (`SQLITE_BUSY`: under WAL, a transaction that read
before another's commit cannot write, and fails at once, whatever the busy timeout;
`prefect.server.api.server.is_client_retryable_exception`). Prefect's client retries a 503
after 2, 4, 8, 16 s (`PREFECT_CLIENT_MAX_RETRIES`, backoff `2 ** attempt`), so two or three
such answers in a row cost 6-14 s of sleep. Measured on a loaded 2-CPU machine (load 5-8,
s61): serve's pause of two deployments took 0.2-0.5 s, or 2.2-3.2 s when one answer was
busy. Retried here every `BUSY_RETRY_SECONDS`, with Prefect's retries off for the call, the next
attempt comes as soon as the writer is done. The backoff was part of why s60's CI saw the pause
outlast a stop's deadline (7 s and 25 s); the rest is the server's own work, the pause's
deletion of the runs its scheduler made (benchmarks/RESULTS.md, s61), which no retry shortens.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import httpx

# Between two attempts of a call the server answered busy.
BUSY_RETRY_SECONDS = 0.25
# How long a call is retried while the server answers busy: Prefect's own five retries' span
# (2 + 4 + 8 + 16 + 32 s); a stop's deadline bounds it sooner.
BUSY_WITHIN_SECONDS = 60.0
# The answers Prefect's client itself retries (`PrefectHttpxSyncClient.send`, 3.8-3.9): the
# request was not carried out, so it may be sent again.
BUSY_STATUSES = frozenset({408, 429, 502, 503})

Result = TypeVar("Result")


def busy(error: BaseException) -> bool:
    """The server refused the request without carrying it out: it may be sent again."""
    return (isinstance(error, httpx.HTTPStatusError)
            and error.response.status_code in BUSY_STATUSES)


@contextmanager
def prefect_retries_off() -> Iterator[None]:
    """Prefect's client sends each request once, in this context (a contextvar: this thread's,
    or the task's, only): the caller retries (`retried_while_busy`)."""
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    with temporary_settings({PREFECT_CLIENT_MAX_RETRIES: 0}):
        yield


def retried_while_busy(call: Callable[[], Result], *, idempotent: bool = False,
                       every_seconds: float = BUSY_RETRY_SECONDS,
                       within_seconds: float = BUSY_WITHIN_SECONDS,
                       clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], None] = time.sleep) -> Result:
    """`call()`, again every `every_seconds` while the server answers busy, for up to
    `within_seconds`; any other error, and the last busy one, raised. `idempotent`: also
    after a transport error (a connection reset, a timeout), which may come after the server
    carried the request out, as Prefect's client retries them. Send `call` inside
    `prefect_retries_off()`."""
    started = clock()
    while True:
        try:
            return call()
        except Exception as error:
            again = busy(error) or (idempotent and isinstance(error, httpx.TransportError))
            if not again or clock() + every_seconds - started > within_seconds:
                raise
        sleep(every_seconds)
