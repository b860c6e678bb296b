"""Escalator's node-group file: loading, Go durations, and validation that reports every problem.

The file is Escalator's format unchanged (`node_groups:` list, YAML or JSON, snake_case keys), so
an existing Escalator config works as is. Validation messages and their order are Escalator's
(spec/escalator.md §3.2); each is prefixed with the file and the group.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
)
from pydantic_core import PydanticCustomError

from tasks.documents import load_file
from tasks.errors import InputError, join_location
from tasks.resources import parse_quantity

# --- Go durations ---------------------------------------------------------------------

_DURATION_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
# ASCII digits only, as Go's parser (Python's \d would take "٣s").
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]*)(ns|us|µs|μs|ms|s|m|h)")
_MAX_DURATION_NS = 2**63 - 1  # Go's time.Duration is an int64 of nanoseconds


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration (`1h10m`, `1.5h`, `90s`, `-2m`, `0`); ValueError as time.ParseDuration."""
    original = text
    sign = 1
    if text[:1] in ("+", "-"):
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return 0.0
    if not text:
        raise ValueError(f"invalid duration {original!r}")
    total_ns = 0.0
    position = 0
    while position < len(text):
        match = _DURATION_PART.match(text, position)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"invalid duration {original!r}")
        total_ns += float(match.group(1)) * _DURATION_UNITS_NS[match.group(2)]
        position = match.end()
        if total_ns > _MAX_DURATION_NS:
            raise ValueError(f"invalid duration {original!r}: out of range")
    return sign * total_ns / 1e9


def positive_duration_option(text: str, option: str) -> float:
    """A command-line duration (`--interval 60s`): seconds, or InputError naming the option."""
    try:
        value = parse_go_duration(text)
    except ValueError:
        raise InputError([f"{option}: {text!r} is not a Go duration (like 60s)"]) from None
    if value <= 0:
        raise InputError([f"{option}: {text!r} must be positive"])
    return value


def duration_or_zero(text: str) -> float:
    """Escalator's `XDuration()` helpers: a parse error reads as 0."""
    try:
        return parse_go_duration(text)
    except ValueError:
        return 0.0


# --- the models ---------------------------------------------------------------------------


def _go_string(value: Any) -> Any:
    """Escalator decodes YAML through JSON into Go strings: a number becomes its string form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return value


GoString = Annotated[str, BeforeValidator(_go_string)]
TAINT_EFFECTS = ("", "NoSchedule", "NoExecute", "PreferNoSchedule")
LIFECYCLES = ("", "on-demand", "spot")


class AwsOptions(BaseModel):
    """The `aws:` block of a node group."""

    model_config = ConfigDict(extra="allow", frozen=True)

    launch_template_id: GoString = ""
    launch_template_version: GoString = ""
    fleet_instance_ready_timeout: GoString = "1m"
    lifecycle: GoString = ""
    instance_type_overrides: list[GoString] = []
    resource_tagging: StrictBool = False


class NodeGroupConfig(BaseModel):
    """One Escalator node group, keys and defaults as spec/escalator.md §3.1."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: GoString = ""
    label_key: GoString = ""
    label_value: GoString = ""
    cloud_provider_group_name: GoString = ""
    min_nodes: StrictInt = 0
    max_nodes: StrictInt = 0
    dry_mode: StrictBool = False
    scale_on_starve: StrictBool = False
    taint_upper_capacity_threshold_percent: StrictInt = 0
    taint_lower_capacity_threshold_percent: StrictInt = 0
    scale_up_threshold_percent: StrictInt = 0
    slow_node_removal_rate: StrictInt = 0
    fast_node_removal_rate: StrictInt = 0
    soft_delete_grace_period: GoString = ""
    hard_delete_grace_period: GoString = ""
    scale_up_cool_down_period: GoString = ""
    taint_effect: GoString = ""
    max_node_age: GoString = ""
    unhealthy_node_grace_period: GoString = ""
    health_check_newest_nodes_percent: StrictInt = 0
    max_unhealthy_nodes_percent: StrictInt = 0
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


