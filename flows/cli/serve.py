"""`elevator serve`: the `autoscale` and `plan` deployments served from one process.

For users without a work pool: the same two deployments as `deployments/prefect.yaml` (the
scheduled tick, concurrency 1 cancelling the new run; and the manual dry run), made with
`flow.to_deployment`, with our own SIGTERM handling: one SIGTERM stops it cleanly, no new run
starts after it, the run in flight finishes (or is cancelled after a grace period), and the
exit code is 0. The stop has a deadline (`flows.cli.stopping`): the grace and
`SHUTDOWN_SECONDS`; past it, or at a second signal, a stop that hangs on a Prefect server
that does not answer releases the Lease and exits 1.

- `--ticks in-process` (the default): this process keeps a watch cache of the cluster and runs
  the `autoscale` deployment's runs itself (`flows.deployment_runs`): when scheduled, when
  started from the UI, and at once on a burst of pending pods. A tick reads memory, not a list
  of every pod. `plan` runs are Prefect `Runner` subprocesses, which list.
- `--ticks runs`: every run a Runner subprocess, as `prefect.serve` does, and `autoscale`
  triggered by `elevator watch --ticks events`' pending-pods event.

Also the `prefect.yaml` pull step `set_project_directory`, so no path of the deploying machine
ends up in the deployments.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast
from uuid import UUID

import typer

from kube_elevator.flows.cli.common import console_logs_without_tracebacks, say_as
from kube_elevator.flows.cli.liveness import (
    HealthPages,
    Liveness,
    elector_for,
    kept_alive,
    with_liveness_options,
)
from kube_elevator.flows.cli.stopping import STOP_GRACE_SECONDS
from kube_elevator.tasks.core.duration import positive_duration_option
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.health import LoopHealth
from kube_elevator.tasks.core.lease_state import DEFAULT_LEASE_NAMESPACE
from kube_elevator.tasks.escalator.pending_bursts import PENDING_EVENT, RESOURCE_PREFIX

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.deployments.runner import RunnerDeployment
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger
    from prefect.runner import Runner

    from kube_elevator.flows.cli.serve_runs import RunCare, SubmissionGuard
    from kube_elevator.flows.cli.stopping import StopDeadline
    from kube_elevator.flows.deployment_runs import DeploymentRuns
    from kube_elevator.flows.leader import LeaderElector
    from kube_elevator.flows.run_state import RunOutcome
    from kube_elevator.flows.ticker import CacheFeed
    from kube_elevator.tasks.adapters.kube import KubeClient
    from kube_elevator.tasks.core.process_owner import ProcessMark
    from kube_elevator.tasks.escalator.config import NodeGroupConfig

log = logging.getLogger(__name__)

AUTOSCALE_DEPLOYMENT = "autoscale"
PLAN_DEPLOYMENT = "plan"
DEFAULT_INTERVAL = "60s"
# How often the served process asks for runs to start; an event-triggered run waits for it.
DEFAULT_POLL = "2s"
# How often serve looks for abandoned runs (and, with --ticks runs, for runs that ended).
CARE_SECONDS = 5.0
SERVE_LEADER_HELP = ("in-process: elect one leader among the replicas on a Lease; it runs the "
                     "ticks, the others keep their cache warm and take over when its lease runs "
                     "out. (With --ticks runs the Prefect server gives each run to one process.)")


def set_project_directory() -> dict[str, str]:
    """`prefect.yaml` pull step: the entrypoints are module paths (`kube_elevator.flows...`), so a
    worker loads them from wherever kube-elevator is installed, in any directory.

    Without a pull step of its own, `prefect deploy` would add one that changes into the
    deploying machine's working directory, which a worker does not have.
    """
    return {"directory": os.getcwd()}


def tick_concurrency() -> ConcurrencyLimitConfig:
    """One tick at a time; a tick due while one runs is cancelled, never queued behind it."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

    return ConcurrencyLimitConfig(limit=1,
                                  collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW)


