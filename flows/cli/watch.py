"""`elevator watch`: pending pods become Prefect events, so a burst is acted on in seconds.

Escalator only polls. This command keeps a real watch on unscheduled pending pods (list, then
watch from the list's resourceVersion; on a dropped connection it resumes from the last
resourceVersion seen, on 410 Gone it lists again), maps each pod to its node groups, and emits
`elevator.node-group.pods-pending` (`tasks.escalator.pending_bursts` decides when); the
`autoscale` deployment's trigger turns that event into a run. It stops cleanly (exit 0) on SIGTERM or SIGINT.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer

from kube_elevator.flows.cli.common import say_as
from kube_elevator.flows.cli.liveness import (
    HealthPages,
    Liveness,
    elector_for,
    kept_alive,
    with_liveness_options,
)
from kube_elevator.flows.ticker import Changed, Relisted, TickLoop, run_cached_ticks, run_watch
from kube_elevator.tasks.adapters.kube_watch import PAGE_SIZE, RETRY_SECONDS, WATCH_TIMEOUT_SECONDS, ListWatch
from kube_elevator.tasks.core.api_objects import OBJECT_DECODER
from kube_elevator.tasks.core.duration import positive_duration_option
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.health import LoopHealth
from kube_elevator.tasks.core.lease_state import DEFAULT_LEASE_NAMESPACE
from kube_elevator.tasks.core.records import PodRecord, pod_record
from kube_elevator.tasks.escalator.pending_bursts import (
    DEFAULT_DEBOUNCE_SECONDS,
    DEFAULT_SETTLE_SECONDS,
    PENDING_EVENT,
    UNSCHEDULED_PODS,
    Debouncer,
    PendingPods,
    PendingPodsEvents,
)

if TYPE_CHECKING:
    from kube_elevator.flows.cli.stopping import StopDeadline
    from kube_elevator.flows.leader import LeaderElector

log = logging.getLogger(__name__)

CACHE_START_SECONDS = 120.0  # a first list of 150,000 pods takes seconds; ticks wait for it


class PodWatch:
    """List-then-watch of unscheduled pending pods in all namespaces, in a daemon thread.

    `items` receives a `Relisted` after each list and a `Changed` per event; the loop itself is
    the Kubernetes adapter's one (`tasks.adapters.kube_watch.ListWatch`).
    """

    def __init__(self, api_client: Any, timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
                 page_size: int = PAGE_SIZE, retry_seconds: float = RETRY_SECONDS) -> None:
        from kubernetes import client

        self.items: queue.Queue[Changed | Relisted] = queue.Queue()
        self.loop = ListWatch(
            client.CoreV1Api(api_client).list_pod_for_all_namespaces, "pods", self._relisted,
            self._changed, timeout_seconds=timeout_seconds, page_size=page_size,
            retry_seconds=retry_seconds, field_selector=UNSCHEDULED_PODS)

    @property
    def resource_version(self) -> str | None:
        return self.loop.resource_version

    @resource_version.setter
    def resource_version(self, version: str | None) -> None:
        self.loop.resource_version = version

    def start(self) -> PodWatch:
        self.loop.start()
        return self

    def stop(self) -> None:
        self.loop.stop()

    def _relisted(self, items: list[msgspec.Raw], version: str) -> None:
        self.items.put(Relisted([pod for item in items if (pod := _pod(item, "LIST"))]))

    def _changed(self, event_type: str, item: msgspec.Raw) -> None:
        pod = _pod(item, event_type)
        if pod is not None:
            self.items.put(Changed(event_type, pod))


def _pod(item: msgspec.Raw, event_type: str) -> PodRecord | None:
    try:
        return pod_record(OBJECT_DECODER.decode(item))
    except (msgspec.DecodeError, ValueError) as error:
        # Skipped, not retried: resuming would only read the same object again.
        log.warning("skipping a %s pod the watch cannot read: %s", event_type, error)
        return None


def emit_to_prefect(event: PendingPods) -> None:
    """The Prefect event the `autoscale` deployment's trigger waits for."""
    from prefect.events import emit_event

    emit_event(event=PENDING_EVENT, resource=event.resource, payload=event.payload)


