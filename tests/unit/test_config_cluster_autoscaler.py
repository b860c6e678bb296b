"""The `cluster_autoscaler:` section beside `node_groups`: CA's defaults, and clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_elevator.tasks.cluster_autoscaler.config import (
    PRIORITY_CONFIGMAP,
    ClusterAutoscalerConfig,
    parse_cores_total,
    parse_memory_total,
)
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.node_group_file import load_node_groups, parse_node_groups
from tests.builders import group_dict

GiB = 2**30


def section(**keys: Any) -> ClusterAutoscalerConfig:
    return parse_node_groups({"node_groups": [group_dict()], "cluster_autoscaler": keys},
                             "f.yaml").cluster_autoscaler


def problems(**keys: Any) -> list[str]:
    with pytest.raises(InputError) as caught:
        parse_node_groups({"node_groups": [group_dict()], "cluster_autoscaler": keys}, "f.yaml")
    return caught.value.problems


def test_absent_section_is_disabled_with_ca_defaults() -> None:
    loaded = parse_node_groups({"node_groups": [group_dict()]}, "f.yaml")
    config = loaded.cluster_autoscaler
    assert config.enabled is False
    assert config.expander_chain == ("least-waste",)  # CA's --expander default
    assert config.max_nodes_total == 0  # no cap
    assert config.cores_min_max == (0, 320_000)
    assert config.memory_min_max_bytes == (0, 6_400_000 * GiB)
    assert config.max_node_provision_seconds == 15 * 60
    assert config.scale_down.drain is False
    assert config.scale_down.utilization_threshold == 0.5
    assert config.scale_down.unneeded_seconds == 600
    assert config.scale_down.delay_after_add_seconds == 600
    assert config.scale_down.enabled is True  # CA --scale-down-enabled
    assert (config.scale_down.max_scale_down_parallelism,
            config.scale_down.max_drain_parallelism) == (10, 1)
    assert config.prices == {}
    assert config.priorities is None
    assert config.random_seed is None
    assert config.priority_configmap is None


def test_empty_section_reads_as_defaults() -> None:
    loaded = parse_node_groups({"node_groups": [group_dict()], "cluster_autoscaler": None}, "f")
    assert loaded.cluster_autoscaler == ClusterAutoscalerConfig()


def test_the_section_is_no_longer_an_unknown_top_level_key() -> None:
    loaded = parse_node_groups({"node_groups": [group_dict()],
                                "cluster_autoscaler": {"enabled": True}}, "f.yaml")
    assert loaded.warnings == ()
    assert loaded.node_groups[0].name == "batch"


def test_full_section_from_a_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "nodegroups.yaml"
    path.write_text(yaml.safe_dump({
        "node_groups": [group_dict()],
        "cluster_autoscaler": {
            "enabled": True,
            "expander": "priority, least-waste",
            "max_nodes_total": 50,
            "cores_total": "4:200",
            "memory_total": "8:1024",
            "max_node_provision_time": "10m",
            "scale_down": {"drain": True, "utilization_threshold": 0.6,
                           "unneeded_time": "5m", "delay_after_add": "2m"},
            "prices": {"m5.large": 0.096, "c5.2xlarge": 0.34},
            "priorities": {50: [".*-spot-.*"], 10: [".*"]},
            "random_seed": 42,
        },
    }))
    config = load_node_groups(path).cluster_autoscaler
    assert config.enabled
    assert config.expander_chain == ("priority", "least-waste")
    assert config.max_nodes_total == 50
    assert config.cores_min_max == (4, 200)
    assert config.memory_min_max_bytes == (8 * GiB, 1024 * GiB)
    assert config.max_node_provision_seconds == 600
    assert config.scale_down.drain is True
    assert config.scale_down.utilization_threshold == 0.6
    assert config.scale_down.unneeded_seconds == 300
    assert config.scale_down.delay_after_add_seconds == 120
    assert config.prices == {"m5.large": 0.096, "c5.2xlarge": 0.34}
    assert config.priorities == {50: (".*-spot-.*",), 10: (".*",)}
    assert config.random_seed == 42


def test_priorities_can_name_a_configmap_or_default_to_cas() -> None:
    assert section(expander="priority").priority_configmap == PRIORITY_CONFIGMAP
    assert section(expander="priority", priorities="kube-system/my-priorities"
                   ).priority_configmap == "kube-system/my-priorities"
    assert section(expander="priority", priorities={1: ".*"}).priority_configmap is None


def test_json_priority_keys_are_integers_too() -> None:
    assert section(priorities={"10": ["a"], "-1": "b"}).priorities == {10: ("a",), -1: ("b",)}


def test_memory_total_takes_gib_as_ca_or_quantities() -> None:
    assert parse_memory_total("0:64") == (0, 64 * GiB)
    assert parse_memory_total("512Mi:1Ti") == (512 * 2**20, 2**40)
    assert parse_memory_total("1.5:2") == (int(1.5 * GiB), 2 * GiB)
    assert parse_cores_total(" 2 : 8 ") == (2, 8)


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ({"enable": True}, "f.yaml: cluster_autoscaler.enable: Extra inputs are not permitted; "
                           "did you mean `enabled`?"),
        ({"enabled": "yes"}, "f.yaml: cluster_autoscaler.enabled: Input should be a valid boolean"),
        ({"expander": "cheapest"}, "f.yaml: cluster_autoscaler.expander: unknown expander "
                                   "'cheapest'; known: random, most-pods, least-waste, "
                                   "least-nodes, price, priority"),
        ({"expander": "priority,least-waste,priority"},
         "f.yaml: cluster_autoscaler.expander: expander 'priority' appears more than once"),
        ({"expander": "priority,,random"},
         "f.yaml: cluster_autoscaler.expander: must be a comma-separated list"),
        ({"expander": "grpc"}, "f.yaml: cluster_autoscaler.expander: the grpc expander is not "
                               "supported"),
        ({"max_nodes_total": -1},
         "f.yaml: cluster_autoscaler.max_nodes_total: Input should be greater than or equal to 0"),
        ({"cores_total": "100"}, 'f.yaml: cluster_autoscaler.cores_total: must be "min:max"'),
        ({"cores_total": "1.5:8"},
         'f.yaml: cluster_autoscaler.cores_total: must be "min:max" in whole cores'),
        ({"cores_total": "8:4"},
         "f.yaml: cluster_autoscaler.cores_total: min must be less than or equal to max"),
        ({"cores_total": "-1:4"},
         "f.yaml: cluster_autoscaler.cores_total: min and max must be greater than or equal to 0"),
        ({"memory_total": "lots:more"},
         'f.yaml: cluster_autoscaler.memory_total: must be "min:max" in GiB (as CA) or '
         'quantities'),
        ({"memory_total": "2Ti:1Ti"},
         "f.yaml: cluster_autoscaler.memory_total: min must be less than or equal to max"),
        ({"max_node_provision_time": "15"},
         'f.yaml: cluster_autoscaler.max_node_provision_time: "15": not a duration; use a number '
         'and a unit, e.g. 30s, 5m, 1h30m'),
        ({"max_node_provision_time": "0s"},
         "f.yaml: cluster_autoscaler.max_node_provision_time: must be longer than 0"),
        ({"max_node_provision_time": "-5m"},
         'f.yaml: cluster_autoscaler.max_node_provision_time: "-5m": must not be negative, e.g. '
         '30s, 5m, 1h30m'),
        ({"scale_down": {"utilization_threshold": 1.5}},
         "f.yaml: cluster_autoscaler.scale_down.utilization_threshold: Input should be less "
         "than or equal to 1"),
        ({"scale_down": {"unneeded_time": "ten minutes"}},
         'f.yaml: cluster_autoscaler.scale_down.unneeded_time: "ten minutes": not a duration; '
         'use a number and a unit, e.g. 30s, 5m, 1h30m'),
        ({"scale_down": {"delay_after_add": "-1m"}},
         'f.yaml: cluster_autoscaler.scale_down.delay_after_add: "-1m": must not be negative, '
         'e.g. 30s, 5m, 1h30m'),
        ({"scale_down": {"enabled": "yes"}},
         "f.yaml: cluster_autoscaler.scale_down.enabled: Input should be a valid boolean"),
        ({"scale_down": {"max_drain_parallelism": 0}},
         "f.yaml: cluster_autoscaler.scale_down.max_drain_parallelism: Input should be greater "
         "than or equal to 1"),
        ({"scale_down": {"drain": "true"}},
         "f.yaml: cluster_autoscaler.scale_down.drain: Input should be a valid boolean"),
        ({"scale_down": {"drian": True}},
         "f.yaml: cluster_autoscaler.scale_down.drian: Extra inputs are not permitted; did you "
         "mean `drain`?"),
        ({"prices": {"m5.large": "cheap"}},
         "f.yaml: cluster_autoscaler.prices.m5.large: Input should be a valid number"),
        ({"prices": {"m5.large": -1}},
         "f.yaml: cluster_autoscaler.prices.m5.large: Input should be greater than or equal to 0"),
        ({"expander": "price"}, "f.yaml: cluster_autoscaler.prices: the price expander needs a "
                                "price per instance type"),
        ({"priorities": {"high": [".*"]}},
         "f.yaml: cluster_autoscaler.priorities: priority 'high' is not an integer"),
        ({"priorities": {10: ["spot-("]}},
         "f.yaml: cluster_autoscaler.priorities: priority 10: regex 'spot-(' does not compile"),
        ({"priorities": {10: [3]}},
         "f.yaml: cluster_autoscaler.priorities: priority 10: expected a list of regexes"),
        ({"priorities": "Not A Name!"},
         "f.yaml: cluster_autoscaler.priorities: must be a mapping of priority to regexes, or a "
         "ConfigMap name"),
        ({"random_seed": "seven"},
         "f.yaml: cluster_autoscaler.random_seed: Input should be a valid integer"),
    ],
)
def test_each_mistake_names_its_key_path(keys: dict[str, Any], problem: str) -> None:
    found = problems(**keys)
    assert any(line.startswith(problem) for line in found), found


def test_every_problem_is_reported_at_once_with_the_groups_problems() -> None:
    with pytest.raises(InputError) as caught:
        parse_node_groups({"node_groups": [group_dict(name="")],
                           "cluster_autoscaler": {"expander": "price",
                                                  "max_node_provision_time": "0"}}, "f.yaml")
    assert caught.value.problems == [
        "f.yaml: node_groups[0]: name cannot be empty",
        "f.yaml: cluster_autoscaler.prices: the price expander needs a price per instance type "
        "(prices: {m5.large: 0.096, ...})",
        "f.yaml: cluster_autoscaler.max_node_provision_time: must be longer than 0",
    ]


def test_the_section_is_frozen() -> None:
    config = section(enabled=True)
    with pytest.raises(ValueError):
        config.enabled = False
