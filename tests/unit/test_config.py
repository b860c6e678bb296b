"""Escalator's node-group file: every rule of spec §3.2, Go durations, loading errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kube_elevator.tasks.core.duration import parse_go_duration
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.escalator.config import validate_node_group
from kube_elevator.tasks.node_group_file import load_node_groups, parse_node_groups
from tests.builders import group_dict, make_group


def problems_of(**overrides: Any) -> list[str]:
    """Escalator's messages for one group (without the file prefix)."""
    from kube_elevator.tasks.escalator.config import NodeGroupConfig

    return validate_node_group(NodeGroupConfig.model_validate(group_dict(**overrides)))


def test_valid_group_has_no_problems() -> None:
    assert problems_of() == []


NOT_A_DURATION = "not a duration; use a number and a unit, e.g. 30s, 5m, 1h30m"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"name": ""}, "name cannot be empty"),
        ({"label_key": ""}, "label_key cannot be empty"),
        ({"label_value": ""}, "label_value cannot be empty"),
        ({"cloud_provider_group_name": ""}, "cloud_provider_group_name cannot be empty"),
        ({"taint_upper_capacity_threshold_percent": 0},
         "taint_upper_capacity_threshold_percent must be larger than 0, got 0"),
        ({"taint_lower_capacity_threshold_percent": 0},
         "taint_lower_capacity_threshold_percent must be larger than 0, got 0"),
        ({"scale_up_threshold_percent": 0},
         "scale_up_threshold_percent must be larger than 0, got 0"),
        ({"taint_lower_capacity_threshold_percent": 40},
         "taint_lower_capacity_threshold_percent (40) must be less than "
         "taint_upper_capacity_threshold_percent (40)"),
        ({"taint_upper_capacity_threshold_percent": 70},
         "taint_upper_capacity_threshold_percent (70) must be less than "
         "scale_up_threshold_percent (70)"),
        ({"min_nodes": 10, "max_nodes": 10}, "min_nodes (10) must be less than max_nodes (10)"),
        ({"min_nodes": -2, "max_nodes": -1}, "max_nodes must be larger than 0, got -1"),
        ({"min_nodes": -1, "max_nodes": 3}, "min_nodes must be at least 0, got -1"),
        ({"slow_node_removal_rate": 3},
         "slow_node_removal_rate (3) must be at most fast_node_removal_rate (2)"),
        ({"soft_delete_grace_period": ""},
         "soft_delete_grace_period must not be empty: give a duration, e.g. 30s, 5m, 1h30m"),
        ({"hard_delete_grace_period": ""},
         "hard_delete_grace_period must not be empty: give a duration, e.g. 30s, 5m, 1h30m"),
        ({"soft_delete_grace_period": "10"}, f'soft_delete_grace_period: "10": {NOT_A_DURATION}'),
        ({"hard_delete_grace_period": "abc"},
         f'hard_delete_grace_period: "abc": {NOT_A_DURATION}'),
        ({"soft_delete_grace_period": "-1m"},
         'soft_delete_grace_period: "-1m": must be positive, e.g. 30s, 5m, 1h30m'),
        ({"soft_delete_grace_period": "10m"},
         "soft_delete_grace_period (10m) must be less than hard_delete_grace_period (10m)"),
        ({"scale_up_cool_down_period": ""},
         "scale_up_cool_down_period must not be empty: give a duration, e.g. 30s, 5m, 1h30m"),
        ({"taint_effect": "NoWay"},
         'taint_effect: "NoWay" is not a Kubernetes taint effect; use NoSchedule, NoExecute or '
         "PreferNoSchedule (empty: NoSchedule)"),
        ({"aws": {"lifecycle": "reserved"}},
         'aws.lifecycle: "reserved" must be on-demand or spot if provided'),
        ({"max_node_age": "1d"},
         f"max_node_age: \"1d\": {NOT_A_DURATION} ('0' or '' turns the rotation off)"),
        ({"unhealthy_node_grace_period": "x", "health_check_newest_nodes_percent": 50},
         f'unhealthy_node_grace_period: "x": {NOT_A_DURATION}'),
        ({"unhealthy_node_grace_period": "5m"},
         "health_check_newest_nodes_percent must be larger than 0, got 0"),
        ({"unhealthy_node_grace_period": "5m", "health_check_newest_nodes_percent": 101},
         "health_check_newest_nodes_percent must be at most 100, got 101"),
        ({"unhealthy_node_grace_period": "5m", "health_check_newest_nodes_percent": 50,
          "max_unhealthy_nodes_percent": -1},
         "max_unhealthy_nodes_percent must be at least 0, got -1"),
        ({"unhealthy_node_grace_period": "5m", "health_check_newest_nodes_percent": 50,
          "max_unhealthy_nodes_percent": 100},
         "max_unhealthy_nodes_percent must be less than 100, got 100"),
    ],
)
def test_each_rule_names_the_value_and_the_rule(overrides: dict[str, Any], message: str) -> None:
    assert message in problems_of(**overrides)


