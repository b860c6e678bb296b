"""A hypothesis test after a Prefect test in the same process: Prefect's senders are stopped
first, so their websocket's keepalive pings (which draw from the global `random`) cannot land
between hypothesis' checks of the global random state (tests/prefect_senders.py)."""

from __future__ import annotations

from benchmarks.deadlines import scaled
from tests.prefect_senders import running_prefect_senders, stop_prefect_senders


def test_the_senders_an_event_started_are_stopped_and_start_again_on_the_next_event(
        prefect_server: None) -> None:
    from prefect.events import emit_event

    resource = {"prefect.resource.id": "kube-elevator.tests.senders"}
    emit_event(event="kube-elevator.tests.sent", resource=resource)
    assert running_prefect_senders() >= 1
    stop_prefect_senders(timeout_seconds=scaled(30))
    assert running_prefect_senders() == 0
    emit_event(event="kube-elevator.tests.sent-again", resource=resource)
    assert running_prefect_senders() >= 1
