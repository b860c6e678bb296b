"""What `serve`, `watch`, `run --interval`, `pods run`, `load-watcher` and `scheduler-extender`
share to live for months: the health endpoint (`/health-check`, `/ready`, `/metrics`) and, for
the first three, leader election, with their options.

The endpoint answers from the ticker (`flows.ticker.TickLoop`: the last tick finished, the last
that succeeded, leading or not) and the elector (`flows.leader`), with the Cluster Autoscaler's
limits (`tasks.core.health`). `/metrics` is Escalator's metrics as this process has them
(`tasks.escalator.metrics.METRICS`, cumulative for its life) and the `elevator_*` process
metrics; the Pushgateway stays for one-shot runs.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

import typer

from kube_elevator.tasks.core.duration import positive_duration_option
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.health import (
    DEFAULT_MAX_FAILING_TIME,
    DEFAULT_MAX_INACTIVITY,
    HealthLimits,
    LoopHealth,
    health_answer,
    liveness_problems,
    not_ready_reason,
    process_metrics,
)
from kube_elevator.tasks.core.leader_election import ElectionTimes

if TYPE_CHECKING:
    from kube_elevator.flows.cli.stopping import StopDeadline
    from kube_elevator.flows.leader import LeaderElector

DEFAULT_HEALTH_ADDRESS = "127.0.0.1:8085"  # the Cluster Autoscaler's port; 127.0.0.1 by default
# The other long-lived commands' health ports: none collides with 8085 nor with the commands' own
# (`pods run --metrics-port` 8080, the load watcher's 2020, the extender's 8888), so all of them
# may run on one machine with their defaults.
PODS_HEALTH_ADDRESS = "127.0.0.1:8086"
WATCHER_HEALTH_ADDRESS = "127.0.0.1:8087"
EXTENDER_HEALTH_ADDRESS = "127.0.0.1:8088"
DEFAULT_LEADER_LEASE = "elevator-leader"
TEXT = "text/plain; charset=utf-8"
EXPOSITION = "text/plain; version=0.0.4; charset=utf-8"

@dataclass(frozen=True)
class Liveness:
    """The options, checked."""

    address: tuple[str, int] | None
    limits: HealthLimits
    leader_elect: bool
    lease_name: str
    times: ElectionTimes

    def warn_if_ticks_outlast(self, interval_seconds: float) -> None:
        """A warning line when a tick every `interval_seconds` cannot keep the liveness clock
        (`--max-inactivity`, counting finished ticks only) going: the probe would fail between
        two ticks, and a kubelet restart the process in a loop."""
        from kube_elevator.flows.cli.common import print_warning_lines

        inactivity = self.limits.max_inactivity_seconds
        if self.address is not None and inactivity <= interval_seconds:
            print_warning_lines([
                f"--max-inactivity {inactivity:g}s is not longer than --interval "
                f"{interval_seconds:g}s: /health-check will fail between two ticks; allow "
                f"more than the interval (the default, 10m, suits --interval up to a few "
                f"minutes)"])

    def check_lease_name(self, group_leases: Sequence[str]) -> None:
        """A node group's Lease (elevator-<group>) cannot be the election's too."""
        if self.leader_elect and self.lease_name in group_leases:
            raise InputError([f"--leader-elect-lease-name: {self.lease_name!r} is a node "
                              "group's Lease (elevator-<group>): choose another name"])


def _health_options(address: str, loop: str) -> list[tuple[str, Any, Any]]:
    """(parameter, annotation, default) of the health endpoint's options; `loop` names what
    the limits count (a tick, a cycle, a fetch)."""
    port = address.rpartition(":")[2]
    return [
        ("health_address", Annotated[str, typer.Option(
            help="Serve /health-check, /ready and /metrics here (HOST:PORT; port 0 picks a free "
                 f"port; \"\" turns it off). In a pod: 0.0.0.0:{port}.")], address),
        ("max_inactivity", Annotated[str, typer.Option(
            help=f"/health-check fails when no {loop} finished for this long (Go duration).")],
         DEFAULT_MAX_INACTIVITY),
        ("max_failing_time", Annotated[str, typer.Option(
            help=f"/health-check fails when no {loop} succeeded for this long (Go duration).")],
         DEFAULT_MAX_FAILING_TIME),
    ]


def _options(leader_elect: bool, leader_help: str) -> list[tuple[str, Any, Any]]:
    """(parameter, annotation, default) of each option, in `--help`'s order."""
    return [
        *_health_options(DEFAULT_HEALTH_ADDRESS, "tick"),
        ("leader_elect", Annotated[bool, typer.Option(help=leader_help)], leader_elect),
        ("leader_elect_lease_name", Annotated[str, typer.Option(
            help="Name of the leader-election Lease, in --lease-namespace.")],
         DEFAULT_LEADER_LEASE),
        ("leader_elect_lease_duration", Annotated[str, typer.Option(
            help="How long followers wait, from the last renewal they saw, to take over "
                 "(client-go's).")], "15s"),
        ("leader_elect_renew_deadline", Annotated[str, typer.Option(
            help="How long the leader tries to renew before it stops leading (client-go's).")],
         "10s"),
        ("leader_elect_retry_period", Annotated[str, typer.Option(
            help="Time between tries to acquire or renew the Lease (client-go's).")], "2s"),
    ]


