"""The heartbeat fix on the installed Prefect release (issue 40: it was installed on 3.8.8 only).

With heartbeats on (`PREFECT_FLOWS_HEARTBEAT_FREQUENCY`, as `elevator serve` sets them for crash
detection), Prefect's heartbeat thread sleeps in 1 s slices and is joined when the run ends: a
flow run that ends 0.1 s after its start waits most of a second more. Where
`prefect_compat.install()` recognises that loop, the join no longer waits; on every release of
CI's Prefect matrix (make test-prefect) either the fix is installed or Prefect's own loop does
not sleep."""

from __future__ import annotations

import time

import prefect.flow_engine
import pytest
from prefect import flow
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

from kube_elevator.flows.prefect_compat import heartbeat_loop_sleeps_in_slices, install


@flow(name="heartbeat-probe", persist_result=False)
def ends_at_once() -> float:
    return time.monotonic()


def seconds_after_the_body(runs: int) -> float:
    """The least, over `runs` flow runs, of the time from the end of the flow's body to the
    return of the call: the run's final state, and the heartbeat thread's join."""
    waits: list[float] = []
    for _ in range(runs):
        ended = ends_at_once()
        waits.append(time.monotonic() - ended)
    return min(waits)


def test_a_flow_run_with_heartbeats_does_not_wait_for_the_heartbeat_threads_sleep(
        prefect_server: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ELEVATOR_PREFECT_ENGINE_FIX", raising=False)
    fixed = install()
    # Fixed, or Prefect's own loop never slept (the detection reads Prefect's own loop).
    assert fixed == heartbeat_loop_sleeps_in_slices(prefect.flow_engine)
    assert fixed == getattr(prefect.flow_engine._send_heartbeats, "__elevator_fix__", False)
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 30}):
        seconds_after_the_body(1)  # the flow's first run registers it
        # Prefect's own sleeping loop: about 0.9 s every run (a slice begun at the start).
        assert seconds_after_the_body(3) < 0.5
