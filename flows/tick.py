"""One composition of a node-group tick (DESIGN.md §3): source -> decide -> actuator.

`elevator plan` (files, no actuator), `elevator run` and the `autoscale` flow (live API and
cloud), and `elevator simulate` (the simulated world, over the same live adapters) all call
`tick`, so what one path filters or decides the others do too. It reads like the algorithm:
pods, nodes and ASGs are collected once, then each group (in parallel) reads its lock, filters
its nodes, measures, decides, claims the tick in its Lease, and acts; with the Cluster
Autoscaler ideas enabled, the cluster-wide scale-up and scale-down follow.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from logging import getLogger as get_logger
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from kube_elevator.flows.fleet import (
    earlier_fleet_in_flight,
    earlier_fleet_message,
    scale_up_in_one_shot,
    stopped_by_failures,
    stopped_message,
    sweep_earlier_fleet,
    tag_node_groups,
)
from kube_elevator.tasks.cluster_autoscaler.config import ClusterAutoscalerConfig
from kube_elevator.tasks.core.errors import LeaseConflict
from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.core.records import AutoScalingGroup, NodeRecord, PodRecord
from kube_elevator.tasks.core.retry import is_retryable
from kube_elevator.tasks.core.step import Runner, run_plain
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.decide import missing_asg_plan
from kube_elevator.tasks.escalator.decide_step import GroupInputs, decide
from kube_elevator.tasks.escalator.filter_nodes import nodes_by_group, pod_matching_notes
from kube_elevator.tasks.escalator.plan import ScalePlan
from kube_elevator.tasks.escalator.utilization import GroupPods
from kube_elevator.tasks.steps.lease import write_lock
from kube_elevator.tasks.steps.load_watcher import read_node_load
from kube_elevator.tasks.steps.node_groups import (
    ActionsDone,
    Adapters,
    GroupResult,
    Status,
    registration_lags,
    taint_and_remove,
    untaint_or_increase,
)
from kube_elevator.tasks.steps.source import (
    CachedSource,
    LiveSource,
    SnapshotSource,
    TickSource,
    collect_nodes,
    collect_pdbs,
    collect_pods,
    decided_pods,
    describe_node_groups,
    pods_of_groups,
    read_locks,
)

if TYPE_CHECKING:
    from kube_elevator.flows.cluster_autoscaler import ClusterReads
    from kube_elevator.tasks.cluster_autoscaler.drain import DrainPlan, RemovalInputs

# The Cluster Autoscaler's parts (its scale-up and scale-down, the drain) are imported where a
# tick with `cluster_autoscaler.enabled` reaches them: an Escalator tick's run process (`serve
# --ticks runs`, a worker's) does not load them (issue 40).

P = ParamSpec("P")
R = TypeVar("R")


def needs_claim(plan: ScalePlan, state: GroupState) -> bool:
    """Write the Lease before acting whenever the tick changes anything, cluster or state."""
    return plan.changes_anything or replace(plan.next_state, resource_version="") != replace(
        state, resource_version="")


def tick_group(
    run: Runner, actuator: Adapters | None, group: NodeGroupConfig,
    pods: Sequence[PodRecord] | GroupPods, nodes: Sequence[NodeRecord],
    asg: AutoScalingGroup | None, state: GroupState | Exception,
    decision: ScalePlan | Exception | None, now: float,
    cpu_load_percent: Mapping[str, float] | None = None, removal: RemovalInputs | None = None,
) -> GroupResult:
    """Escalator's scale_node_group after the decision, for one group: its Lease's `state`
    and `decision` (or the errors that stopped them); `actuator` None acts on nothing.

    `removal` (with `cluster_autoscaler.enabled`) applies CA's removal rules: only nodes whose
    pods can all move are tainted, and with `drain` occupied nodes are drained through the
    Eviction API instead of terminated (`tasks.cluster_autoscaler.drain`).
    """
    if removal is None:
        return _tick_group(run, actuator, group, pods, nodes, asg, state, decision, now, None)
    from kube_elevator.tasks.cluster_autoscaler.drain import safe_plan
    from kube_elevator.tasks.steps.drain import evict_pods

    evictions: list[DrainPlan] = []

    def made_safe(plan: ScalePlan) -> ScalePlan:
        planned = safe_plan(plan, group, nodes, removal, now, cpu_load_percent)
        evictions.append(planned)
        return planned.plan

    result = _tick_group(run, actuator, group, pods, nodes, asg, state, decision, now,
                         made_safe)
    pending = [pod for planned in evictions for pod in planned.evict]
    if actuator is None or not pending or result.status in ("failed", "lost race"):
        return result
    outcome = run(evict_pods, actuator, pending)
    notes = tuple(f"eviction refused, node kept: {why}" for why in outcome.blocked)
    return replace(result, plan=replace(result.plan, notes=result.plan.notes + notes),
                   done=replace(result.done, evicted=outcome.evicted))


def _tick_group(
    run: Runner, actuator: Adapters | None, group: NodeGroupConfig,
    pods: Sequence[PodRecord] | GroupPods, nodes: Sequence[NodeRecord],
    asg: AutoScalingGroup | None, state: GroupState | Exception,
    decision: ScalePlan | Exception | None, now: float,
    adjust: Callable[[ScalePlan], ScalePlan] | None,
) -> GroupResult:
    if asg is None:
        return GroupResult(missing_asg_plan(group, len(pods), len(nodes)), "failed",
                           message="Auto Scaling Group not found")
    # Its Lease could not be read, or its decision failed: this group fails alone.
    if isinstance(state, Exception):
        raise state
    if isinstance(decision, Exception):
        raise decision
    if decision is None:
        raise RuntimeError(f"no decision for node group {group.name}")
    plan = decision
    if adjust is not None:
        plan = adjust(plan)
    if actuator is None:
        return GroupResult(plan, "dry run", asg=asg)
    # An earlier tick's fleet that never reported back (flows/fleet.py).
    plan, swept = sweep_earlier_fleet(run, actuator, group, plan, state, now)
    done = ActionsDone(fleet_terminated_instances=swept)
    if not needs_claim(plan, state):
        return GroupResult(plan, "nothing to do", done, asg=asg)
    one_shot = group.aws.one_shot and plan.cloud_increase > 0 and not plan.dry_mode
    if one_shot and stopped_by_failures(group, plan, state):
        return GroupResult(plan, "failed", done, message=stopped_message(group), asg=asg)
    if one_shot and plan.next_state.fleet_claim:  # its claim must not be overwritten
        waiting = earlier_fleet_in_flight(group, state, now)
        return GroupResult(plan, "nothing to do" if waiting else "failed", done, asg=asg,
                           message=earlier_fleet_message(state, waiting))
    # Claim the tick: a concurrent tick that read the same Lease version now gets a 409.
    namespace = actuator.lease_namespace
    token = uuid.uuid4().hex
    claimed = replace(plan.next_state, resource_version=state.resource_version, claim=token,
                      fleet_claim=token if one_shot else plan.next_state.fleet_claim)
    try:
        written = run(write_lock, actuator.kube, namespace, group.name, claimed, now)
    except LeaseConflict as conflict:
        return GroupResult(plan, "lost race", message=str(conflict), asg=asg)
    lags = _registration_lags(run, actuator, plan, nodes, now)
    # A step with nothing to do is not called: no task run records that it did nothing.
    if plan.taint or plan.delete:
        done = done.merged(run(taint_and_remove, actuator, plan, asg, nodes, now))
    try:
        if plan.untaint or plan.cloud_increase:
            done = done.merged(run(untaint_or_increase, actuator, plan, asg, one_shot))
    except Exception as error:
        if plan.cloud_increase and not is_retryable(error):
            # Escalator takes the lock only after the cloud accepted the increase: the cloud
            # said no, so release it. An unknown answer (lost, throttled, timed out) keeps the
            # claim; the next tick compares it with the ASG (ScaleLock.never_reached_cloud).
            released = replace(written, lock=state.lock, claim=uuid.uuid4().hex)
            run(write_lock, actuator.kube, namespace, group.name, released, now)
        raise
    if one_shot:  # the increase is an EC2 Fleet, attached to the ASG (flows/fleet.py)
        done, failure = scale_up_in_one_shot(run, actuator, group, plan, written, state.lock,
                                             now, done)
        if failure:
            return GroupResult(plan, "failed", done, message=failure, asg=asg)
    # Only the Lease changed (a node's capacity cached, a lock released; a scale-down that a
    # minimum held back): nothing was done to the cluster, and the status says so.
    status: Status = "acted" if plan.changes_anything or done != ActionsDone() \
        else "nothing to do"
    return GroupResult(plan, status, done, asg=asg, registration_lags_seconds=lags)


def _registration_lags(run: Runner, actuator: Adapters, plan: ScalePlan,
                       nodes: Sequence[NodeRecord], now: float) -> tuple[float, ...]:
    """On the first unlocked tick after a scale-out (the lock released this tick, as Escalator
    measures it), the new nodes' registration lags; a failed lookup is logged and skipped."""
    if plan.lock_released_after_seconds is None:
        return ()
    try:
        return run(registration_lags, actuator, nodes, now - plan.lock_released_after_seconds)
    except Exception as error:
        get_logger(__name__).warning(
            "%s: unable to get instances from the cloud provider to determine the registration "
            "lag, skipping: %s", plan.name, error)
        return ()


