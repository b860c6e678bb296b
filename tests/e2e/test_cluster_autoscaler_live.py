"""CA scale-up and drain through the real tick, the fake API server (real client over HTTP) and
moto: the priority expander's ConfigMap, a refused eviction, and the cluster-wide limits.

Each test asserts what a cluster operator would see: ASG desired capacity in moto, Nodes and
Pods in the fake API, and the notes on each group's result. Time is passed as `now`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.aws_faults import AwsFaultProxy
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import live_tick
from kube_elevator.tasks.adapters.cloud import AsgClient, client_config
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.core.lease_state import lease_name
from kube_elevator.tasks.core.step import Step, run_plain
from kube_elevator.tasks.core.timeouts import Timeouts
from kube_elevator.tasks.node_group_file import LoadedConfig, parse_node_groups
from kube_elevator.tasks.steps.drain import evict_pods
from kube_elevator.tasks.steps.node_groups import Adapters, GroupResult
from tests import recording
from tests.builders import group_dict
from tests.e2e.test_fault_ticks import run_retrying

T0 = 1_800_000_000.0
GiB = 2**30
LEASES = "kube-system"  # Adapters' default Lease namespace: the priority ConfigMap lives there
CONFIGMAP = "cluster-autoscaler-priority-expander"
JOBS = "jobs"


# --- fixtures in the fakes ------------------------------------------------------------------


def prefix() -> str:
    """moto lives for the whole session: every test gets ASG names of its own."""
    return f"ca{uuid.uuid4().hex[:8]}"


def ca_config(groups: list[dict[str, Any]], **ca: Any) -> LoadedConfig:
    return parse_node_groups({"node_groups": groups,
                              "cluster_autoscaler": {"enabled": True, **ca}}, "t.yaml")


def group(name: str, asg: str, **overrides: Any) -> dict[str, Any]:
    """A group found by `customer=<name>`; min 0 unless told, so Escalator leaves it alone."""
    return group_dict(**{"name": name, "label_value": name, "cloud_provider_group_name": asg,
                         "min_nodes": 0, "max_nodes": 10, **overrides})


def adapters_for(kubeconfig: Path, aws: FakeAws) -> Adapters:
    return Adapters(KubeClient.from_config(kubeconfig),
                    AsgClient(aws.client("autoscaling"), aws.client("ec2")), LEASES)


def desired(aws: FakeAws, asg: str) -> int:
    answer = aws.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[asg])
    return answer["AutoScalingGroups"][0]["DesiredCapacity"]


def register_nodes(kube: FakeKubeApi, aws: FakeAws, asg: str, customer: str,
                   cpu_milli: int = 2000, memory: int = 8 * GiB) -> list[str]:
    """Every instance of the ASG joins as a Node (named by its instance id), oldest first."""
    names = []
    for index, instance in enumerate(sorted(aws.instances(asg), key=lambda i: i["InstanceId"])):
        kube.create("nodes", node_for_instance(instance, {"customer": customer}, cpu_milli,
                                               memory, T0 - 3600 + index * 60))
        names.append(str(instance["InstanceId"]))
    return names


def _owner() -> list[dict[str, Any]]:
    return [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1",
             "controller": True}]


def _requests(cpu: str, memory: str) -> list[dict[str, Any]]:
    return [{"name": "c", "image": "pause",
             "resources": {"requests": {"cpu": cpu, "memory": memory}}}]


def pending_pod(kube: FakeKubeApi, name: str, cpu: str = "1500m") -> None:
    """A pod the scheduler gave up on; no nodeSelector, so no Escalator group counts it (no
    group is named "default") and only CA's scale-up can help it."""
    kube.create("pods", {
        "metadata": {"name": name, "namespace": JOBS, "ownerReferences": _owner()},
        "spec": {"containers": _requests(cpu, "512Mi")},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}},
        namespace=JOBS)


def running_pod(kube: FakeKubeApi, name: str, node: str, cpu: str = "1500m",
                namespace: str = JOBS, labels: dict[str, str] | None = None,
                node_selector: dict[str, str] | None = None) -> None:
    spec: dict[str, Any] = {"nodeName": node, "containers": _requests(cpu, "100Mi")}
    if node_selector:
        spec["nodeSelector"] = node_selector
    kube.create("pods", {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                     "ownerReferences": _owner()},
        "spec": spec,
        "status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}},
        namespace=namespace)


