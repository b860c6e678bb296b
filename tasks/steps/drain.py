"""The drain's one effect: evictions through the Eviction API, as a retryable task run."""

from __future__ import annotations

from collections.abc import Sequence

from kube_elevator.tasks.cluster_autoscaler.drain import EvictionResult
from kube_elevator.tasks.core.errors import EvictionBlocked
from kube_elevator.tasks.core.records import PodRecord
from kube_elevator.tasks.core.step import step
from kube_elevator.tasks.steps.node_groups import Adapters


@step
def evict_pods(adapters: Adapters, pods: Sequence[PodRecord]) -> EvictionResult:
    """Evict through the Eviction API; a 429 (PDB at its limit) is left for a later tick, and
    the node is not deleted meanwhile (it is not empty).

    Example:
        ```python
        result = ke.evict_pods(adapters, pods_on_node)
        if result.blocked:                            # a budget at its limit: try on a later tick
            print("still on the node:", result.blocked)
        ```
    """
    evicted: list[str] = []
    blocked: list[str] = []
    for pod in pods:
        name = f"{pod.namespace}/{pod.name}"
        try:
            if adapters.kube.evict_pod(pod.namespace, pod.name, pod.uid):
                evicted.append(name)
        except EvictionBlocked as blocked_by:
            blocked.append(f"{name}: {blocked_by}")
    return EvictionResult(tuple(evicted), tuple(blocked))