def pending_pods_trigger() -> DeploymentEventTrigger:
    """Run the tick when `elevator watch` reports pending pods in any node group."""
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    return DeploymentEventTrigger(
        name="autoscale on pending pods",
        description="elevator watch saw pods of a node group pending: tick now.",
        expect={PENDING_EVENT},
        match={"prefect.resource.id": f"{RESOURCE_PREFIX}*"},
    )


class ServeMode(StrEnum):
    in_process = "in-process"
    runs = "runs"


def served_deployments(nodegroups: Path, interval_seconds: float,
                       kubeconfig: Path | None = None,
                       lease_namespace: str = DEFAULT_LEASE_NAMESPACE,
                       pushgateway: str | None = None,
                       triggered: bool = True) -> list[RunnerDeployment]:
    """`autoscale` (scheduled, concurrency 1, and `triggered` by the pending-pods event) and
    `plan` (manual, dry run)."""
    from prefect.deployments.runner import RunnerDeployment

    from kube_elevator.flows.autoscale import autoscale

    parameters: dict[str, Any] = {
        "nodegroups": str(nodegroups.resolve()),
        "lease_namespace": lease_namespace,
        "kubeconfig": str(kubeconfig.resolve()) if kubeconfig else None,
        "pushgateway": pushgateway,
    }
    # `to_deployment` is async-dispatched: called from sync code it returns the deployment.
    scheduled = autoscale.to_deployment(
        AUTOSCALE_DEPLOYMENT, interval=timedelta(seconds=interval_seconds),
        parameters={**parameters, "dry_run": False},
        concurrency_limit=tick_concurrency(),
        triggers=[pending_pods_trigger()] if triggered else [],
        description="One Escalator tick for every node group, on a schedule and when "
                    "elevator watch reports pending pods.",
        tags=["kube-elevator"])
    manual = autoscale.to_deployment(
        PLAN_DEPLOYMENT, parameters={**parameters, "dry_run": True},
        description="What one tick would do now, changing nothing: for manual runs.",
        tags=["kube-elevator"])
    assert isinstance(scheduled, RunnerDeployment) and isinstance(manual, RunnerDeployment)
    return [scheduled, manual]


