"""The decision of one tick of one node group (ScalePlan): what it does, and why.

The record `decide` returns and everything downstream reads: the actuator, the report, the
metrics, `elevator plan --output json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.escalator.utilization import Utilization


@dataclass(frozen=True)
class NodeCounts:
    """A group's nodes by what `filter_nodes` found them to be (Escalator §5.1).

    Example:
        >>> plan = ke.plan("deployments/examples/nodegroups.yaml",
        ...                ["deployments/examples/cluster.json"], now=1795262400.0)[0]
        >>> plan.nodes.untainted, plan.nodes.tainted
        (2, 1)
    """

    total: int
    untainted: int
    tainted: int
    force_tainted: int
    cordoned: int


@dataclass(frozen=True)
class ScalePlan:
    """What one tick of one node group does, and why.

    Example:
        >>> plan = ke.plan("deployments/examples/nodegroups.yaml",
        ...                ["deployments/examples/cluster.json"], now=1795262400.0)[0]
        >>> (plan.name, plan.delta, plan.untaint, plan.cloud_increase)
        ('batch', 4, ('batch-node-00000',), 3)
    """

    name: str
    pods: int
    nodes: NodeCounts
    utilization: Utilization
    cpu_percent: float | None  # None in the scale-from-zero case
    mem_percent: float | None
    locked: bool  # the scale lock is held after this tick
    delta: int  # the decided delta, as Escalator returns it (§13)
    error: str | None  # Escalator's returned error (§5.5), else None
    reason: str
    untaint: tuple[str, ...] = ()
    taint: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    cloud_increase: int = 0
    asg_desired: int = 0
    asg_desired_before: int = 0
    dry_mode: bool = False
    taint_effect: str = "NoSchedule"
    next_state: GroupState = field(default_factory=GroupState)
    notes: tuple[str, ...] = ()  # errors Escalator only logs
    # For Escalator's metrics (§11):
    lock_held_at_check: bool = False
    lock_released_after_seconds: float | None = None
    group_healthy: bool = True
    pods_on_deleted_nodes: int = 0
    # §6 step 1 and §7.1 step 2: the events count what was asked for, not what was done.
    untaint_requested: int = 0
    taint_requested: int = 0
    # §7.1 step 1: a scale-down's failed reaps: the node not in the ASG, or "" (a minimum).
    delete_errors: tuple[str, ...] = ()
    # What a minimum (`held at min_nodes 3: nothing tainted`) or the ASG's MaxSize (`at MaxSize
    # 10: no scale-up`) let the tick do, when less than the delta; also the reason's last part.
    limit: str = ""

    @property
    def changes_anything(self) -> bool:
        return bool(self.untaint or self.taint or self.delete or self.cloud_increase)

    def to_json(self) -> dict[str, object]:
        """The `elevator plan --output json` shape, one object per group."""
        return {
            "name": self.name,
            "pods": self.pods,
            "nodes": {
                "total": self.nodes.total,
                "untainted": self.nodes.untainted,
                "tainted": self.nodes.tainted,
                "force_tainted": self.nodes.force_tainted,
                "cordoned": self.nodes.cordoned,
            },
            "cpu_request_milli": self.utilization.requests.cpu_milli,
            "mem_request_bytes": self.utilization.requests.memory_bytes,
            "cpu_capacity_milli": self.utilization.capacity.cpu_milli,
            "mem_capacity_bytes": self.utilization.capacity.memory_bytes,
            "cpu_percent": self.cpu_percent,
            "mem_percent": self.mem_percent,
            "locked": self.locked,
            "delta": self.delta,
            "error": self.error,
            "reason": self.reason,
            "dry_mode": self.dry_mode,
            "notes": list(self.notes),
            "actions": {
                "untaint": list(self.untaint),
                "taint": list(self.taint),
                "delete": list(self.delete),
                "cloud_increase": self.cloud_increase,
                "asg_desired": self.asg_desired,
            },
        }
