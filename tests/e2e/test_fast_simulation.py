"""The simulator's fast mode: the in-memory world gives the HTTP world's records, call for call.

The scenario tests run every bundled scenario both ways. The contract tests send the same calls
to the real clients over HTTP (`KubeClient` on the fake API server, `AsgClient` on moto) and to
the in-memory adapters, and compare the answers.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from typer.testing import CliRunner

from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.cluster import _decoded, node_for_instance
from kube_elevator.fakes.kube_api.errors import Conflict
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.fakes.memory_world import MemoryCloud, MemoryKube, MemoryWorld
from kube_elevator.fakes.scenario import load_scenario, with_profile
from kube_elevator.flows.cli import app
from kube_elevator.flows.simulation import simulate
from kube_elevator.tasks.adapters.cloud import AsgClient
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.adapters.ports import CloudActions, KubeActions
from kube_elevator.tasks.core.errors import CloudError, InputError, LeaseConflict
from kube_elevator.tasks.core.lease_state import GroupState, ScaleLock
from kube_elevator.tasks.core.records import NodeRecord, node_record
from kube_elevator.tasks.scheduler.profiles import PROFILE_NAMES

if TYPE_CHECKING:
    from kube_elevator.flows.simulation_memory import MemoryCluster

EXAMPLES = Path(__file__).resolve().parents[2] / "deployments" / "examples"
# The scenario files among deployments/examples/scenario*.yaml (scenario-nodegroups.yaml is the
# node-group file they share).
SCENARIOS = sorted(path.name for path in EXAMPLES.glob("scenario*.yaml")
                   if "asgs" in (yaml.safe_load(path.read_text()) or {}))


@pytest.mark.parametrize("name", SCENARIOS)
def test_fast_mode_gives_the_http_modes_tick_records(name: str) -> None:
    """Issue 17: the fast mode runs the same tick (flows/tick.py) on the in-memory world and
    must give identical tick-by-tick records, summary and terminations. Nothing in the result
    differs by nature: wall time is not in it, and moto's random instance ids (the in-memory
    ids are a counter) appear in no record, since nodes are named `<asg>-<n>` in join order."""
    loaded = load_scenario(EXAMPLES / name)
    over_http = simulate(loaded)
    in_memory = simulate(loaded, mode="memory")
    assert len(in_memory.ticks) == len(over_http.ticks) > 10
    for http_tick, memory_tick in zip(over_http.ticks, in_memory.ticks, strict=True):
        assert memory_tick == http_tick
    assert in_memory.summary == over_http.summary
    assert in_memory.terminations == over_http.terminations
    if name == "scenario-cluster-autoscaler.yaml":
        # CA's drain went through the Eviction API and its controller re-created the pod.
        assert in_memory.summary["evictions"] > 0


def test_fast_mode_refuses_what_needs_the_load_services(tmp_path: Path) -> None:
    """Trimaran's placement and least-loaded scale-down read the load watcher over HTTP: the
    fast mode says so, naming the file and key path, and the CLI exits 2 without a traceback."""
    document = yaml.safe_load((EXAMPLES / "scenario.yaml").read_text())
    document["placement"] = "target-load-packing"
    document["nodegroups"] = str(EXAMPLES / "scenario-nodegroups.yaml")
    path = tmp_path / "placed.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(InputError) as refused:
        simulate(load_scenario(path), mode="memory")
    assert refused.value.problems[0].startswith(f"{path}: placement: 'target-load-packing' "
                                                "needs the load watcher")
    result = CliRunner().invoke(app, ["simulate", str(path), "--fast"])
    assert result.exit_code == 2
    assert "placement" in result.output and "Traceback" not in result.output


def test_simulate_fast_prints_the_memory_modes_json() -> None:
    """`elevator simulate --fast --format json` is `simulate(mode="memory")`'s document."""
    path = EXAMPLES / "scenario.yaml"
    result = CliRunner().invoke(app, ["simulate", str(path), "--fast", "--format", "json"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.stdout.splitlines()[-1])
    assert printed == simulate(load_scenario(path), mode="memory").to_json()


def _group(name: str, max_nodes: int) -> dict[str, Any]:
    return {"name": name, "label_key": "customer", "label_value": name,
            "cloud_provider_group_name": f"{name}-asg", "min_nodes": 1, "max_nodes": max_nodes,
            "taint_upper_capacity_threshold_percent": 75,
            "taint_lower_capacity_threshold_percent": 10, "scale_up_threshold_percent": 90,
            "slow_node_removal_rate": 1, "fast_node_removal_rate": 2,
            "soft_delete_grace_period": "30s", "hard_delete_grace_period": "2m",
            "scale_up_cool_down_period": "1m"}


EITHER_GROUP = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "customer", "operator": "In",
                           "values": ["batch", "services"]}]}]}}

