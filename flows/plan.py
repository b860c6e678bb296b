"""`plan`: what one tick would decide on files, changing nothing (`elevator plan`).

The live tick's composition (`flows.tick.tick`) with nothing to act through, read from
`kubectl get -o json` dumps and, optionally, `aws autoscaling describe-auto-scaling-groups`
output: the same reads (terminal pods dropped), the same decision and, with
`cluster_autoscaler.enabled`, CA's removal rules with the snapshot's PodDisruptionBudgets.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kube_elevator.flows.tick import tick
from kube_elevator.tasks.core.lease_state import DEFAULT_LEASE_NAMESPACE
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.escalator.plan import ScalePlan
from kube_elevator.tasks.node_group_file import LoadedConfig, load_node_groups
from kube_elevator.tasks.steps.source import SnapshotSource


def plan(nodegroups: str | Path | LoadedConfig, cluster: Sequence[str | Path], now: float,
         asg: str | Path | None = None, lease_namespace: str = DEFAULT_LEASE_NAMESPACE,
         dry_mode: bool = False) -> list[ScalePlan]:
    """Each group's plan for one tick at `now` (Unix seconds) on the snapshot files.

    `nodegroups`: the node-group file (or it loaded); `cluster`: `kubectl get
    nodes,pods,leases[,poddisruptionbudgets] -A -o json` files; `asg`: the ASGs as AWS
    describes them (without it each ASG is MinSize=min_nodes, MaxSize=max_nodes, desired=the
    group's node count); `dry_mode` forces Escalator's dry mode for every group.

    Example:
        >>> plans = ke.plan("deployments/examples/nodegroups.yaml",
        ...                 ["deployments/examples/cluster.json"], now=1795262400.0,
        ...                 asg="deployments/examples/asgs.json")
        >>> [(p.name, p.delta) for p in plans]
        [('batch', 4), ('services', -1)]
    """
    config = nodegroups if isinstance(nodegroups, LoadedConfig) else load_node_groups(nodegroups)
    groups = [group.model_copy(update={"dry_mode": True}) if dry_mode else group
              for group in config.node_groups]
    source = SnapshotSource.from_files(groups, cluster, asg, lease_namespace)
    results = tick(run_plain, source, None, groups, now,
                   cluster_autoscaler=config.cluster_autoscaler)
    return [result.plan for result in results]
