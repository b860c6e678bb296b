"""One Escalator node group: its keys, Go durations, and validation that reports every problem.

The keys are Escalator's unchanged (snake_case), so an existing Escalator config works as is.
Validation messages and their order are Escalator's (spec/escalator.md §3.2). Reading the whole
file, with its `cluster_autoscaler:` section, is `tasks.node_group_file`, above both systems.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
)

from kube_elevator.tasks.core.duration import (
    DURATION_EXAMPLES,
    duration_or_zero,
    duration_problem,
    go_string,
)
from kube_elevator.tasks.core.lease_state import CLAIM_SETTLE_SECONDS

# --- the models ---------------------------------------------------------------------------


GoString = Annotated[str, BeforeValidator(go_string)]
# Escalator's Go `int` (64 bits): a larger number fails its YAML decoding.
GoInt = Annotated[StrictInt, Field(ge=-(2**63), le=2**63 - 1)]
TAINT_EFFECTS = ("", "NoSchedule", "NoExecute", "PreferNoSchedule")
LIFECYCLES = ("", "on-demand", "spot")


class AwsOptions(BaseModel):
    """The `aws:` block of a node group: with `launch_template_id`, scale-ups go through EC2
    Fleet in one shot (spec §10, `flows/fleet.py`)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    launch_template_id: GoString = ""
    launch_template_version: GoString = ""
    fleet_instance_ready_timeout: GoString = "1m"
    lifecycle: GoString = ""
    instance_type_overrides: list[GoString] = []
    resource_tagging: StrictBool = False

    @property
    def one_shot(self) -> bool:
        """Escalator's canScaleInOneShot: a launch template means CreateFleet + AttachInstances."""
        return self.launch_template_id != ""

    @property
    def fleet_instance_ready_seconds(self) -> float:
        """Spec §3.1: the default 1m when empty; unparsable (or negative) is 0."""
        return max(duration_or_zero(self.fleet_instance_ready_timeout or "1m"), 0.0)