def tick(
    run: Runner, source: TickSource, actuator: Adapters | None,
    groups: Sequence[NodeGroupConfig], now: float, load_watcher_url: str | None = None,
    cluster_autoscaler: ClusterAutoscalerConfig | None = None, concurrent_groups: bool = True,
) -> list[GroupResult]:
    """Read once from `source`, then every group concurrently; one group's failure does not
    stop the others. `actuator` None (`elevator plan`, dry runs) decides and changes nothing.
    `concurrent_groups` False acts group after group in this thread: the in-memory simulator
    has no network wait to overlap, and a thread pool a tick is a tenth of its day.

    With `cluster_autoscaler.enabled`, the groups remove only nodes CA could remove (drained
    first with `scale_down.drain`); after the groups, pods no node can hold get a scale-up of
    their own (CA §1.1), and nodes unneeded long enough are removed (CA §1.3).

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(config.node_groups, ["deployments/examples/cluster.json"])
        >>> results = ke.tick(ke.run_plain, source, None, config.node_groups, now=1795262400.0)
        >>> [(r.plan.name, r.plan.delta) for r in results]
        [('batch', 4), ('services', -1)]

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(
        ...     config.node_groups, ["deployments/examples/cluster.json"])
        >>> results = ke.tick(ke.run_plain, source, None, config.node_groups, now=1795262400.0)
        >>> [(r.plan.name, r.plan.delta) for r in results]
        [('batch', 4), ('services', -1)]
    """
    ca = cluster_autoscaler if cluster_autoscaler is not None and cluster_autoscaler.enabled \
        else None
    cpu_load_percent = None
    if load_watcher_url and any(g.scale_down_selection == "least_loaded" for g in groups):
        try:
            cpu_load_percent = run(read_node_load, load_watcher_url)
        except Exception as unreadable:  # no load data: oldest first, as Escalator does
            get_logger(__name__).warning("load watcher %s unreadable (%s): oldest first",
                                         load_watcher_url, unreadable)
    # A read of this process's watch cache is memory, and the decision is pure: neither is a
    # task run (nothing to retry, nothing outside the process to record). A tick a minute keeps
    # its task runs in the Prefect database until its retention: an idle tick from the cache
    # records the two reads that leave the process, the ASGs and the Leases (issue 27).
    def read(kind: str) -> Runner:
        """Plainly, a kind the cache serves; as a task run, a kind listed (live, or listed for
        this tick because its watch went silent: `CachedSource.live_kinds`)."""
        cached = isinstance(source, CachedSource) and kind not in source.live_kinds
        return run_plain if cached else run

    pods = read("pods")(collect_pods, source)
    nodes = read("nodes")(collect_nodes, source)
    asgs = run(describe_node_groups, source, [g.cloud_provider_group_name for g in groups])
    if actuator is not None:  # Escalator's addASGTags (at each tick, not at registration)
        tag_node_groups(run, actuator.cloud, groups, asgs)
    grouped = pods_of_groups(source, pods, groups)
    group_pods = decided_pods(source, pods, groups, grouped)
    group_nodes = nodes_by_group(nodes, groups)
    removal = None
    if ca is not None:
        from kube_elevator.tasks.cluster_autoscaler.drain import RemovalInputs, pods_on_nodes

        budgets = read("poddisruptionbudgets")(collect_pdbs, source)
        removal = RemovalInputs(nodes, pods_on_nodes(pods), budgets, ca.scale_down.drain)

    names = [group.name for group in groups]
    try:
        states = run(read_locks, source, names)
    except Exception as unreadable:  # every Lease unreadable (after retries): every group fails
        states = dict.fromkeys(names, unreadable)

    # filter-nodes, compute-utilization and decide for every group read, in this process
    ready = []
    for group in groups:
        asg, state = asgs.get(group.cloud_provider_group_name), states[group.name]
        if asg is not None and not isinstance(state, Exception):
            ready.append(GroupInputs(group, group_pods[group.name], group_nodes[group.name],
                                     asg, state))
    decided = run_plain(decide, ready, now, cpu_load_percent) if ready else []
    decisions = {inputs.group.name: plan for inputs, plan in zip(ready, decided, strict=True)}

    def one(group: NodeGroupConfig) -> GroupResult:
        return tick_group(run, actuator, group, group_pods[group.name],
                          group_nodes[group.name], asgs.get(group.cloud_provider_group_name),
                          states[group.name], decisions.get(group.name), now,
                          cpu_load_percent, removal)

    futures: list[Future[GroupResult]]
    if concurrent_groups:
        with ThreadPoolExecutor(max_workers=max(len(groups), 1),
                                thread_name_prefix="node-group") as pool:
            # Each thread gets a copy of this context, so task runs belong to the flow run.
            futures = [pool.submit(contextvars.copy_context().run, one, group)
                       for group in groups]
    else:
        futures = [_settled(one, group) for group in groups]
    results = []
    for group, future in zip(groups, futures, strict=True):
        error = future.exception()
        if error is None:
            results.append(future.result())
        else:
            failed = missing_asg_plan(group, len(grouped[group.name]),
                                      len(group_nodes[group.name]))
            results.append(GroupResult(replace(failed, error=str(error),
                                               reason="the tick failed: see the message"),
                                       "failed", message=f"{type(error).__name__}: {error}"))
    if ca is not None:  # acted on through `actuator`; without one, decided as live and noted
        reads = _cluster_reads(run, source, actuator)
        results = _scale_up_unschedulable(run, actuator, reads, ca, groups, results, pods,
                                          nodes, grouped, group_nodes, asgs, now)
        if ca.scale_down.enabled and removal is not None:
            results = _scale_down_unneeded(run, actuator, reads, ca, groups, results, removal,
                                           group_nodes, asgs, now)
    # Pods no group takes, said rather than left out in silence (issue 34).
    matching = pod_matching_notes(pods, groups, grouped)
    return [_annotated(result, matching.get(result.plan.name, ()), result.done)
            for result in results]


