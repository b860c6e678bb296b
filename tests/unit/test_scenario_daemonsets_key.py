"""The scenario's `asgs[].daemonsets` key (issue 29's contract): validated where it is read, each
problem one line naming the file, the key path and the rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_elevator.fakes.scenario import DaemonSetSpec, load_scenario
from kube_elevator.tasks.core.errors import InputError
from tests.builders import group_dict


def scenario_with(tmp_path: Path, daemonsets: Any) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({
        "duration": "10m", "nodegroups": {"node_groups": [group_dict()]},
        "asgs": [{"name": "batch-asg", "min": 1, "max": 10, "desired": 1,
                  "node_labels": {"customer": "batch"}, "daemonsets": daemonsets}],
        "workload": [{"at": 0, "count": 1, "cpu": "500m", "memory": "256Mi"}]}))
    return path


def test_daemonsets_load_with_their_requests(tmp_path: Path) -> None:
    loaded = load_scenario(scenario_with(tmp_path, [
        {"name": "kube-proxy", "cpu": "100m", "memory": "64Mi"},
        {"name": "node-exporter-monitoring", "cpu": 0.05, "memory": 33554432}]))
    assert loaded.asgs[0].daemonsets == [
        DaemonSetSpec(name="kube-proxy", cpu="100m", memory="64Mi"),
        DaemonSetSpec(name="node-exporter-monitoring", cpu="0.05", memory="33554432")]


def test_an_asg_without_daemonsets_has_none(tmp_path: Path) -> None:
    assert load_scenario(scenario_with(tmp_path, [])).asgs[0].daemonsets == []


@pytest.mark.parametrize(("daemonsets", "problem"), [
    ([{"name": "Kube_Proxy", "cpu": "1", "memory": "1"}],
     "asgs[0].daemonsets[0].name: String should match pattern "
     "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"),
    ([{"name": "a", "cpu": "-100m", "memory": "1"}],
     "asgs[0].daemonsets[0].cpu: quantity '-100m' must not be negative"),
    ([{"name": "a", "cpu": "1"}], "asgs[0].daemonsets[0].memory: Field required"),
    ([{"name": "a", "cpu": "1", "memory": "1", "image": "x"}],
     "asgs[0].daemonsets[0].image: Extra inputs are not permitted"),
    ([{"name": "a", "cpu": "1", "memory": "1"}, {"name": "a", "cpu": "2", "memory": "2"}],
     "asgs[0]: daemonsets: 'a' given more than once"),
    ([{"name": "a", "cpu": "1500m", "memory": "1"}, {"name": "b", "cpu": "500m", "memory": "1"}],
     "asgs[0]: daemonsets request 2000m CPU and 2 bytes of memory, more than a m5.large node "
     "offers (1900m, 8053063680 bytes): their pods would never run"),
], ids=["name", "negative-cpu", "no-memory", "unknown-key", "repeated", "larger-than-a-node"])
def test_a_bad_daemonset_is_one_line_naming_its_key(tmp_path: Path, daemonsets: Any,
                                                     problem: str) -> None:
    path = scenario_with(tmp_path, daemonsets)
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    assert caught.value.problems == [f"{path}: {problem}"]