def test_a_bad_cool_down_is_reported_under_its_own_name() -> None:
    """Escalator reports it as soft_delete_grace_period, a second time when both are bad."""
    assert problems_of(scale_up_cool_down_period="5") == [
        f'scale_up_cool_down_period: "5": {NOT_A_DURATION}']
    assert problems_of(scale_up_cool_down_period="5", soft_delete_grace_period="9") == [
        f'soft_delete_grace_period: "9": {NOT_A_DURATION}',
        f'scale_up_cool_down_period: "5": {NOT_A_DURATION}']


def test_a_bad_duration_is_one_problem_not_a_cascade() -> None:
    """Issue 34 item 6: an empty or bad duration was also "failed to parse", or "must be less
    than" the other grace period: one problem per key."""
    assert problems_of(soft_delete_grace_period="") == [
        "soft_delete_grace_period must not be empty: give a duration, e.g. 30s, 5m, 1h30m"]
    assert problems_of(hard_delete_grace_period="90x") == [
        f'hard_delete_grace_period: "90x": {NOT_A_DURATION}']
    assert problems_of(taint_lower_capacity_threshold_percent=0) == [
        "taint_lower_capacity_threshold_percent must be larger than 0, got 0"]


def test_all_problems_are_reported_in_escalators_order() -> None:
    problems = problems_of(name="", scale_up_threshold_percent=0, taint_effect="x",
                           slow_node_removal_rate=5)
    assert problems == [
        "name cannot be empty",
        "scale_up_threshold_percent must be larger than 0, got 0",
        "slow_node_removal_rate (5) must be at most fast_node_removal_rate (2)",
        'taint_effect: "x" is not a Kubernetes taint effect; use NoSchedule, NoExecute or '
        "PreferNoSchedule (empty: NoSchedule)",
    ]


def test_min_max_checks_are_skipped_when_auto_discovering() -> None:
    group = make_group(min_nodes=0, max_nodes=0)
    assert group.auto_discover_min_max
    assert validate_node_group(group) == []


def test_slow_equal_to_fast_is_allowed() -> None:
    assert problems_of(slow_node_removal_rate=2, fast_node_removal_rate=2) == []


def test_unhealthy_checks_only_when_feature_on() -> None:
    assert problems_of(health_check_newest_nodes_percent=500) == []


def test_zero_max_node_age_disables_rotation() -> None:
    assert problems_of(max_node_age="0") == []
    assert make_group(max_node_age="0").max_node_age_seconds == 0


def test_file_errors_name_file_group_and_rule(tmp_path: Path) -> None:
    path = tmp_path / "nodegroups.yaml"
    path.write_text(
        "node_groups:\n"
        "  - name: ok\n    label_key: a\n    label_value: b\n"
        "    cloud_provider_group_name: c\n    min_nodes: 1\n    max_nodes: 2\n"
        "    taint_upper_capacity_threshold_percent: 40\n"
        "    taint_lower_capacity_threshold_percent: 10\n"
        "    scale_up_threshold_percent: 70\n"
        "    soft_delete_grace_period: 1m\n    hard_delete_grace_period: 10m\n"
        "    scale_up_cool_down_period: 1m\n"
        "  - name: batch\n    label_key: a\n    label_value: b\n"
        "    cloud_provider_group_name: c\n    min_nodes: 1\n    max_nodes: 2\n"
        "    taint_upper_capacity_threshold_percent: 40\n"
        "    taint_lower_capacity_threshold_percent: 10\n"
        "    scale_up_threshold_percent: 70\n"
        "    soft_delete_grace_period: 1h\n    hard_delete_grace_period: 10m\n"
        "    scale_up_cool_down_period: 1m\n")
    with pytest.raises(InputError) as caught:
        load_node_groups(path)
    assert caught.value.problems == [
        f"{path}: node_groups[1] (batch): soft_delete_grace_period (1h) must be less than "
        "hard_delete_grace_period (10m)"]


def test_type_errors_name_the_key_path() -> None:
    with pytest.raises(InputError) as caught:
        parse_node_groups({"node_groups": [group_dict(min_nodes="three", dry_mode="maybe")]},
                          "ng.yaml")
    problems = "\n".join(caught.value.problems)
    assert "ng.yaml: node_groups[0] (batch).min_nodes: Input should be a valid integer" in problems
    assert "ng.yaml: node_groups[0] (batch).dry_mode: Input should be a valid boolean" in problems