def _settled(one: Callable[[NodeGroupConfig], GroupResult],
             group: NodeGroupConfig) -> Future[GroupResult]:
    """`one(group)` called here, its result or error held as the pool's future would hold it."""
    future: Future[GroupResult] = Future()
    try:
        future.set_result(one(group))
    except Exception as error:
        future.set_exception(error)
    return future


def _cluster_reads(run: Runner, source: TickSource, actuator: Adapters | None) -> ClusterReads:
    """The Cluster Autoscaler's reads: live when there is an API to read (a dry run reads it
    too), else the files' Leases (`elevator plan`)."""
    from kube_elevator.flows.cluster_autoscaler import ClusterReads, live_reads

    adapters = actuator
    if adapters is None and isinstance(source, LiveSource | CachedSource):
        adapters = source.adapters
    if adapters is not None:
        return live_reads(run, adapters)
    namespace = source.lease_namespace if isinstance(source, SnapshotSource) else "kube-system"
    return ClusterReads(namespace, lambda names: {name: source.read_state(name) for name in names},
                        lambda asg_names: {}, None)


def _done_or_planned(result: GroupResult) -> ActionsDone:
    """What a group's tick changed; on a dry run, what it would have changed (the CA parts
    then decide as they would after it)."""
    if result.status != "dry run":
        return result.done
    plan = result.plan
    return ActionsDone(untainted=plan.untaint, tainted=plan.taint,
                       asg_desired_set=plan.asg_desired
                       if plan.asg_desired != plan.asg_desired_before else None)