# --- the cluster-level section: Cluster Autoscaler's ideas (issue 8) ------------------------
# Escalator ignores unknown top-level keys, so a file with this section still works there. Its
# keys are ours, not Escalator's: an unknown key here is an error, not a warning, so a typo
# (`enable: true`) cannot silently leave the feature off.

EXPANDER_NAMES = ("random", "most-pods", "least-waste", "least-nodes", "price", "priority")
PRIORITY_CONFIGMAP = "cluster-autoscaler-priority-expander"  # CA §1.2: the priority ConfigMap
GiB = 2**30
_PLAIN_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")
_CONFIGMAP_REFERENCE = re.compile(
    r"^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _problem(message: str) -> PydanticCustomError:
    # A custom error keeps pydantic from prefixing the message with "Value error, ".
    return PydanticCustomError("cluster_autoscaler", message)


def _go_duration(text: str) -> str:
    try:
        seconds = parse_go_duration(text)
    except ValueError:
        raise _problem("must be a Go duration such as 90s, 10m or 1h30m") from None
    if seconds < 0:
        raise _problem("must not be negative")
    return text


GoDuration = Annotated[str, BeforeValidator(_go_string), AfterValidator(_go_duration)]


def _min_max(text: str) -> tuple[str, str]:
    parts = text.split(":")
    if len(parts) != 2 or not all(part.strip() for part in parts):
        raise _problem('must be "min:max"')
    return parts[0].strip(), parts[1].strip()


def _check_min_max(low: float, high: float) -> None:
    # CA's validateMinMaxFlag: both not negative, min not above max.
    if low < 0 or high < 0:
        raise _problem("min and max must be greater than or equal to 0")
    if low > high:
        raise _problem("min must be less than or equal to max")


def parse_cores_total(text: str) -> tuple[int, int]:
    """CA `--cores-total` ("0:320000"): whole cores."""
    low, high = _min_max(text)
    try:
        cores = int(low), int(high)
    except ValueError:
        raise _problem('must be "min:max" in whole cores, e.g. "0:320000"') from None
    _check_min_max(*cores)
    return cores


def _memory_bytes(text: str) -> int:
    if _PLAIN_NUMBER.match(text):
        return int(float(text) * GiB)  # CA's --memory-total unit
    try:
        value = parse_quantity(text)
    except ValueError:
        raise _problem('must be "min:max" in GiB (as CA) or quantities, e.g. "0:64Ti"') from None
    return int(value)


def parse_memory_total(text: str) -> tuple[int, int]:
    """CA `--memory-total` ("0:6400000"): a bare number is GiB as in CA; `64Ti` is a quantity."""
    low, high = _min_max(text)
    memory = _memory_bytes(low), _memory_bytes(high)
    _check_min_max(*memory)
    return memory


def _valid_cores_total(text: str) -> str:
    parse_cores_total(text)
    return text


def _valid_memory_total(text: str) -> str:
    parse_memory_total(text)
    return text


def _expander_chain(text: str) -> str:
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise _problem("must be a comma-separated list of expander names, e.g. "
                       '"priority,least-waste"')
    for name in names:
        if name == "grpc":
            raise _problem("the grpc expander is not supported; known: " + ", ".join(EXPANDER_NAMES))
        if name not in EXPANDER_NAMES:
            raise _problem(f"unknown expander {name!r}; known: " + ", ".join(EXPANDER_NAMES))
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        # CA §1.2: "A name may appear in the chain only once."
        raise _problem(f"expander {duplicates[0]!r} appears more than once in the chain")
    return ",".join(names)


def parse_priorities(value: Any) -> dict[int, tuple[str, ...]]:
    """The priority expander's mapping (CA §1.2: integer priority -> list of regexes matched
    against the ASG name); ValueError names the priority or regex that is wrong."""
    if not isinstance(value, dict):
        raise ValueError("must be a mapping of priority to a list of regexes")
    parsed: dict[int, tuple[str, ...]] = {}
    for key, patterns in value.items():
        if isinstance(key, bool):
            raise ValueError(f"priority {key!r} is not an integer")
        try:
            priority = int(key)
        except (TypeError, ValueError):
            raise ValueError(f"priority {key!r} is not an integer") from None
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise ValueError(f"priority {priority}: expected a list of regexes")
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"priority {priority}: regex {pattern!r} does not compile: "
                                 f"{error}") from None
        parsed[priority] = tuple(patterns)
    return parsed


