"""Crashed ticks end Crashed (issue 14): Prefect's own way to find flow runs whose process died.

A process killed with SIGKILL cannot report its flow run's end, so the run would stay
"Running" on the server. Every flow run sends `prefect.flow-run.heartbeat` events while it
runs (`PREFECT_FLOWS_HEARTBEAT_FREQUENCY`, 30 s for our ticks); this automation, Prefect's
"zombie flow" recipe, marks a run Crashed when its heartbeats stop for `HEARTBEAT_GRACE`
without the run reaching a final state. The deployment's concurrency slot is held by a lease
the dead process no longer renews, and the server's repossessor frees it when it expires, so
the next scheduled tick is not cancelled for a run that will never finish.

The Prefect server may be shared, so the automation touches only kube-elevator's own flow runs
(`OWN_FLOWS`, matched on the `flow` resource every flow-run event carries), and, as in Prefect's
recipe, only runs that have sent a heartbeat: a run of a worker or process without
`PREFECT_FLOWS_HEARTBEAT_FREQUENCY` is never marked Crashed for sending none.

`ensure_crash_detection` creates the automation once (by name) on a Prefect server of its own
(PREFECT_API_URL set); `elevator serve` and `run` call it when they start.
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prefect.events.schemas.automations import EventTrigger

AUTOMATION_NAME = "kube-elevator: crashed ticks"
HEARTBEAT_SECONDS = 30  # Prefect's minimum
HEARTBEAT_GRACE = timedelta(seconds=HEARTBEAT_SECONDS * 3)
FINAL_EVENTS = ("prefect.flow-run.Completed", "prefect.flow-run.Failed",
                "prefect.flow-run.Cancelled", "prefect.flow-run.Crashed")
HEARTBEAT_EVENT = "prefect.flow-run.heartbeat"
# The names of the flows this project defines (flows/autoscale.py, pod_autoscale.py, tune.py).
OWN_FLOWS = ("autoscale", "pod-autoscale", "tune")

log = logging.getLogger("kube_elevator.crash_detection")


# Set for the processes serve starts: the house rule (no traceback on the console) holds there.
QUIET_CONSOLE_VARIABLE = "ELEVATOR_RUN_CONSOLE_WITHOUT_TRACEBACKS"


def heartbeat_environment() -> None:
    """Ticks send heartbeats often enough for the automation to find a dead one quickly."""
    os.environ.setdefault("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", str(HEARTBEAT_SECONDS))


def quiet_run_consoles() -> None:
    """The runs' processes `serve --ticks runs` starts write to serve's console: they log
    without tracebacks there too (`flows.autoscale` reads `QUIET_CONSOLE_VARIABLE` as it
    loads, in each of them)."""
    os.environ[QUIET_CONSOLE_VARIABLE] = "1"


def crash_detection_trigger(grace: timedelta = HEARTBEAT_GRACE) -> EventTrigger:
    """Prefect's zombie-flow trigger, limited to kube-elevator's flow runs: a run of one of
    `OWN_FLOWS` that sent a heartbeat and then neither another one nor a final state within
    `grace`."""
    from prefect.events.schemas.automations import EventTrigger, Posture

    return EventTrigger(
        match={"prefect.resource.id": "prefect.flow-run.*"},
        # Heartbeats, the server's state events and the Crashed this automation sets all name
        # the run's flow as a related resource.
        match_related={"prefect.resource.role": "flow",
                       "prefect.resource.name": list(OWN_FLOWS)},
        # Heartbeats only (Prefect's recipe): a run that sends none is never a suspect.
        after={HEARTBEAT_EVENT},
        expect={HEARTBEAT_EVENT, *FINAL_EVENTS},
        for_each={"prefect.resource.id"},
        posture=Posture.Proactive,
        threshold=1,
        within=grace,
    )


def _same_matching(trigger: object, wanted: EventTrigger) -> bool:
    """True when an existing automation's trigger picks the same runs (its grace may differ)."""
    from prefect.events.schemas.automations import EventTrigger

    return isinstance(trigger, EventTrigger) and all(
        getattr(trigger, field) == getattr(wanted, field)
        for field in ("match", "match_related", "after", "expect", "for_each", "posture"))


def ensure_crash_detection(grace: timedelta = HEARTBEAT_GRACE) -> bool:
    """Create the crashed-run automation unless one of that name exists; False if the server
    could not be asked (the tick still runs; a warning says why).

    One of that name that matches other runs (an older kube-elevator's, which started its timer
    on any flow run's `Running`) is corrected in place, keeping its grace."""
    from prefect import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import AutomationCore
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        # An ephemeral server lives and dies with this process: there is no one to tell, and
        # its SQLite database is better left to the flow runs.
        return False

    def automation(within: timedelta) -> AutomationCore:
        return AutomationCore(
            name=AUTOMATION_NAME,
            description="Marks a kube-elevator flow run Crashed when its heartbeats stop "
                        "before it ends.",
            trigger=crash_detection_trigger(within),
            actions=[ChangeFlowRunState(
                name=None, state=StateType.CRASHED, force=False,
                message=f"No heartbeat for {within.total_seconds():.0f} s: the process "
                        "running this flow run died (kube-elevator crash detection).")],
        )

    try:
        with get_client(sync_client=True) as client:
            existing = client.read_automations_by_name(AUTOMATION_NAME)
            if not existing:
                client.create_automation(automation(grace))
                return True
            wanted = crash_detection_trigger(grace)
            for found in existing:
                if not _same_matching(found.trigger, wanted):
                    within = getattr(found.trigger, "within", grace)
                    client.update_automation(found.id, automation(within))
                    log.info("crash detection %s: limited to kube-elevator's runs", found.id)
        return True
    except Exception as error:  # no server yet, or no automations on it: the tick goes on
        log.warning("crash detection not set up: %s", error)
        return False
