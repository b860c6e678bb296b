"""`PodTally` (a group's pods summed change by change, as the watch cache keeps them) against
`summarize_pods` (the same summary from the list), over random lives of pods."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from kube_elevator.tasks.core.records import PodRecord
from kube_elevator.tasks.escalator.utilization import GroupPods, PodTally, group_utilization, summarize_pods
from tests.builders import make_pod, plain_node

NODES = ["n0", "n1", "n2"]
# One step of a pod's life: (pod index, phase, node, cpu milli); "" node: not bound.
steps = st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["Pending", "Running", "gone"]),
                           st.sampled_from(["", *NODES]), st.integers(0, 8).map(lambda n: n * 250)),
                 max_size=40)


def canonical(pods: GroupPods) -> GroupPods:
    return replace(pods, on_node={node: tuple(sorted(bound, key=lambda pod: pod.name))
                                  for node, bound in pods.on_node.items()})


@settings(max_examples=200)
@given(steps=steps)
def test_a_tally_kept_change_by_change_equals_the_list_summed(
        steps: list[tuple[int, str, str, int]]) -> None:
    tally = PodTally()
    pods: dict[int, PodRecord] = {}
    for index, phase, node, cpu in steps:
        old = pods.get(index)
        if phase == "gone":
            if old is not None:
                tally.remove(index, pods.pop(index))
            continue
        # As the API server allows: the node is set once, the phase only moves on.
        node = old.node_name if old is not None and old.node_name else node
        if old is not None and old.phase == "Running":
            phase = "Running"
        pod = make_pod(f"p{index}", cpu=cpu, node=node, phase=phase, scheduled=bool(node))
        if old is None:
            tally.add(index, pod)
        else:
            tally.replace(index, old, pod)
        pods[index] = pod
    kept = tally.snapshot()
    assert canonical(kept) == canonical(summarize_pods(pods.values()))
    assert len(kept) == len(pods)
    nodes = [plain_node(name) for name in NODES]
    from_tally = group_utilization(kept, nodes, nodes)
    from_list = group_utilization(list(pods.values()), nodes, nodes)
    # The decision's inputs agree; of a node's pods it reads how many there are.
    assert replace(from_tally, pods_on_node={}) == replace(from_list, pods_on_node={})
    assert {node: len(bound) for node, bound in from_tally.pods_on_node.items()} == \
        {node: len(bound) for node, bound in from_list.pods_on_node.items()}
