"""Which pods and nodes belong to which node group, and what state each node is in.

Escalator §5.1 and §5.2. Matching is indexed by (label key, label value) so one pass over
150,000 pods serves every group: no pod is tested against every group.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kube_elevator.tasks.core.records import ESCALATOR_TAINT_KEY, FORCE_TAINT_KEY, NodeRecord, PodRecord
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.utilization import GroupPods

DEFAULT_GROUP_NAME = "default"


def pod_matches_group(pod: PodRecord, group: NodeGroupConfig) -> bool:
    """Escalator's pod filter for one group (daemonset pods never match)."""
    if pod.owned_by_daemonset:
        return False
    if group.name == DEFAULT_GROUP_NAME:
        # Escalator: the `default` group takes unconstrained, non-static pods.
        return not pod.static and not pod.node_selector and not pod.has_affinity
    return selects_labels(pod, group.label_key, group.label_value)


def pods_by_group(
    pods: Iterable[PodRecord], groups: Sequence[NodeGroupConfig]
) -> dict[str, list[PodRecord]]:
    """Every group's pods, in listing order; a pod may belong to several groups."""
    selected: dict[str, list[PodRecord]] = {group.name: [] for group in groups}
    by_label: dict[tuple[str, str], list[str]] = defaultdict(list)
    for group in groups:
        if group.name != DEFAULT_GROUP_NAME:
            by_label[(group.label_key, group.label_value)].append(group.name)
    keys = {key for key, _ in by_label}
    has_default = DEFAULT_GROUP_NAME in selected
    for pod in pods:
        if pod.owned_by_daemonset:
            continue
        matched: list[str] = []
        for key, value in pod.node_selector.items():
            if key in keys:
                matched.extend(by_label.get((key, value), ()))
        for term in pod.required_node_terms:
            for expression in term.matchExpressions:
                if expression.operator == "In" and expression.key in keys:
                    for value in expression.values:
                        matched.extend(by_label.get((expression.key, value), ()))
        for name in dict.fromkeys(matched):
            selected[name].append(pod)
        if has_default and not pod.static and not pod.node_selector and not pod.has_affinity:
            selected[DEFAULT_GROUP_NAME].append(pod)
    return selected


NAMES_SHOWN = 5  # pods named in a note; the rest are counted


def _named(pods: Sequence[PodRecord]) -> str:
    shown = ", ".join(f"{pod.namespace}/{pod.name}" for pod in pods[:NAMES_SHOWN])
    more = len(pods) - NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def selects_labels(pod: PodRecord, key: str, value: str) -> bool:
    """The pod asks for nodes labelled key=value: a normal group's rule (§5.1)."""
    return pod.node_selector.get(key) == value or any(
        expression.key == key and expression.operator == "In" and value in expression.values
        for term in pod.required_node_terms for expression in term.matchExpressions)


def pod_matching_notes(pods: Sequence[PodRecord], groups: Sequence[NodeGroupConfig],
                       grouped: Mapping[str, Sequence[PodRecord]]) -> dict[str, tuple[str, ...]]:
    """Each group's notes on pods the groups silently leave out (issue 34: every "nothing"
    says why), by group name.

    - None of the pods matches any group (a snapshot, or a cluster, whose pods select other
      labels): every group says so, naming a few.
    - A group named `default` takes only pods without a selector or affinity (§5.1); pods that
      select its own label_key=label_value belong to no group, unless another group takes them.
    Cheap unless a note is due: the first walks the pods only when every group is empty, the
    second only when a group is named `default`.
    """
    notes: dict[str, list[str]] = {group.name: [] for group in groups}
    if not any(grouped.get(group.name) for group in groups):
        # A node's own pods (DaemonSet, static, mirror) need no group: never counted.
        candidates = [pod for pod in pods
                      if not (pod.owned_by_daemonset or pod.static or pod.mirror)]
        if candidates:
            rule = ("a pod belongs to a group by a nodeSelector or a required In node affinity "
                    "on the group's label_key=label_value (" + ", ".join(
                        f"{group.name}: {group.label_key}={group.label_value}"
                        for group in groups if group.name != DEFAULT_GROUP_NAME) + ")")
            if any(group.name == DEFAULT_GROUP_NAME for group in groups):
                rule += "; a group named default takes pods with neither"
            note = (f"none of the {len(candidates)} pods matches a node group: {rule}: "
                    f"{_named(candidates)}")
            for group in groups:
                notes[group.name].append(note)
    for group in groups:
        if group.name != DEFAULT_GROUP_NAME:
            continue
        selecting = [pod for pod in pods if not pod.owned_by_daemonset
                     and selects_labels(pod, group.label_key, group.label_value)]
        if not selecting:
            continue
        taken = {(pod.namespace, pod.name) for other in groups if other.name != group.name
                 for pod in grouped.get(other.name, ())}
        dropped = [pod for pod in selecting if (pod.namespace, pod.name) not in taken]
        if dropped:
            notes[group.name].append(
                f"{len(dropped)} pods select this group's labels ({group.label_key}="
                f"{group.label_value}) but a group named default takes only pods without a "
                f"selector (Escalator's rule), and no other group takes them: "
                f"{_named(dropped)}")
    return {name: tuple(found) for name, found in notes.items() if found}