def serve(
    nodegroups: Annotated[Path, typer.Option(help="Escalator node-group file.")],
    interval: Annotated[str, typer.Option(
        help="Time between scheduled ticks (Go duration).")] = DEFAULT_INTERVAL,
    kubeconfig: Annotated[Path | None, typer.Option(
        help="kubeconfig file (default: in-cluster config, else ~/.kube/config).")] = None,
    lease_namespace: Annotated[str, typer.Option(
        help="Namespace of the elevator-<group> Leases.")] = DEFAULT_LEASE_NAMESPACE,
    pushgateway: Annotated[str | None, typer.Option(
        help="Prometheus Pushgateway URL each tick pushes its metrics to.")] = None,
    poll: Annotated[str, typer.Option(
        help="How often to ask the Prefect server for runs to start (Go duration).")] =
        DEFAULT_POLL,
    ticks: Annotated[ServeMode, typer.Option(
        help="in-process: keep a watch cache here and run the autoscale deployment's runs in "
             "this process (scheduled, from the UI, and on a burst of pending pods); runs: "
             "every run a process of its own, triggered by elevator watch --ticks events.")] =
        ServeMode.in_process,
    stop_grace: Annotated[str, typer.Option(
        help="After SIGTERM or Ctrl-C, how long the run in flight may finish before it is "
             "cancelled (Go duration). The stop's deadline is 5 s later: past it, or at a "
             "second signal, serve releases the Lease and exits 1 without waiting for a "
             "Prefect server that does not answer. Keep it 10 s under the pod's "
             "terminationGracePeriodSeconds.")] = f"{STOP_GRACE_SECONDS:g}s",
    *, liveness: Liveness,
) -> None:
    """Serve the autoscale and plan deployments from this process (no work pool needed)."""
    from kube_elevator.tasks.core.documents import names_a_file
    from kube_elevator.tasks.core.lease_state import lease_name
    from kube_elevator.tasks.node_group_file import load_node_groups

    config = load_node_groups(nodegroups)  # bad input fails here, before anything is registered
    liveness.check_lease_name([lease_name(group.name) for group in config.node_groups])
    period = positive_duration_option(interval, "--interval")
    poll_seconds = positive_duration_option(poll, "--poll")
    grace_seconds = positive_duration_option(stop_grace, "--stop-grace")
    if ticks is ServeMode.in_process:  # --ticks runs: its check allows the interval itself
        liveness.warn_if_ticks_outlast(period)
    if kubeconfig is not None and not names_a_file(kubeconfig):
        raise InputError([f"--kubeconfig: {kubeconfig}: no such file"])
    if pushgateway is not None:
        from kube_elevator.flows.cli.services import http_url

        pushgateway = http_url(pushgateway, "--pushgateway")
    from kube_elevator.flows.crash_detection import heartbeat_environment, quiet_run_consoles

    heartbeat_environment()  # before Prefect reads its settings: the runs it starts inherit it
    quiet_run_consoles()
    in_process = ticks is ServeMode.in_process
    feed = None
    if in_process:
        from kube_elevator.flows.ticker import start_cache

        kube = _kube_client(kubeconfig)  # an unreadable kubeconfig fails before registering
        # Listing the cluster while the Prefect server starts, the deployments register and
        # abandoned runs end: the first tick (after a restart, too) does not wait for it.
        feed = start_cache(kube.api, str(kubeconfig) if kubeconfig else None)
    from kube_elevator.tasks.adapters.prefect_server import use_local_server

    # Without PREFECT_API_URL: a server of its own that runs Prefect's scheduler, its URL in
    # PREFECT_API_URL, which the runs' subprocesses (`--ticks runs`) inherit.
    use_local_server("own", schedules=True)
    from prefect.runner import Runner

    from kube_elevator.flows.cli.common import console
    from kube_elevator.flows.crash_detection import ensure_crash_detection

    ensure_crash_detection()  # a tick whose process dies ends Crashed, its slot freed
    from kube_elevator.tasks.adapters.blocks import register_block_types

    register_block_types()  # the UI's Blocks page offers the cluster and credentials blocks
    from kube_elevator.flows.cli.serve_runs import SubmissionGuard

    guard = SubmissionGuard(say_as("serve"))  # no run starts once stopping (issue 40)
    # Its deployments are paused as the stop begins, beside the grace (`run_until_signal`),
    # not one by one after it, within the deadline.
    runner = cast(Runner, guard.runner(name="kube-elevator", query_seconds=poll_seconds,
                                       limit=None, pause_on_shutdown=False))
    served = LoopHealth(time.monotonic())  # --ticks runs: the runs the server saw end
    scheduled, manual = served_deployments(nodegroups, period, kubeconfig, lease_namespace,
                                           pushgateway, triggered=not in_process)
    here = None
    elector = None
    if in_process:
        deployment_id = scheduled.apply()  # registered, its schedule on; runs go on here
        assert isinstance(deployment_id, UUID)  # `apply` is async-dispatched: sync here
        elector = elector_for(liveness, kube.api, lease_namespace, say_as("serve"))
        here = InProcessTicks(deployment_id, config.node_groups, kube, kubeconfig,
                              poll_seconds, elector, feed)
        loop = here.loop
        pages = HealthPages(lambda: loop.health, lambda: loop.ready(), liveness.limits,
                            loop.clock, elector, ticks_ready=True)
    else:
        # The runs the server saw end (`flows.served_ticks`), on a clock an interval behind:
        # the check fails once a tick was due (an interval after the last) and none ended
        # within --max-inactivity, and an --interval 1h fed by events is not failed at 10m.
        pages = HealthPages(lambda: served, lambda: True, liveness.limits,
                            lambda: time.monotonic() - period, role="serving",
                            ticks_ready=True)
    deployment_ids = [runner.add_deployment(manual)]
    if here is not None:
        deployment_ids.append(here.deployment_id)
    else:
        deployment_ids.append(runner.add_deployment(scheduled))
    assert all(isinstance(id_, UUID) for id_ in deployment_ids)  # async-dispatched: sync here
    runner_deployment_ids = cast(list[UUID], deployment_ids[:1] if here else deployment_ids)
    care = _run_care(cast(list[UUID], deployment_ids), None if in_process else served,
                     period)
    care.sweep()  # before the first tick: a run a stopped serve left holds no slot
    from kube_elevator.flows.cli.stopping import SHUTDOWN_SECONDS, StopDeadline, prefect_api_url

    stopping = StopDeadline("serve", grace_seconds + SHUTDOWN_SECONDS, prefect_api_url(),
                            say_as("serve"))
    # From "serving" on, a signal is the stop's: one that comes before the Runner runs is
    # kept, and acted on as it starts (`run_until_signal`).
    stopping.install(lambda: None)
    console.print(f"serving autoscale/{scheduled.name}"
                  + (" in this process" if in_process else "") + f", autoscale/{manual.name}",
                  highlight=False)
    sys.stdout.flush()
    console_logs_without_tracebacks()  # Prefect's handlers exist now: no traceback on stderr
    from kube_elevator.flows.cli.stopping import RunsShieldedFromCtrlC

    # The runs' processes the Runner starts ignore a Ctrl-C to the group: serve ends them.
    with kept_alive(liveness, pages, elector, stopping), \
            asyncio.Runner(loop_factory=RunsShieldedFromCtrlC) as loop_runner:
        loop_runner.run(run_until_signal(runner, grace_seconds, in_process=here,
                                         stopping=stopping, care=care,
                                         care_seconds=max(poll_seconds, CARE_SECONDS),
                                         mark_seconds=poll_seconds, guard=guard,
                                         paused=runner_deployment_ids))
    console.print("serve: stopped", highlight=False)
    stopping.doing = "exiting: Prefect's clients flushing their logs and events"


