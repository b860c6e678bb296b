"""One Escalator node group: its keys, Go durations, and validation that reports every problem.

The keys are Escalator's unchanged (snake_case), so an existing Escalator config works as is.
Validation messages and their order are Escalator's (spec/escalator.md §3.2). Reading the whole
file, with its `cluster_autoscaler:` section, is `tasks.node_group_file`, above both systems.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
)

from kube_elevator.tasks.core.duration import duration_or_zero, go_string, parse_go_duration
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
    """Escalator's ValidateNodeGroup: every failed check, in Escalator's order and words."""
    problems: list[str] = []

    def check(condition: bool, message: str) -> None:
        if not condition:
            problems.append(message)

    check(len(group.name) > 0, "name cannot be empty")
    check(len(group.label_key) > 0, "label_key cannot be empty")
    check(len(group.label_value) > 0, "label_value cannot be empty")
    check(len(group.cloud_provider_group_name) > 0, "cloud_provider_group_name cannot be empty")

    upper = group.taint_upper_capacity_threshold_percent
    lower = group.taint_lower_capacity_threshold_percent
    scale_up = group.scale_up_threshold_percent
    check(upper > 0, "taint_upper_capacity_threshold_percent must be larger than 0")
    check(lower > 0, "taint_lower_capacity_threshold_percent must be larger than 0")
    check(scale_up > 0, "scale_up_threshold_percent must be larger than 0")
    check(lower < upper,
          "taint_lower_capacity_threshold_percent must be less than "
          "taint_upper_capacity_threshold_percent")
    check(upper < scale_up,
          "taint_upper_capacity_threshold_percent must be less than scale_up_threshold_percent")

    if not group.auto_discover_min_max:
        check(group.min_nodes < group.max_nodes, "min_nodes must be less than max_nodes")
        check(group.max_nodes > 0, "max_nodes must be larger than 0")
        check(group.min_nodes >= 0, "min_nodes must be not less than 0")

    # Escalator checks slow <= fast but words it "less than".
    check(group.slow_node_removal_rate <= group.fast_node_removal_rate,
          "slow_node_removal_rate must be less than fast_node_removal_rate")

    check(len(group.soft_delete_grace_period) > 0, "soft_delete_grace_period must not be empty")
    check(len(group.hard_delete_grace_period) > 0, "hard_delete_grace_period must not be empty")
    soft = group.soft_delete_grace_seconds
    hard = group.hard_delete_grace_seconds
    check(soft > 0,
          "soft_delete_grace_period failed to parse into a time.Duration. check your formatting.")
    check(hard > 0,
          "hard_delete_grace_period failed to parse into a time.Duration. check your formatting.")
    check(soft < hard, "soft_delete_grace_period must be less than hard_delete_grace_period")

    check(len(group.scale_up_cool_down_period) > 0, "scale_up_cool_down_period must not be empty")
    # Escalator quirk (kept for compatibility): a bad cool-down is reported as soft_delete_grace_period.
    check(group.scale_up_cool_down_seconds > 0,
          "soft_delete_grace_period failed to parse into a time.Duration. check your formatting.")

    check(group.taint_effect in TAINT_EFFECTS, "taint_effect must be valid kubernetes taint")
    check(group.aws.lifecycle in LIFECYCLES,
          "aws.lifecycle must be 'on-demand' or 'spot' if provided.")

    if group.max_node_age not in ("", "0"):
        try:
            parse_go_duration(group.max_node_age)
        except ValueError:
            problems.append(
                "max_node_age failed to parse into a time.Duration. Set to '0' or '' to "
                "disable, or a positive Go duration to enable."
            )

    if group.unhealthy_node_feature:
        newest = group.health_check_newest_nodes_percent
        unhealthy = group.max_unhealthy_nodes_percent
        check(group.unhealthy_node_grace_seconds > 0,
              "unhealthy_node_grace_period failed to parse into a time.Duration. "
              "check your formatting.")
        check(newest > 0, "health_check_newest_nodes_percent must be greater than 0")
        check(newest <= 100, "health_check_newest_nodes_percent must be less than or equal to 100")
        check(unhealthy >= 0, "max_unhealthy_nodes_percent must be greater than or equal to 0")
        check(unhealthy < 100, "max_unhealthy_nodes_percent must be less than 100")
    return problems


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