def _scale_down_unneeded(
    run: Runner, adapters: Adapters | None, reads: ClusterReads, ca: ClusterAutoscalerConfig,
    groups: Sequence[NodeGroupConfig], results: list[GroupResult], removal: RemovalInputs,
    group_nodes: Mapping[str, Sequence[NodeRecord]], asgs: Mapping[str, AutoScalingGroup],
    now: float,
) -> list[GroupResult]:
    """CA's scale-down once per tick, after the scale-up; its taints and notes go on the
    groups' result lines. Groups whose tick failed or lost a race are left out."""
    from kube_elevator.flows.cluster_autoscaler import scale_down_unneeded
    from kube_elevator.tasks.cluster_autoscaler.unneeded import EscalatorTick

    escalator = {
        result.plan.name: EscalatorTick(
            acted=result.plan.changes_anything or result.done != ActionsDone(),
            requests=result.plan.utilization.requests,
            capacity=result.plan.utilization.capacity)
        for result in results if result.status in ("acted", "nothing to do", "dry run")}
    leaving_now = {name for result in results
                   for name in (*result.plan.taint, *result.plan.delete)}
    # CA disables scale-down for a loop that scaled up: here nodes untainted or asked for.
    scaled_up = any(done.untainted or (done.asg_desired_set or 0)
                    > result.plan.asg_desired_before
                    for result in results for done in [_done_or_planned(result)])
    outcome = _after_groups("scale-down of unneeded nodes", lambda: scale_down_unneeded(
        run, adapters, reads, ca.scale_down, groups, group_nodes, asgs, removal.nodes,
        removal.pods_by_node, removal.pdbs, escalator, leaving_now, scaled_up, now))
    if outcome is None:
        return results
    return [_annotated(result, outcome.notes.get(result.plan.name, ()),
                       replace(result.done, tainted=result.done.tainted
                               + outcome.tainted.get(result.plan.name, ())))
            for result in results]