def priority_configmap(kube: FakeKubeApi, priorities: dict[int, list[str]] | str) -> None:
    """Create or replace the ConfigMap; a string is written as is (to be malformed)."""
    text = priorities if isinstance(priorities, str) else yaml.safe_dump(priorities)
    body = {"metadata": {"name": CONFIGMAP, "namespace": LEASES},
            "data": {"priorities": text}}
    try:
        kube.get("configmaps", CONFIGMAP, LEASES)
    except KeyError:
        kube.create("configmaps", body, namespace=LEASES)
    else:
        kube.patch("configmaps", CONFIGMAP, {"data": {"priorities": text}}, LEASES)


def run_tick(adapters: Adapters, config: LoadedConfig, now: float,
             run: Callable[..., Any] = run_plain) -> dict[str, GroupResult]:
    results = live_tick(run, adapters, config.node_groups, now,
                   cluster_autoscaler=config.cluster_autoscaler)
    assert all(result.status != "failed" for result in results), \
        [(r.plan.name, r.message) for r in results]
    return {result.plan.name: result for result in results}


def scale_up_notes(result: GroupResult) -> list[str]:
    return [note for note in result.plan.notes if "unschedulable" in note]


# --- 1. the priority expander's ConfigMap -------------------------------------------------


def _two_groups_from_zero(fake_aws: FakeAws) -> tuple[str, str, LoadedConfig]:
    """Groups a and b, m5.large ASGs at 0: either could hold a 1.5-CPU pod."""
    a, b = f"{prefix()}-a", f"{prefix()}-b"
    for asg in (a, b):
        fake_aws.create_asg(asg, 0, 5, 0)
    config = ca_config([group("a", a), group("b", b)], expander="priority", random_seed=1)
    return a, b, config


