"""Where a node-group tick reads the cluster from (DESIGN.md §3): the live API, or files.

One protocol and its two readers: `LiveSource` (Kubernetes lists, Leases and
DescribeAutoScalingGroups, for `elevator run`, the `autoscale` flow and the simulator) and
`SnapshotSource` (`kubectl get -o json` dumps, for `elevator plan`). The tick composition
(`flows/tick.py`) reads only through them, through the steps below, so a filter applied on one
path is applied on every path: `collect_pods` drops terminal pods whichever source listed them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kube_elevator.tasks.core.decode import load_asg_file, load_cluster_files
from kube_elevator.tasks.core.lease_state import DEFAULT_LEASE_NAMESPACE, GroupState, lease_name
from kube_elevator.tasks.core.pdb import PodDisruptionBudget, pdb_from_api
from kube_elevator.tasks.core.records import TERMINAL_PHASES, AutoScalingGroup, NodeRecord, PodRecord
from kube_elevator.tasks.core.retry import is_retryable
from kube_elevator.tasks.core.step import step
from kube_elevator.tasks.core.step_inputs import expect_items
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.decide import asg_from_config
from kube_elevator.tasks.escalator.filter_nodes import nodes_by_group, pods_by_group
from kube_elevator.tasks.escalator.utilization import GroupPods, PodTally

if TYPE_CHECKING:
    from kube_elevator.tasks.adapters.kube_cache import ClusterCache, KindAge
    from kube_elevator.tasks.steps.node_groups import Adapters

log = logging.getLogger(__name__)


class TickSource(Protocol):
    """What one tick reads: pods, nodes, the groups' ASGs and Leases, and the budgets.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(
        ...     config.node_groups, ["deployments/examples/cluster.json"])
        >>> source: ke.TickSource = ke.SnapshotSource(config.node_groups, pods=[], nodes=[])
        >>> ke.collect_nodes.fn(source)
        []
    """

    @property
    def holds_finished_pods(self) -> bool:
        """May `list_pods` hold Succeeded and Failed pods? A `kubectl get pods -A` dump does."""

    def list_pods(self) -> list[PodRecord]: ...

    def list_nodes(self) -> list[NodeRecord]: ...

    def describe_groups(self, names: Sequence[str]) -> dict[str, AutoScalingGroup]: ...

    def read_state(self, group_name: str) -> GroupState: ...

    def list_pdbs(self) -> tuple[PodDisruptionBudget, ...]: ...


@dataclass(frozen=True)
class LiveSource:
    """The cluster and the cloud as the adapters read them now.

    Example:
        ```python
        adapters = ke.make_adapters(kubeconfig=None, lease_namespace="kube-system",
                                    aws_credentials_block=None)
        pods = ke.collect_pods(ke.LiveSource(adapters))   # in a flow: a task run
        ```
    """

    adapters: Adapters
    holds_finished_pods = True  # the API server honours the list's field selector; in case not

    def list_pods(self) -> list[PodRecord]:
        return self.adapters.kube.list_pods()

    def list_nodes(self) -> list[NodeRecord]:
        return self.adapters.kube.list_nodes()

    def describe_groups(self, names: Sequence[str]) -> dict[str, AutoScalingGroup]:
        # One paged DescribeAutoScalingGroups for all configured ASGs (Escalator's Refresh).
        return self.adapters.cloud.describe(list(names))

    def read_state(self, group_name: str) -> GroupState:
        return self.adapters.kube.read_state(self.adapters.lease_namespace,
                                             lease_name(group_name))

    def list_pdbs(self) -> tuple[PodDisruptionBudget, ...]:
        return tuple(pdb_from_api(obj)
                     for obj in self.adapters.kube.list_pod_disruption_budgets())


@dataclass(frozen=True)
class CachedSource:
    """Pods, nodes and budgets from this process's watch cache; the cloud and the Leases live
    (a Lease is read fresh: the claim compares its resourceVersion).

    The cache keeps the groups' pods sorted as they change, so the tick needs not sort them:
    `list_pods` takes the pods and their grouping at one instant, `group_pods` hands the
    grouping back for that very list. A kind in `live_kinds` (its watch stayed silent past the
    freshness bound, `cache_freshness`) is listed for this tick instead.
    """

    cache: ClusterCache
    adapters: Adapters
    groups: Sequence[NodeGroupConfig] = ()
    live_kinds: frozenset[str] = frozenset()
    _read: list[tuple[list[PodRecord], dict[str, list[PodRecord]], dict[str, GroupPods]]] = field(
        default_factory=list, compare=False, repr=False)

    @property
    def holds_finished_pods(self) -> bool:
        return "pods" in self.live_kinds  # the cache drops a pod as soon as it ends

    def list_pods(self) -> list[PodRecord]:
        if "pods" in self.live_kinds:
            return LiveSource(self.adapters).list_pods()
        if not self.groups:
            return self.cache.pods()
        key = tuple((g.name, g.label_key, g.label_value) for g in self.groups)
        groups = self.groups
        pods, grouped, tallies = self.cache.grouped_pods(key, lambda pod: [
            name for name, members in pods_by_group([pod], groups).items() if members],
            PodTally)
        self._read[:] = [(pods, grouped, tallies)]
        return pods

    def grouped(self, pods: Sequence[PodRecord], groups: Sequence[NodeGroupConfig],
                ) -> dict[str, list[PodRecord]]:
        if self._read and self._read[0][0] is pods and groups == self.groups:
            grouped = self._read[0][1]
            return {group.name: grouped.get(group.name, []) for group in groups}
        return pods_by_group(pods, groups)

    def summaries(self, pods: Sequence[PodRecord], groups: Sequence[NodeGroupConfig],
                  ) -> dict[str, GroupPods] | None:
        """Each group's `GroupPods` as the cache keeps them, for that very list of pods."""
        if self._read and self._read[0][0] is pods and groups == self.groups:
            tallies = self._read[0][2]
            return {group.name: tallies.get(group.name, GroupPods()) for group in groups}
        return None

    def list_nodes(self) -> list[NodeRecord]:
        if "nodes" in self.live_kinds:
            return LiveSource(self.adapters).list_nodes()
        return self.cache.nodes()

    def describe_groups(self, names: Sequence[str]) -> dict[str, AutoScalingGroup]:
        return self.adapters.cloud.describe(list(names))

    def read_state(self, group_name: str) -> GroupState:
        return self.adapters.kube.read_state(self.adapters.lease_namespace,
                                             lease_name(group_name))

    def list_pdbs(self) -> tuple[PodDisruptionBudget, ...]:
        if "poddisruptionbudgets" in self.live_kinds:
            return LiveSource(self.adapters).list_pdbs()
        return self.cache.pdbs()


