"""kube-elevator: Kubernetes node-group and pod autoscaling as Prefect flows.

This module is the public API (DESIGN.md §8): the names in `__all__`, documented below and in
the API reference (`make docs`). Everything else, every module under `kube_elevator.flows`,
`kube_elevator.tasks` and `kube_elevator.fakes` included, is internal and may change without
notice. The names load on first use (PEP 562), so `import kube_elevator` stays cheap; each
says where it lives, for a reader of the code. Each name's docstring ends with an example: one
written `>>>` runs as it stands from a checkout's root, after `import kube_elevator as ke` (the
tests run them all), and one that needs a cluster, a server or AWS is a fenced block.

**The steps** are Prefect tasks with typed inputs and outputs (`Step`). Called inside a flow,
`collect_pods(source)` is a recorded task run with the tick's retry policy (a transient error
is retried, a lost answer does nothing twice) and returns the step's value; `step.fn` is the
plain function, for tests and scripts. In the order a tick runs them:

| step | reads or does | Escalator |
|---|---|---|
| `collect_pods`, `collect_nodes`, `describe_node_groups` | the cluster and the ASGs, once a tick | §4 |
| `read_locks` | every group's scale lock and state, from its Lease | §5.3 |
| `filter_pods`, `filter_nodes` | each group's pods and nodes, by its label | §5.1 |
| `compute_utilization` | a group's requests and capacity | §5.2 |
| `decide` | filter, measure and decide every group: a `ScalePlan` each | §5 |
| `write_lock` | claim the tick: the group's next state, the scale lock in it | §5.3 |
| `untaint_or_increase` | untaint, then set the ASG to the plan's size | §6 |
| `taint_and_remove` | terminate and delete expired nodes, then taint | §7 |

**The tick composition** `tick(run, source, actuator, groups, now)` chains them as the
`autoscale` flow does: `run` is `run_as_task` in a flow, `run_plain` outside one; `actuator`
None decides and changes nothing. `make_adapters` builds the live clients (a kubeconfig or a
prefect-kubernetes cluster block; boto3's chain or a prefect-aws credentials block);
`LiveSource(adapters)` reads the live cluster, `SnapshotSource` files.

**The flows**: `autoscale` (one tick of every node group, the deployment `autoscale`, and
with `dry_run` the deployment `plan`), `tune_flow` (`elevator tune`), and `pod_autoscale`
(the WatermarkPodAutoscaler and MemoryAutoscaler cycle); and two plain functions: `plan` (a
tick on files, `elevator plan`) and `simulate` (a scenario on the fake cluster, `elevator
simulate`, each of its ticks a flow run of its own with `prefect=True`).

**The node-group file**: `load_node_groups(path)` validates Escalator's YAML or JSON and
returns a `LoadedConfig`; a bad file raises `InputError` naming the file, the key and the rule.

**Blocks**: the flows take Prefect's own blocks (`cluster_block`, a prefect-kubernetes
`KubernetesClusterConfig`; `aws_credentials_block`, a prefect-aws `AwsCredentials`; the `blocks`
extra), chosen in the run form's block picker or by name. A flow of one's own types such a
parameter `ClusterBlock | str | None` (or `AwsCredentialsBlock | str | None`) for the same
picker, and `block_name` reads the name back; `register_block_types` registers the block types
with a server, as `elevator serve` does.

**The harness**: `kube_elevator.harness`, a documented module of its own (docs/harness.md):
the fake cluster as a test harness for anyone's code, and the `harness` extra's pytest plugin.

A flow of one's own, with a check between the decision and the scale-up, is
`deployments/examples/approval_flow.py`; a tick on the shipped snapshot, with no cluster:

```python
import kube_elevator as ke

plans = ke.plan("deployments/examples/nodegroups.yaml",
                ["deployments/examples/cluster.json"], now=1795262400.0,
                asg="deployments/examples/asgs.json")
print([(p.name, p.delta) for p in plans])
```
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Each public name and the module it lives in (under kube_elevator.).
_HOMES: dict[str, str] = {
    # the steps, Prefect tasks
    "collect_pods": "tasks.steps.source",
    "collect_nodes": "tasks.steps.source",
    "collect_pdbs": "tasks.steps.source",
    "describe_node_groups": "tasks.steps.source",
    "read_locks": "tasks.steps.source",
    "filter_pods": "tasks.steps.decision",
    "filter_nodes": "tasks.steps.decision",
    "compute_utilization": "tasks.steps.decision",
    "decide": "tasks.escalator.decide_step",
    "write_lock": "tasks.steps.lease",
    "untaint_or_increase": "tasks.steps.node_groups",
    "taint_and_remove": "tasks.steps.node_groups",
    "evict_pods": "tasks.steps.drain",
    # what a step is, and how a composition runs it
    "Step": "tasks.core.step",
    "step": "tasks.core.step",
    "Runner": "tasks.core.step",
    "run_as_task": "tasks.core.step",
    "run_plain": "tasks.core.step",
    # the tick composition and its inputs and outputs
    "tick": "flows.tick",
    "live_tick": "flows.autoscale",
    "make_adapters": "flows.autoscale",
    "Adapters": "tasks.steps.node_groups",
    "GroupResult": "tasks.steps.node_groups",
    "ActionsDone": "tasks.steps.node_groups",
    "TickSource": "tasks.steps.source",
    "LiveSource": "tasks.steps.source",
    "SnapshotSource": "tasks.steps.source",
    "GroupInputs": "tasks.escalator.decide_step",
    "ScalePlan": "tasks.escalator.plan",
    "Utilization": "tasks.escalator.utilization",
    "GroupState": "tasks.core.lease_state",
    "PodRecord": "tasks.core.records",
    "NodeRecord": "tasks.core.records",
    "AutoScalingGroup": "tasks.core.records",
    "KubeClient": "tasks.adapters.kube",
    "AsgClient": "tasks.adapters.cloud",
    # the flows
    "autoscale": "flows.autoscale",
    "plan": "flows.plan",
    "simulate": "flows.simulation",
    "load_scenario": "fakes.scenario",
    "tune_flow": "flows.tune",
    "pod_autoscale": "flows.pod_autoscale",
    # the node-group file, errors, blocks
    "load_node_groups": "tasks.node_group_file",
    "LoadedConfig": "tasks.node_group_file",
    "NodeGroupConfig": "tasks.escalator.config",
    "InputError": "tasks.core.errors",
    "register_block_types": "tasks.adapters.blocks",
    "ClusterBlock": "tasks.adapters.blocks",
    "AwsCredentialsBlock": "tasks.adapters.blocks",
    "block_name": "tasks.adapters.blocks",
    # the types the public names' signatures and fields name
    "AsgInstance": "tasks.core.records",
    "AsgTemplateSource": "tasks.core.records",
    "AwsOptions": "tasks.escalator.config",
    "BlockChoice": "tasks.adapters.blocks",
    "Boxed": "tasks.core.step",
    "CloudActions": "tasks.adapters.ports",
    "ClusterAutoscalerConfig": "tasks.cluster_autoscaler.config",
    "ClusterCache": "tasks.adapters.kube_cache",
    "EvictionResult": "tasks.cluster_autoscaler.drain",
    "FleetCalls": "tasks.adapters.fleet",
    "GroupPods": "tasks.escalator.utilization",
    "KubeActions": "tasks.adapters.ports",
    "LeaseConflict": "tasks.core.errors",
    "LoadedScenario": "fakes.scenario",
    "LocalVolume": "tasks.core.api_objects",
    "NodeCounts": "tasks.escalator.plan",
    "NodeGroupsFile": "tasks.node_group_file",
    "NodeSelectorTerm": "tasks.core.api_objects",
    "PodDisruptionBudget": "tasks.core.pdb",
    "PodPlacement": "tasks.core.api_objects",
    "Resources": "tasks.core.records",
    "ScaleLock": "tasks.core.lease_state",
    "SimulationResult": "flows.simulation",
    "Taint": "tasks.core.api_objects",
    "TargetScale": "tasks.core.workload",
    "Toleration": "tasks.core.api_objects",
    "WaitClock": "tasks.adapters.fleet",
    # the types the public names' signatures and fields name
    "AsgSpec": "fakes.scenario",
    "FleetRequest": "tasks.adapters.fleet_request",
    "KindAge": "tasks.adapters.kube_cache",
    "LabelSelector": "tasks.core.selectors",
    "MatchExpression": "tasks.core.api_objects",
    "PodPrices": "tasks.cluster_autoscaler.config",
    "ScaleDownOptions": "tasks.cluster_autoscaler.config",
    "Scenario": "fakes.scenario",
    "Tally": "tasks.adapters.kube_cache",
    "TracePod": "fakes.scenario",
    "Wave": "fakes.scenario",
    # the types the public names' signatures and fields name
    "DaemonSetSpec": "fakes.scenario",
    "LabelRequirement": "tasks.core.selectors",
    "PodShape": "fakes.scenario_constraints",
    "SchedulerSpec": "fakes.scenario",
    # the types the public names' signatures and fields name
    "Affinity": "fakes.scenario_constraints",
    "ContainerPort": "fakes.scenario_constraints",
    "TopologySpreadConstraint": "fakes.scenario_constraints",
    # the types the public names' signatures and fields name
    "NodeAffinity": "fakes.scenario_constraints",
    "PodAffinity": "fakes.scenario_constraints",
    # the types the public names' signatures and fields name
    "NodeSelector": "fakes.scenario_constraints",
    "PodAffinityTerm": "fakes.scenario_constraints",
    "PreferredSchedulingTerm": "fakes.scenario_constraints",
    "WeightedPodAffinityTerm": "fakes.scenario_constraints",
}

__all__ = ["ActionsDone", "Adapters", "Affinity", "AsgClient", "AsgInstance", "AsgSpec",
           "AsgTemplateSource", "AutoScalingGroup", "AwsCredentialsBlock", "AwsOptions",
           "BlockChoice", "Boxed", "CloudActions", "ClusterAutoscalerConfig", "ClusterBlock",
           "ClusterCache", "ContainerPort", "DaemonSetSpec", "EvictionResult", "FleetCalls",
           "FleetRequest", "GroupInputs", "GroupPods", "GroupResult", "GroupState", "InputError",
           "KindAge", "KubeActions", "KubeClient", "LabelRequirement", "LabelSelector",
           "LeaseConflict", "LiveSource", "LoadedConfig", "LoadedScenario", "LocalVolume",
           "MatchExpression", "NodeAffinity", "NodeCounts", "NodeGroupConfig", "NodeGroupsFile",
           "NodeRecord", "NodeSelector", "NodeSelectorTerm", "PodAffinity", "PodAffinityTerm",
           "PodDisruptionBudget", "PodPlacement", "PodPrices", "PodRecord", "PodShape",
           "PreferredSchedulingTerm", "Resources", "Runner", "ScaleDownOptions", "ScaleLock",
           "ScalePlan", "Scenario", "SchedulerSpec", "SimulationResult", "SnapshotSource", "Step",
           "Taint", "Tally", "TargetScale", "TickSource", "Toleration", "TopologySpreadConstraint",
           "TracePod", "Utilization", "WaitClock", "Wave", "WeightedPodAffinityTerm", "autoscale",
           "block_name", "collect_nodes", "collect_pdbs", "collect_pods", "compute_utilization",
           "decide", "describe_node_groups", "evict_pods", "filter_nodes", "filter_pods",
           "live_tick", "load_node_groups", "load_scenario", "make_adapters", "plan",
           "pod_autoscale", "read_locks", "register_block_types", "run_as_task", "run_plain",
           "simulate", "step", "taint_and_remove", "tick", "tune_flow", "untaint_or_increase",
           "write_lock"]


def __getattr__(name: str) -> Any:
    """A public name, imported on first use (PEP 562) and kept here after."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what mypy and editors see; at run time `__getattr__` imports them
    from kube_elevator.fakes.scenario import (
        AsgSpec,
        DaemonSetSpec,
        LoadedScenario,
        Scenario,
        SchedulerSpec,
        TracePod,
        Wave,
        load_scenario,
    )
    from kube_elevator.fakes.scenario_constraints import (
        Affinity,
        ContainerPort,
        NodeAffinity,
        NodeSelector,
        PodAffinity,
        PodAffinityTerm,
        PodShape,
        PreferredSchedulingTerm,
        TopologySpreadConstraint,
        WeightedPodAffinityTerm,
    )
    from kube_elevator.flows.autoscale import autoscale, live_tick, make_adapters
    from kube_elevator.flows.plan import plan
    from kube_elevator.flows.pod_autoscale import pod_autoscale
    from kube_elevator.flows.simulation import SimulationResult, simulate
    from kube_elevator.flows.tick import tick
    from kube_elevator.flows.tune import tune_flow
    from kube_elevator.tasks.adapters.blocks import (
        AwsCredentialsBlock,
        BlockChoice,
        ClusterBlock,
        block_name,
        register_block_types,
    )
    from kube_elevator.tasks.adapters.cloud import AsgClient
    from kube_elevator.tasks.adapters.fleet import FleetCalls, WaitClock
    from kube_elevator.tasks.adapters.fleet_request import FleetRequest
    from kube_elevator.tasks.adapters.kube import KubeClient
    from kube_elevator.tasks.adapters.kube_cache import ClusterCache, KindAge, Tally
    from kube_elevator.tasks.adapters.ports import CloudActions, KubeActions
    from kube_elevator.tasks.cluster_autoscaler.config import (
        ClusterAutoscalerConfig,
        PodPrices,
        ScaleDownOptions,
    )
    from kube_elevator.tasks.cluster_autoscaler.drain import EvictionResult
    from kube_elevator.tasks.core.api_objects import (
        LocalVolume,
        MatchExpression,
        NodeSelectorTerm,
        PodPlacement,
        Taint,
        Toleration,
    )
    from kube_elevator.tasks.core.errors import InputError, LeaseConflict
    from kube_elevator.tasks.core.lease_state import GroupState, ScaleLock
    from kube_elevator.tasks.core.pdb import PodDisruptionBudget
    from kube_elevator.tasks.core.records import (
        AsgInstance,
        AsgTemplateSource,
        AutoScalingGroup,
        NodeRecord,
        PodRecord,
        Resources,
    )
    from kube_elevator.tasks.core.selectors import LabelRequirement, LabelSelector
    from kube_elevator.tasks.core.step import Boxed, Runner, Step, run_as_task, run_plain, step
    from kube_elevator.tasks.core.workload import TargetScale
    from kube_elevator.tasks.escalator.config import AwsOptions, NodeGroupConfig
    from kube_elevator.tasks.escalator.decide_step import GroupInputs, decide
    from kube_elevator.tasks.escalator.plan import NodeCounts, ScalePlan
    from kube_elevator.tasks.escalator.utilization import GroupPods, Utilization
    from kube_elevator.tasks.node_group_file import LoadedConfig, NodeGroupsFile, load_node_groups
    from kube_elevator.tasks.steps.decision import compute_utilization, filter_nodes, filter_pods
    from kube_elevator.tasks.steps.drain import evict_pods
    from kube_elevator.tasks.steps.lease import write_lock
    from kube_elevator.tasks.steps.node_groups import (
        ActionsDone,
        Adapters,
        GroupResult,
        taint_and_remove,
        untaint_or_increase,
    )
    from kube_elevator.tasks.steps.source import (
        LiveSource,
        SnapshotSource,
        TickSource,
        collect_nodes,
        collect_pdbs,
        collect_pods,
        describe_node_groups,
        read_locks,
    )