def _priorities(value: Any) -> Any:
    """Inline priorities, or the name of the ConfigMap that holds them."""
    if value is None:
        return None
    if isinstance(value, str):
        if not _CONFIGMAP_REFERENCE.match(value):
            raise _problem('must be a mapping of priority to regexes, or a ConfigMap name '
                           '("name" or "namespace/name")')
        return value
    try:
        return parse_priorities(value)
    except ValueError as error:
        raise _problem(str(error)) from None


class ScaleDownOptions(BaseModel):
    """Safe scale-down; timers and threshold are CA's defaults (spec §1.3)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # CA --scale-down-enabled: remove nodes unneeded for `unneeded_time` (tasks.scale_down).
    enabled: StrictBool = True
    # Off by default: without it the node-group rules terminate nodes as Escalator does, and
    # only empty unneeded nodes are removed.
    drain: StrictBool = False
    utilization_threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
    unneeded_time: GoDuration = "10m"
    delay_after_add: GoDuration = "10m"
    max_scale_down_parallelism: Annotated[StrictInt, Field(ge=1)] = 10
    max_drain_parallelism: Annotated[StrictInt, Field(ge=1)] = 1
    # CA --scale-down-unready-enabled and --scale-down-unready-time: an unready node may go
    # once unneeded for `unready_time` instead of `unneeded_time`.
    unready_enabled: StrictBool = True
    unready_time: GoDuration = "20m"

    @property
    def unneeded_seconds(self) -> float:
        return parse_go_duration(self.unneeded_time)

    @property
    def unready_seconds(self) -> float:
        return parse_go_duration(self.unready_time)

    @property
    def delay_after_add_seconds(self) -> float:
        return parse_go_duration(self.delay_after_add)


class PodPrices(BaseModel):
    """What a pod's requests cost per hour, for the price expander's pod price.

    Defaults from CA's AWS price model: an m4.large ($0.111/h, 2 vCPU, 8 GiB) split 50/50
    between CPU and memory; a GPU at CA's base GPU price (GcePriceModel, $0.700/h).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_per_hour: Annotated[float, Field(ge=0.0)] = 0.111 * 0.5 / 2
    memory_gib_per_hour: Annotated[float, Field(ge=0.0)] = 0.111 * 0.5 / 8
    # per requested nvidia.com/gpu: CA's pricing model charges a pod's GPUs (gpuPricePerHour)
    gpu_per_hour: Annotated[float, Field(ge=0.0)] = 0.700


