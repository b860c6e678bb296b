"""What `serve`, `watch` and `run --interval` share to live for months: the health endpoint
(`/health-check`, `/ready`, `/metrics`) and leader election, with their options.

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
    process_metrics,
)
from kube_elevator.tasks.core.leader_election import ElectionTimes

if TYPE_CHECKING:
    from kube_elevator.flows.leader import LeaderElector

DEFAULT_HEALTH_ADDRESS = "127.0.0.1:8085"  # the Cluster Autoscaler's port; 127.0.0.1 by default
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

    def check_lease_name(self, group_leases: Sequence[str]) -> None:
        """A node group's Lease (elevator-<group>) cannot be the election's too."""
        if self.leader_elect and self.lease_name in group_leases:
            raise InputError([f"--leader-elect-lease-name: {self.lease_name!r} is a node "
                              "group's Lease (elevator-<group>): choose another name"])


def _options(leader_elect: bool, leader_help: str) -> list[tuple[str, Any, Any]]:
    """(parameter, annotation, default) of each option, in `--help`'s order."""
    return [
        ("health_address", Annotated[str, typer.Option(
            help="Serve /health-check, /ready and /metrics here (HOST:PORT; port 0 picks a free "
                 "port; \"\" turns it off). In a pod: 0.0.0.0:8085.")], DEFAULT_HEALTH_ADDRESS),
        ("max_inactivity", Annotated[str, typer.Option(
            help="/health-check fails when no tick finished for this long (Go duration).")],
         DEFAULT_MAX_INACTIVITY),
        ("max_failing_time", Annotated[str, typer.Option(
            help="/health-check fails when no tick succeeded for this long (Go duration).")],
         DEFAULT_MAX_FAILING_TIME),
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

    def decorate(command: C) -> C:
        options = _options(leader_elect, leader_help)
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
                     leader_elect: bool, lease_name: str, lease_duration: str,
                     renew_deadline: str, retry_period: str) -> Liveness:
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
                 elector: LeaderElector | None = None, role: str = "ticking") -> None:
        self.health = health
        self.ready = ready
        self.limits = limits
        self.clock = clock
        self.elector = elector
        self.role = role
        self._election_started = elector.clock() if elector is not None else 0.0

    def _verdict(self) -> tuple[str, list[str], bool]:
        """(role, problems, runs the ticks)."""
        state = self.health().state()
        problems = liveness_problems(state, self.clock(), self.limits)
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
        if self.ready():
            return 200, TEXT, "ready\n"
        return 503, TEXT, "not ready: the watch cache has not listed the cluster yet\n"

    def metrics(self) -> tuple[int, str, str]:
        from kube_elevator.tasks.escalator.metrics import METRICS

        _, problems, acting = self._verdict()
        return 200, EXPOSITION, METRICS.render() + process_metrics(
            self.health().state(), acting, not problems)


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
               ) -> Iterator[None]:
    """The health endpoint served and the election run while the body runs; then the election
    stops and releases the Lease (after the ticks it guarded ended), and the endpoint stops."""
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
    try:
        yield
    finally:
        stop_election.set()
        if election is not None:
            election.join(timeout=elector.times.renew_deadline_seconds + 5 if elector else 5)
        if service is not None:
            service.stop()
        sys.stdout.flush()
