"""What a tick tells the outside world: a table artifact, Prefect events, Escalator's metrics,
and its outcome in one line and as tags for its flow run.

Events let users build Prefect automations (page someone on `elevator.node-group.error`);
the artifact shows a tick's decisions in the UI; the metrics keep Escalator's dashboards. The
one-line outcome (the run's state message) and the tags make the UI's run list say which runs
scaled and why; a tick that changed nothing writes no artifact or event, its message says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kube_elevator.tasks.core.step import Runner, step
from kube_elevator.tasks.escalator.metrics import METRICS, EscalatorMetrics, push
from kube_elevator.tasks.escalator.plan import ScalePlan
from kube_elevator.tasks.steps.node_groups import ActionsDone, GroupResult
from kube_elevator.tasks.steps.source import CacheReading

EVENT_PREFIX = "elevator.node-group"
# The flow run's tags for what its tick did, for the UI's tag filter and Prefect automations.
SCALED_UP, TAINTED, NODES_REMOVED, FAILED, NOTHING, DRY_RUN = (
    "scaled-up", "tainted", "nodes-removed", "failed", "nothing", "dry-run")
GROUP_TAG = "group:"  # + the name of a group that acted or failed
OUTCOME_CHARACTERS = 200  # of each group's part of the one-line outcome


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


def changed_nothing(results: Sequence[GroupResult]) -> bool:
    """Every group had nothing to do and none failed: no event to send, no artifact to show."""
    return all(result.status == "nothing to do" and not events_for(result)
               for result in results)


def publish_tick(run: Runner, results: Sequence[GroupResult], pushgateway: str | None = None,
                 dry_run: bool = False, cache: CacheReading | None = None) -> None:
    """The tick's report. Escalator's metrics always, with the age of the watch cache the tick
    read (`cache`); to Prefect, the table artifact (with that age) and the events (the
    `publish-tick` task run) only when the tick did something, failed somewhere or was a dry
    run (whose report is its point). A tick that changed nothing says so in its flow run's
    state message and writes no artifact, event or task run for it: at a tick a minute, most
    ticks."""
    record_metrics(METRICS, results)  # once: a retried push must not count twice
    if cache is not None:
        record_cache_ages(METRICS, cache)
    to_prefect = dry_run or not changed_nothing(results)
    if to_prefect or pushgateway:
        run(send_report, results if to_prefect else (), pushgateway,
            cache_note(cache) if cache is not None else "")


def _send_report(results: Sequence[GroupResult], pushgateway: str | None = None,
                 note: str = "") -> None:
    """A table artifact (`note` under its description) and the events of `results` (if any),
    then the metrics pushed (if asked)."""
    from prefect.artifacts import create_table_artifact
    from prefect.events import emit_event

    if results:
        description = "What this tick decided for each node group, and why."
        create_table_artifact(key="autoscale-tick", table=table_rows(results),
                              description=description + (f"\n\n{note}" if note else ""))
    for result in results:
        for name, payload in events_for(result):
            emit_event(event=name, payload=payload, resource={
                "prefect.resource.id": f"{EVENT_PREFIX}.{result.plan.name}",
                "prefect.resource.name": result.plan.name})
    if pushgateway:
        push(METRICS, pushgateway)


send_report = step(_send_report, name="publish-tick")

def _acted(result: GroupResult) -> bool:
    return result.done != ActionsDone()


def _usage(result: GroupResult) -> str:
    plan = result.plan
    if plan.cpu_percent is None or plan.mem_percent is None:
        shown = "from 0"
    else:
        shown = f"{max(plan.cpu_percent, plan.mem_percent):.0f}%"
    return (f"{plan.name} {shown}" + (" (locked)" if plan.locked else "")
            + (f" ({plan.limit})" if plan.limit else ""))


def _why(result: GroupResult) -> str:
    """The decision's first reason (Escalator's wording) and what a minimum or MaxSize let it
    do, on one line."""
    plan = result.plan
    text = plan.error or plan.reason.split("; ")[0] + (f"; {plan.limit}" if plan.limit else "")
    return " ".join(text.split())[:OUTCOME_CHARACTERS]


def _change(plan: ScalePlan) -> str:
    """What a scale-up asked for (issue 42): the untaints and the ASG's increase apart, as
    `untaint 3, ASG +2 (4 -> 6)`, not the decided delta (+5), which a MaxSize or the tainted
    nodes split; any other change, its delta."""
    if plan.delta > 0 and (plan.untaint or plan.cloud_increase):
        asked = [f"untaint {len(plan.untaint)}"] if plan.untaint else []
        if plan.cloud_increase:
            asked.append(f"ASG +{plan.cloud_increase} "
                         f"({plan.asg_desired_before} -> {plan.asg_desired})")
        return ", ".join(asked)
    return f"{plan.delta:+d}" if plan.delta else "acted"


def outcome_line(results: Sequence[GroupResult]) -> str:
    """The tick in one line, for the flow run's state message: each group that acted or failed
    (`shared ASG +2 (3 -> 5): usage 125.0% is above scale_up_threshold 70%: ...`), then the others' usage
    (`nothing: batch 50%, spot 12% (locked)`); a dry run says what each group would do."""
    parts, idle = [], []
    for result in results:
        plan = result.plan
        change = _change(plan)
        if result.status == "failed":
            error = " ".join((result.message or plan.error or plan.reason).split())
            parts.append(f"{plan.name} failed: {error[:OUTCOME_CHARACTERS]}")
        elif result.status == "dry run" and plan.changes_anything:
            parts.append(f"{plan.name} would {change}: {_why(result)}")
        elif _acted(result):
            parts.append(f"{plan.name} {change}: {_why(result)}")
        elif result.status == "lost race":
            parts.append(f"{plan.name}: another tick acted first")
        else:
            idle.append(_usage(result))
    if idle:
        parts.append("nothing: " + ", ".join(idle))
    return "; ".join(parts) or "nothing"


def outcome_tags(results: Sequence[GroupResult], dry_run: bool = False) -> list[str]:
    """What the tick did, as tags: `scaled-up`, `tainted`, `nodes-removed`, `failed`, else
    `nothing` (`dry-run` for a dry run), and `group:<name>` for each group that acted or
    failed."""
    tags: list[str] = []
    for result in results:
        done = result.done
        found = [tag for tag, happened in (
            (SCALED_UP, done.asg_desired_set is not None or bool(done.untainted)),
            (TAINTED, bool(done.tainted)),
            (NODES_REMOVED, bool(done.deleted_nodes or done.terminated_instances)),
            (FAILED, result.status == "failed")) if happened]
        tags += found
        if found:
            tags.append(GROUP_TAG + result.plan.name)
    if dry_run:
        tags.append(DRY_RUN)
    elif not tags:
        tags.append(NOTHING)
    return sorted(set(tags))