def tell_outcome(why: str, outcome: RunOutcome, say: Callable[[str], None]) -> None:
    """A tick's results a line per group; a tick that stopped (bad input, a crash, a cancel),
    one line, `tick failed: <reason>` (issue 42): its traceback is in the flow run's logs on
    the Prefect server, not on the console."""
    from kube_elevator.flows.cli.common import describe_failure, print_tick_results

    try:
        results = outcome.results()
    except BaseException as stopped:
        ended = (outcome.state.name or outcome.state.type.value).lower()
        say(f"tick {ended}: {describe_failure(stopped)} ({why})")
    else:
        print_tick_results(why, results)


class InProcessTicks:
    """The `autoscale` deployment's runs, run in a thread of this process from a watch cache."""

    def __init__(self, deployment_id: UUID, node_groups: Sequence[NodeGroupConfig],
                 kube: KubeClient, kubeconfig: Path | None, poll_seconds: float,
                 elector: LeaderElector | None = None, feed: CacheFeed | None = None) -> None:
        """`feed`: the watch cache, started already (`flows.ticker.start_cache`)."""
        from kube_elevator.flows.cli.watch import IN_PROCESS_SETTLE_SECONDS
        from kube_elevator.flows.ticker import TickLoop
        from kube_elevator.tasks.escalator.pending_bursts import (
            DEFAULT_DEBOUNCE_SECONDS,
            Debouncer,
            PendingPodsEvents,
        )

        self.deployment_id = deployment_id
        self.kube = kube
        self.kubeconfig = kubeconfig
        self.poll_seconds = poll_seconds
        self.events = PendingPodsEvents(node_groups, Debouncer(DEFAULT_DEBOUNCE_SECONDS,
                                                               IN_PROCESS_SETTLE_SECONDS))
        self.stop = threading.Event()
        self.error: Exception | None = None
        self.elector = elector
        self.runs: DeploymentRuns | None = None
        self.feed = feed
        self.loop = TickLoop(self._tick, poll_seconds,
                             may_act=elector.may_act if elector is not None else None,
                             warm_up=self._warm_up)
        self.thread = threading.Thread(target=self._run, name="in-process-ticks", daemon=True)

    def _tick(self, why: str) -> bool | None:
        """Every --poll the runs whose time has come; on a burst (or on taking the lead, with
        the schedule resumed) a run of its own, due now, run at once. True when every run ran
        ended Completed, None when none ran (a look that found nothing due, runs the
        concurrency limit cancelled, runs that crashed): no tick, and the health check's clock
        does not move for it (`flows.ticker.TickLoop`, `flows.served_ticks`)."""
        from kube_elevator.flows.cli.common import say_as
        from kube_elevator.flows.deployment_runs import BURST_TAG, LEADING_TAG
        from kube_elevator.flows.served_ticks import tick_outcome

        runs = self.runs
        assert runs is not None
        outcomes: list[RunOutcome]
        if why == "schedule":
            outcomes = runs.run_due()
        else:
            if why == "leading":
                runs.resume()
            outcome = runs.execute(runs.start_now(
                why, LEADING_TAG if why == "leading" else BURST_TAG))
            outcomes = [] if outcome is None else [outcome]
        for outcome in outcomes:
            tell_outcome(why, outcome, say_as("serve"))
        return tick_outcome(outcome.state.type.value for outcome in outcomes)

    def _warm_up(self) -> None:
        """A follower's dry run of the flow (not of the deployment: it claims no run and
        changes nothing), so its takeover run is not this process's first."""
        from prefect.flow_engine import run_flow

        from kube_elevator.flows.autoscale import autoscale
        from kube_elevator.flows.cli.common import say_as
        from kube_elevator.tasks.core.process_owner import mark_of

        assert self.runs is not None
        client = self.runs.client
        dry = {**client.read_deployment(self.deployment_id).parameters, "dry_run": True,
               "pushgateway": None}
        started = time.monotonic()
        # Made and marked as this process's before it runs: a serve killed during it leaves
        # a run the next serve's sweep ends (`flows.abandoned_runs.why_stray`), not one
        # Running in the UI for good.
        run = client.create_flow_run(autoscale, parameters=dry)
        client.update_flow_run(run.id, infrastructure_pid=str(mark_of()))
        run_flow(autoscale, flow_run=client.read_flow_run(run.id),
                 parameters=dry, return_type="state")
        say_as("serve")(f"warmed up for a takeover by a dry run "
                        f"({time.monotonic() - started:.1f}s)")

    def _run(self) -> None:
        from prefect.client.orchestration import get_client

        from kube_elevator.flows.autoscale import autoscale
        from kube_elevator.flows.cli.watch import CACHE_START_SECONDS
        from kube_elevator.flows.deployment_runs import DeploymentRuns
        from kube_elevator.flows.ticker import run_cached_ticks

        say = say_as("serve")
        console_logs_without_tracebacks()  # a failed tick: `serve: tick failed: ...`, no traceback
        try:
            with get_client(sync_client=True) as client:
                self.runs = DeploymentRuns(autoscale, self.deployment_id, client)
                run_cached_ticks(self.kube.api, str(self.kubeconfig) if self.kubeconfig
                                 else None, self.events, self.loop, self.stop, say,
                                 CACHE_START_SECONDS, self.feed)
        except Exception as error:  # reported; serve then stops with exit code 1
            self.error = error
            say(f"the ticks stopped: {type(error).__name__}: {error}")