def node_matches_group(node: NodeRecord, group: NodeGroupConfig) -> bool:
    """Escalator: a node belongs iff labels[label_key] == label_value (the key must exist)."""
    return node.labels.get(group.label_key) == group.label_value


def nodes_by_group(
    nodes: Iterable[NodeRecord], groups: Sequence[NodeGroupConfig]
) -> dict[str, list[NodeRecord]]:
    """Every group's nodes, in listing order (`node_matches_group`, one label lookup per node
    and label key rather than per node and group)."""
    selected: dict[str, list[NodeRecord]] = {group.name: [] for group in groups}
    by_label: dict[tuple[str, str], list[list[NodeRecord]]] = defaultdict(list)
    for group in groups:
        by_label[(group.label_key, group.label_value)].append(selected[group.name])
    keys = list(dict.fromkeys(group.label_key for group in groups))
    for node in nodes:
        for key in keys:
            value = node.labels.get(key)
            if value is not None:
                for members in by_label.get((key, value), ()):
                    members.append(node)
    return selected


@dataclass(frozen=True)
class NodeClasses:
    """Escalator's four node classes (§5.2), each in listing order."""

    untainted: tuple[NodeRecord, ...]
    tainted: tuple[NodeRecord, ...]
    force_tainted: tuple[NodeRecord, ...]
    cordoned: tuple[NodeRecord, ...]


def classify_nodes(
    nodes: Iterable[NodeRecord], dry_mode: bool = False,
    dry_mode_tainted: Collection[str] = (),
) -> NodeClasses:
    """Cordoned, then force-tainted, then tainted, else untainted; dry mode reads only the tracker."""
    untainted: list[NodeRecord] = []
    tainted: list[NodeRecord] = []
    force_tainted: list[NodeRecord] = []
    cordoned: list[NodeRecord] = []
    for node in nodes:
        if dry_mode:
            # Escalator §9: the tracker replaces taints; cordons and real taints are ignored.
            (tainted if node.name in dry_mode_tainted else untainted).append(node)
        elif node.unschedulable:
            cordoned.append(node)
        elif node.has_taint(FORCE_TAINT_KEY):
            force_tainted.append(node)
        elif node.has_taint(ESCALATOR_TAINT_KEY):
            tainted.append(node)
        else:
            untainted.append(node)
    return NodeClasses(tuple(untainted), tuple(tainted), tuple(force_tainted), tuple(cordoned))


def is_unhealthy(node: NodeRecord, grace_seconds: float, now: float) -> bool:
    """Escalator §5.11: not cordoned, at least `grace` old, and Ready absent or not True."""
    return (not node.unschedulable and node.created_unix_seconds + grace_seconds <= now
            and not node.ready)


@dataclass(frozen=True)
class GroupMembers:
    """One group's pods and nodes, its nodes classified: Escalator steps 3 and 4."""

    pods: Sequence[PodRecord] | GroupPods
    nodes: Sequence[NodeRecord]
    classes: NodeClasses
    dry_mode: bool
    unhealthy_to_taint: tuple[str, ...] = ()
    dry_mode_tainted: tuple[str, ...] = ()


def filter_group(
    group: NodeGroupConfig, pods: Sequence[PodRecord] | GroupPods, nodes: Sequence[NodeRecord],
    dry_mode_tainted: Sequence[str], now: float, dry_mode: bool,
) -> GroupMembers:
    """Classify the group's nodes, after tainting unhealthy ones (step 3) in dry mode's tracker.

    Outside dry mode the classification still sees unhealthy nodes as listed, as Escalator's
    does (its taints land on the API, not on the nodes it already listed).
    """
    # A node that left the group (deleted, replaced, relabelled) leaves the tracker too: the
    # tracker lives in the group's Lease, and would otherwise keep every node it ever held.
    present = {node.name for node in nodes}
    tracker = [name for name in dry_mode_tainted if name in present]
    unhealthy: list[str] = []
    if group.unhealthy_node_feature:
        grace = group.unhealthy_node_grace_seconds
        for node in nodes:
            if is_unhealthy(node, grace, now) and (dry_mode or not node.has_taint(
                    ESCALATOR_TAINT_KEY)):
                unhealthy.append(node.name)
                if dry_mode and node.name not in tracker:
                    tracker.append(node.name)
    return GroupMembers(pods=pods, nodes=nodes,
                        classes=classify_nodes(nodes, dry_mode, tracker), dry_mode=dry_mode,
                        unhealthy_to_taint=tuple(unhealthy), dry_mode_tainted=tuple(tracker))