@dataclass(frozen=True)
class SnapshotSource:
    """A cluster read from files: `kubectl get nodes,pods,leases[,pdb] -A -o json` and,
    optionally, `aws autoscaling describe-auto-scaling-groups`.

    Without an ASG description each group's ASG is MinSize=min_nodes, MaxSize=max_nodes and
    desired = the group's node count in the snapshot.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(
        ...     config.node_groups, ["deployments/examples/cluster.json"])
        >>> [node.name for node in source.list_nodes()][:2]
        ['batch-node-00000', 'batch-node-00001']
    """

    groups: Sequence[NodeGroupConfig]
    pods: Sequence[PodRecord]
    nodes: Sequence[NodeRecord]
    asgs: Mapping[str, AutoScalingGroup] | None = None
    states: Mapping[tuple[str, str], GroupState] = field(default_factory=dict)
    pdbs: Sequence[PodDisruptionBudget] = ()
    lease_namespace: str = "kube-system"
    holds_finished_pods = True  # finished Jobs stay in a dump until cleaned up

    @classmethod
    def from_files(cls, groups: Sequence[NodeGroupConfig], cluster: Sequence[str | Path],
                   asg: str | Path | None = None,
                   lease_namespace: str = DEFAULT_LEASE_NAMESPACE) -> SnapshotSource:
        """`kubectl get nodes,pods,leases[,poddisruptionbudgets] -A -o json` files and,
        optionally, `aws autoscaling describe-auto-scaling-groups` output."""
        snapshot = load_cluster_files(cluster)
        asgs = load_asg_file(asg) if asg is not None else None
        return cls(groups, snapshot.pods, snapshot.nodes, asgs, snapshot.states, snapshot.pdbs,
                   lease_namespace)

    def list_pods(self) -> list[PodRecord]:
        return list(self.pods)

    def list_nodes(self) -> list[NodeRecord]:
        return list(self.nodes)

    def describe_groups(self, names: Sequence[str]) -> dict[str, AutoScalingGroup]:
        if self.asgs is not None:
            return {name: self.asgs[name] for name in names if name in self.asgs}
        members = nodes_by_group(self.nodes, self.groups)
        return {group.cloud_provider_group_name: asg_from_config(group,
                                                                 len(members[group.name]))
                for group in self.groups if group.cloud_provider_group_name in names}

    def read_state(self, group_name: str) -> GroupState:
        return self.states.get((self.lease_namespace, lease_name(group_name)), GroupState())

    def list_pdbs(self) -> tuple[PodDisruptionBudget, ...]:
        return tuple(self.pdbs)


# --- the read steps of a tick: each a task run with retries in the flow --------------------


# A resumed watch is answered in milliseconds; this is the connect timeout, and a server that
# has not answered by then is read by a list for this tick.
REFRESH_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class CacheReading:
    """How current the cache a tick decides on is: each kind's age and resourceVersion, the
    bound, the kinds found past it (their watches reconnected before the tick read them) and,
    of those, the kinds the server did not answer for (listed by this tick)."""

    ages: tuple[KindAge, ...]
    bound_seconds: float
    refreshed: tuple[str, ...] = ()
    listed: tuple[str, ...] = ()