class TickMode(StrEnum):
    in_process = "in-process"
    events = "events"


# A burst's pods come from one controller within milliseconds, and the scheduler marks them
# within about 100 ms: 0.25 s of quiet closes a burst in the watching process without letting
# a tick see only its first pods. The event path keeps 1 s: its trigger costs seconds anyway.
IN_PROCESS_SETTLE_SECONDS = 0.25


def watch(
    nodegroups: Annotated[Path, typer.Option(help="Escalator node-group file.")],
    kubeconfig: Annotated[Path | None, typer.Option(
        help="kubeconfig file (default: in-cluster config, else ~/.kube/config).")] = None,
    ticks: Annotated[TickMode, typer.Option(
        help="in-process: keep a watch cache and run the autoscale flow here, every --interval "
             "and on a burst of pending pods; events: send elevator.node-group.pods-pending "
             "events for the autoscale deployment's trigger (ticks on a work pool).")] =
        TickMode.in_process,
    interval: Annotated[str, typer.Option(
        help="in-process: time between scheduled ticks (Go duration).")] = "60s",
    lease_namespace: Annotated[str, typer.Option(
        help="in-process: namespace of the elevator-<group> Leases.")] = DEFAULT_LEASE_NAMESPACE,
    debounce: Annotated[str, typer.Option(
        help="At most one burst per node group per this long (Go duration).")] =
        f"{DEFAULT_DEBOUNCE_SECONDS:g}s",
    settle: Annotated[str | None, typer.Option(
        help="A group's burst closes once no new pending pod has come for this long "
             f"(default {IN_PROCESS_SETTLE_SECONDS:g}s in-process, "
             f"{DEFAULT_SETTLE_SECONDS:g}s with events).")] = None,
    *, liveness: Liveness,
) -> None:
    """Watch the cluster: run ticks on pending pods here, or send events for a trigger."""
    from prefect.settings import get_current_settings

    from kube_elevator.flows.cli.common import console
    from kube_elevator.flows.cli.stopping import stop_signals
    from kube_elevator.tasks.adapters.kube import KubeClient
    from kube_elevator.tasks.core.lease_state import lease_name
    from kube_elevator.tasks.node_group_file import load_node_groups

    config = load_node_groups(nodegroups)
    liveness.check_lease_name([lease_name(group.name) for group in config.node_groups])
    in_process = ticks is TickMode.in_process
    default_settle = IN_PROCESS_SETTLE_SECONDS if in_process else DEFAULT_SETTLE_SECONDS
    debouncer = Debouncer(positive_duration_option(debounce, "--debounce"),
                          positive_duration_option(settle or f"{default_settle:g}s", "--settle"))
    period = positive_duration_option(interval, "--interval")
    if in_process:  # --ticks events: the probe checks its pending-pods loop
        liveness.warn_if_ticks_outlast(period)
    if not in_process and not get_current_settings().api.url:
        raise InputError(["PREFECT_API_URL is not set: elevator watch --ticks events sends its "
                          "events to a Prefect server, where the autoscale deployment's "
                          "trigger waits"])
    try:
        kube = KubeClient.from_config(kubeconfig)
    except Exception as error:  # the client raises ConfigException, OSError, YAML errors
        raise InputError([f"--kubeconfig: {kubeconfig}: {error}"]) from None
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request to Prefect
    if in_process:
        from kube_elevator.tasks.adapters.prefect_server import use_local_server

        use_local_server("own")  # without PREFECT_API_URL: started now, or one line why not
    stop, stopping = stop_signals("watch")
    events = PendingPodsEvents(config.node_groups, debouncer)
    elector = elector_for(liveness, kube.api, lease_namespace, say_as("watch"))
    if in_process:
        _watch_and_tick(kube, nodegroups, kubeconfig, lease_namespace, period, events, stop,
                        liveness, elector, stopping)
        return
    pods = PodWatch(kube.api)
    health = LoopHealth(time.monotonic(), monitoring=elector is None)
    may_act = elector.may_act if elector is not None else (lambda: True)

    def emit(event: PendingPods) -> None:
        if not may_act():  # the leader sends it
            return
        emit_to_prefect(event)
        console.print(f"{event.group}: {event.count} pending pods → {PENDING_EVENT}",
                      highlight=False, markup=False, soft_wrap=True)  # a group name: no markup
        sys.stdout.flush()

    def passed() -> None:
        """A pass of the pending-pods loop (this mode's tick): activity; a success once the pod
        watch has listed (a silent watch is the cache freshness's concern, not this check's)."""
        if elector is not None:
            if may_act() and not health.state().monitoring:
                health.start_monitoring(time.monotonic())
            elif not may_act() and health.state().monitoring:
                health.stop_monitoring()
        health.finished(time.monotonic(), time.time(),
                        pods.resource_version is not None)

    pages = HealthPages(lambda: health, lambda: pods.resource_version is not None,
                        liveness.limits, time.monotonic, elector, role="watching")
    stopping.doing = "sending the pending-pods events still queued"
    with kept_alive(liveness, pages, elector, stopping):
        pods.start()
        console.print(f"watching pending pods for {len(config.node_groups)} node groups",
                      highlight=False)
        sys.stdout.flush()
        try:
            run_watch(pods.items, events, emit, stop, heartbeat=passed)
        finally:
            pods.stop()
            from prefect.events.worker import EventsWorker

            EventsWorker.drain_all(timeout=10)  # events still queued reach the server
    console.print("watch: stopped", highlight=False)
    stopping.doing = "exiting: Prefect's clients flushing their logs and events"