LEADER_HELP = ("Elect one leader among the replicas on a Lease: it ticks; the others wait (serve "
               "and watch: their cache warm) and take over when its lease runs out.")
C = TypeVar("C", bound=Callable[..., Any])


def with_liveness_options(leader_elect: bool, leader_help: str = LEADER_HELP
                          ) -> Callable[[C], C]:
    """Give a command the health endpoint's and the election's options, checked: it receives
    them as `liveness` (a `Liveness`), and bad values exit 2 with every problem named."""
    return _with_options(_options(leader_elect, leader_help))


def with_health_options(address: str, loop: str) -> Callable[[C], C]:
    """The health endpoint's options alone (no election: `pods run`, the load services),
    `--health-address` defaulting to `address`; received as `liveness`, as above."""
    return _with_options(_health_options(address, loop))


def _with_options(options: list[tuple[str, Any, Any]]) -> Callable[[C], C]:
    def decorate(command: C) -> C:
        names = [name for name, _, _ in options]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = [kwargs.pop(name) for name in names]
            return command(*args, liveness=liveness_options(*values), **kwargs)

        # Evaluated: the signature given here is what typer reads, as it is.
        signature = inspect.signature(command, eval_str=True)
        kept = [p for p in signature.parameters.values() if p.name != "liveness"]
        wrapper.__signature__ = signature.replace(parameters=[  # type: ignore[attr-defined]
            *kept, *(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                       annotation=annotation)
                     for name, annotation, default in options)])
        wrapper.__annotations__ = {
            **{p.name: p.annotation for p in kept},
            **{name: annotation for name, annotation, _ in options},
            "return": signature.return_annotation}
        return cast(C, wrapper)

    return decorate


def liveness_options(health_address: str, max_inactivity: str, max_failing_time: str,
                     leader_elect: bool = False, lease_name: str = DEFAULT_LEADER_LEASE,
                     lease_duration: str = "15s", renew_deadline: str = "10s",
                     retry_period: str = "2s") -> Liveness:
    """The options as values; every problem an InputError line naming its option."""
    from kube_elevator.tasks.adapters.http_server import listen_address

    problems: list[str] = []

    def checked(read: Callable[[], Any]) -> Any:
        try:
            return read()
        except InputError as error:
            problems.extend(error.problems)
            return None

    address = checked(lambda: listen_address(health_address, "--health-address"))
    inactivity = checked(lambda: positive_duration_option(max_inactivity, "--max-inactivity"))
    failing = checked(lambda: positive_duration_option(max_failing_time, "--max-failing-time"))
    durations = [checked(functools.partial(positive_duration_option, text, option))
                 for text, option in ((lease_duration, "--leader-elect-lease-duration"),
                                      (renew_deadline, "--leader-elect-renew-deadline"),
                                      (retry_period, "--leader-elect-retry-period"))]
    times = ElectionTimes(*durations) if None not in durations else ElectionTimes()
    if None not in durations:
        problems += [f"--leader-elect-lease-duration/--leader-elect-renew-deadline/"
                     f"--leader-elect-retry-period: {problem}" for problem in times.problems()]
    if not lease_name:
        problems.append("--leader-elect-lease-name: must not be empty")
    if problems:
        raise InputError(problems)
    return Liveness(address, HealthLimits(inactivity, failing), leader_elect, lease_name, times)


