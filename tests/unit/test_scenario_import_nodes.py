"""From kube-state-metrics' series to a scenario's ASGs and trace rows, the pure parts
(fakes/scenario_import_nodes.py, scheduler_request in fakes/scenario_import.py)."""

from __future__ import annotations

import pytest

from kube_elevator.fakes.scenario import DaemonSetSpec
from kube_elevator.fakes.scenario_import import PerNodePod, per_node_pods, scheduler_request
from kube_elevator.fakes.scenario_import_nodes import (
    NodeSize,
    holds,
    ksm_label_name,
    missing_label_keys,
    missing_labels_problem,
    nearest_instance_type,
    node_sizes,
    node_type,
    simulated_size,
    typical_size,
)
from kube_elevator.tasks.core.quantity import GiB, MiB


# kube-state-metrics' TestKubeLabelsToPrometheusLabels (internal/store/utils_test.go), the cases
# of one key.
@pytest.mark.parametrize(("key", "name"), [
    ("app1", "label_app1"),
    ("0_app3", "label_0_app3"),
    ("$app4", "label__app4"),
    ("_app5", "label__app5"),
    ("camelCase", "label_camel_case"),
    ("snake_camelCase", "label_snake_camel_case"),
    ("node.kubernetes.io/instance-type", "label_node_kubernetes_io_instance_type"),
], ids=["normal", "starts-with-digit", "special-char", "starts-with-underscore", "camel-case",
        "snake-and-camel-case", "instance-type"])
def test_label_names_are_kube_state_metrics(key: str, name: str) -> None:
    assert ksm_label_name(key) == name


def test_missing_label_keys_are_each_key_no_series_carries() -> None:
    seen = {"node", "label_customer", "label_topology_kubernetes_io_zone"}
    assert missing_label_keys(seen, ["customer", "team", "customer", "nodeGroup"]) == [
        "team", "nodeGroup"]
    assert missing_label_keys({"node", "label_node_group"}, ["nodeGroup"]) == []


def test_the_problem_names_the_labels_the_keys_and_the_flag() -> None:
    none = missing_labels_problem(["customer"], {"node"}, "between 1 and 2")
    assert none == (
        "kube_node_labels has no label_customer between 1 and 2: it exported no node label "
        "(kube-state-metrics exports none by default), so no node is known to belong to a node "
        "group. The node groups select their nodes by the label key 'customer': run "
        "kube-state-metrics with "
        "--metric-labels-allowlist=nodes=[customer,node.kubernetes.io/instance-type] (or add "
        "the keys to the list it has), then import a window it has scraped since")
    other = missing_labels_problem(["customer", "team"],
                                   {"node", "label_topology_kubernetes_io_zone"}, "here")
    assert other.startswith("kube_node_labels has no label_customer, label_team here: its "
                            "series carry label_topology_kubernetes_io_zone only")
    assert "by the label keys 'customer', 'team'" in other
    assert "nodes=[customer,team,node.kubernetes.io/instance-type]" in other


def test_node_sizes_read_cores_bytes_and_gpus_as_kube_state_metrics_exports_them() -> None:
    # The series of KSM's TestNodeStore (internal/store/node_test.go), with a second node.
    samples = [({"node": "127.0.0.1", "resource": resource, "unit": unit}, value)
               for resource, unit, value in (
                   ("cpu", "core", 3.0), ("ephemeral_storage", "byte", 3e9),
                   ("memory", "byte", 1e9), ("nvidia_com_gpu", "integer", 1.0),
                   ("pods", "integer", 555.0), ("storage", "byte", 2e9))]
    samples += [({"node": "n2", "resource": "cpu", "unit": "core"}, 1.93),
                ({"node": "n2", "resource": "memory", "unit": "byte"}, 7_291_584_512.0),
                ({"node": "n3", "resource": "cpu", "unit": "core"}, 2.0)]  # no memory: left out
    assert node_sizes(samples) == {"127.0.0.1": NodeSize(3000, 1_000_000_000, 1),
                                   "n2": NodeSize(1930, 7_291_584_512)}


def test_the_typical_size_is_the_most_common_then_the_larger() -> None:
    small, large = NodeSize(1930, 7 * GiB), NodeSize(3920, 15 * GiB)
    assert typical_size([small, large, small]) == (small, 2)
    assert typical_size([small, large]) == (large, 2)
    assert typical_size([small]) == (small, 1)
    assert typical_size([]) is None


@pytest.mark.parametrize(("size", "instance_type"), [
    (NodeSize(1930, 7_291_584_512), "m5.large"),  # an EKS m5.large / m6i.large
    (NodeSize(3920, 14_900 * MiB), "m5.xlarge"),
    (NodeSize(1930, 3_300 * MiB), "c5.large"),
    (NodeSize(7910, 61_000 * MiB), "r5.2xlarge"),
    (NodeSize(3920, 15_000 * MiB, gpus=1), "g4dn.xlarge"),  # a GPU node gets a GPU type
    (NodeSize(31_850, 240 * GiB, gpus=4), "p3.8xlarge"),
], ids=["m5.large", "m5.xlarge", "c5.large", "r5.2xlarge", "one-gpu", "four-gpus"])
def test_the_nearest_known_type_to_a_nodes_allocatable(size: NodeSize,
                                                       instance_type: str) -> None:
    assert nearest_instance_type(size) == instance_type


def test_the_simulated_size_is_the_simulators_allocatable() -> None:
    assert simulated_size("m5.large") == NodeSize(1900, 8 * GiB - 512 * MiB)
    assert simulated_size("g4dn.xlarge").gpus == 1


