"""Running a scenario: the simulated world advances step by step and the real tick runs on it.

The tick is `flows/autoscale.py`'s, over HTTP through the real adapters; by default its steps are
called without Prefect for speed, and with `prefect=True` each tick is a real flow run. The fast
mode (`mode="memory"`) runs the same tick on the in-memory world of `fakes.memory_world`.
"""

from __future__ import annotations

import asyncio
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import yaml

from kube_elevator.fakes.cluster import PodLife, SimulatedCluster, Termination, simulated_scheduler
from kube_elevator.fakes.scenario import AsgSpec, LoadedScenario, TracePod, Wave
from kube_elevator.tasks.core.errors import InputError, join_location
from kube_elevator.tasks.core.records import NodeRecord, PodRecord
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.filter_nodes import classify_nodes, pods_by_group
from kube_elevator.tasks.steps.node_groups import Adapters

if TYPE_CHECKING:  # the HTTP world's parts, imported where it starts: not `--fast` (issue 40)
    from kube_elevator.fakes.aws import FakeAws
    from kube_elevator.fakes.kube_api.server import FakeKubeApi
    from kube_elevator.fakes.load import SimulatedMetricsProvider

Observer = Callable[[dict[str, Any]], None]


@dataclass
class SimulationResult:
    """What `simulate` returns: a record per tick, the summary `elevator simulate` prints,
    and each node terminated.

    Example:
        ```python
        result = ke.simulate(ke.load_scenario("deployments/examples/scenario.yaml"), mode="memory")
        print(len(result.ticks), result.summary["max_pending_seconds"])
        ```
    """

    ticks: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    terminations: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"ticks": self.ticks, "summary": self.summary}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _arrival_schedule(loaded: LoadedScenario) -> list[tuple[float, str, Wave | TracePod,
                                                            dict[str, str]]]:
    """Every pod arrival (offset seconds, name, spec, node selector), in time order."""
    groups = {group.name: group for group in loaded.config.node_groups}
    arrivals: list[tuple[float, str, Wave | TracePod, dict[str, str]]] = []
    # Waves of one name (a trace's rows of one shape) number their pods on from the last.
    named: dict[str, int] = {}
    for index, item in enumerate(loaded.arrivals):
        if isinstance(item, Wave):
            prefix = item.name or f"wave{index}"
            first = named.get(prefix, 0)
            named[prefix] = first + item.count
            arrivals += [(item.at, f"{prefix}-{number:04d}", item, dict(item.node_selector))
                         for number in range(first, first + item.count)]
        else:
            group = groups[item.node_group]
            arrivals.append((item.arrival_s, f"trace-{index:06d}", item,
                             {group.label_key: group.label_value}))
    arrivals.sort(key=lambda arrival: (arrival[0], arrival[1]))
    return arrivals


Mode = Literal["http", "memory"]


class _Driver(Protocol):
    """One simulated world, as the simulation loop drives and reads it."""

    @property
    def pods(self) -> dict[tuple[str, str], PodLife]: ...

    @property
    def terminations(self) -> list[Termination]: ...

    @property
    def evictions(self) -> int: ...

    def arrive(self, name: str, arrival: Wave | TracePod, node_selector: Mapping[str, str],
               now: float) -> None: ...

    def advance(self, now: float) -> None: ...

    def reconcile_instances(self, now: float) -> None: ...

    def run_tick(self, now: float) -> list[dict[str, Any]]: ...

    def tick_record(self, offset: float, outcomes: list[dict[str, Any]]) -> dict[str, Any]: ...

    def node_count(self) -> int: ...

    def requested(self) -> Mapping[str, Sequence[int]]: ...