async def run_until_signal(runner: Runner, grace_seconds: float = STOP_GRACE_SECONDS,
                           in_process: InProcessTicks | None = None,
                           stopping: StopDeadline | None = None, care: RunCare | None = None,
                           care_seconds: float = 2.0, mark_seconds: float | None = None,
                           guard: SubmissionGuard | None = None,
                           paused: Collection[UUID] = ()) -> None:
    """Run `runner` until SIGTERM or SIGINT, then stop it gently.

    Prefect's own SIGTERM handler calls `sys.exit` inside the runner's event loop (3.8.8): the
    exit code is 0 but the run in flight is left Running. Instead: stop polling (no new run
    starts), give the run in flight `grace_seconds` to finish, cancel it if it has not (it
    ends Cancelled), and let the runner shut down, for what the deadline leaves of its time
    (`serve_runs.runner_ended`). `stopping` takes SIGTERM and SIGINT, installed in the Runner
    as its own SIGTERM handler: its deadline bounds all of that. The signal
    itself stops the Runner submitting (`guard`, installed as the Runner started:
    `serve_runs.SubmissionGuard`): a run it had fetched but not yet claimed stays Scheduled
    for the next serve, one claimed meanwhile ends Cancelled, unstarted. A run whose process
    started but whose flow has not begun (Pending: the process importing) is not waited for:
    Cancelled and killed at once (`serve_runs.end_not_begun`). `care` looks after the served
    runs every `care_seconds` until the signal, and marks the Runner's new runs every
    `mark_seconds` (`flows.cli.serve_runs`). `paused`: the deployments whose schedules stop
    at the signal (a Runner made with `pause_on_shutdown=False`: its own, which it would pause
    one by one after the grace, each a round trip the deadline must hold; under load 9 that
    outlasted it), with the in-process deployment while this process acts on it.
    """
    from kube_elevator.flows.cli.common import say_as
    from kube_elevator.flows.cli.serve_runs import (
        SubmissionGuard,
        kill_runs,
        pause_schedules,
        runner_ended,
    )
    from kube_elevator.flows.cli.stopping import EXIT_SECONDS, SHUTDOWN_SECONDS, StopDeadline

    loop = asyncio.get_running_loop()
    if stopping is None:
        stopping = StopDeadline("serve", grace_seconds + SHUTDOWN_SECONDS, None, say_as("serve"))
    if guard is None:  # a Runner not made by `SubmissionGuard.runner`: guarded at the signal
        guard = SubmissionGuard(say_as("serve"))
    signalled = asyncio.Event()

    def on_signal() -> None:
        assert guard is not None
        _refuse_new_runs(runner, guard)  # at once, in the handler: not when the loop gets to it
        _call_soon(loop, signalled.set)

    stopping.install(on_signal)
    # Runner.start installs Prefect's SIGTERM handler, `runner.handle_sigterm` (3.8.6-3.9.1),
    # which would exit at once or stop the Runner its own way: it installs ours instead, and
    # ours is installed again once it has started, for a release that installs its own.
    runner.handle_sigterm = stopping.handler  # type: ignore[method-assign,assignment]
    started = asyncio.ensure_future(runner.start())
    await asyncio.sleep(0)
    stopping.install(on_signal)
    # A forced stop (a server that does not answer) leaves no run's process behind: killed,
    # its run ends Crashed at the next serve's look (`flows.abandoned_runs`).
    stopping.on_force.append(lambda: kill_runs(runner))
    waiting = {started, asyncio.ensure_future(signalled.wait())}
    if care is not None:
        from kube_elevator.flows.cli.serve_runs import runner_owned

        def owned() -> dict[UUID, ProcessMark]:
            mine = runner_owned(runner)
            if in_process is not None and in_process.runs is not None:
                mine.update(in_process.runs.owned())  # a claim whose mark has not landed
            return mine

        waiting.add(asyncio.ensure_future(care.every(care_seconds, owned,
                                                     mark_seconds=mark_seconds)))
    if in_process is not None:
        in_process.thread.start()
        waiting.add(asyncio.ensure_future(_ended(in_process.thread)))
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    for other in waiting - {started}:
        other.cancel()
    # The schedules stop now, beside the grace: the run in flight needs none.
    schedules = list(paused)
    if in_process is not None and in_process.loop.acting:  # a follower leaves it to the leader
        schedules.append(in_process.deployment_id)
    pausing = asyncio.ensure_future(asyncio.to_thread(pause_schedules, schedules))
    if started.done():
        await pausing
        await started  # the runner ended by itself: raise what it raised
        return
    _refuse_new_runs(runner, guard)
    deadline = loop.time() + grace_seconds
    stopping.doing = "waiting for the run in flight"
    if in_process is not None:
        in_process.stop.set()  # no new tick; the one in flight finishes
        while in_process.thread.is_alive() and loop.time() < deadline:
            await asyncio.sleep(0.1)
    processes = getattr(runner, "_process_manager", None)
    if processes is not None:
        from kube_elevator.flows.cli.serve_runs import end_not_begun

        await end_not_begun(runner, processes, deadline, stopping)
    if processes is not None and processes.flow_run_ids():
        stopping.doing = "ending the runs still in flight"
        from kube_elevator.flows.cli.serve_runs import cancel_runs, end_processes

        # Cancelled, saying why, before their processes are killed (`end_processes`).
        cancelled = await asyncio.to_thread(
            cancel_runs, list(processes.flow_run_ids()),
            f"serve stopped: the run did not finish within the stop's grace (--stop-grace "
            f"{grace_seconds:g}s)")
        await end_processes(processes, cancelled=cancelled)
    if not pausing.done():
        stopping.doing = "pausing the schedules"
        await pausing
    stopping.doing = "stopping Prefect's Runner"
    if runner.started:
        await runner.astop()  # cancels what still runs: nothing by now
    else:
        # The signal came while the Runner set itself up (`Runner.__aenter__`, 3.8.6-3.9.1),
        # and the pause ended before it: its astop() refuses a Runner not started ("Runner has
        # not yet started": a traceback, exit 1). It has claimed nothing (the guard stopped its
        # poller before it polled): its start is cancelled.
        started.cancel()
    await runner_ended(started, stopping.left() - EXIT_SECONDS, say_as("serve"))
    if in_process is not None and in_process.error is not None and not signalled.is_set():
        raise SystemExit(1)  # the ticks stopped by themselves (said why): exit non-zero


