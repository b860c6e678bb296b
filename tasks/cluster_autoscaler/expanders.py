"""Scale-up from unschedulable pods, the Cluster Autoscaler's way (spec §1.1, §1.2).

Escalator sizes a group from summed requests, so a pod that fits no node can wait forever while
utilization looks fine. CA instead asks, for each group, "how many copies of this group's node
would these pending pods need?", and lets a chain of expanders pick the group. All of it is pure:
records, templates and the clock come in, a plan comes out; the flow does the I/O.

The expanders and their chain live here; the templates, the estimator, the limits, the plan and
the provisioning back-off are this folder's siblings.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kube_elevator.tasks.cluster_autoscaler.config import (
    PRIORITY_CONFIGMAP,
    ClusterAutoscalerConfig,
    parse_priorities,
)
from kube_elevator.tasks.cluster_autoscaler.templates import GPU_RESOURCE, TemplateNode
from kube_elevator.tasks.core.documents import load_document
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.quantity import GiB, MiB
from kube_elevator.tasks.core.records import PodRecord

T = TypeVar("T")


# --- the expanders ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ScaleUpOption:
    """Grow `group` by `node_count` nodes to help `pods` (CA's expander.Option)."""

    group: str
    asg_name: str
    node_count: int
    pods: tuple[PodRecord, ...]
    template: TemplateNode


@dataclass(frozen=True)
class ExpanderContext:
    """What the expanders read besides the options."""

    prices: Mapping[str, float] = field(default_factory=dict)  # instance type -> $ per hour
    pod_cpu_price_per_hour: float = 0.111 * 0.5 / 2  # CA's AWS price model (config.PodPrices)
    pod_memory_gib_price_per_hour: float = 0.111 * 0.5 / 8
    pod_gpu_price_per_hour: float = 0.700  # per requested nvidia.com/gpu (CA gpuPricePerHour)
    priorities: Mapping[int, Sequence[str]] = field(default_factory=dict)
    cluster_node_count: int = 0  # the price expander's preferred node size depends on it


Filter = Callable[[Sequence[ScaleUpOption], ExpanderContext, random.Random], list[ScaleUpOption]]


def _best(options: Sequence[ScaleUpOption], score: Callable[[ScaleUpOption], float | None],
          ) -> list[ScaleUpOption]:
    """The options with the lowest score, ties kept; a None score drops the option."""
    best: list[ScaleUpOption] = []
    best_score = math.inf
    for option in options:
        value = score(option)
        if value is None:
            continue
        if value < best_score:
            best, best_score = [option], value
        elif value == best_score:
            best.append(option)
    return best


def random_expander(options: Sequence[ScaleUpOption], context: ExpanderContext,
                    rng: random.Random) -> list[ScaleUpOption]:
    """CA `random`: one option, uniformly at random."""
    return [rng.choice(list(options))] if options else []


def most_pods(options: Sequence[ScaleUpOption], context: ExpanderContext,
              rng: random.Random) -> list[ScaleUpOption]:
    """CA `most-pods`: the options that would schedule the most pending pods."""
    return _best(options, lambda option: -len(option.pods))


def waste_score(option: ScaleUpOption) -> float | None:
    """CA `least-waste`: idle fraction of CPU plus idle fraction of memory, on node *capacity*.

    (The FAQ words it as CPU first, memory as tie-break; the code adds the two fractions.)
    """
    available_cpu = option.template.cpu_capacity_milli * option.node_count
    available_memory = option.template.memory_capacity_bytes * option.node_count
    if available_cpu <= 0 or available_memory <= 0:
        return None  # CA has no node info for such a group and skips it
    requested_cpu = sum(pod.cpu_request_milli for pod in option.pods)
    requested_memory = sum(pod.memory_request_bytes for pod in option.pods)
    return ((available_cpu - requested_cpu) / available_cpu
            + (available_memory - requested_memory) / available_memory)


def least_waste(options: Sequence[ScaleUpOption], context: ExpanderContext,
                rng: random.Random) -> list[ScaleUpOption]:
    """CA `least-waste` (the default): lowest waste score wins, ties pass on."""
    return _best(options, waste_score)


def least_nodes(options: Sequence[ScaleUpOption], context: ExpanderContext,
                rng: random.Random) -> list[ScaleUpOption]:
    """CA `least-nodes`: fewest nodes to add; options adding none are skipped."""
    return _best(options, lambda option: option.node_count if option.node_count > 0 else None)


# The price expander's constants (CA expander/price): a 0.5 CPU / 500 MiB pod stabilises the
# node/pod price ratio; GPU groups get a fixed, unattractive unfitness.
STABILIZATION_POD_CPU_MILLI = 500
STABILIZATION_POD_MEMORY_BYTES = 500 * MiB
GPU_UNFITNESS = 1000.0


def preferred_node_cpu_milli(cluster_node_count: int) -> int:
    """CA's SimplePreferredNodeProvider: node size doubles each time the cluster triples."""
    for limit, cpus in ((2, 1), (6, 2), (20, 4), (60, 8), (200, 16)):
        if cluster_node_count <= limit:
            return cpus * 1000
    return 32 * 1000


def pod_price(cpu_milli: int, memory_bytes: int, context: ExpanderContext, gpus: int = 0,
              ) -> float:
    """Price of one hour of a pod's requests. GPUs are charged too, as CA's pricing model
    does (GcePriceModel.PodPrice: base price + getAdditionalPrice, per nvidia.com/gpu), so a
    GPU pod is worth its GPU node's price."""
    return (cpu_milli / 1000 * context.pod_cpu_price_per_hour
            + memory_bytes / GiB * context.pod_memory_gib_price_per_hour
            + gpus * context.pod_gpu_price_per_hour)


def _gpus(pod: PodRecord) -> int:
    return dict(pod.extended_requests).get(GPU_RESOURCE, 0) if pod.extended_requests else 0


def price_score(option: ScaleUpOption, context: ExpanderContext) -> float | None:
    """CA `price`: unfitness x (node price + stab) / (pod price + stab); None if unpriced."""
    node_price = context.prices.get(option.template.instance_type)
    if node_price is None:
        return None  # CA: "Failed to calculate node price", the option is skipped
    total_node_price = node_price * option.node_count
    total_pod_price = sum(pod_price(pod.cpu_request_milli, pod.memory_request_bytes, context,
                                    _gpus(pod)) for pod in option.pods)
    stabilization = pod_price(STABILIZATION_POD_CPU_MILLI, STABILIZATION_POD_MEMORY_BYTES, context)
    price_ratio = (total_node_price + stabilization) / (total_pod_price + stabilization)
    preferred = preferred_node_cpu_milli(context.cluster_node_count)
    node_cpu = option.template.cpu_capacity_milli
    unfitness = max(preferred / node_cpu, node_cpu / preferred) if node_cpu > 0 else 1.0
    suppressed = (unfitness - 1.0) * (1.0 - math.tanh((option.node_count - 1) / 15.0)) + 1.0
    if option.template.has_gpu:
        suppressed = GPU_UNFITNESS
    # CA multiplies by 2 for groups that do not exist yet (autoprovisioning); ASGs always exist.
    return suppressed * price_ratio


def price(options: Sequence[ScaleUpOption], context: ExpanderContext,
          rng: random.Random) -> list[ScaleUpOption]:
    """CA `price`: lowest score wins, ties pass on; options without a price are dropped."""
    return _best(options, lambda option: price_score(option, context))


def priority_of(asg_name: str, priorities: Mapping[int, Sequence[str]]) -> int | None:
    """The highest priority whose regexes match the ASG name anywhere (Go's FindStringIndex)."""
    matching = [priority for priority, patterns in priorities.items()
                if any(re.search(pattern, asg_name) for pattern in patterns)]
    return max(matching) if matching else None


def priority(options: Sequence[ScaleUpOption], context: ExpanderContext,
             rng: random.Random) -> list[ScaleUpOption]:
    """CA `priority`: the options of the highest matching priority; no match at all passes every
    option on (CA: "No options filtered"). CA's code starts its search at -1 and so never picks
    a priority below -1; we follow the documented rule (any integer) instead."""
    ranked = [(priority_of(option.asg_name, context.priorities), option) for option in options]
    matched = [(rank, option) for rank, option in ranked if rank is not None]
    if not matched:
        return list(options)
    top = max(rank for rank, _ in matched)
    return [option for rank, option in matched if rank == top]


EXPANDERS: dict[str, Filter] = {
    "random": random_expander,
    "most-pods": most_pods,
    "least-waste": least_waste,
    "least-nodes": least_nodes,
    "price": price,
    "priority": priority,
}


@dataclass(frozen=True)
class Choice:
    """The chain's answer and how it got there (for `elevator plan`)."""

    option: ScaleUpOption | None
    trace: tuple[tuple[str, tuple[str, ...]], ...]  # (expander, groups it kept)


def choose(options: Sequence[ScaleUpOption], chain: Sequence[str], context: ExpanderContext,
           rng: random.Random) -> Choice:
    """CA's chain (§1.2): each expander keeps its best options for the next; a single survivor
    wins at once; ties left at the end are broken at random. KeyError for an unknown name."""
    remaining = list(options)
    trace: list[tuple[str, tuple[str, ...]]] = []
    for name in chain:
        remaining = EXPANDERS[name](remaining, context, rng)
        trace.append((name, tuple(option.group for option in remaining)))
        if len(remaining) == 1:
            return Choice(remaining[0], tuple(trace))
    if not remaining:
        return Choice(None, tuple(trace))
    winner = rng.choice(remaining)
    trace.append(("random", (winner.group,)))
    return Choice(winner, tuple(trace))


# --- from the config file -------------------------------------------------------------


def priorities_from_configmap(data: Mapping[str, str],
                              source: str = PRIORITY_CONFIGMAP) -> dict[int, tuple[str, ...]]:
    """The `cluster-autoscaler-priority-expander` ConfigMap's data: key `priorities`, a YAML
    mapping of integer priority to a list of regexes (CA §1.2). ValueError says what is wrong,
    naming `source` (the ConfigMap read)."""
    text = data.get("priorities")
    if text is None:
        raise ValueError(f"ConfigMap {source}: no 'priorities' key")
    if not text.strip():
        raise ValueError(f"ConfigMap {source}: 'priorities' is empty")
    try:  # the limits of every user file: a recursive alias, nesting past 100 levels
        document: Any = load_document(text.encode("utf-8", "replace"),
                                      f"ConfigMap {source}: 'priorities'", "YAML")
    except InputError as error:
        raise ValueError(str(error)) from None
    return parse_priorities(document)


def expander_context(config: ClusterAutoscalerConfig, cluster_node_count: int,
                     priorities: Mapping[int, Sequence[str]] | None = None) -> ExpanderContext:
    """The context from the file's `cluster_autoscaler:` section; `priorities` read from the
    ConfigMap replaces the inline ones when the section names a ConfigMap."""
    inline = config.priorities if isinstance(config.priorities, dict) else {}
    return ExpanderContext(
        prices=dict(config.prices),
        pod_cpu_price_per_hour=config.pod_prices.cpu_per_hour,
        pod_memory_gib_price_per_hour=config.pod_prices.memory_gib_per_hour,
        pod_gpu_price_per_hour=config.pod_prices.gpu_per_hour,
        priorities=priorities if priorities is not None else inline,
        cluster_node_count=cluster_node_count,
    )