@dataclass
class _HttpDriver:
    """The faithful mode: `SimulatedCluster` over the fake API server and moto."""

    cluster: SimulatedCluster
    aws: FakeAws
    kube: FakeKubeApi
    groups: Sequence[NodeGroupConfig]
    tick: Callable[[float], list[dict[str, Any]]]

    @property
    def pods(self) -> dict[tuple[str, str], PodLife]:
        return self.cluster.pods

    @property
    def terminations(self) -> list[Termination]:
        return self.cluster.terminations

    @property
    def evictions(self) -> int:
        return self.cluster.evictions

    def arrive(self, name: str, arrival: Wave | TracePod, node_selector: Mapping[str, str],
               now: float) -> None:
        self.cluster.arrive(name, arrival, node_selector, now)

    def advance(self, now: float) -> None:
        self.cluster.advance(now)

    def reconcile_instances(self, now: float) -> None:
        self.cluster.reconcile_instances(now)

    def run_tick(self, now: float) -> list[dict[str, Any]]:
        return self.tick(now)

    def tick_record(self, offset: float, outcomes: list[dict[str, Any]]) -> dict[str, Any]:
        return _tick_record(offset, self.cluster, outcomes, self.aws, self.groups)

    def node_count(self) -> int:
        return len(self.kube.list("nodes"))

    def requested(self) -> Mapping[str, Sequence[int]]:
        pods = pods_by_group(self.cluster.pod_records(), self.groups)
        return {group.name: (sum(p.cpu_request_milli for p in pods[group.name]),
                             sum(p.memory_request_bytes for p in pods[group.name]))
                for group in self.groups}


def fast_mode_problems(loaded: LoadedScenario, prefect: bool = False) -> list[str]:
    """Why a scenario cannot run in the fast mode: the load-aware parts (placement by the
    scheduler extender, least-loaded scale-down) use the load watcher, an HTTP service, and
    `--prefect` records flow runs on a server; both stay with the HTTP mode."""
    problems = []
    if loaded.scenario.placement != "first-fit":
        problems.append(join_location(
            loaded.source, "placement", f"{loaded.scenario.placement!r} needs the load "
            "watcher and the scheduler extender over HTTP, which the fast mode does not run "
            "(run without --fast)"))
    for index, group in enumerate(loaded.config.node_groups):
        if group.scale_down_selection == "least_loaded":
            problems.append(join_location(
                loaded.source, f"nodegroups.node_groups[{index}].scale_down_selection",
                "least_loaded reads the load watcher over HTTP: the fast mode selects oldest "
                "first only (run without --fast)"))
    if prefect:
        problems.append(join_location(loaded.source, "", "--prefect runs each tick as a "
                                      "flow run against the HTTP world: not with --fast"))
    return problems


def simulate(loaded: LoadedScenario, prefect: bool = False,
             on_tick: Observer | None = None,
             on_step: Callable[[float], None] | None = None,
             mode: Mode = "http") -> SimulationResult:
    """Run the scenario to its end; deterministic for a scenario (names, order and clock).

    `mode="http"` (the default) runs the world over the fake API server and moto, the tick
    through the real clients; `mode="memory"` runs the same tick on the in-memory world
    (`fakes.memory_world`), with identical tick records, for scenarios without load-aware
    placement or `--prefect` (`fast_mode_problems` says why not, as an InputError).

    Example:
        ```python
        result = ke.simulate(ke.load_scenario("deployments/examples/scenario.yaml"))
        print(result.summary)
        ```
    """
    scenario = loaded.scenario
    groups = loaded.config.node_groups
    start = scenario.start
    if mode == "memory":
        from kube_elevator.fakes.memory_world import MemoryWorld
        from kube_elevator.flows.simulation_memory import MemoryCluster

        problems = fast_mode_problems(loaded, prefect)
        if problems:
            raise InputError(problems)
        memory = MemoryCluster(MemoryWorld(), scenario.asgs, groups,
                               loaded.config.cluster_autoscaler,
                               scheduler=simulated_scheduler(scenario.scheduler.profile,
                                                             scenario.seed))
        memory.create_asgs(start)
        return _run(loaded, memory, on_tick, on_step)
    from kube_elevator.fakes.aws import FakeAws
    from kube_elevator.fakes.kube_api.server import FakeKubeApi

    with tempfile.TemporaryDirectory(prefix="elevator-sim-") as scratch, \
            FakeKubeApi() as kube, FakeAws() as aws, aws.environment():
        # moto keeps its state in process-wide globals: a simulation starts from an empty cloud.
        aws.reset()
        cluster = SimulatedCluster(kube, aws, scenario.asgs, groups,
                                   scheduler=simulated_scheduler(scenario.scheduler.profile,
                                                                 scenario.seed))
        cluster.create_asgs(start)
        kubeconfig = kube.write_kubeconfig(Path(scratch) / "kubeconfig")
        nodegroups = Path(scratch) / "nodegroups.yaml"
        nodegroups.write_text(yaml.safe_dump(loaded.config.document.model_dump()
                                             if loaded.config.document else {}))
        load = _LoadServices.start(loaded, cluster, start) if _needs_load(loaded) else None
        run_tick = _tick_runner(prefect, kubeconfig, nodegroups, aws, groups,
                                load.watcher_url if load else None,
                                loaded.config.cluster_autoscaler)
        driver = _HttpDriver(cluster, aws, kube, groups, run_tick)
        try:
            return _run(loaded, driver, on_tick, on_step, load)
        finally:
            if load is not None:
                load.stop()


