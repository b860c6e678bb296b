"""Prefect's background senders in a test process, stopped before a hypothesis test.

Once a test in this process has run a flow or emitted an event, Prefect's `EventsWorker` keeps a
websocket to the server open on Prefect's event-loop thread, and websockets' keepalive pings it
every 20 s with a payload from the global `random` (websockets asyncio/connection.py `ping`:
`random.getrandbits(32)`). Hypothesis compares the global random state before and after drawing
each example (hypothesis control.py `deprecate_random_in_strategy`), so a ping in between is
reported as the strategy using `random` (the HypothesisDeprecationWarning `make test` showed on
whichever strategy a worker process drew next: `clusters()`, `situations()`, `mutations()`).
"""

from __future__ import annotations

import sys


def running_prefect_senders() -> int:
    """How many of Prefect's queue services (events, logs) run in this process."""
    if "prefect._internal.concurrency.services" not in sys.modules:
        return 0
    from prefect._internal.concurrency.services import _QueueServiceBase

    return sum(1 for service in list(_QueueServiceBase._instances.values())
               if not service._stopped)


def stop_prefect_senders(timeout_seconds: float) -> None:
    """Send what Prefect's events and logs services hold and stop them (Prefect starts new ones
    when a later test emits again); nothing when this process never started one."""
    if "prefect.events.worker" not in sys.modules:
        return
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=timeout_seconds)  # every queue service, not only events