def _kube_client(kubeconfig: Path | None) -> KubeClient:
    from kube_elevator.tasks.adapters.kube import KubeClient

    try:
        return KubeClient.from_config(kubeconfig)
    except Exception as error:  # the client raises ConfigException, OSError, YAML errors
        raise InputError([f"--kubeconfig: {kubeconfig}: {error}"]) from None


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """`callback` in `loop`, from a signal handler; nothing once the loop has closed (the
    runner ended by itself, and serve is on its way out)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)


def _refuse_new_runs(runner: Runner, guard: SubmissionGuard) -> None:
    """No run submitted from now on: the poller stops polling, a run it fetched already is
    not claimed, one whose claim is in flight is not started (`serve_runs.SubmissionGuard`;
    Prefect 3.8 and 3.9's Runner). Safe from a signal handler: attribute assignments."""
    guard.stop(runner)
    guard.install(runner)  # guarded already as it started; this for a Runner made otherwise


def _run_care(deployment_ids: list[UUID], served: LoopHealth | None,
              interval_seconds: float) -> RunCare:
    """The care of the served runs; the `autoscale` deployment's (the last id) left Scheduled
    over an interval late ended; with `served`, the health check of `--ticks runs` counts
    the runs of `autoscale` the server saw end."""
    from kube_elevator.flows.abandoned_runs import LATE_SLACK
    from kube_elevator.flows.cli.common import say_as
    from kube_elevator.flows.cli.serve_runs import RunCare
    from kube_elevator.flows.served_ticks import ServedTicks

    ticks = None
    if served is not None:
        from datetime import UTC, datetime

        ticks = ServedTicks(served, deployment_ids[-1], datetime.now(UTC), time.monotonic)
    from kube_elevator.flows.autoscale import autoscale

    return RunCare(deployment_ids, say_as("serve"), ticks, late=deployment_ids[-1:],
                   late_after=timedelta(seconds=interval_seconds) + LATE_SLACK,
                   stray_flows=[autoscale.name])


async def _ended(thread: threading.Thread) -> None:
    while thread.is_alive():
        await asyncio.sleep(0.2)


def register(app: typer.Typer) -> None:
    """Add `serve` to the `elevator` app."""
    from kube_elevator.flows.cli.common import reports_input_errors

    app.command("serve")(reports_input_errors(with_liveness_options(
        leader_elect=True, leader_help=SERVE_LEADER_HELP)(serve)))