# What the scheduler model reads, in a short run: DaemonSet pods on every node, two zones,
# services spread by their ReplicaSet (system default spreading), batch jobs of two priorities
# arriving when there is room for some only, empty new nodes tying, scale-down with a hard
# grace period shorter than some jobs (evictions, re-created pods queued anew).
SCHEDULER_SCENARIO: dict[str, Any] = {
    "seed": 5, "tick_interval": "1m", "step": "10s", "duration": "14m",
    "nodegroups": {"node_groups": [_group("batch", 5), _group("services", 3)]},
    "asgs": [
        {"name": "batch-asg", "min": 1, "max": 5, "desired": 2, "instance_type": "m5.large",
         "node_labels": {"customer": "batch"}, "boot_delay": "60s",
         "availability_zone": "us-east-1a",
         "daemonsets": [{"name": "kube-proxy", "cpu": "100m", "memory": "128Mi"},
                        {"name": "logs", "cpu": "300m", "memory": "256Mi"}]},
        {"name": "services-asg", "min": 1, "max": 3, "desired": 2,
         "instance_type": "m5.xlarge", "node_labels": {"customer": "services"},
         "boot_delay": "90s", "availability_zone": "us-east-1b",
         "daemonsets": [{"name": "kube-proxy", "cpu": "100m", "memory": "128Mi"}]}],
    "workload": [
        {"name": "api", "at": "0s", "count": 5, "cpu": "700m", "memory": "1Gi",
         "node_selector": {"customer": "services"}},
        {"name": "low", "at": "20s", "count": 8, "cpu": "600m", "memory": "512Mi",
         "duration": "6m", "node_selector": {"customer": "batch"}},
        {"name": "high", "at": "40s", "count": 4, "cpu": "600m", "memory": "512Mi",
         "duration": "2m", "priority": 1000, "node_selector": {"customer": "batch"}},
        {"name": "api-more", "at": "4m", "count": 4, "cpu": "700m", "memory": "1Gi",
         "node_selector": {"customer": "services"}},
        {"name": "tail", "at": "6m", "count": 6, "cpu": "300m", "memory": "256Mi",
         "duration": "5m", "node_selector": {"customer": "batch"}},
        # Issue 37: what real workloads say about placement. A replica a node and zones kept
        # within one of each other, a host port, volumes in one zone.
        {"name": "front", "at": "30s", "count": 4, "cpu": "200m", "memory": "256Mi",
         "labels": {"tier": "front"},
         "affinity": {"nodeAffinity": EITHER_GROUP, "podAntiAffinity": {
             "requiredDuringSchedulingIgnoredDuringExecution": [{
                 "labelSelector": {"matchLabels": {"app": "front"}},
                 "topologyKey": "kubernetes.io/hostname"}]}},
         "topology_spread_constraints": [{
             "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
             "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"tier": "front"}}}]},
        {"name": "agent", "at": "1m", "count": 3, "cpu": "100m", "memory": "64Mi",
         "ports": [{"containerPort": 9100, "hostPort": 9100}],
         "node_selector": {"customer": "batch"}},
        {"name": "store", "at": "2m", "count": 2, "cpu": "300m", "memory": "512Mi",
         "volume_zone": "us-east-1b", "affinity": {"nodeAffinity": EITHER_GROUP}}],
}


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_fast_mode_gives_the_http_modes_records_under_every_profile(tmp_path: Path,
                                                                     profile: str) -> None:
    """One scheduler model for both worlds: under each profile the in-memory world binds every
    pod where the HTTP world does (identical tick records, summary and terminations), with its
    DaemonSet pods, priorities and tie-break draws, and the pods that carry hostname
    anti-affinity, zonal spreading, a host port and zonal volumes (issue 37)."""
    path = tmp_path / "scheduler.yaml"
    path.write_text(yaml.safe_dump({**SCHEDULER_SCENARIO, "scheduler": {"profile": profile}}))
    loaded = load_scenario(path)
    over_http = simulate(loaded)
    in_memory = simulate(loaded, mode="memory")
    assert in_memory.ticks == over_http.ticks
    assert in_memory.summary == over_http.summary
    assert in_memory.terminations == over_http.terminations
    assert over_http.summary["scheduler_profile"] == profile
    assert over_http.summary["scale_ups"] > 0 and over_http.summary["scale_downs"] > 0
    assert over_http.summary["evictions"] > 0  # cut short by the hard grace, queued anew


BATCH_SELECTOR = {"customer": "batch"}


def one_batch_node_with_a_daemonset() -> tuple[MemoryCluster, dict[str, str], float]:
    """An in-memory world of one m5.large in `batch` (max 1 node) running a 400m DaemonSet pod:
    (the cluster, the group's selector, the start)."""
    from kube_elevator.fakes.cluster import simulated_scheduler
    from kube_elevator.fakes.scenario import AsgSpec, DaemonSetSpec
    from kube_elevator.flows.simulation_memory import MemoryCluster
    from kube_elevator.tasks.node_group_file import parse_node_groups
    from tests.builders import group_dict

    asg = AsgSpec(name="batch-asg", min=1, max=1, desired=1, node_labels=BATCH_SELECTOR,
                  daemonsets=[DaemonSetSpec(name="logs", cpu="400m", memory="128Mi")])
    groups = parse_node_groups({"node_groups": [group_dict(min_nodes=1, max_nodes=2)]},
                               "test").node_groups
    cluster = MemoryCluster(MemoryWorld(), [asg], groups,
                            scheduler=simulated_scheduler("default", 1))
    start = 1_800_000_000.0
    cluster.create_asgs(start)
    return cluster, dict(BATCH_SELECTOR), start


def test_a_later_pod_of_higher_priority_binds_first_where_daemonsets_left_room() -> None:
    """The simulated node runs its DaemonSet pod from the moment it joins (400m of an m5.large's
    1900m); when the 1500m blocker finishes, room for one of the two waiting 900m pods is left
    (it would be two without the DaemonSet), and the later one of higher priority takes it.
    The DaemonSet pod is not the group's workload (Escalator counts no DaemonSet pod)."""
    from kube_elevator.fakes.scenario import Wave

    cluster, selector, start = one_batch_node_with_a_daemonset()

    def wave(name: str, cpu: str, priority: int = 0, duration: float | None = None) -> Wave:
        return Wave(at=0, count=1, cpu=cpu, memory="256Mi", duration=duration,
                    node_selector=selector, name=name, priority=priority)

    # the blocker is of the high pod's priority: it cannot be preempted
    for offset, name, arrival in [(0, "blocker-0000", wave("blocker", "1500m", priority=100,
                                                            duration=60)),
                                  (10, "low-0000", wave("low", "900m")),
                                  (20, "high-0000", wave("high", "900m", priority=100))]:
        cluster.arrive(name, arrival, selector, start + offset)
        cluster.advance(start + offset)
    assert [key for key, pod in cluster.world.pods.items() if pod.owned_by_daemonset] == [
        ("kube-system", "logs-batch-asg-001")]
    assert cluster.pods[("workload", "low-0000")].bound_at is None
    cluster.advance(start + 60)  # the blocker is done
    assert cluster.pods[("workload", "high-0000")].node == "batch-asg-001"
    assert cluster.pods[("workload", "low-0000")].bound_at is None
    assert cluster.requested()["batch"] == [1800, 2 * 256 * 2**20]  # the workload's only
    cluster.world.remove_node("batch-asg-001")  # deleted (by an autoscaler, say)
    cluster.advance(start + 70)
    assert not [pod for pod in cluster.world.pods.values() if pod.owned_by_daemonset]  # PodGC
    assert cluster.pods[("workload", "high-0000")].bound_at is None  # evicted, pending again


def test_simulate_reports_the_profile_it_ran_under() -> None:
    """`--profile` overrides the scenario's `scheduler.profile`; the summary names the profile
    in the JSON and in the table (whose caption names the kube-scheduler version modelled)."""
    path = EXAMPLES / "scenario.yaml"
    result = CliRunner().invoke(app, ["simulate", str(path), "--fast", "--profile",
                                      "most-allocated", "--format", "json"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.stdout.splitlines()[-1])
    assert printed["summary"]["scheduler_profile"] == "most-allocated"
    assert printed == simulate(with_profile(load_scenario(path), "most-allocated"),
                               mode="memory").to_json()
    table = CliRunner().invoke(app, ["simulate", str(path), "--fast"], terminal_width=200)
    assert table.exit_code == 0, table.output
    assert re.search(r"scheduler profile +│ +default", table.stdout), table.stdout
    caption = " ".join(table.stdout.split())  # the caption wraps to the table's width
    assert "pods placed by the default profile of the kube-scheduler v1.35 model" in caption
    first_fit = CliRunner().invoke(app, ["simulate", str(path), "--fast", "--profile",
                                         "first-fit"], terminal_width=200)
    assert first_fit.exit_code == 0, first_fit.output
    caption = " ".join(first_fit.stdout.split())  # first-fit is no profile of kube-scheduler's
    assert ("pods placed first-fit: on the oldest node that passes the kube-scheduler v1.35 "
            "model's filters") in caption, caption
    refused = CliRunner().invoke(app, ["simulate", str(path), "--profile", "spread-out"])
    assert refused.exit_code == 2 and "Traceback" not in refused.output


# --- contracts: the same calls on the HTTP adapters and the in-memory ones ---------------------


def _node(name: str) -> dict[str, Any]:
    return node_for_instance({"InstanceId": f"i-{name}", "AvailabilityZone": "us-east-1a"},
                             {"customer": "batch"}, 1900, 2**33, 1_800_000_000.0, name)


def _kube_pair(fake_kube: FakeKubeApi, kubeconfig: Path) -> tuple[KubeActions, KubeActions,
                                                                   MemoryWorld]:
    world = MemoryWorld()
    for name in ("node-a", "node-b"):
        fake_kube.create("nodes", _node(name))
        world.put_node(node_record(_decoded(_node(name))))
    return KubeClient.from_config(kubeconfig), MemoryKube(world), world


def _lease_calls(kube: KubeActions) -> list[str]:
    """A sequence of Lease reads and writes; each answer as what changed, not its value."""
    answers = []
    fresh = kube.read_state("kube-system", "elevator-batch")
    answers.append(f"fresh: {fresh == GroupState()}")
    locked = GroupState(lock=ScaleLock(True, 2, 1_800_000_000.0, 1, 3), claim="c1")
    first = kube.write_state("kube-system", "elevator-batch", locked, 1_800_000_000.0)
    answers.append(f"created: {bool(first.resource_version)}")
    for attempt, state in (("create again", locked),
                           ("stale version", GroupState(resource_version="1"))):
        try:
            kube.write_state("kube-system", "elevator-batch", state, 1_800_000_000.0)
            answers.append(f"{attempt}: written")
        except LeaseConflict:
            answers.append(f"{attempt}: 409")
    read = kube.read_state("kube-system", "elevator-batch")
    answers.append(f"read back: {read == first}")
    same = kube.write_state("kube-system", "elevator-batch", read, 1_800_000_000.0)
    answers.append(f"unchanged write keeps the version: "
                   f"{same.resource_version == read.resource_version}")
    changed = kube.write_state("kube-system", "elevator-batch", replace_claim(read, "c2"),
                               1_800_000_060.0)
    answers.append(f"changed write bumps it: "
                   f"{changed.resource_version != read.resource_version}")
    try:
        kube.write_state("kube-system", "elevator-batch", read, 1_800_000_060.0)
        answers.append("old version: written")
    except LeaseConflict:
        answers.append("old version: 409")
    answers.append(f"claim kept: {kube.read_state('kube-system', 'elevator-batch').claim}")
    return answers


def replace_claim(state: GroupState, claim: str) -> GroupState:
    from dataclasses import replace

    return replace(state, claim=claim)


def test_lease_update_at_a_stale_resource_version_is_a_conflict(
        fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    """Kubernetes optimistic concurrency (API conventions, "Concurrency Control and
    Consistency"): an update carrying an old resourceVersion gets 409 Conflict, a create of an
    existing object 409 AlreadyExists, and an update that changes nothing keeps the version
    (apiserver's GuaranteedUpdate skips no-op writes). Both worlds answer alike."""
    live, memory, _ = _kube_pair(fake_kube, kubeconfig)
    assert _lease_calls(memory) == _lease_calls(live) == [
        "fresh: True", "created: True", "create again: 409", "stale version: 409",
        "read back: True", "unchanged write keeps the version: True",
        "changed write bumps it: True", "old version: 409", "claim kept: c2"]


def _taint_calls(kube: KubeActions) -> list[object]:
    return [kube.ensure_tainted("node-a", "1800000000", "NoSchedule"),
            kube.ensure_tainted("node-a", "1800000060", "NoSchedule"),
            kube.ensure_tainted("node-b", "1800000000", "NoExecute", "example.com/other"),
            kube.ensure_untainted("node-b"),
            kube.ensure_tainted("node-b", "1800000000", "NoSchedule"),
            kube.ensure_untainted("node-b"),
            kube.ensure_untainted("node-b"),
            kube.ensure_tainted("missing", "1800000000", "NoSchedule"),
            kube.delete_node("node-b"), kube.delete_node("node-b"),
            kube.ensure_untainted("node-b"),
            [(n.name, [(t.key, t.value, t.effect) for t in n.taints])
             for n in kube.list_nodes()]]


def test_escalator_taints_are_ensured_once_and_removed_once(
        fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    """Escalator k8s/taint.go AddToBeRemovedTaint / DeleteToBeRemovedTaint: a node already
    carrying the taint key is left alone (the first value stays), only that key is removed, and
    a missing node is no error. Same answers from KubeClient over HTTP and from memory."""
    live, memory, _ = _kube_pair(fake_kube, kubeconfig)
    expected = [True, False, True, False, True, True, False, False, True, False, False,
                [("node-a", [("atlassian.com/escalator", "1800000000", "NoSchedule")])]]
    assert _taint_calls(memory) == _taint_calls(live) == expected


def test_taint_patch_at_a_stale_resource_version_is_refused(
        fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    """A merge patch carrying metadata.resourceVersion is conditional (409 when the node
    changed since it was read), which is why KubeClient re-reads and retries: after another
    writer tainted the node, the ensure call sees the taint and sends nothing."""
    live, memory, world = _kube_pair(fake_kube, kubeconfig)
    stale = fake_kube.get("nodes", "node-a")["metadata"]["resourceVersion"]
    fake_kube.patch("nodes", "node-a", {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}})
    with pytest.raises(Conflict):
        fake_kube.patch("nodes", "node-a", {"metadata": {"resourceVersion": stale},
                                            "spec": {"taints": []}})
    stale_memory = world.nodes["node-a"].resource_version
    assert memory.ensure_tainted("node-a", "1", "NoSchedule", "x") is True
    assert memory._patch_taints("node-a", stale_memory, ()) is False  # type: ignore[attr-defined]
    assert [t.key for t in world.nodes["node-a"].taints] == ["x"]
    assert live.ensure_tainted("node-a", "2", "NoSchedule", "x") is False
    assert memory.ensure_tainted("node-a", "2", "NoSchedule", "x") is False


def _cloud_calls(cloud: CloudActions, asg: str, node_of: Any) -> list[object]:
    """SetDesiredCapacity and TerminateInstanceInAutoScalingGroup as a tick sends them."""
    answers: list[object] = []
    group = cloud.describe([asg])[asg]
    answers.append(cloud.set_desired_capacity(group, 9))  # above MaxSize 5
    group = cloud.describe([asg])[asg]
    answers += [group.desired_capacity, len(group.instances)]
    answers.append(cloud.set_desired_capacity(group, 5))  # already there: nothing sent
    doomed = [node_of(instance) for instance in group.instances[:2]]
    answers.append(len(cloud.terminate_instances(asg, doomed)))
    group = cloud.describe([asg])[asg]
    answers += [group.desired_capacity, len(group.instances)]
    answers.append(len(cloud.terminate_instances(asg, doomed)))  # a retry: done, no decrement
    answers.append(cloud.describe([asg])[asg].desired_capacity)
    rest = [node_of(instance) for instance in group.instances]
    for batch in (rest, rest[:1], rest[1:2]):
        try:
            answers.append(len(cloud.terminate_instances(asg, batch)))
        except CloudError as error:
            answers.append(error.message)
    answers.append(cloud.describe([asg, "no-such-asg"]).keys() == {asg})
    return answers


def _node_of(instance: Any) -> NodeRecord:
    return NodeRecord(instance.instance_id, {}, 0.0, 1900, 2**33,
                      provider_id=instance.provider_id)


def test_desired_capacity_is_clamped_and_terminating_decrements_it(fake_aws: FakeAws) -> None:
    """AWS SetDesiredCapacity must lie within [MinSize, MaxSize] (the adapter clamps, moto
    does not check), TerminateInstanceInAutoScalingGroup with ShouldDecrementDesiredCapacity
    lowers the desired capacity, and Escalator's DeleteNodes refuses a batch that would breach
    MinSize ("terminating nodes will breach minimum node size", "min sized reached")."""
    name = f"contract-{uuid.uuid4().hex[:8]}"
    fake_aws.create_asg(name, 2, 5, 3)
    live = AsgClient(fake_aws.client("autoscaling"), fake_aws.client("ec2"))
    world = MemoryWorld()
    world.create_asg(name, 2, 5, 3)
    expected = [5, 5, 5, 5, 2, 3, 3, 2, 3,
                "terminating nodes will breach minimum node size", 1,
                "min sized reached, nodes will not be deleted", True]
    assert _cloud_calls(MemoryCloud(world), name, _node_of) == expected
    assert _cloud_calls(live, name, _node_of) == expected


def test_the_in_memory_world_places_constrained_pods_as_they_say() -> None:
    """Issue 37: the in-memory world's one decoded pod per kind now tells constrained waves
    apart and carries a zonal pod's volume zone. Two waves of one app that differ only in
    anti-affinity are two kinds; a replica a node under hostname anti-affinity (the third
    pends with room to spare), two host ports never on one node, and a pod whose volume is in
    us-east-1b only on that zone's node."""
    from kube_elevator.fakes.cluster import simulated_scheduler
    from kube_elevator.fakes.scenario import AsgSpec, Wave
    from kube_elevator.flows.simulation_memory import MemoryCluster
    from kube_elevator.tasks.node_group_file import parse_node_groups
    from tests.builders import group_dict

    asgs = [AsgSpec(name=f"{zone}-asg", min=1, max=1, desired=1, instance_type="m5.xlarge",
                    node_labels={"customer": "web"}, availability_zone=f"us-east-1{zone}")
            for zone in ("a", "b")]
    groups = parse_node_groups({"node_groups": [
        group_dict(name=f"web-{zone}", label_key="customer", label_value="web",
                   cloud_provider_group_name=f"{zone}-asg", min_nodes=1, max_nodes=2)
        for zone in ("a", "b")]}, "test").node_groups
    cluster = MemoryCluster(MemoryWorld(), asgs, groups,
                            scheduler=simulated_scheduler("most-allocated", 1))
    start = 1_800_000_000.0
    cluster.create_asgs(start)
    selector = {"customer": "web"}
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "kubernetes.io/hostname"}]}}
    arrivals = [
        ("web-0000", Wave(at=0, count=1, cpu="100m", memory="64Mi", name="web")),
        ("web-0001", Wave.model_validate({"at": 0, "count": 3, "cpu": "100m", "memory": "64Mi",
                                          "name": "web", "affinity": apart})),
        ("web-0002", Wave.model_validate({"at": 0, "count": 3, "cpu": "100m", "memory": "64Mi",
                                          "name": "web", "affinity": apart})),
        ("web-0003", Wave.model_validate({"at": 0, "count": 3, "cpu": "100m", "memory": "64Mi",
                                          "name": "web", "affinity": apart})),
        ("port-0000", Wave.model_validate({"at": 0, "count": 2, "cpu": "100m",
                                           "memory": "64Mi", "name": "port", "ports": [
                                               {"containerPort": 80, "hostPort": 8080}]})),
        ("port-0001", Wave.model_validate({"at": 0, "count": 2, "cpu": "100m",
                                           "memory": "64Mi", "name": "port", "ports": [
                                               {"containerPort": 80, "hostPort": 8080}]})),
        ("db-0000", Wave(at=0, count=1, cpu="100m", memory="64Mi", name="db",
                         volume_zone="us-east-1b"))]
    for name, arrival in arrivals:
        cluster.arrive(name, arrival, selector, start)
    cluster.advance(start)
    node_of = {name: cluster.pods[("workload", name)].node for name, _ in arrivals}
    # the first web pod has no anti-affinity, but the others' terms keep them off its node
    web_nodes = [node_of[f"web-000{n}"] for n in range(4)]
    assert sorted(filter(None, web_nodes)) == ["a-asg-001", "b-asg-001"]
    assert web_nodes.count(None) == 2
    assert {node_of["port-0000"], node_of["port-0001"]} == {"a-asg-001", "b-asg-001"}
    assert node_of["db-0000"] == "b-asg-001"


def test_a_pod_of_higher_priority_preempts_and_its_victim_pends_again() -> None:
    """DefaultPreemption in the simulator: a 1500m pod of priority 0 fills the node (the
    DaemonSet pod apart, never a victim); a 900m pod of priority 100 arrives, evicts it and
    binds in the same step; the evicted pod is re-created pending, its wait counted anew."""
    from kube_elevator.fakes.scenario import Wave

    cluster, selector, start = one_batch_node_with_a_daemonset()
    for offset, name, cpu, priority in [(0, "low-0000", "1500m", 0),
                                        (10, "high-0000", "900m", 100)]:
        cluster.arrive(name, Wave(at=0, count=1, cpu=cpu, memory="256Mi",
                                  node_selector=selector, name=name.rsplit("-", 1)[0],
                                  priority=priority), selector, start + offset)
        cluster.advance(start + offset)
    low, high = cluster.pods[("workload", "low-0000")], cluster.pods[("workload", "high-0000")]
    assert high.node == "batch-asg-001" and high.bound_at == start + 10
    assert low.bound_at is None and low.pending_since == start + 10
    assert cluster.world.pods[("workload", "low-0000")].node_name == ""
    assert cluster.evictions == 1
    assert [key for key, pod in cluster.world.pods.items() if pod.owned_by_daemonset] == [
        ("kube-system", "logs-batch-asg-001")]  # the DaemonSet pod stays
