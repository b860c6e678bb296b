"""What a tick tells the outside world: a table artifact, Prefect events, Escalator's metrics.

Events let users build Prefect automations (page someone on `elevator.node-group.error`);
the artifact shows each tick's decisions in the UI; the metrics keep Escalator's dashboards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasks.core.step import step
from tasks.escalator.metrics import METRICS, EscalatorMetrics, push
from tasks.steps.node_groups import GroupResult
from tasks.steps.source import CacheReading

EVENT_PREFIX = "elevator.node-group"


def record_metrics(metrics: EscalatorMetrics, results: Sequence[GroupResult]) -> None:
    """Escalator §11, set from each group's plan and outcome."""
    metrics.add("run_count", 1)
    for result in results:
        plan, group = result.plan, {"node_group": result.plan.name}
        usage = plan.utilization
        for name, value in (
            ("node_group_nodes", plan.nodes.total),
            ("node_group_untainted_nodes", plan.nodes.untainted),
            ("node_group_tainted_nodes", plan.nodes.tainted),
            ("node_group_cordoned_nodes", plan.nodes.cordoned),
            ("node_group_pods", plan.pods),
            ("node_group_unhealthy_nodes", 1 if plan.group_healthy else 0),
            # Escalator sets both percentages to 0 in the scale-from-zero case.
            ("node_group_cpu_percent", plan.cpu_percent or 0.0),
            ("node_group_mem_percent", plan.mem_percent or 0.0),
            ("node_group_cpu_request", usage.requests.cpu_milli),
            ("node_group_mem_request", usage.requests.memory_bytes),
            ("node_group_cpu_capacity", usage.capacity.cpu_milli),
            ("node_group_mem_capacity", usage.capacity.memory_bytes),
            ("node_group_cpu_request_largest_pending_cpu", usage.largest_pending_cpu.cpu_milli),
            ("node_group_mem_request_largest_pending_cpu",
             usage.largest_pending_cpu.memory_bytes),
            ("node_group_cpu_request_largest_pending_mem",
             usage.largest_pending_memory.cpu_milli),
            ("node_group_mem_request_largest_pending_mem",
             usage.largest_pending_memory.memory_bytes),
            ("node_group_cpu_capacity_largest_available_cpu",
             usage.largest_available_cpu.cpu_milli),
            ("node_group_mem_capacity_largest_available_cpu",
             usage.largest_available_cpu.memory_bytes),
            ("node_group_cpu_capacity_largest_available_mem",
             usage.largest_available_memory.cpu_milli),
            ("node_group_mem_capacity_largest_available_mem",
             usage.largest_available_memory.memory_bytes),
            ("node_group_scale_lock", 1 if plan.locked else 0),
            ("node_group_scale_delta", plan.delta),
        ):
            metrics.set(name, value, **group)
        metrics.add("node_group_taint_event", plan.taint_requested, **group)
        metrics.add("node_group_untaint_event", plan.untaint_requested, **group)
        if plan.lock_held_at_check:
            metrics.add("node_group_scale_lock_check_was_locked", 1, **group)
        if plan.lock_released_after_seconds is not None:
            metrics.observe("node_group_scale_lock_duration", plan.lock_released_after_seconds,
                            **group)
        for lag in result.registration_lags_seconds:
            metrics.observe("node_group_node_registration_lag", lag, **group)
        if result.done.deleted_nodes:
            metrics.add("node_group_pods_evicted", plan.pods_on_deleted_nodes, **group)
        for node in plan.delete_errors:  # reaps the scale-down found it could not do
            metrics.add("node_delete_errors", 1, node=node, **group)
        if result.status == "failed" and plan.delete:  # the executor's own failure
            metrics.add("node_delete_errors", 1, node="", **group)
        if result.asg is not None:
            labels = {"cloud_provider": "aws", "id": result.asg.name, **group}
            metrics.set("cloud_provider_min_size", result.asg.min_size, **labels)
            metrics.set("cloud_provider_max_size", result.asg.max_size, **labels)
            metrics.set("cloud_provider_target_size", result.asg.desired_capacity, **labels)
            metrics.set("cloud_provider_size", len(result.asg.instances), **labels)