def _after_groups(what: str, cluster_step: Callable[[], R]) -> R | None:
    """A cluster-wide CA part after the groups: its failure is logged, the groups' results
    stand (the next tick tries again)."""
    try:
        return cluster_step()
    except Exception as error:
        get_logger(__name__).warning("%s failed: %s", what, error)
        return None


def _annotated(result: GroupResult, notes: Sequence[str], done: ActionsDone) -> GroupResult:
    """A group's result line with a cluster-wide step's notes and actions added."""
    if not notes and done == result.done:
        return result
    status = "acted" if done != result.done and result.status == "nothing to do" \
        else result.status
    return replace(result, plan=replace(result.plan, notes=result.plan.notes + tuple(notes)),
                   done=done, status=status)


def _scale_up_unschedulable(
    run: Runner, adapters: Adapters | None, reads: ClusterReads, ca: ClusterAutoscalerConfig,
    groups: Sequence[NodeGroupConfig], results: list[GroupResult], pods: Sequence[PodRecord],
    nodes: Sequence[NodeRecord], group_pods: Mapping[str, Sequence[PodRecord]],
    group_nodes: Mapping[str, Sequence[NodeRecord]], asgs: Mapping[str, AutoScalingGroup],
    now: float,
) -> list[GroupResult]:
    """CA's scale-up once per tick, after the groups; its notes and actions go on the groups'
    result lines. A group's own Escalator scale-up this tick already serves that group's pods."""
    from kube_elevator.flows.cluster_autoscaler import scale_up_unschedulable

    helped: dict[str, frozenset[str]] = {}
    desired: dict[str, int] = {}
    for result in results:
        done = _done_or_planned(result)
        if done.asg_desired_set is not None:
            desired[result.plan.name] = done.asg_desired_set
            if result.plan.cloud_increase > 0:
                helped[result.plan.name] = frozenset(
                    f"{p.namespace}/{p.name}" for p in group_pods[result.plan.name])
    outcome = _after_groups("scale-up for unschedulable pods", lambda: scale_up_unschedulable(
        run, adapters, reads, ca, groups, pods, nodes, group_nodes, asgs, helped, desired,
        now))
    if outcome is None:
        return results
    merged = []
    for result in results:
        name = result.plan.name
        notes = (outcome.notes or {}).get(name, ()) + (outcome.notes or {}).get("cluster", ())
        terminated = (outcome.terminated or {}).get(name, ())
        done = result.done
        if name in outcome.asg_desired_set:  # the chosen group, or each group balanced into
            done = replace(done, asg_desired_set=outcome.asg_desired_set[name])
        if terminated:
            done = replace(done, terminated_instances=done.terminated_instances + terminated)
        annotated = _annotated(result, notes, done)
        grown_to = outcome.asg_desired_set.get(name, outcome.would_set.get(name))
        merged.append(annotated if grown_to is None else
                      replace(annotated, plan=with_ca_growth(annotated.plan, grown_to)))
    return merged


def with_ca_growth(plan: ScalePlan, asg_desired: int) -> ScalePlan:
    """The group's plan with CA's scale-up in its numbers (issue 42 item 9): the ASG's target,
    the cloud increase and the delta carry the nodes CA adds beyond the group's own plan, so
    `elevator plan`'s actions and JSON show every scale-up a live tick makes, the note beside
    them saying why."""
    planned = plan.asg_desired if plan.cloud_increase > 0 else plan.asg_desired_before
    more = asg_desired - planned
    if more <= 0:
        return plan
    # The nodes the group's own rule changes: its scale-up, or the nodes it taints (a removal
    # held at the minimum taints none, and changes nothing).
    own = plan.delta if plan.delta > 0 else -len(plan.taint)
    return replace(plan, asg_desired=asg_desired, cloud_increase=plan.cloud_increase + more,
                   delta=own + more)