class NodeGroupConfig(BaseModel):
    """One Escalator node group, keys and defaults as spec/escalator.md §3.1."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: GoString = ""
    label_key: GoString = ""
    label_value: GoString = ""
    cloud_provider_group_name: GoString = ""
    min_nodes: GoInt = 0
    max_nodes: GoInt = 0
    dry_mode: StrictBool = False
    scale_on_starve: StrictBool = False
    taint_upper_capacity_threshold_percent: GoInt = 0
    taint_lower_capacity_threshold_percent: GoInt = 0
    scale_up_threshold_percent: GoInt = 0
    slow_node_removal_rate: GoInt = 0
    fast_node_removal_rate: GoInt = 0
    soft_delete_grace_period: GoString = ""
    hard_delete_grace_period: GoString = ""
    scale_up_cool_down_period: GoString = ""
    taint_effect: GoString = ""
    max_node_age: GoString = ""
    unhealthy_node_grace_period: GoString = ""
    health_check_newest_nodes_percent: GoInt = 0
    max_unhealthy_nodes_percent: GoInt = 0
    # Beyond Escalator (Trimaran): taint the least loaded nodes first, as a load watcher sees them.
    scale_down_selection: Literal["oldest", "least_loaded"] = "oldest"
    aws: AwsOptions = AwsOptions()

    @property
    def auto_discover_min_max(self) -> bool:
        """Escalator: min_nodes and max_nodes both 0 means "read them from the ASG every tick"."""
        return self.min_nodes == 0 and self.max_nodes == 0

    @property
    def soft_delete_grace_seconds(self) -> float:
        return duration_or_zero(self.soft_delete_grace_period)

    @property
    def hard_delete_grace_seconds(self) -> float:
        return duration_or_zero(self.hard_delete_grace_period)

    @property
    def scale_up_cool_down_seconds(self) -> float:
        return duration_or_zero(self.scale_up_cool_down_period)

    @property
    def max_node_age_seconds(self) -> float:
        """0 disables the rotation (`""`, `"0"`, or anything not positive)."""
        return max(duration_or_zero(self.max_node_age), 0.0)

    @property
    def unhealthy_node_feature(self) -> bool:
        return self.unhealthy_node_grace_period != ""

    @property
    def unhealthy_node_grace_seconds(self) -> float:
        return duration_or_zero(self.unhealthy_node_grace_period)

    @property
    def effective_taint_effect(self) -> str:
        return self.taint_effect or "NoSchedule"

    @property
    def claim_settle_seconds(self) -> float:
        """How long a claimed scale-up may take to show in the ASG before a later tick calls it
        lost: a one-shot group's tick may first wait for its fleet's instances to be ready."""
        if self.aws.one_shot:
            return CLAIM_SETTLE_SECONDS + self.aws.fleet_instance_ready_seconds
        return CLAIM_SETTLE_SECONDS



def validate_node_group(group: NodeGroupConfig) -> list[str]:
    """Escalator's ValidateNodeGroup: every failed check, in Escalator's order.

    The rules are Escalator's (spec/escalator.md §3.2), the words are ours where Escalator's
    mislead: a bad value is named with the rule and an example, "at most" where the check is
    `<=`, the valid taint effects listed; a key with a problem of its own is left out of the
    checks that compare it with another (no second error about the same value), and no
    problem is reported twice (Escalator reports a bad cool-down as soft_delete_grace_period).
    """
    problems: list[str] = []
    bad: set[str] = set()  # keys with a problem of their own

    def check(condition: bool, message: str, *keys: str) -> None:
        if not condition:
            problems.append(message)
            bad.update(keys)

    def compare(condition: bool, message: str, *keys: str) -> None:
        """A rule between keys, checked when none of them has a problem of its own."""
        if not bad.intersection(keys):
            check(condition, message)

    check(len(group.name) > 0, "name cannot be empty")
    check(len(group.label_key) > 0, "label_key cannot be empty")
    check(len(group.label_value) > 0, "label_value cannot be empty")
    check(len(group.cloud_provider_group_name) > 0, "cloud_provider_group_name cannot be empty")

    upper_key, lower_key, scale_up_key = ("taint_upper_capacity_threshold_percent",
                                          "taint_lower_capacity_threshold_percent",
                                          "scale_up_threshold_percent")
    upper = group.taint_upper_capacity_threshold_percent
    lower = group.taint_lower_capacity_threshold_percent
    scale_up = group.scale_up_threshold_percent
    check(upper > 0, f"{upper_key} must be larger than 0, got {upper}", upper_key)
    check(lower > 0, f"{lower_key} must be larger than 0, got {lower}", lower_key)
    check(scale_up > 0, f"{scale_up_key} must be larger than 0, got {scale_up}", scale_up_key)
    compare(lower < upper, f"{lower_key} ({lower}) must be less than {upper_key} ({upper})",
            lower_key, upper_key)
    compare(upper < scale_up, f"{upper_key} ({upper}) must be less than {scale_up_key} "
                              f"({scale_up})", upper_key, scale_up_key)

    if not group.auto_discover_min_max:
        minimum, maximum = group.min_nodes, group.max_nodes
        check(minimum < maximum, f"min_nodes ({minimum}) must be less than max_nodes ({maximum})")
        check(maximum > 0, f"max_nodes must be larger than 0, got {maximum}")
        check(minimum >= 0, f"min_nodes must be at least 0, got {minimum}")

    slow, fast = group.slow_node_removal_rate, group.fast_node_removal_rate
    check(slow <= fast, f"slow_node_removal_rate ({slow}) must be at most "
                        f"fast_node_removal_rate ({fast})")

    def duration(key: str, text: str) -> None:
        """Escalator: not empty, then parsed and positive; one problem per key."""
        if not text:
            check(False, f"{key} must not be empty: give a duration, {DURATION_EXAMPLES}", key)
        else:
            problem = duration_problem(text)
            check(problem is None, f"{key}: {problem}", key)

    duration("soft_delete_grace_period", group.soft_delete_grace_period)
    duration("hard_delete_grace_period", group.hard_delete_grace_period)
    compare(group.soft_delete_grace_seconds < group.hard_delete_grace_seconds,
            f"soft_delete_grace_period ({group.soft_delete_grace_period}) must be less than "
            f"hard_delete_grace_period ({group.hard_delete_grace_period})",
            "soft_delete_grace_period", "hard_delete_grace_period")
    duration("scale_up_cool_down_period", group.scale_up_cool_down_period)

    check(group.taint_effect in TAINT_EFFECTS,
          f"taint_effect: {json.dumps(group.taint_effect)} is not a Kubernetes taint effect; use "
          "NoSchedule, NoExecute or PreferNoSchedule (empty: NoSchedule)")
    check(group.aws.lifecycle in LIFECYCLES,
          f"aws.lifecycle: {json.dumps(group.aws.lifecycle)} must be on-demand or spot if "
          "provided")

    if group.max_node_age not in ("", "0"):
        problem = duration_problem(group.max_node_age)
        check(problem is None, f"max_node_age: {problem} ('0' or '' turns the rotation off)")

    if group.unhealthy_node_feature:
        newest = group.health_check_newest_nodes_percent
        unhealthy = group.max_unhealthy_nodes_percent
        duration("unhealthy_node_grace_period", group.unhealthy_node_grace_period)
        check(newest > 0, f"health_check_newest_nodes_percent must be larger than 0, got {newest}")
        check(newest <= 100,
              f"health_check_newest_nodes_percent must be at most 100, got {newest}")
        check(unhealthy >= 0, f"max_unhealthy_nodes_percent must be at least 0, got {unhealthy}")
        check(unhealthy < 100, f"max_unhealthy_nodes_percent must be less than 100, got "
                               f"{unhealthy}")
    return list(dict.fromkeys(problems))  # never the same line twice


def effective_min_max(group: NodeGroupConfig, asg_min: int, asg_max: int) -> tuple[int, int]:
    """Escalator auto-discovery: re-read min/max from the ASG every tick when both are 0."""
    if group.auto_discover_min_max:
        return asg_min, asg_max
    return group.min_nodes, group.max_nodes


__all__ = [
    "AwsOptions",
    "NodeGroupConfig",
    "effective_min_max",
    "validate_node_group",
]
