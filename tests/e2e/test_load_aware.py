"""Load-aware scale-down selection, and the simulator placing pods through the extender."""

from __future__ import annotations

from pathlib import Path

import yaml

from kube_elevator.fakes.scenario import load_scenario
from kube_elevator.flows.simulation import simulate
from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.escalator.decide import plan_group
from kube_elevator.tasks.escalator.node_selection import cpu_load_from_watcher, nodes_to_taint
from tests.builders import group_dict, make_asg, make_group, make_node


def test_least_loaded_taints_the_idlest_nodes_first_and_unknown_ones_last() -> None:
    nodes = [make_node("old-busy", created=1), make_node("new-idle", created=9),
             make_node("mid-idle", created=5), make_node("unmeasured", created=0)]
    load = {"old-busy": 80.0, "new-idle": 5.0, "mid-idle": 5.0}
    chosen = nodes_to_taint(nodes, 3, "least_loaded", load)
    assert [n.name for n in chosen] == ["mid-idle", "new-idle", "old-busy"]
    assert [n.name for n in nodes_to_taint(nodes, 2, "oldest", load)] == ["unmeasured",
                                                                          "old-busy"]
    assert [n.name for n in nodes_to_taint(nodes, 2, "least_loaded", {})] == [
        "unmeasured", "old-busy"]  # no load data: Escalator's order


def test_plan_uses_the_selection_of_the_group() -> None:
    nodes = [make_node(f"n{i}", created=i) for i in range(4)]
    load = {"n0": 90.0, "n1": 70.0, "n2": 10.0, "n3": 20.0}
    plan = plan_group(make_group(scale_down_selection="least_loaded"), [], nodes,
                      make_asg(4), GroupState(), 1e9, cpu_load_percent=load)
    assert plan.taint == ("n2", "n3")  # fast removal of 2, least loaded first
    assert plan_group(make_group(), [], nodes, make_asg(4), GroupState(), 1e9,
                      cpu_load_percent=load).taint == ("n0", "n1")


def test_watcher_json_gives_cpu_load_per_node() -> None:
    document = (b'{"timestamp": 1, "window": {"duration": "5m"}, "source": "x", "data": '
                b'{"NodeMetricsMap": {"a": {"metrics": [{"type": "CPU", "operator": "AVG", '
                b'"value": 42.5}, {"type": "Memory", "operator": "AVG", "value": 9}]}}}}')
    assert cpu_load_from_watcher(document, "test") == {"a": 42.5}


def test_simulator_places_pods_through_the_extender(tmp_path: Path) -> None:
    scenario = {
        "tick_interval": "60s", "step": "10s", "duration": "6m",
        "placement": "target-load-packing",
        "nodegroups": {"node_groups": [group_dict(scale_down_selection="least_loaded")]},
        "asgs": [{"name": "batch-asg", "min": 1, "max": 10, "desired": 3,
                  "node_labels": {"customer": "batch"}, "boot_delay": "60s"}],
        "workload": [{"name": "job", "at": "30s", "count": 6, "cpu": "300m",
                      "memory": "256Mi", "duration": "3m",
                      "node_selector": {"customer": "batch"}}],
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    first = simulate(load_scenario(path)).to_json()
    assert first["summary"]["pods_completed"] == 6
    assert first == simulate(load_scenario(path)).to_json()  # still deterministic


def test_simulated_pod_usage_is_published_as_cadvisor_series() -> None:
    from kube_elevator.fakes.load import SimulatedMetricsProvider, usage_factor
    from kube_elevator.fakes.pod_metrics import PodMetricsServer
    from tests.builders import make_pod

    clock = [1000.0]
    server = PodMetricsServer(clock=lambda: clock[0])
    provider = SimulatedMetricsProvider(mean_usage=0.5, spread=0.0, pod_metrics=server)
    node = make_node("n1", cpu=2000)
    provider.observe([node], [make_pod("web-1", cpu=1000, memory=2**30, node="n1"),
                              make_pod("pending", cpu=1000)])
    assert server.usage("default", "web-1") == (0.5, 2**29)
    assert server.usage("default", "pending") is None
    assert usage_factor("web-1", 0.5, 0.0, 1) == 0.5
    provider.observe([node], [])  # the pod finished: its series go
    assert server.usage("default", "web-1") is None
    assert 'pod="web-1"' not in server.render()