@step
def cache_freshness(cache: ClusterCache, wait_seconds: float = REFRESH_WAIT_SECONDS
                    ) -> CacheReading:
    """Date the cache before the tick reads it (DESIGN.md §7): a kind not heard from within
    the freshness bound has its watch reconnected from its resourceVersion, and the tick waits
    up to `wait_seconds` for the server's answer; a kind still unanswered is listed instead.

    Reconnecting, not listing, is the first answer: a silent connection is what makes a kind
    stale, a resumed watch costs one request where a list costs 150,000 pods, and a healthy
    watch is never this old (the server is heard from every 30 s, `kube_watch`), so a quiet
    cluster lists nothing.
    """
    ages = cache.freshness()
    stale = cache.stale_kinds(ages)
    if not stale:
        return CacheReading(ages, cache.freshness_bound_seconds)
    unanswered = cache.refresh(stale, wait_seconds)
    log.warning("watch cache: %s past the %g s freshness bound: reconnected%s", ", ".join(stale),
                cache.freshness_bound_seconds,
                f"; not answered within {wait_seconds:g} s, listed by this tick: "
                f"{', '.join(unanswered)}" if unanswered else "")
    return CacheReading(cache.freshness(), cache.freshness_bound_seconds, tuple(stale),
                        tuple(unanswered))


# Escalator §4: completed and failed pods never count. The live list asks the API server to
# leave them out (`tasks.adapters.kube.ACTIVE_PODS`); a `kubectl get pods -A -o json` dump holds them
# (finished Jobs stay until cleaned up), so the tick drops them again whatever the source.
def active_pods(pods: list[PodRecord]) -> list[PodRecord]:
    """The pods a tick counts: everything but Succeeded and Failed (Escalator §4)."""
    return [pod for pod in pods if pod.phase not in TERMINAL_PHASES]


def pods_of_groups(source: TickSource, pods: list[PodRecord], groups: Sequence[NodeGroupConfig],
               ) -> dict[str, list[PodRecord]]:
    """Every group's pods: kept current by the watch cache when the source is the cache."""
    if isinstance(source, CachedSource):
        return source.grouped(pods, groups)
    return pods_by_group(pods, groups)


def decided_pods(source: TickSource, pods: list[PodRecord], groups: Sequence[NodeGroupConfig],
                 grouped: Mapping[str, list[PodRecord]],
                 ) -> Mapping[str, Sequence[PodRecord] | GroupPods]:
    """What each group's decision reads of its pods: the cache's running tallies when the
    source keeps them (the tick then costs what changed), else the group's list."""
    if isinstance(source, CachedSource):
        summaries = source.summaries(pods, groups)
        if summaries is not None:
            return summaries
    return grouped


@step
def collect_pods(source: TickSource) -> list[PodRecord]:
    """Every active pod, listed once per tick for all groups.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(
        ...     config.node_groups, ["deployments/examples/cluster.json"])
        >>> len(ke.collect_pods.fn(source))
        38
    """
    pods = source.list_pods()
    return active_pods(pods) if source.holds_finished_pods else pods


@step
def collect_nodes(source: TickSource) -> list[NodeRecord]:
    """Every node, listed once per tick for all groups (Escalator §4).

    Example:
        ```python
        nodes = ke.filter_nodes(ke.collect_nodes(source), groups)
        ```
    """
    return source.list_nodes()


@step
def describe_node_groups(source: TickSource, names: Sequence[str]
                         ) -> dict[str, AutoScalingGroup]:
    """The configured groups' ASGs, by name; a group missing here has no ASG.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(
        ...     config.node_groups, ["deployments/examples/cluster.json"],
        ...     asg="deployments/examples/asgs.json")
        >>> asgs = ke.describe_node_groups.fn(source, [config.node_groups[0].cloud_provider_group_name])
        >>> {name: (asg.min_size, asg.max_size, asg.desired_capacity) for name, asg in asgs.items()}
        {'batch-asg': (1, 6, 3)}
    """
    expect_items("describe_node_groups", "names", names, str,
                 "ASG names (each group's cloud_provider_group_name)")
    return source.describe_groups(names)


@step
def read_locks(source: TickSource, group_names: Sequence[str]
               ) -> dict[str, GroupState | Exception]:
    """Every group's state as its Lease holds it (a fresh state before the first write): one
    GET per group, in one task run, since each task run costs the tick more than the GET.

    A Lease that cannot be read fails its own group only (its error in place of its state); a
    transient error retries the whole read, which changes nothing.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(
        ...     config.node_groups, ["deployments/examples/cluster.json"])
        >>> states = ke.read_locks.fn(source, ["batch"])
        >>> states["batch"].lock.is_locked
        False
    """
    expect_items("read_locks", "group_names", group_names, str, "node-group names")
    states: dict[str, GroupState | Exception] = {}
    for name in group_names:
        try:
            states[name] = source.read_state(name)
        except Exception as error:
            if is_retryable(error):
                raise
            states[name] = error
    return states


@step
def collect_pdbs(source: TickSource) -> tuple[PodDisruptionBudget, ...]:
    """Every PodDisruptionBudget, read once per tick for CA's removal rules.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(
        ...     config.node_groups, ["deployments/examples/cluster.json"])
        >>> ke.collect_pdbs.fn(source)
        ()
    """
    return source.list_pdbs()