def record_cache_ages(metrics: EscalatorMetrics, reading: CacheReading) -> None:
    """`elevator_watch_cache_age_seconds{kind}`: how old the cache this tick read was."""
    for age in reading.ages:
        if age.age_seconds is not None:
            metrics.set("watch_cache_age_seconds", age.age_seconds, kind=age.kind)


def cache_note(reading: CacheReading) -> str:
    """The artifact's line on the cache the tick decided on: each kind's age and
    resourceVersion, and what the freshness check did."""
    kinds = ", ".join(
        f"{age.kind} {'never' if age.age_seconds is None else f'{age.age_seconds:.1f} s'} "
        f"(resourceVersion {age.resource_version or '-'})" for age in reading.ages)
    note = (f"Read from the watch cache; the server last heard from on each kind's watch: "
            f"{kinds}.")
    if reading.refreshed:
        note += (f" Past the {reading.bound_seconds:g} s freshness bound, reconnected before "
                 f"deciding: {', '.join(reading.refreshed)}.")
    if reading.listed:
        note += (f" Not answered in time, listed by this tick instead: "
                 f"{', '.join(reading.listed)}.")
    return note


def table_rows(results: Sequence[GroupResult]) -> list[dict[str, Any]]:
    """One artifact row per group: the numbers a platform engineer looks at first."""
    rows = []
    for result in results:
        plan = result.plan
        rows.append({
            "node group": plan.name,
            "pods": plan.pods,
            "nodes (untainted/tainted/force/cordoned)":
                f"{plan.nodes.total} ({plan.nodes.untainted}/{plan.nodes.tainted}/"
                f"{plan.nodes.force_tainted}/{plan.nodes.cordoned})",
            "cpu %": "from 0" if plan.cpu_percent is None else round(plan.cpu_percent, 1),
            "memory %": "from 0" if plan.mem_percent is None else round(plan.mem_percent, 1),
            "decision": f"{plan.delta:+d} ({result.status})",
            "reason": plan.error + ": " + plan.reason if plan.error else plan.reason,
        })
    return rows


def events_for(result: GroupResult) -> list[tuple[str, dict[str, Any]]]:
    """(event name, payload) for what this group's tick did."""
    plan, done = result.plan, result.done
    events: list[tuple[str, dict[str, Any]]] = []
    if done.asg_desired_set is not None or done.untainted:
        events.append((f"{EVENT_PREFIX}.scaled-up", {
            "delta": plan.delta, "untainted": list(done.untainted),
            "asg_desired_before": plan.asg_desired_before,
            "asg_desired": done.asg_desired_set}))
    if done.tainted:
        events.append((f"{EVENT_PREFIX}.tainted", {"nodes": list(done.tainted),
                                                    "delta": plan.delta}))
    if done.deleted_nodes:
        events.append((f"{EVENT_PREFIX}.nodes-removed", {
            "nodes": list(done.deleted_nodes),
            "instances": list(done.terminated_instances)}))
    if result.status == "failed" or plan.error:
        events.append((f"{EVENT_PREFIX}.error", {"error": plan.error,
                                                  "message": result.message}))
    return events


@step
def publish_tick(results: Sequence[GroupResult], pushgateway: str | None = None,
                 cache: CacheReading | None = None) -> None:
    """The tick's report: metrics (pushed if asked), a table artifact, events; with `cache`,
    the age of the watch cache it read, on the artifact and as a metric."""
    from prefect.artifacts import create_table_artifact
    from prefect.events import emit_event

    record_metrics(METRICS, results)
    description = "What this tick decided for each node group, and why."
    if cache is not None:
        record_cache_ages(METRICS, cache)
        description += "\n\n" + cache_note(cache)
    create_table_artifact(
        key="autoscale-tick", table=table_rows(results), description=description)
    for result in results:
        for name, payload in events_for(result):
            emit_event(event=name, payload=payload, resource={
                "prefect.resource.id": f"{EVENT_PREFIX}.{result.plan.name}",
                "prefect.resource.name": result.plan.name})
    if pushgateway:
        push(METRICS, pushgateway)