def _run(loaded: LoadedScenario, world: _Driver, on_tick: Observer | None,
         on_step: Callable[[float], None] | None,
         load: _LoadServices | None = None) -> SimulationResult:
    """The simulation loop, the same for both worlds: arrivals, a world step, a tick every
    `tick_interval`, and the node-seconds and lower bound summed per step."""
    scenario = loaded.scenario
    groups = loaded.config.node_groups
    start = scenario.start
    allocatable = {asg.name: asg for asg in scenario.asgs}
    arrivals = _arrival_schedule(loaded)
    result = SimulationResult()
    node_seconds = lower_bound_node_seconds = 0.0
    max_nodes = 0
    scale_ups = scale_downs = 0
    steps = math.floor(scenario.duration / scenario.step + 1e-9)
    ticks_every = max(1, round(scenario.tick_interval / scenario.step))
    next_arrival = 0
    for step_index in range(steps + 1):
        offset = step_index * scenario.step
        now = start + offset
        while next_arrival < len(arrivals) and arrivals[next_arrival][0] <= offset:
            _, name, spec, selector = arrivals[next_arrival]
            world.arrive(name, spec, selector, now)
            next_arrival += 1
        world.advance(now)
        if load is not None:
            load.observe(now)
        if step_index % ticks_every == 0:
            outcomes = world.run_tick(now)
            world.reconcile_instances(now)  # new instances start booting now
            scale_ups += sum(1 for o in outcomes if o["done"]["asg_desired_set"] is not None
                             and o["actions"]["cloud_increase"] > 0)
            scale_downs += sum(1 for o in outcomes if o["done"]["terminated_instances"])
            record = world.tick_record(offset, outcomes)
            result.ticks.append(record)
            if on_tick is not None:
                on_tick(record)
        node_count = world.node_count()
        max_nodes = max(max_nodes, node_count)
        if step_index < steps:
            node_seconds += node_count * scenario.step
            lower_bound_node_seconds += _fewest_nodes(world.requested(), groups,
                                                      allocatable) * scenario.step
        if on_step is not None:
            on_step(offset)

    end = start + steps * scenario.step
    lives = world.pods.values()
    pending = [life.pending_seconds + (end - life.pending_since if life.bound_at is None
                                       and life.completed_at is None else 0.0)
               for life in lives]
    result.summary = {
        "scheduler_profile": scenario.scheduler.profile,
        "node_seconds": round(node_seconds, 3),
        "lower_bound_node_seconds": round(lower_bound_node_seconds, 3),
        "pending_pod_seconds": round(sum(pending), 3),
        "max_pending_seconds": round(max(pending, default=0.0), 3),
        "pods_completed": sum(1 for life in lives if life.completed_at is not None),
        "pods_total": len(world.pods),
        "scale_ups": scale_ups,
        "scale_downs": scale_downs,
        "max_nodes": max_nodes,
        "evictions": world.evictions,
        "premature_terminations": sum(1 for t in world.terminations if t.premature),
    }
    result.terminations = [
        {"t": round(t.at - start, 3), "node": t.node, "group_pods": t.group_pods,
         "taint_age_seconds": _round(t.taint_age_seconds), "premature": t.premature}
        for t in world.terminations]
    return result


