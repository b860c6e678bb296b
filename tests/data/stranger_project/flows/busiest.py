"""Their own flow, composed of kube-elevator's public steps: type-checked with `mypy --strict
--disallow-any-expr` against the installed wheel (tests/e2e/test_plugin_types.py), so every
name it uses must reach mypy with its type, never as `Any`."""

from __future__ import annotations

from prefect import flow
from tasks.hottest import hottest

import kube_elevator as ke


@flow
def busiest_group(nodegroups: str, cluster: str, now: float) -> str:
    """Collect, filter and measure with the steps, then decide: the busiest group and the
    groups' deltas."""
    groups = ke.load_node_groups(nodegroups).node_groups
    source = ke.SnapshotSource.from_files(groups, [cluster])
    pods = ke.filter_pods(ke.collect_pods(source), groups)
    nodes = ke.filter_nodes(ke.collect_nodes(source), groups)
    usage = {group.name: ke.compute_utilization(pods[group.name], nodes[group.name])
             for group in groups}
    states = ke.read_locks(source, [group.name for group in groups])
    asgs = ke.describe_node_groups(source, [group.cloud_provider_group_name for group in groups])
    inputs: list[ke.GroupInputs] = []
    for group in groups:
        state = states[group.name]
        if isinstance(state, Exception):
            raise state
        inputs.append(ke.GroupInputs(group, pods[group.name], nodes[group.name],
                                     asgs[group.cloud_provider_group_name], state))
    deltas = [plan.delta for plan in ke.decide(inputs, now) if isinstance(plan, ke.ScalePlan)]
    return f"{hottest(usage)} {deltas}"