class HealthPages:
    """`/health-check`, `/ready` and `/metrics` of one process, from what its loop recorded."""

    def __init__(self, health: Callable[[], LoopHealth], ready: Callable[[], bool],
                 limits: HealthLimits, clock: Callable[[], float],
                 elector: LeaderElector | None = None, role: str = "ticking", *,
                 loop: str = "tick",
                 not_ready: str | Callable[[], str] = (
                     "the watch cache has not listed the cluster yet"),
                 metrics: Callable[[], str] | None = None,
                 ticks_ready: bool = False) -> None:
        """`loop` names what the limits count in the problems (a tick, a cycle, a fetch);
        `not_ready` says (or tells when asked) why `/ready` answers 503; `metrics` is the
        exposition `/metrics` serves before the `elevator_*` metrics (default: Escalator's).
        `ticks_ready`: ready only once a tick of this process completed and while its health
        check passes (`serve`, issue 40: ready is not said while no tick can run)."""
        self.health = health
        self.ready = ready
        self.limits = limits
        self.clock = clock
        self.elector = elector
        self.role = role
        self.loop = loop
        self.not_ready = not_ready
        self.metrics_text = metrics
        self.ticks_ready = ticks_ready
        self._election_started = elector.clock() if elector is not None else 0.0

    def _verdict(self) -> tuple[str, list[str], bool]:
        """(role, problems, runs the ticks)."""
        state = self.health().state()
        problems = liveness_problems(state, self.clock(), self.limits, self.loop)
        if self.elector is None:
            return self.role, problems, True
        if self.elector.may_act():
            return "leading", problems, True
        status = self.elector.status()
        holder = status.holder if status.holder and status.holder != self.elector.identity \
            else "no leader yet"
        # A follower is healthy while it can see the Lease: one that cannot (the API is out of
        # reach, its credentials expired) could never take over, and a restart may mend it.
        since = status.observed_at if status.observed_at is not None else self._election_started
        blind = self.elector.clock() - since
        if blind > self.limits.max_failing_seconds:
            problems.append(f"the leader Lease {self.elector.lease.describe()} was not read for "
                            f"{blind:.0f}s (--max-failing-time "
                            f"{self.limits.max_failing_seconds:g}s)")
        return f"following {holder}", problems, False

    def health_check(self) -> tuple[int, str, str]:
        role, problems, _ = self._verdict()
        status, body = health_answer(role, problems)
        return status, TEXT, body

    def ready_page(self) -> tuple[int, str, str]:
        if not self.ready():
            reason = self.not_ready() if callable(self.not_ready) else self.not_ready
            return 503, TEXT, f"not ready: {reason}\n"
        if self.ticks_ready:
            _, problems, acting = self._verdict()
            why = not_ready_reason(self.health().state(), problems, self.loop) if acting \
                else None
            if why is not None:
                return 503, TEXT, f"not ready: {why}\n"
        return 200, TEXT, "ready\n"

    def metrics(self) -> tuple[int, str, str]:
        _, problems, acting = self._verdict()
        if self.metrics_text is None:
            from kube_elevator.tasks.escalator.metrics import METRICS

            text = METRICS.render()
        else:
            text = self.metrics_text()
        return 200, EXPOSITION, text + process_metrics(self.health().state(), acting,
                                                       not problems)


def elector_for(liveness: Liveness, api_client: Any, lease_namespace: str,
                say: Callable[[str], None]) -> LeaderElector | None:
    """The elector of `--leader-elect`, not yet running; None without it."""
    if not liveness.leader_elect:
        return None
    from kube_elevator.flows.leader import LeaderElector
    from kube_elevator.tasks.adapters.kube_leader import LeaderLease
    from kube_elevator.tasks.core.identity import process_identity

    return LeaderElector(LeaderLease(api_client, lease_namespace, liveness.lease_name),
                         process_identity(), liveness.times, say=say)