def test_the_priority_configmap_ranks_the_groups_and_an_edit_is_followed_next_scale_up(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    a, b, config = _two_groups_from_zero(fake_aws)
    adapters = adapters_for(kubeconfig, fake_aws)
    priority_configmap(fake_kube, {10: [f"^{b}$"], 1: [f"^{a}$"]})
    pending_pod(fake_kube, "job-0")

    first = run_tick(adapters, config, T0)
    assert (desired(fake_aws, a), desired(fake_aws, b)) == (0, 1)
    assert scale_up_notes(first["b"]) == [
        "scale-up for 1 unschedulable pod(s): +1 node(s), ASG desired 1 (expanders priority: b)"]
    assert scale_up_notes(first["a"]) == []

    # b's node joins and the scheduler puts job-0 on it; a second pod finds no room (1.5 of 2
    # CPUs taken). The operator now ranks a first: the next scale-up grows a.
    [b_node] = register_nodes(fake_kube, fake_aws, b, "b")
    fake_kube.delete("pods", "job-0", JOBS)
    running_pod(fake_kube, "job-0", b_node)
    pending_pod(fake_kube, "job-1")
    priority_configmap(fake_kube, {10: [f"^{a}$"], 1: [f"^{b}$"]})

    second = run_tick(adapters, config, T0 + 60)
    assert (desired(fake_aws, a), desired(fake_aws, b)) == (1, 1)
    assert scale_up_notes(second["a"]) == [
        "scale-up for 1 unschedulable pod(s): +1 node(s), ASG desired 1 (expanders priority: a)"]


def test_a_dry_run_decides_the_scale_up_as_the_live_tick_and_changes_nothing(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    """`elevator run --dry-run` and the flow's dry_run read the same ConfigMap and Leases and
    say what CA's scale-up would do; no ASG, Lease or taint changes until the live tick."""
    a, b, config = _two_groups_from_zero(fake_aws)
    adapters = adapters_for(kubeconfig, fake_aws)
    priority_configmap(fake_kube, {10: [f"^{b}$"], 1: [f"^{a}$"]})
    pending_pod(fake_kube, "job-0")
    writes_before = [r for r in fake_kube.requests if r.method != "GET"]

    dry = live_tick(run_plain, adapters, config.node_groups, T0, dry_run=True,
                    cluster_autoscaler=config.cluster_autoscaler)
    dry_notes = {result.plan.name: scale_up_notes(result) for result in dry}
    assert dry_notes == {"a": [], "b": [
        "scale-up for 1 unschedulable pod(s): +1 node(s), ASG desired 1 (expanders priority: b)"]}
    assert all(result.status == "dry run" for result in dry)
    assert (desired(fake_aws, a), desired(fake_aws, b)) == (0, 0)
    assert [r for r in fake_kube.requests if r.method != "GET"] == writes_before

    live = run_tick(adapters, config, T0)
    assert {name: scale_up_notes(result) for name, result in live.items()} == dry_notes
    assert (desired(fake_aws, a), desired(fake_aws, b)) == (0, 1)
    # Issue 42 item 9: CA's scale-up is in the plans' numbers, the dry run's as the live one's.
    numbers = {"a": (0, 0, 0), "b": (1, 1, 1)}  # (delta, cloud_increase, asg_desired)
    for results in ({result.plan.name: result for result in dry}, live):
        assert {name: (result.plan.delta, result.plan.cloud_increase, result.plan.asg_desired)
                for name, result in results.items()} == numbers


def test_priorities_may_name_a_configmap_in_another_namespace(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    a, b, _ = _two_groups_from_zero(fake_aws)
    namespace = f"autoscaling-{prefix()}"
    fake_kube.create("configmaps", {
        "metadata": {"name": "ranks", "namespace": namespace},
        "data": {"priorities": yaml.safe_dump({10: [f"^{a}$"], 1: [f"^{b}$"]})}},
        namespace=namespace)
    config = ca_config([group("a", a), group("b", b)], expander="priority", random_seed=1,
                       priorities=f"{namespace}/ranks")
    pending_pod(fake_kube, "job-0")
    with recording.needs_its_own_grant("configmaps", "ranks"):
        results = run_tick(adapters_for(kubeconfig, fake_aws), config, T0)
    assert (desired(fake_aws, a), desired(fake_aws, b)) == (1, 0)
    assert not any("not found" in note for r in results.values() for note in r.plan.notes)


@pytest.mark.parametrize(("priorities", "problem"), [
    ("10: [unclosed", f"ConfigMap {LEASES}/{CONFIGMAP}: 'priorities': line 2, column 1: "
                      "not valid YAML"),
    ("&ranks {10: *ranks}", "a YAML alias inside the node its anchor names"),
    ("10: ['(']", "priority 10: regex '(' does not compile"),
    ("- just\n- a list\n", "must be a mapping of priority to a list of regexes"),
])
def test_a_malformed_priority_configmap_is_a_note_and_the_scale_up_goes_on(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path, priorities: str,
        problem: str) -> None:
    a, b, config = _two_groups_from_zero(fake_aws)
    priority_configmap(fake_kube, priorities)
    pending_pod(fake_kube, "job-0")
    results = run_tick(adapters_for(kubeconfig, fake_aws), config, T0)
    # Every option passes the priority expander; the seeded tie-break grows exactly one group.
    assert sorted((desired(fake_aws, a), desired(fake_aws, b))) == [0, 1]
    for result in results.values():
        [note] = [n for n in result.plan.notes if "priority expander" in n]
        assert problem in note
        assert note.endswith(": the priority expander passes every option on")


def test_a_missing_priority_configmap_is_a_note_and_the_scale_up_goes_on(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    a, b, config = _two_groups_from_zero(fake_aws)
    pending_pod(fake_kube, "job-0")
    results = run_tick(adapters_for(kubeconfig, fake_aws), config, T0)
    assert sorted((desired(fake_aws, a), desired(fake_aws, b))) == [0, 1]
    missing = (f"ConfigMap {LEASES}/{CONFIGMAP} not found: "
               "the priority expander passes every option on")
    assert all(missing in result.plan.notes for result in results.values())


# --- 2. a refused eviction ------------------------------------------------------------------


def _draining_group(fake_aws: FakeAws, fake_kube: FakeKubeApi, name: str, asg: str,
                    tainted_ago: float = 1200) -> tuple[str, str]:
    """An ASG of two nodes; `doomed` was tainted by Escalator 20 minutes ago (past the hard
    grace: Escalator alone would terminate it) and runs web pod <name>-0; `kept` runs <name>-1.
    The pods are the web PodDisruptionBudget's (create it separately)."""
    fake_aws.create_asg(asg, 1, 5, 2)
    doomed, kept = register_nodes(fake_kube, fake_aws, asg, name, cpu_milli=1000,
                                  memory=4 * GiB)
    fake_kube.patch("nodes", doomed, {"spec": {"taints": [{
        "key": "atlassian.com/escalator", "value": str(int(T0 - tainted_ago)),
        "effect": "NoSchedule"}]}})
    for index, node in enumerate((doomed, kept)):
        running_pod(fake_kube, f"{name}-{index}", node, cpu="250m", namespace="web",
                    labels={"app": "web"}, node_selector={"customer": name})
    return doomed, kept


def _web_budget(fake_kube: FakeKubeApi, min_available: int) -> None:
    fake_kube.create("poddisruptionbudgets", {
        "metadata": {"name": "web", "namespace": "web"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}},
        namespace="web")


def _instances(aws: FakeAws, asg: str) -> set[str]:
    return {str(i["InstanceId"]) for i in aws.instances(asg)
            if i["LifecycleState"] == "InService"}


def _ready(kube: FakeKubeApi, pod: str, ready: bool) -> None:
    kube.patch("pods/status", pod, {"status": {"conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True" if ready else "False"}]}}, "web")


def test_an_eviction_the_api_refuses_becomes_a_note_and_the_node_is_kept(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    asg = f"{prefix()}-web"
    doomed, kept = _draining_group(fake_aws, fake_kube, "batch", asg)
    _web_budget(fake_kube, min_available=1)  # two healthy pods: one disruption allowed
    config = ca_config([group("batch", asg, min_nodes=1)], scale_down={"drain": True})
    adapters = adapters_for(kubeconfig, fake_aws)

    # Between the tick's read of the budget and its eviction, batch-1 stops being Ready: the
    # budget has no disruption left, and the API server answers the eviction with 429.
    def racing(step: Step[..., Any], *args: Any) -> Any:
        if step is evict_pods:
            _ready(fake_kube, "batch-1", ready=False)
        return run_plain(step, *args)

    refused = run_tick(adapters, config, T0, racing)["batch"]
    assert f"draining {doomed}: evicting 1 pod(s); terminated once empty" in refused.plan.notes
    assert refused.done.evicted == () and refused.done.deleted_nodes == ()
    [note] = [n for n in refused.plan.notes if n.startswith("eviction refused")]
    assert note.startswith("eviction refused, node kept: web/batch-0: eviction of pod "
                           "web/batch-0 blocked: ")
    assert "disruption budget" in note
    assert fake_kube.get("nodes", doomed)["spec"]["taints"]
    assert fake_kube.get("pods", "batch-0", "web")["spec"]["nodeName"] == doomed
    assert _instances(fake_aws, asg) == {doomed, kept} and desired(fake_aws, asg) == 2

    # Still unready next tick: the budget (read again) keeps the node without trying.
    held = run_tick(adapters, config, T0 + 60)["batch"]
    assert held.done.evicted == () and held.done.terminated_instances == ()
    assert any(n.startswith(f"scale-down skipped {doomed}: ") and "web/web" in n
               for n in held.plan.notes), held.plan.notes
    assert _instances(fake_aws, asg) == {doomed, kept}

    # Ready again: the pod is evicted, and the node, now empty, goes the tick after.
    _ready(fake_kube, "batch-1", ready=True)
    assert run_tick(adapters, config, T0 + 120)["batch"].done.evicted == ("web/batch-0",)
    assert _instances(fake_aws, asg) == {doomed, kept}
    gone = run_tick(adapters, config, T0 + 180)["batch"]
    assert gone.done.deleted_nodes == (doomed,)
    assert _instances(fake_aws, asg) == {kept} and desired(fake_aws, asg) == 1


def test_two_groups_counting_on_the_same_last_disruption_one_eviction_is_refused(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    # One budget over four web pods allows one disruption; each group's tick drains a node with
    # one of its pods, both counting on that disruption. The API lets the first through only.
    p = prefix()
    doomed = {}
    for name in ("x", "y"):
        doomed[name], _ = _draining_group(fake_aws, fake_kube, name, f"{p}-{name}")
    _web_budget(fake_kube, min_available=3)
    config = ca_config([group("x", f"{p}-x", min_nodes=1), group("y", f"{p}-y", min_nodes=1)],
                       scale_down={"drain": True})
    results = run_tick(adapters_for(kubeconfig, fake_aws), config, T0)
    evicted = {name for name, result in results.items() if result.done.evicted}
    refused = {name for name, result in results.items()
               if any(n.startswith(f"eviction refused, node kept: web/{name}-0: ")
                      for n in result.plan.notes)}
    assert len(evicted) == 1 and refused == {"x", "y"} - evicted
    [loser] = refused
    assert fake_kube.get("pods", f"{loser}-0", "web")["spec"]["nodeName"] == doomed[loser]
    assert doomed[loser] in _instances(fake_aws, f"{p}-{loser}")
    assert results[loser].done.deleted_nodes == ()


# --- 3. cluster limits during a live scale-up ---------------------------------------------


def _full_group(fake_aws: FakeAws, fake_kube: FakeKubeApi, name: str, asg: str,
                nodes: int) -> None:
    """An m5.large ASG whose nodes have joined, each 1.5 of its 2 CPUs taken: no pending
    1.5-CPU pod fits an existing node."""
    fake_aws.create_asg(asg, 0, 10, nodes)
    for node in register_nodes(fake_kube, fake_aws, asg, name):
        running_pod(fake_kube, f"filler-{node}", node)


def test_max_nodes_total_caps_the_nodes_added_and_then_skips_the_group(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    asg = f"{prefix()}-a"
    _full_group(fake_aws, fake_kube, "a", asg, nodes=2)
    for index in range(4):  # each needs a node of its own: 4 nodes wanted
        pending_pod(fake_kube, f"job-{index}")
    # min_nodes 2: Escalator sees none of the pods and would otherwise taint the nodes.
    config = ca_config([group("a", asg, min_nodes=2)], max_nodes_total=4)
    adapters = adapters_for(kubeconfig, fake_aws)

    capped = run_tick(adapters, config, T0)["a"]
    assert desired(fake_aws, asg) == 4  # 2 nodes + 2 more: the total of 4; not 2 + 4
    assert any(n.startswith("scale-up for 2 unschedulable pod(s): +2 node(s), ASG desired 4")
               for n in capped.plan.notes), capped.plan.notes

    # The 2 upcoming nodes count toward the total: the 2 pods still waiting get nothing.
    skipped = run_tick(adapters, config, T0 + 60)["a"]
    assert desired(fake_aws, asg) == 4
    assert ("scale-up for unschedulable pods: skipped, max_nodes_total 4 reached"
            in skipped.plan.notes), skipped.plan.notes


@pytest.mark.parametrize(("limit", "added", "skip_reason"), [
    # 2 live m5.large: 4 cores, 16 GiB. A b node (m5.2xlarge: 8 cores, 32 GiB) would break the
    # limit; a nodes (2 cores, 8 GiB) fit until it.
    ({"cores_total": "0:9"}, 2, "cores_total max 9 would be exceeded"),
    ({"memory_total": "0:40Gi"}, 3, "memory_total max 40 GiB would be exceeded"),
])
def test_a_resource_total_skips_the_group_that_would_exceed_it_and_caps_the_other(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path, limit: dict[str, str],
        added: int, skip_reason: str) -> None:
    p = prefix()
    a, b = f"{p}-a", f"{p}-b"
    _full_group(fake_aws, fake_kube, "a", a, nodes=2)
    fake_aws.create_asg(b, 0, 10, 0, instance_type="m5.2xlarge")
    for index in range(4):
        pending_pod(fake_kube, f"job-{index}")
    # b is preferred: without the limit, one b node would take all four pods.
    config = ca_config([group("a", a, min_nodes=2), group("b", b)], expander="priority",
                       priorities={10: [f"^{b}$"], 1: [f"^{a}$"]}, **limit)
    results = run_tick(adapters_for(kubeconfig, fake_aws), config, T0)
    assert desired(fake_aws, b) == 0
    assert f"scale-up for unschedulable pods: skipped, {skip_reason}" in results["b"].plan.notes
    assert desired(fake_aws, a) == 2 + added
    assert any(n.startswith(f"scale-up for {added} unschedulable pod(s): +{added} node(s), "
                            f"ASG desired {2 + added}") for n in results["a"].plan.notes), \
        results["a"].plan.notes


# --- the scale lock under cloud faults ------------------------------------------------------


@pytest.fixture
def aws_proxy(fake_aws: FakeAws) -> Iterator[AwsFaultProxy]:
    with AwsFaultProxy(fake_aws.endpoint_url) as running:
        yield running


@pytest.mark.parametrize("fault", ["answer-lost-then-throttled", "refused"])
def test_a_ca_increase_keeps_its_lock_unless_the_cloud_refused_it(
        fault: str, fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path,
        aws_proxy: AwsFaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """CA's scale-up takes the group's scale lock, as Escalator's does. An answer lost (the
    increase applied, every retry's Describe throttled) keeps it: a minute later a pod of the
    group does not get a second increase inside the cool-down. A refusal releases it."""
    monkeypatch.setenv("ELEVATOR_RETRY_DELAY_SECONDS", "0")
    asg = f"{prefix()}-a"
    fake_aws.create_asg(asg, 0, 5, 1)
    config = ca_config([group("a", asg, min_nodes=1, scale_up_cool_down_period="10m")])
    [node] = register_nodes(fake_kube, fake_aws, asg, "a")
    running_pod(fake_kube, "busy", node, cpu="1000m", node_selector={"customer": "a"})  # 50 %
    pending_pod(fake_kube, "big")  # fits no node: only CA's scale-up helps it
    session: Any = fake_aws.session()
    config_ = client_config(Timeouts(connect_seconds=2, read_seconds=1))
    cloud = AsgClient(session.client("autoscaling", endpoint_url=aws_proxy.url, config=config_),
                      session.client("ec2", endpoint_url=aws_proxy.url, config=config_))
    adapters = Adapters(KubeClient.from_config(kubeconfig), cloud, LEASES)
    if fault == "refused":
        aws_proxy.faults.add("status", operation="SetDesiredCapacity", status=400,
                             code="ValidationError")
    else:
        aws_proxy.faults.add("apply_then_drop", operation="SetDesiredCapacity")
        armed: list[object] = []

        def throttle_from_now_on(**_: Any) -> None:  # the retries' Describe: throttled
            if not armed:
                armed.append(aws_proxy.faults.add("status", operation="DescribeAutoScalingGroups",
                                                  count=None, status=400, code="Throttling"))

        cloud.autoscaling.meta.events.register("before-send.auto-scaling.SetDesiredCapacity",
                                               throttle_from_now_on)
    live_tick(run_retrying, adapters, config.node_groups, T0,
              cluster_autoscaler=config.cluster_autoscaler)
    aws_proxy.faults.clear()
    cloud.autoscaling.meta.events.unregister("before-send.auto-scaling.SetDesiredCapacity")
    lease = fake_kube.get("leases", lease_name("a"), LEASES)["metadata"]["annotations"]
    if fault == "refused":
        assert desired(fake_aws, asg) == 1
        assert lease["elevator.io/scale-locked"] == "false"
        return
    assert desired(fake_aws, asg) == 2  # CA's increase reached the ASG
    assert lease["elevator.io/scale-locked"] == "true"
    # A minute later, CA's node still booting, a pod of the group: 100 % of the one node.
    running_pod(fake_kube, "more", node, cpu="1000m", node_selector={"customer": "a"})
    [result] = live_tick(run_retrying, adapters, config.node_groups, T0 + 60,
                         cluster_autoscaler=config.cluster_autoscaler)
    assert desired(fake_aws, asg) == 2, result.plan.reason  # held by the cool-down


def test_an_instance_that_never_joined_is_terminated_only_once_its_back_off_is_saved(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """CA §1.1: an instance not registered within max_node_provision_time is terminated and its
    group backs off. Terminated before the back-off reached the Lease, a failed Lease write
    would leave the next tick seeing no unregistered instance, which it counts as a success:
    the group would never back off. So the Lease goes first, and a failed write terminates
    nothing this tick."""
    from kube_elevator.tasks.cluster_autoscaler.backoff import BACKOFF_UNTIL

    monkeypatch.setenv("ELEVATOR_RETRY_DELAY_SECONDS", "0")
    asg = f"{prefix()}-a"
    fake_aws.create_asg(asg, 1, 5, 2)
    config = ca_config([group("a", asg, min_nodes=1)], max_node_provision_time="15m")
    joined, stuck = sorted(fake_aws.instances(asg), key=lambda i: i["InstanceId"])
    fake_kube.create("nodes", node_for_instance(joined, {"customer": "a"}, 2000, 8 * GiB,
                                                T0 - 3600))
    adapters = adapters_for(kubeconfig, fake_aws)
    run_tick(adapters, config, T0, run_retrying)  # the stuck instance is first seen
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASES}/leases/{lease_name('a')}"
    fake_kube.faults.add("status", method="PUT", path=lease_path, status=500, count=None)
    live_tick(run_retrying, adapters, config.node_groups, T0 + 16 * 60,
              cluster_autoscaler=config.cluster_autoscaler)
    fake_kube.faults.clear()
    instances = {i["InstanceId"] for i in fake_aws.instances(asg)}
    assert stuck["InstanceId"] in instances and desired(fake_aws, asg) == 2
    run_tick(adapters, config, T0 + 17 * 60, run_retrying)
    assert {i["InstanceId"] for i in fake_aws.instances(asg)} == {joined["InstanceId"]}
    annotations = fake_kube.get("leases", lease_name("a"), LEASES)["metadata"]["annotations"]
    assert annotations[BACKOFF_UNTIL]  # the group backs off


def test_a_retried_eviction_never_evicts_the_pod_re_created_under_the_same_name(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    """The eviction was applied and its answer lost; before the retry, the StatefulSet made a
    new `db-0`. The retry names the evicted pod's UID, so the new one stays."""
    from tests.builders import api_pod

    fake_kube.create("pods", api_pod("db-0", JOBS, owner_kind="StatefulSet", uid="first"),
                     namespace=JOBS)
    [old] = [pod for pod in KubeClient.from_config(kubeconfig).list_pods() if pod.name == "db-0"]
    fake_kube.faults.add("apply_then_drop", method="POST",
                         path=f"/api/v1/namespaces/{JOBS}/pods/db-0/eviction")
    attempts: list[int] = []

    def retried_after_the_statefulset_acted(step: Step[..., Any], *args: Any) -> Any:
        try:
            attempts.append(1)
            return step.fn(*args)
        except Exception:
            fake_kube.create("pods", api_pod("db-0", JOBS, owner_kind="StatefulSet",
                                             uid="second"), namespace=JOBS)
            attempts.append(2)
            return step.fn(*args)

    retried_after_the_statefulset_acted(evict_pods, adapters_for(kubeconfig, fake_aws), [old])
    assert attempts == [1, 2]
    assert fake_kube.get("pods", "db-0", JOBS)["metadata"]["uid"] == "second"


# --- constraints the scheduler's filters carry (issue 37) ----------------------------------


WEB_ANTI_AFFINITY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}


def web_replica(kube: FakeKubeApi, name: str, node: str = "") -> None:
    """An `app=web` replica (100m) that wants no other on its node; pending unless `node`."""
    spec: dict[str, Any] = {"containers": _requests("100m", "100Mi"),
                            "affinity": WEB_ANTI_AFFINITY}
    status: dict[str, Any] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    if node:
        spec["nodeName"] = node
        status = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    kube.create("pods", {"metadata": {"name": name, "namespace": JOBS, "labels": {"app": "web"},
                                      "ownerReferences": _owner()},
                         "spec": spec, "status": status}, namespace=JOBS)


def test_ten_replicas_under_hostname_anti_affinity_ask_for_ten_nodes_in_one_tick(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    """One 4-CPU node runs a replica; ten more wait (the scheduler's anti-affinity verdict).
    Their 1 CPU of requests fits the live node, yet CA's estimator runs the scheduler's
    filters: ten template copies, one replica each, asked for in the first tick."""
    asg = f"{prefix()}-web"
    fake_aws.create_asg(asg, 0, 20, 1, instance_type="m5.xlarge")
    (node,) = register_nodes(fake_kube, fake_aws, asg, "web", cpu_milli=4000, memory=16 * GiB)
    web_replica(fake_kube, "web-0", node)
    for index in range(1, 11):
        web_replica(fake_kube, f"web-{index}")
    config = ca_config([group("web", asg, min_nodes=1, max_nodes=20)])
    result = run_tick(adapters_for(kubeconfig, fake_aws), config, T0)["web"]
    assert desired(fake_aws, asg) == 11
    assert any(note.startswith("scale-up for 10 unschedulable pod(s): +10 node(s), "
                               "ASG desired 11") for note in scale_up_notes(result)), \
        result.plan.notes