def test_the_instance_type_label_wins_when_the_simulator_knows_it() -> None:
    sizes = [NodeSize(3920, 15 * GiB)] * 2
    chosen = node_type(["m5.xlarge", "m5.xlarge", "m5.large"], sizes, "t3.medium")
    assert chosen.instance_type == "m5.xlarge"
    assert chosen.source == ("from node.kubernetes.io/instance-type; allocatable 3920m CPU, "
                             "15.0 GiB")


def test_an_unknown_labelled_type_falls_back_to_the_nearest_size() -> None:
    chosen = node_type(["m6i.large"], [NodeSize(1930, 7_291_584_512)], "t3.medium")
    assert chosen.instance_type == "m5.large"
    assert chosen.source == (
        "nearest to the nodes' kube_node_status_allocatable; allocatable 1930m CPU, 6.8 GiB "
        "(simulated: 1900m CPU, 7.5 GiB); node.kubernetes.io/instance-type 'm6i.large' is not "
        "a type the simulator knows")


def test_mixed_sizes_say_which_was_taken() -> None:
    chosen = node_type([], [NodeSize(1930, 7 * GiB), NodeSize(3920, 15 * GiB),
                            NodeSize(3920, 15 * GiB)], "t3.medium")
    assert chosen.instance_type == "m5.xlarge"
    assert "the most common of 2 sizes" in chosen.source
    assert chosen.source.endswith("node.kubernetes.io/instance-type not exported")


def test_without_label_or_allocatable_the_option_is_taken() -> None:
    chosen = node_type([], [], "t3.medium")
    assert chosen.instance_type == "t3.medium"
    assert chosen.source.startswith("from --instance-type: no node of the group in "
                                    "kube_node_status_allocatable")


# The pods of KSM's TestPodStore request cases (internal/store/pod_test.go): milli-CPU, bytes.
@pytest.mark.parametrize(("containers", "inits", "sidecars", "overhead", "counted"), [
    # pod1: containers 200m/100M and 300m/200M, an init container 200m/100M
    ({"pod1_con1": (200, 100_000_000), "pod1_con2": (300, 200_000_000)},
     {"pod1_initcon1": (200, 100_000_000)}, set(), (0, 0), (500, 300_000_000)),
    # pod2: containers 400m/300M and 500m/400M, an init container 400m/300M
    ({"pod2_con1": (400, 300_000_000), "pod2_con2": (500, 400_000_000)},
     {"pod2_initcon1": (400, 300_000_000)}, set(), (0, 0), (900, 700_000_000)),
    # an init container larger than the containers: the pod needs it, per resource
    ({"c": (250, 2**28)}, {"migrate": (1000, 2**27), "fetch": (100, 2**29)}, set(), (0, 0),
     (1000, 2**29)),
    # a native sidecar runs beside the containers and beside the init containers after it
    ({"c": (250, 2**28)}, {"proxy": (100, 2**26), "migrate": (1000, 2**27)}, {"proxy"},
     (0, 0), (1100, 2**28 + 2**26)),
    # the overhead (RuntimeClass) is added after the max
    ({"c": (250, 2**28)}, {"migrate": (1000, 2**27)}, set(), (50, 2**20),
     (1050, 2**28 + 2**20)),
    ({}, {}, set(), (0, 0), (0, 0)),
], ids=["ksm-pod1", "ksm-pod2", "init-larger", "native-sidecar", "overhead", "no-requests"])
def test_a_pods_request_is_what_kube_scheduler_counts(
        containers: dict[str, tuple[int, int]], inits: dict[str, tuple[int, int]],
        sidecars: set[str], overhead: tuple[int, int], counted: tuple[int, int]) -> None:
    assert scheduler_request(containers, inits, sidecars, overhead) == counted


def test_per_node_pods_get_names_a_scenario_takes_each_once() -> None:
    found = {"batch": {("monitoring", "agent"): (50, MiB), ("security", "agent"): (60, MiB),
                       ("kube-system", "kube-proxy"): (100, 0),
                       ("logging", "fluent-bit.v2"): (100, 2 * MiB),
                       ("a", "x" * 70): (1, 1), ("b", "x" * 70 + "-b"): (2, 2)}}
    pods = per_node_pods(found)["batch"]
    names = [pod.name for pod in pods]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert PerNodePod("agent-monitoring", 50, MiB) in pods
    assert PerNodePod("agent-security", 60, MiB) in pods
    assert PerNodePod("kube-proxy", 100, 0) in pods
    assert PerNodePod("fluent-bit-v2", 100, 2 * MiB) in pods  # a label holds no dot
    long = [pod.name for pod in pods if pod.name.startswith("x")]
    assert long == ["x" * 60 + "-2", "x" * 63]  # cut to 63 characters, then numbered
    for name in names:  # what the scenario's DaemonSetSpec takes
        DaemonSetSpec(name=name, cpu="0", memory="0")


def test_a_type_too_small_for_the_daemonsets_is_passed_over() -> None:
    daemonsets = NodeSize(2500, GiB)  # more CPU than a simulated m5.large offers (1900m)
    assert not holds("m5.large", daemonsets) and holds("c5.xlarge", daemonsets)
    assert nearest_instance_type(NodeSize(1930, 7 * GiB), daemonsets) == "c5.xlarge"
    chosen = node_type(["m5.large"], [NodeSize(1930, 7 * GiB)], "m5.large", daemonsets)
    assert chosen.instance_type == "c5.xlarge"  # the nearest that holds them
    assert chosen.source.endswith("node.kubernetes.io/instance-type 'm5.large': its simulated "
                                  "node (1900m CPU, 7.5 GiB) cannot hold the DaemonSet pods "
                                  "(2500m CPU, 1.0 GiB)")