@contextlib.contextmanager
def kept_alive(liveness: Liveness, pages: HealthPages, elector: LeaderElector | None,
               stopping: StopDeadline | None = None) -> Iterator[str | None]:
    """The health endpoint served and the election run while the body runs; then the election
    stops and releases the Lease (after the ticks it guarded ended), and the endpoint stops.
    Yields the endpoint's URL (None when `--health-address ""` turned it off). `stopping`'s
    forced stop releases the Lease the same way, within its own timeout."""
    from kube_elevator.tasks.adapters.http_server import ServiceThread, pages_app

    service = None
    if liveness.address is not None:
        host, port = liveness.address
        service = ServiceThread(pages_app({"/health-check": pages.health_check,
                                           "/ready": pages.ready_page,
                                           "/metrics": pages.metrics}),
                                host, port, "health", lifespan="off",
                                bind_option="--health-address")
        service.start()
        print(f"health: {service.url}/health-check", flush=True)
    stop_election = threading.Event()
    election = None
    if elector is not None:
        election = threading.Thread(target=elector.run, args=(stop_election,),
                                    name="leader-election", daemon=True)
        election.start()
        if stopping is not None:
            stopping.release = lambda seconds: _released(elector, election, stop_election,
                                                         seconds)
    try:
        yield service.url if service is not None else None
    finally:
        stop_election.set()
        if election is not None:
            election.join(timeout=elector.times.renew_deadline_seconds + 5 if elector else 5)
        if service is not None:
            service.stop()
        sys.stdout.flush()


def _released(elector: LeaderElector, election: threading.Thread, stop: threading.Event,
              seconds: float) -> bool:
    """Stop the election, which releases the Lease as it ends; then release it from here, which
    does nothing when it is free already (True), and tries again when the election's release
    failed or has not ended in half of `seconds` (a renewal in flight). Within `seconds`."""
    stop.set()
    election.join(timeout=seconds / 2)
    return elector.release(seconds / 2)


def run_ticks_alive(tick: Callable[[], bool], period: float, liveness: Liveness,
                    elector: LeaderElector | None = None, *, loop_name: str = "tick",
                    ready_once_ticked: bool = False,
                    metrics: Callable[[], str] | None = None, command: str = "run") -> None:
    """`tick` every `period` seconds through the ticker (under leader election, while this
    process leads), with the health endpoint, until SIGTERM or SIGINT: `run --interval` and
    `pods run`. `tick` returns whether it succeeded; `/ready` answers 200 at once, or with
    `ready_once_ticked` once the first tick finished. The stop has a deadline
    (`stopping.stop_signals`), its lines said as `command`."""
    from kube_elevator.flows.cli.common import console_logs_without_tracebacks, errors
    from kube_elevator.flows.cli.stopping import stop_signals
    from kube_elevator.flows.prefect_compat import one_client_for_runs
    from kube_elevator.flows.ticker import TickLoop, run_ticks

    stop, stopping = stop_signals(command)
    console_logs_without_tracebacks()
    ticker = TickLoop(lambda _why: tick(), period,
                      may_act=elector.may_act if elector is not None else None)
    pages = HealthPages(lambda: ticker.health, lambda: ticker.ticks > 0 or not ready_once_ticked,
                        liveness.limits, ticker.clock, elector, loop=loop_name,
                        not_ready=f"no {loop_name} has finished yet", metrics=metrics)
    def ticking() -> None:
        with one_client_for_runs():
            run_ticks(ticker, stop)

    with kept_alive(liveness, pages, elector, stopping):
        _in_a_thread(ticking, f"{loop_name}s")
    # As `serve: stopped` (issue 42), on stderr: stdout stays the JSON lines of `--output json`.
    errors.print(f"{command}: stopped", highlight=False)
    stopping.doing = "exiting: Prefect's clients flushing their logs and events"


def _in_a_thread(target: Callable[[], None], name: str) -> None:
    """`target` in a thread of its own, this (main) thread waiting for it; what it raised is
    raised here.

    Signal handlers run in the main thread, and a flow run started in the main thread swaps
    SIGTERM for Prefect's own handler, which crashes the run and reports that to the Prefect
    server before the command hears of the signal: with a server that does not answer, the
    command would never stop. From another thread the flow engine leaves SIGTERM alone, as in
    `watch` and `serve`: the signal stops the loop, the tick in flight finishes within the
    stop's deadline (`stopping.StopDeadline`).
    """
    import contextvars

    raised: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as error:  # raised in the main thread below
            raised.append(error)

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(run,), name=name, daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.5)  # in slices: the signal handlers run between them
    if raised:
        raise raised[0]