def test_yaml_number_for_a_duration_becomes_its_string_and_fails_to_parse() -> None:
    # Escalator's YAML-to-JSON decoding: `hard_delete_grace_period: 42` is "42", not a duration.
    with pytest.raises(InputError) as caught:
        parse_node_groups({"node_groups": [group_dict(hard_delete_grace_period=42)]}, "f")
    assert caught.value.problems == [
        f'f: node_groups[0] (batch): hard_delete_grace_period: "42": {NOT_A_DURATION}']


def test_unknown_keys_are_warnings_not_dropped_silently() -> None:
    loaded = parse_node_groups(
        {"node_groups": [group_dict(scale_up_cool_down_timeout="10m", aws={"colour": "red"})],
         "karpenter": {}}, "f.yaml")
    # `cluster_autoscaler` is a known section now (tests/unit/test_config_cluster_autoscaler.py).
    assert loaded.warnings == (
        "f.yaml: karpenter: unknown top-level key, ignored",
        "f.yaml: node_groups[0] (batch).scale_up_cool_down_timeout: unknown key, ignored "
        "(as Escalator does); did you mean `scale_up_cool_down_period`?",
        "f.yaml: node_groups[0] (batch).aws.colour: unknown key, ignored (as Escalator does)",
    )


@pytest.mark.parametrize(("document", "warning"), [
    ({"nodegroups": [group_dict()]},
     "f.yaml: nodegroups: unknown top-level key, ignored; did you mean `node_groups`?"),
    ({"node_groups": [group_dict(soft_delete_grace_period="90x", label_kye="x")]},
     "f.yaml: node_groups[0] (batch).label_kye: unknown key, ignored (as Escalator does); did "
     "you mean `label_key`?"),
    ({"node_groups": [group_dict(min_nodes="three", clod_provider_group_name="x")]},
     "f.yaml: node_groups[0] (batch).clod_provider_group_name: unknown key, ignored (as "
     "Escalator does); did you mean `cloud_provider_group_name`?"),
], ids=["missing node_groups", "a rule broken", "a type error"])
def test_a_file_with_errors_keeps_its_warnings_and_suggests_the_key_meant(
        document: dict[str, Any], warning: str) -> None:
    """Issue 34 item 6: the unknown-key warning went missing when the file also had an error,
    and `nodegroups:` got no "did you mean"."""
    with pytest.raises(InputError) as caught:
        parse_node_groups(document, "f.yaml")
    assert caught.value.warnings == (warning,)


def test_duplicate_names_are_an_error() -> None:
    with pytest.raises(InputError) as caught:
        parse_node_groups({"node_groups": [group_dict(), group_dict()]}, "f.yaml")
    assert caught.value.problems == [
        "f.yaml: node_groups[1] (batch): duplicate node group name 'batch' (also node_groups[0])"]


@pytest.mark.parametrize("document", [[1, 2], "text", None])
def test_top_level_must_be_a_mapping(document: Any) -> None:
    with pytest.raises(InputError, match="top level must be a mapping"):
        parse_node_groups(document, "f.yaml")


def test_json_files_load_too(tmp_path: Path) -> None:
    import json

    path = tmp_path / "ng.json"
    path.write_text(json.dumps({"node_groups": [group_dict()]}))
    assert load_node_groups(path).node_groups[0].name == "batch"


def test_a_pipe_is_read_to_its_end(tmp_path: Path) -> None:
    """`--nodegroups <(generate-config)`: the shell hands over a pipe, read as `cat` reads it."""
    import json
    import os
    import threading

    fifo = tmp_path / "node-groups"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text,
                              args=(json.dumps({"node_groups": [group_dict()]}),))
    writer.start()
    try:
        assert load_node_groups(fifo).node_groups[0].name == "batch"
    finally:
        if writer.is_alive():  # nothing opened the pipe: let the writer's open return
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(10)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read file"):
        load_node_groups(tmp_path / "missing.yaml")
    with pytest.raises(InputError, match="/dev/zero: cannot read file: it is a character device"):
        load_node_groups("/dev/zero")  # read to its end, it would fill the memory
    bad = tmp_path / "bad.yaml"
    bad.write_text("node_groups: [\n  - {name: x\n")
    with pytest.raises(InputError, match=r"bad.yaml: line \d+, column \d+: not valid YAML"):
        load_node_groups(bad)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h10m", 4200), ("1.5h", 5400), ("90s", 90), ("0", 0), ("-2m", -120), ("500ms", 0.5),
     ("1h0m0.5s", 3600.5), (".5s", 0.5), ("2us", 2e-6), ("3µs", 3e-6), ("7ns", 7e-9)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "1d", "h", "1 h", ".s", "1h-5m", "+"])
def test_go_duration_errors(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)