def _fewest_nodes(requested: Mapping[str, Sequence[int]], groups: Sequence[NodeGroupConfig],
                  asgs: Mapping[str, AsgSpec]) -> int:
    """The fewest nodes whose allocatable covers the requests of the pods present, per group.

    A fluid bound (requests may be split across nodes), summed over groups, within each ASG's
    MinSize and MaxSize, which no autoscaler may go beyond. A node offers its allocatable less
    what its DaemonSet pods take.
    """
    total = 0
    for group in groups:
        asg = asgs[group.cloud_provider_group_name]
        cpu, memory = asg.allocatable
        daemon_cpu, daemon_memory = asg.daemonset_requests
        cpu, memory = max(cpu - daemon_cpu, 1), max(memory - daemon_memory, 1)
        requested_cpu, requested_memory = requested[group.name]
        needed = max(math.ceil(requested_cpu / cpu), math.ceil(requested_memory / memory))
        total += min(max(needed, asg.min), asg.max)
    return total


def _needs_load(loaded: LoadedScenario) -> bool:
    return loaded.scenario.placement != "first-fit" or any(
        group.scale_down_selection == "least_loaded" for group in loaded.config.node_groups)


@dataclass
class _LoadServices:
    """The real load watcher over the simulated load, and the extender scoring placements."""

    provider: SimulatedMetricsProvider
    watcher: Any
    service: Any
    clock: list[float]
    cluster: SimulatedCluster
    extender: Any = None

    @classmethod
    def start(cls, loaded: LoadedScenario, cluster: SimulatedCluster,
              start: float) -> _LoadServices:
        from kube_elevator.fakes.load import SimulatedMetricsProvider
        from kube_elevator.fakes.pod_metrics import PodMetricsServer
        from kube_elevator.tasks.adapters.http_server import ServiceThread
        from kube_elevator.tasks.load_aware.watcher import LoadWatcher

        scenario = loaded.scenario
        clock = [start]
        # Per-pod cAdvisor series that Prometheus can scrape (`pod_metrics_url`).
        pod_metrics = PodMetricsServer(clock=lambda: clock[0]).start()
        provider = SimulatedMetricsProvider(scenario.usage_mean, scenario.usage_spread,
                                            scenario.seed, pod_metrics=pod_metrics)

        async def never(_: float) -> None:  # the simulation, not a timer, drives the fetches
            await asyncio.Event().wait()

        watcher = LoadWatcher(provider, clock=lambda: clock[0], sleep=never)
        service = ServiceThread(watcher.app(), name="load-watcher").start()
        services = cls(provider, watcher, service, clock, cluster)
        if scenario.placement != "first-fit":
            services.extender = _extender(scenario.placement, scenario.target_utilization,
                                          service.url, clock)
            cluster.place = services.place
        return services

    @property
    def watcher_url(self) -> str:
        return str(self.service.url)

    def observe(self, now: float) -> None:
        """A sample of every node's load, then the watcher's 5-minute window refreshed."""
        self.clock[0] = now
        self.provider.observe(self.cluster.nodes(), self.cluster.pod_records())
        asyncio.run(self.watcher.fetch_once("5m"))
        if self.extender is not None:
            self.extender.collector.document = self.watcher.latest("5m")

    def place(self, pod: PodRecord, feasible: list[NodeRecord],
              now: float) -> NodeRecord | None:
        """The extender's highest score wins; `feasible` is oldest first, so ties go by age."""
        from kube_elevator.tasks.load_aware.extender import node_load_from_api, pod_load_from_api

        raw_pod = self.cluster.kube.get("pods", pod.name, pod.namespace)
        pod_load = pod_load_from_api(raw_pod, "simulation")
        best = max(feasible, key=lambda node: self.extender.score(
            pod_load, node_load_from_api(self.cluster.kube.get("nodes", node.name),
                                         "simulation")))
        self.extender.note_bound(pod_load, best.name, at=now)
        return best

    def stop(self) -> None:
        self.service.stop()
        if self.provider.pod_metrics is not None:
            self.provider.pod_metrics.stop()


