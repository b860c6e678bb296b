"""Every value Escalator's decoder and ValidateNodeGroup accept is accepted, read as Escalator
reads it, with a warning where it is "off" or does nothing (issue 43; docs/escalator-config.md).

Sources: escalator pkg/controller/node_group.go (UnmarshalNodeGroupOptions, ValidateNodeGroup,
validMaxNodeAgeDuration, the XDuration helpers), Go's time.ParseDuration (src/time/format.go),
encoding/json's handling of null.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.core.duration import parse_go_duration_ns
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.escalator.config import node_group_warnings
from kube_elevator.tasks.node_group_file import parse_node_groups
from tests.builders import group_dict, make_group

NS, US, MS, S, M, H = 1, 10**3, 10**6, 10**9, 60 * 10**9, 3600 * 10**9


# Go's own table (src/time/time_test.go parseDurationTests), re-expressed.
@pytest.mark.parametrize(("text", "nanoseconds"), [
    ("0", 0), ("5s", 5 * S), ("30s", 30 * S), ("1478s", 1478 * S),
    ("-5s", -5 * S), ("+5s", 5 * S), ("-0", 0), ("+0", 0),
    ("5.0s", 5 * S), ("5.6s", 5 * S + 600 * MS), ("5.s", 5 * S), (".5s", 500 * MS),
    ("1.0s", S), ("1.00s", S), ("1.004s", S + 4 * MS), ("1.0040s", S + 4 * MS),
    ("100.00100s", 100 * S + MS),
    ("10ns", 10 * NS), ("11us", 11 * US), ("12µs", 12 * US), ("12μs", 12 * US),
    ("13ms", 13 * MS), ("14s", 14 * S), ("15m", 15 * M), ("16h", 16 * H),
    ("3h30m", 3 * H + 30 * M), ("10.5s4m", 4 * M + 10 * S + 500 * MS),
    ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)), ("1h2m3s4ms5us6ns",
                                               H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS),
    ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
    ("52763797000ns", 52763797000 * NS), ("0.3333333333333333333h", 20 * M),
    ("9007199254740993ns", (1 << 53) + 1), ("9223372036854775807ns", (1 << 63) - 1),
    ("9223372036854775.807us", (1 << 63) - 1), ("-9223372036854775808ns", -(1 << 63)),
    ("0.100000000000000000000h", 6 * M), ("0.830103483285477580700h", 49 * M + 48 * S
                                          + 372539827 * NS),
    # a fraction finer than a nanosecond is truncated, as Go truncates it
    ("1.0000000001s", S),
])
def test_go_durations_parse_as_go_parses_them(text: str, nanoseconds: int) -> None:
    assert parse_go_duration_ns(text) == nanoseconds


@pytest.mark.parametrize("text", [
    "", "3", "-", "s", ".", "-.", ".s", "+.s", "1d", "1 s", "1hh", "1e3s", "٣s",
    "9223372036854775808ns", "9223372036854775.808us", "-9223372036854775809ns",
])
def test_what_go_refuses_is_no_duration(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration_ns(text)


def _load(**overrides: Any) -> Any:
    return parse_node_groups({"node_groups": [group_dict(**overrides)]}, "ng.yaml")


@pytest.mark.parametrize(("value", "warned"), [
    ("", False), ("0", False), ("-0", True), ("0s", True), ("-1h", True), ("+0", True),
    ("0.0h", True), ("30m", False), ("1h30m", False), ("+2h", False),
])
def test_every_max_node_age_escalator_parses_runs(value: str, warned: bool) -> None:
    """validMaxNodeAgeDuration: "" or whatever ParseDuration reads; scaleOnMaxNodeAge is off
    for MaxNodeAgeDuration() <= 0. A non-positive value other than "" and "0" is warned."""
    loaded = _load(max_node_age=value)
    group = loaded.node_groups[0]
    assert (group.max_node_age_seconds > 0) == (parse_go_duration_ns(value or "0") > 0)
    warnings = [line for line in loaded.warnings if "max_node_age" in line]
    assert bool(warnings) == warned
    if warned:
        assert warnings == [f'ng.yaml: node_groups[0] (batch): max_node_age: "{value}" is not '
                            "positive: no node is rotated out, as Escalator reads it ('0' or "
                            "'' says so)"]


@pytest.mark.parametrize("value", ["1d", "30", "1h 30m", "-"])
def test_a_max_node_age_go_cannot_parse_is_refused(value: str) -> None:
    with pytest.raises(InputError) as raised:
        _load(max_node_age=value)
    assert "max_node_age" in str(raised.value.problems)


def test_durations_compare_in_go_nanoseconds() -> None:
    """soft < hard as Go compares time.Durations: 1.0000000001s is 1s."""
    with pytest.raises(InputError) as raised:
        _load(soft_delete_grace_period="1s", hard_delete_grace_period="1.0000000001s")
    assert "must be less than hard_delete_grace_period" in " ".join(raised.value.problems)
    assert _load(soft_delete_grace_period="1s",
                 hard_delete_grace_period="1.000000001s").node_groups[0]


@pytest.mark.parametrize("key", ["max_node_age", "taint_effect", "unhealthy_node_grace_period",
                                 "scale_on_starve", "dry_mode", "max_unhealthy_nodes_percent",
                                 "aws"])
def test_a_key_given_as_null_keeps_its_zero_value(key: str) -> None:
    """encoding/json: a null "has no effect on the value" (`max_node_age:` with nothing)."""
    group = _load(**{key: None}).node_groups[0]
    assert group == make_group()


def test_a_null_in_a_list_of_strings_is_the_empty_string() -> None:
    group = _load(aws={"instance_type_overrides": [None, "m5.large"]}).node_groups[0]
    assert group.aws.instance_type_overrides == ["", "m5.large"]


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"slow_node_removal_rate": 0}, ["slow_node_removal_rate is 0: usage from taint_lower "
                                     "(10%) to below taint_upper (40%) taints no node (tainted "
                                     "nodes are still removed after their grace periods)"]),
    ({"slow_node_removal_rate": 0, "fast_node_removal_rate": 0},
     ["fast_node_removal_rate is 0: usage below taint_lower (10%) taints no node (tainted "
      "nodes are still removed after their grace periods)",
      "slow_node_removal_rate is 0: usage from taint_lower (10%) to below taint_upper (40%) "
      "taints no node (tainted nodes are still removed after their grace periods)"]),
    ({"slow_node_removal_rate": -1, "fast_node_removal_rate": 2},
     ["slow_node_removal_rate is -1: usage from taint_lower (10%) to below taint_upper (40%) "
      "is a scale-up of 1, as Escalator reads a negative rate (delta = "
      "-slow_node_removal_rate)"]),
    ({"health_check_newest_nodes_percent": 150},
     ["health_check_newest_nodes_percent is ignored: the unhealthy-node check is on only with "
      "unhealthy_node_grace_period"]),
    ({"aws": {"launch_template_id": "lt-1", "fleet_instance_ready_timeout": "soon"}},
     ['aws.fleet_instance_ready_timeout: "soon" is read as 0 (as Escalator does): a fleet\'s '
      "instances get no time to be running before they are terminated"]),
    ({"aws": {"fleet_instance_ready_timeout": "soon"}}, []),  # no fleet: nothing to time
    ({}, []),
])
def test_what_does_nothing_is_warned_never_refused(overrides: dict[str, Any],
                                                    expected: list[str]) -> None:
    loaded = _load(**overrides)  # accepted: Escalator's ValidateNodeGroup accepts each
    assert node_group_warnings(loaded.node_groups[0]) == expected
    assert [line.split("(batch): ", 1)[1] for line in loaded.warnings] == expected


def test_a_negative_rate_scales_up_as_escalator_reads_it() -> None:
    """controller.go scaleNodeGroup: nodesDelta = -SlowNodeRemovalRate, here +1."""
    from kube_elevator.tasks.core.lease_state import GroupState
    from kube_elevator.tasks.escalator.decide import plan_group
    from tests.builders import make_asg, make_node, make_pod

    group = make_group(slow_node_removal_rate=-1, fast_node_removal_rate=2, min_nodes=1)
    nodes = [make_node(f"n{i}", created=i, cpu=1000) for i in range(2)]
    pods = [make_pod("p", cpu=500, node="n0")]  # 25 %: between taint_lower and taint_upper
    plan = plan_group(group, pods, nodes, make_asg(2), GroupState(), 1_800_000_000.0)
    assert plan.delta == 1 and plan.cloud_increase == 1 and plan.asg_desired == 3


def test_keys_are_matched_whatever_their_case_as_encoding_json_matches_them() -> None:
    """Escalator decodes through encoding/json, which takes `Min_Nodes` for `min_nodes` (and
    the Kelvin sign, the long s and the Turkish I's as their ASCII letters, fold.go); of two
    spellings the last decoded wins: sigs.k8s.io/yaml's json.Marshal sorted them, so the
    field's own spelling, else the greatest."""
    document = {"Node_Groups": [{
        **{key: value for key, value in group_dict().items()
           if key not in ("name", "min_nodes", "scale_up_cool_down_period")},
        "NAME": "batch", "Min_Nodes": 4, "MIN_NODES": 3,
        "\u017fcale_up_cool_down_period": "5m", "AWS": {"Lifecycle": "spot"}}]}
    loaded = parse_node_groups(document, "ng.yaml")
    group = loaded.node_groups[0]
    assert (group.name, group.min_nodes, group.scale_up_cool_down_period,
            group.aws.lifecycle) == ("batch", 4, "5m", "spot")
    assert loaded.warnings == (
        "ng.yaml: Node_Groups: read as `node_groups` (Escalator matches keys whatever their "
        "case)",
        "ng.yaml: node_groups[0] (batch).NAME: read as `name` (Escalator matches keys whatever "
        "their case)",
        "ng.yaml: node_groups[0] (batch).Min_Nodes: read as `min_nodes` (Escalator matches "
        "keys whatever their case)",
        "ng.yaml: node_groups[0] (batch).MIN_NODES: ignored: a spelling of `min_nodes`, which "
        "another key sets (Escalator reads the last of them in sorted order; a null sets "
        "nothing)",
        "ng.yaml: node_groups[0] (batch).\u017fcale_up_cool_down_period: read as "
        "`scale_up_cool_down_period` (Escalator matches keys whatever their case)",
        "ng.yaml: node_groups[0] (batch).AWS: read as `aws` (Escalator matches keys whatever "
        "their case)",
        "ng.yaml: node_groups[0] (batch).aws.Lifecycle: read as `lifecycle` (Escalator "
        "matches keys whatever their case)")


def test_the_exact_spelling_wins_over_another_and_a_null_sets_nothing() -> None:
    group = _load(**{"Min_Nodes": 3, "MAX_NODES": None}).node_groups[0]
    assert (group.min_nodes, group.max_nodes) == (1, 10)  # group_dict's min_nodes, max_nodes


@pytest.mark.parametrize(("value", "read"), [(3.0, 3), (3, 3), (3.5, None), ("3", None),
                                             (True, None), (1e21, None)])
def test_an_int_key_takes_what_a_go_int_takes_through_json(value: Any, read: int | None) -> None:
    """sigs.k8s.io/yaml re-encodes a YAML float with json.Marshal (3.0 is `3`), which a Go int
    decodes; a fraction, a string or a bool is a decode error that stops Escalator."""
    if read is None:
        with pytest.raises(InputError):
            _load(min_nodes=value)
    else:
        assert _load(min_nodes=value).node_groups[0].min_nodes == read


def test_a_plain_y_or_n_is_a_bool_as_goyaml_v2_reads_it(tmp_path: Any) -> None:
    """goyaml.v2 (resolve.go) reads a plain y/Y/n/N as a bool, PyYAML as a string: `dry_mode: Y`
    is true for Escalator, and `label_value: y` is the text "true" (a bool for a string key);
    a quoted "y" stays "y"."""
    from kube_elevator.tasks.node_group_file import load_node_groups

    lines = [f"    {key}: {value}" for key, value in group_dict().items()
             if key not in ("label_value", "name")]
    path = tmp_path / "ng.yaml"
    path.write_text("node_groups:\n  - name: \"y\"\n    label_value: y\n    dry_mode: Y\n"
                    "    scale_on_starve: n\n" + "\n".join(lines) + "\n")
    group = load_node_groups(path).node_groups[0]
    assert (group.name, group.label_value, group.dry_mode, group.scale_on_starve) == (
        "y", "true", True, False)

