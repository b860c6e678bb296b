"""The opt-in Cluster Autoscaler settings of the node-group file (`cluster_autoscaler:`).

Escalator ignores unknown top-level keys, so a file with this section still works there. Its
keys are ours, not Escalator's: an unknown key here is an error, not a warning, so a typo
(`enable: true`) cannot silently leave the feature off.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
)
from pydantic_core import PydanticCustomError

from kube_elevator.tasks.core.duration import GoDuration, go_string, parse_go_duration
from kube_elevator.tasks.core.quantity import GiB, parse_quantity

EXPANDER_NAMES = ("random", "most-pods", "least-waste", "least-nodes", "price", "priority")


PRIORITY_CONFIGMAP = "cluster-autoscaler-priority-expander"  # CA §1.2: the priority ConfigMap


_PLAIN_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")


_CONFIGMAP_REFERENCE = re.compile(
    r"^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _problem(message: str) -> PydanticCustomError:
    # A custom error keeps pydantic from prefixing the message with "Value error, ".
    return PydanticCustomError("cluster_autoscaler", message)


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
    """Safe scale-down; timers and threshold are CA's defaults (spec §1.3).

    Example:
        >>> ke.ScaleDownOptions().enabled
        True
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # CA --scale-down-enabled: remove nodes unneeded for `unneeded_time` (tasks.cluster_autoscaler.unneeded).
    enabled: StrictBool = True
    # Off by default: without it the node-group rules terminate nodes as Escalator does, and
    # only empty unneeded nodes are removed.
    drain: StrictBool = False
    utilization_threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
    # CA --scale-down-gpu-utilization-threshold: a GPU node's utilization is its GPU requests'.
    gpu_utilization_threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
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

    Example:
        >>> ke.PodPrices(cpu_per_hour=0.03).gpu_per_hour
        0.7
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_per_hour: Annotated[float, Field(ge=0.0)] = 0.111 * 0.5 / 2
    memory_gib_per_hour: Annotated[float, Field(ge=0.0)] = 0.111 * 0.5 / 8
    # per requested nvidia.com/gpu: CA's pricing model charges a pod's GPUs (gpuPricePerHour)
    gpu_per_hour: Annotated[float, Field(ge=0.0)] = 0.700


class ClusterAutoscalerConfig(BaseModel):
    """`cluster_autoscaler:` beside `node_groups`; defaults are CA's flags (spec §1.1-1.3).

    Example:
        >>> ca = ke.ClusterAutoscalerConfig(enabled=True, expander="least-waste")
        >>> ca.enabled, ca.expander
        (True, 'least-waste')
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: StrictBool = False
    expander: Annotated[str, AfterValidator(_expander_chain)] = "least-waste"
    max_nodes_total: Annotated[StrictInt, Field(ge=0)] = 0  # 0 = no cap
    cores_total: Annotated[str, BeforeValidator(go_string),
                           AfterValidator(_valid_cores_total)] = "0:320000"
    memory_total: Annotated[str, BeforeValidator(go_string),
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