def _watch_and_tick(kube: Any, nodegroups: Path, kubeconfig: Path | None, lease_namespace: str,
                    period: float, events: PendingPodsEvents, stop: threading.Event,
                    liveness: Liveness, elector: LeaderElector | None,
                    stopping: StopDeadline) -> None:
    """Keep the cache, feed its pod changes to the bursts, and run ticks in this process (while
    it leads, under leader election)."""
    from kube_elevator.flows.autoscale import autoscale
    from kube_elevator.flows.cli.common import console_logs_without_tracebacks, print_tick_results
    from kube_elevator.flows.run_state import run_here

    say = say_as("watch")
    kubeconfig_text = str(kubeconfig) if kubeconfig else None

    def tick(why: str) -> bool:
        outcome = run_here(lambda: autoscale(nodegroups=str(nodegroups),
                                             lease_namespace=lease_namespace,
                                             kubeconfig=kubeconfig_text, return_state=True))
        print_tick_results(why, outcome.results())
        return bool(outcome.state.is_completed())

    def warm_up() -> None:
        """A follower's dry-run tick: it decides, changes nothing, claims nothing."""
        started = time.monotonic()
        autoscale(nodegroups=str(nodegroups), lease_namespace=lease_namespace,
                  kubeconfig=kubeconfig_text, dry_run=True, return_state=True)
        say(f"warmed up for a takeover by a dry run ({time.monotonic() - started:.1f}s)")

    console_logs_without_tracebacks()
    loop = TickLoop(tick, period, may_act=elector.may_act if elector is not None else None,
                    warm_up=warm_up)
    pages = HealthPages(lambda: loop.health, lambda: loop.ready(), liveness.limits, loop.clock,
                        elector)
    with kept_alive(liveness, pages, elector, stopping):
        run_cached_ticks(kube.api, kubeconfig_text, events, loop, stop, say,
                         CACHE_START_SECONDS)
    say("stopped")
    stopping.doing = "exiting: Prefect's clients flushing their logs and events"


def register(app: typer.Typer) -> None:
    """Add `watch` to the `elevator` app."""
    from kube_elevator.flows.cli.common import reports_input_errors

    app.command("watch")(reports_input_errors(with_liveness_options(leader_elect=True)(watch)))
