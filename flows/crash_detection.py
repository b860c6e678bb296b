"""Crashed ticks end Crashed (issue 14): Prefect's own way to find flow runs whose process died.

A process killed with SIGKILL cannot report its flow run's end, so the run would stay
"Running" on the server. Every flow run sends `prefect.flow-run.heartbeat` events while it
runs (`PREFECT_FLOWS_HEARTBEAT_FREQUENCY`, 30 s for our ticks); this automation, Prefect's
"zombie flow" recipe, marks a run Crashed when its heartbeats stop for `HEARTBEAT_GRACE`
without the run reaching a final state. The deployment's concurrency slot is held by a lease
the dead process no longer renews, and the server's repossessor frees it when it expires, so
the next scheduled tick is not cancelled for a run that will never finish.

`ensure_crash_detection` creates the automation once (by name) on a Prefect server of its own
(PREFECT_API_URL set); `elevator serve` and `run` call it when they start.
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta

AUTOMATION_NAME = "kube-elevator: crashed ticks"
HEARTBEAT_SECONDS = 30  # Prefect's minimum
HEARTBEAT_GRACE = timedelta(seconds=HEARTBEAT_SECONDS * 3)
FINAL_EVENTS = ("prefect.flow-run.Completed", "prefect.flow-run.Failed",
                "prefect.flow-run.Cancelled", "prefect.flow-run.Crashed")

log = logging.getLogger("kube_elevator.crash_detection")


def heartbeat_environment() -> None:
    """Ticks send heartbeats often enough for the automation to find a dead one quickly."""
    os.environ.setdefault("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", str(HEARTBEAT_SECONDS))


def ensure_crash_detection(grace: timedelta = HEARTBEAT_GRACE) -> bool:
    """Create the crashed-run automation unless one of that name exists; False if the server
    could not be asked (the tick still runs; a warning says why)."""
    from prefect import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        # An ephemeral server lives and dies with this process: there is no one to tell, and
        # its SQLite database is better left to the flow runs.
        return False
    try:
        with get_client(sync_client=True) as client:
            if client.read_automations_by_name(AUTOMATION_NAME):
                return True
            client.create_automation(AutomationCore(
                name=AUTOMATION_NAME,
                description="Marks a flow run Crashed when its heartbeats stop before it ends.",
                trigger=EventTrigger(
                    match={"prefect.resource.id": "prefect.flow-run.*"},
                    # The server emits Running itself: a run killed before its first heartbeat
                    # reached the server is found too.
                    after={"prefect.flow-run.Running", "prefect.flow-run.heartbeat"},
                    expect={"prefect.flow-run.heartbeat", *FINAL_EVENTS},
                    for_each={"prefect.resource.id"},
                    posture=Posture.Proactive,
                    threshold=1,
                    within=grace,
                ),
                actions=[ChangeFlowRunState(
                    name=None, state=StateType.CRASHED, force=False,
                    message=f"No heartbeat for {grace.total_seconds():.0f} s: the process "
                            "running this flow run died (kube-elevator crash detection).")],
            ))
        return True
    except Exception as error:  # no server yet, or no automations on it: the tick goes on
        log.warning("crash detection not set up: %s", error)
        return False