class ClusterAutoscalerConfig(BaseModel):
    """`cluster_autoscaler:` beside `node_groups`; defaults are CA's flags (spec §1.1-1.3)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: StrictBool = False
    expander: Annotated[str, AfterValidator(_expander_chain)] = "least-waste"
    max_nodes_total: Annotated[StrictInt, Field(ge=0)] = 0  # 0 = no cap
    cores_total: Annotated[str, BeforeValidator(_go_string),
                           AfterValidator(_valid_cores_total)] = "0:320000"
    memory_total: Annotated[str, BeforeValidator(_go_string),
                            AfterValidator(_valid_memory_total)] = "0:6400000"
    max_node_provision_time: GoDuration = "15m"
    scale_down: ScaleDownOptions = ScaleDownOptions()
    prices: dict[str, Annotated[float, Field(ge=0.0)]] = {}  # instance type -> $ per hour
    pod_prices: PodPrices = PodPrices()
    priorities: Annotated[dict[int, tuple[str, ...]] | str | None,
                          BeforeValidator(_priorities)] = None
    random_seed: StrictInt | None = None
    # CA --balance-similar-node-groups (spec §1.5): split a scale-up among groups whose
    # template nodes compare similar within these tolerances (CA's flag defaults).
    balance_similar_node_groups: StrictBool = False
    memory_difference_ratio: Annotated[float, Field(ge=0.0, le=1.0)] = 0.015
    max_free_difference_ratio: Annotated[float, Field(ge=0.0, le=1.0)] = 0.05
    max_allocatable_difference_ratio: Annotated[float, Field(ge=0.0, le=1.0)] = 0.05
    # CA --balancing-ignore-label: more node labels that may differ between similar groups.
    balancing_ignore_labels: tuple[Annotated[str, Field(min_length=1)], ...] = ()

    @field_validator("scale_down", "pod_prices", mode="before")
    @classmethod
    def _empty_is_default(cls, value: Any) -> Any:
        return {} if value is None else value

    @property
    def expander_chain(self) -> tuple[str, ...]:
        return tuple(self.expander.split(","))

    @property
    def cores_min_max(self) -> tuple[int, int]:
        return parse_cores_total(self.cores_total)

    @property
    def memory_min_max_bytes(self) -> tuple[int, int]:
        return parse_memory_total(self.memory_total)

    @property
    def max_node_provision_seconds(self) -> float:
        return parse_go_duration(self.max_node_provision_time)

    @property
    def priority_configmap(self) -> str | None:
        """The ConfigMap to read priorities from, when they are not written inline."""
        if isinstance(self.priorities, str):
            return self.priorities
        if self.priorities is None and "priority" in self.expander_chain:
            return PRIORITY_CONFIGMAP
        return None


def validate_cluster_autoscaler(config: ClusterAutoscalerConfig) -> list[tuple[str, str]]:
    """Rules across keys, as (key path under cluster_autoscaler, message)."""
    problems: list[tuple[str, str]] = []
    chain = config.expander_chain
    if "price" in chain and not config.prices:
        problems.append(("prices", "the price expander needs a price per instance type "
                                   "(prices: {m5.large: 0.096, ...})"))
    if config.max_node_provision_seconds <= 0:
        problems.append(("max_node_provision_time", "must be longer than 0"))
    return problems


def _none_is_default(value: Any) -> Any:
    return {} if value is None else value


class NodeGroupsFile(BaseModel):
    """The whole file: Escalator reads `node_groups` and ignores any other top-level key."""

    model_config = ConfigDict(extra="allow", frozen=True)

    node_groups: list[NodeGroupConfig] = []
    cluster_autoscaler: Annotated[ClusterAutoscalerConfig,
                                  BeforeValidator(_none_is_default)] = ClusterAutoscalerConfig()


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


# --- loading ------------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadedConfig:
    """A validated node-group file, with the warnings (unknown keys) found while reading it."""

    path: str
    node_groups: tuple[NodeGroupConfig, ...]
    warnings: tuple[str, ...] = field(default=())
    document: NodeGroupsFile | None = None

    @property
    def cluster_autoscaler(self) -> ClusterAutoscalerConfig:
        """The cluster-level section (disabled when the file has none)."""
        return self.document.cluster_autoscaler if self.document is not None \
            else ClusterAutoscalerConfig()

    def group(self, name: str) -> NodeGroupConfig:
        for group in self.node_groups:
            if group.name == name:
                return group
        raise KeyError(name)


def _group_label(index: int, raw_groups: Any) -> str:
    name = ""
    if isinstance(raw_groups, list) and index < len(raw_groups):
        entry = raw_groups[index]
        if isinstance(entry, dict):
            name = str(_go_string(entry.get("name", "")) or "")
    return f"node_groups[{index}] ({name})" if name else f"node_groups[{index}]"


def _key_path(location: Iterable[int | str], raw_groups: Any) -> str:
    parts = list(location)
    if len(parts) >= 2 and parts[0] == "node_groups" and isinstance(parts[1], int):
        head = _group_label(parts[1], raw_groups)
        rest = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts[2:])
        return head + rest
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p))
                   for i, p in enumerate(parts))


def _pydantic_problems(error: ValidationError, source: str, raw_groups: Any) -> list[str]:
    problems = []
    for detail in error.errors():
        rule = detail["msg"]
        if "input" in detail and detail["type"] not in ("missing",):
            rule = f"{rule}, got {detail['input']!r}"
        problems.append(join_location(source, _key_path(detail["loc"], raw_groups), rule))
    return problems


def _unknown_keys(model: BaseModel, source: str, path: str) -> list[str]:
    extra = model.model_extra or {}
    return [join_location(source, f"{path}.{key}" if path else key,
                          "unknown key, ignored (as Escalator does)") for key in extra]


def parse_node_groups(document: Any, source: str) -> LoadedConfig:
    """Validate a decoded document; raise InputError with every problem at once."""
    if not isinstance(document, dict):
        # Escalator: a top level that is not a mapping is a decode error and yields no groups.
        kind = type(document).__name__ if document is not None else "empty document"
        raise InputError([join_location(source, "", f"top level must be a mapping with "
                                                    f"'node_groups', got {kind}")])
    raw_groups = document.get("node_groups")
    try:
        parsed = NodeGroupsFile.model_validate(document)
    except ValidationError as error:
        raise InputError(_pydantic_problems(error, source, raw_groups)) from None

    problems: list[str] = []
    warnings: list[str] = [
        join_location(source, key, "unknown top-level key, ignored")
        for key in (parsed.model_extra or {})
    ]
    if "node_groups" not in document:
        problems.append(join_location(source, "node_groups", "missing: no node groups defined"))
    seen: dict[str, int] = {}
    for index, group in enumerate(parsed.node_groups):
        label = _group_label(index, raw_groups)
        problems.extend(join_location(source, label, message)
                        for message in validate_node_group(group))
        if group.name:
            if group.name in seen:
                problems.append(join_location(
                    source, label,
                    f"duplicate node group name {group.name!r} "
                    f"(also node_groups[{seen[group.name]}])"))
            else:
                seen[group.name] = index
        warnings.extend(_unknown_keys(group, source, label))
        warnings.extend(_unknown_keys(group.aws, source, f"{label}.aws"))
    problems.extend(join_location(source, f"cluster_autoscaler.{path}", message)
                    for path, message in validate_cluster_autoscaler(parsed.cluster_autoscaler))
    if problems:
        raise InputError(problems)
    return LoadedConfig(path=source, node_groups=tuple(parsed.node_groups),
                        warnings=tuple(warnings), document=parsed)


def load_node_groups(path: str | Path) -> LoadedConfig:
    """Read a node-group file (YAML or JSON) and validate it."""
    # JSON is YAML, so one loader reads both, as Escalator's YAML-to-JSON decoder does.
    return parse_node_groups(load_file(path), str(path))


def effective_min_max(group: NodeGroupConfig, asg_min: int, asg_max: int) -> tuple[int, int]:
    """Escalator auto-discovery: re-read min/max from the ASG every tick when both are 0."""
    if group.auto_discover_min_max:
        return asg_min, asg_max
    return group.min_nodes, group.max_nodes


__all__ = [
    "EXPANDER_NAMES",
    "PRIORITY_CONFIGMAP",
    "AwsOptions",
    "ClusterAutoscalerConfig",
    "InputError",
    "LoadedConfig",
    "NodeGroupConfig",
    "NodeGroupsFile",
    "PodPrices",
    "ScaleDownOptions",
    "duration_or_zero",
    "effective_min_max",
    "load_node_groups",
    "parse_cores_total",
    "parse_go_duration",
    "parse_memory_total",
    "parse_node_groups",
    "parse_priorities",
    "validate_cluster_autoscaler",
    "validate_node_group",
]