def _extender(policy: str, target_utilization: int, watcher_url: str,
              clock: list[float]) -> Any:
    from kube_elevator.tasks.load_aware.extender import Policy, SchedulerExtender, WatcherCollector
    from kube_elevator.tasks.load_aware.scoring import TargetLoadPackingArgs

    return SchedulerExtender(
        WatcherCollector(watcher_url), Policy(policy),
        target_load_packing=TargetLoadPackingArgs(target_utilization_percent=target_utilization),
        clock=lambda: clock[0])


def _tick_runner(prefect: bool, kubeconfig: Path, nodegroups: Path, aws: FakeAws,
                 groups: Any, load_watcher_url: str | None = None,
                 cluster_autoscaler: Any = None,
                 ) -> Callable[[float], list[dict[str, Any]]]:
    """One tick at `now`: a Prefect flow run, or the same steps called directly."""
    if prefect:
        from kube_elevator.flows.autoscale import SIMULATED_CLOCK, autoscale
        from kube_elevator.flows.run_state import run_here

        os.environ[SIMULATED_CLOCK] = "1"  # the fake cluster lives on the simulated clock

        def as_flow_run(now: float) -> list[dict[str, Any]]:
            return run_here(lambda: autoscale(
                nodegroups=str(nodegroups), now=datetime.fromtimestamp(now, UTC),
                kubeconfig=str(kubeconfig), load_watcher_url=load_watcher_url,
                return_state=True)).results()

        return as_flow_run

    from kube_elevator.flows.tick import tick
    from kube_elevator.tasks.adapters.cloud import AsgClient
    from kube_elevator.tasks.adapters.kube import KubeClient
    from kube_elevator.tasks.core.step import run_plain
    from kube_elevator.tasks.steps.source import LiveSource

    adapters = Adapters(KubeClient.from_config(kubeconfig),
                        AsgClient(aws.client("autoscaling"), aws.client("ec2")))

    def plain(now: float) -> list[dict[str, Any]]:
        return [outcome.to_json() for outcome in tick(run_plain, LiveSource(adapters), adapters,
                                                      groups, now,
                                                      load_watcher_url=load_watcher_url,
                                                      cluster_autoscaler=cluster_autoscaler)]

    return plain


def _tick_record(offset: float, cluster: SimulatedCluster, outcomes: list[dict[str, Any]],
                 aws: FakeAws, groups: Any) -> dict[str, Any]:
    """The per-group line of the simulation's JSON for this tick."""
    nodes = cluster.nodes()
    pods_of = pods_by_group(cluster.pod_records(), groups)
    by_name = {outcome["name"]: outcome for outcome in outcomes}
    record: dict[str, Any] = {"t": round(offset, 3), "node_groups": {}}
    for group in groups:
        members = [n for n in nodes if n.labels.get(group.label_key) == group.label_value]
        classes = classify_nodes(members)
        pods = pods_of[group.name]
        outcome = by_name[group.name]
        instances = aws.instances(group.cloud_provider_group_name)
        desired = _desired(aws, group.cloud_provider_group_name)
        record["node_groups"][group.name] = {
            "nodes": len(members),
            "untainted": len(classes.untainted),
            "tainted": len(classes.tainted),
            "asg_desired": desired,
            "instances": len(instances),
            "pending_pods": sum(1 for p in pods if not p.node_name),
            "running_pods": sum(1 for p in pods if p.node_name),
            "cpu_percent": _round(outcome["cpu_percent"]),
            "mem_percent": _round(outcome["mem_percent"]),
            "delta": outcome["delta"],
            "status": outcome["status"],
            # the decision's why and the notes it leaves, for the tick line (as `run`'s)
            "reason": outcome.get("reason") or "",
            "notes": list(outcome.get("notes") or ()),
        }
    return record


def _desired(aws: FakeAws, asg_name: str) -> int:
    answer = aws.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[asg_name])
    return int(answer["AutoScalingGroups"][0]["DesiredCapacity"])
