"""The steps refuse wrong inputs at their edge (issue 42 item 3): one `TypeError` naming the
step, the parameter and what it expected, from the one shared checker
(`tasks/core/step_inputs.py`), before the step does anything; inside a flow the error is
raised by the step's call, never returned as a group's value."""

from __future__ import annotations

import pytest

import kube_elevator as ke
from tests.locks import ROOT

EXAMPLES = ROOT / "deployments" / "examples"
NOW = 1795262400.0


def inputs() -> tuple[list[ke.NodeGroupConfig], list[ke.GroupInputs]]:
    """The shipped example's groups and each one's decision inputs, by the public steps."""
    groups = list(ke.load_node_groups(EXAMPLES / "nodegroups.yaml").node_groups)
    source = ke.SnapshotSource.from_files(groups, [EXAMPLES / "cluster.json"])
    pods = ke.filter_pods.fn(ke.collect_pods.fn(source), groups)
    nodes = ke.filter_nodes.fn(ke.collect_nodes.fn(source), groups)
    asgs = ke.describe_node_groups.fn(source, [g.cloud_provider_group_name for g in groups])
    states = ke.read_locks.fn(source, [group.name for group in groups])
    made = []
    for group in groups:
        state = states[group.name]
        assert isinstance(state, ke.GroupState)
        made.append(ke.GroupInputs(group, pods[group.name], nodes[group.name],
                                   asgs[group.cloud_provider_group_name], state))
    return groups, made


def test_filter_pods_given_a_file_name_for_the_groups_says_so() -> None:
    with pytest.raises(TypeError, match=r"^filter_pods: `groups` must be a sequence of "
                       r"NodeGroupConfig .*not 'nodegroups.yaml' \(str\)$"):
        ke.filter_pods.fn([], "nodegroups.yaml")


def test_decide_given_configs_for_its_inputs_names_the_first_wrong_item() -> None:
    groups, _ = inputs()
    with pytest.raises(TypeError, match=r"^decide: `groups\[0\]` must be GroupInputs .*"
                       r"\(NodeGroupConfig\)$"):
        ke.decide.fn(groups, 0.0)


@pytest.mark.parametrize("now", ["now", None, True])
def test_decide_refuses_a_time_that_is_no_number(now: object) -> None:
    _, made = inputs()
    with pytest.raises(TypeError, match=r"^decide: `now` must be a Unix time in seconds"):
        ke.decide.fn(made, now)  # type: ignore[arg-type]
    assert all(isinstance(plan, ke.ScalePlan) for plan in ke.decide.fn(made, NOW))


def test_the_other_steps_name_their_parameter() -> None:
    groups, made = inputs()
    pods = ke.filter_pods.fn([], groups)
    with pytest.raises(TypeError, match=r"^compute_utilization: `pods` must be a sequence of "
                       r"PodRecord .*\(dict\)$"):
        ke.compute_utilization.fn(pods, [])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^filter_nodes: `nodes\[0\]` must be NodeRecord"):
        ke.filter_nodes.fn([made[0].pods[0]], groups)  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"^read_locks: `group_names` must be a sequence"):
        ke.read_locks.fn(None, "batch")  # type: ignore[arg-type]
    plan = ke.decide.fn(made, NOW)[0]
    assert isinstance(plan, ke.ScalePlan)
    with pytest.raises(TypeError, match=r"^write_lock: `state` must be a GroupState "
                       r"\(a ScalePlan's next_state\), not ScalePlan"):
        ke.write_lock.fn(None, "kube-system", "batch", plan, NOW)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^untaint_or_increase: `adapters` must be Adapters"):
        ke.untaint_or_increase.fn(None, plan, made[0].asg)  # type: ignore[arg-type]


def test_in_a_flow_a_programming_error_is_raised_never_a_groups_value(
        prefect_server: None) -> None:
    from prefect import flow

    groups, made = inputs()

    @flow
    def their_flow(wrong: bool) -> list[ke.ScalePlan | Exception]:
        return ke.decide(groups if wrong else made, NOW)  # type: ignore[arg-type]

    with pytest.raises(TypeError, match=r"^decide: `groups\[0\]` must be GroupInputs"):
        their_flow(True)
    assert [type(plan) for plan in their_flow(False)] == [ke.ScalePlan] * len(made)
