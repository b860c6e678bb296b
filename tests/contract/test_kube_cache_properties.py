"""The watch cache under random change and disruption: after every burst of creates, updates and
deletes, with watches ended, connections dropped and 410 Gone forced on the way, the cache holds
what a fresh list holds, its group tallies equal ones summed from that list, and a tick reading
it decides as a tick that lists (issue 16's correctness property).

Real parts throughout: the fake API server over HTTP, the real `kubernetes` client under
`ClusterCache`, boto3 against moto for the tick's ASG.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.deadlines import scaled
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import live_tick
from kube_elevator.tasks.adapters.cloud import AsgClient
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.adapters.kube_cache import ClusterCache
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.escalator.filter_nodes import pods_by_group
from kube_elevator.tasks.escalator.utilization import GroupPods, PodTally, summarize_pods
from kube_elevator.tasks.steps.node_groups import Adapters
from tests.builders import api_node, api_pod, make_group

HISTORY = 4  # the server remembers 4 changes per kind: a held watch soon meets 410 Gone
POD_NAMES = [f"p{index}" for index in range(8)]
NODE_NAMES = [f"n{index}" for index in range(4)]
GROUPS = [make_group(cloud_provider_group_name="prop-asg"),
          make_group(name="web", label_value="web", cloud_provider_group_name="prop-web-asg")]
NOW = 1_800_000_000.0
PHASES = ["Pending", "Running", "Succeeded", "Failed"]  # Succeeded and Failed both end a pod


@dataclass(frozen=True)
class Change:
    verb: str  # create, patch, delete, node
    name: str
    customer: str = "batch"
    phase: str = "Pending"
    node: str = ""
    cpu_milli: int = 100


changes = st.one_of(
    st.builds(Change, st.just("create"), st.sampled_from(POD_NAMES),
              st.sampled_from(["batch", "web"]), st.sampled_from(["Pending", "Running"]),
              st.sampled_from(["", *NODE_NAMES]), st.integers(1, 40).map(lambda n: n * 50)),
    st.builds(Change, st.just("patch"), st.sampled_from(POD_NAMES), st.just("batch"),
              st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
              st.sampled_from(["", *NODE_NAMES])),
    st.builds(Change, st.just("delete"), st.sampled_from(POD_NAMES)),
    st.builds(Change, st.just("node"), st.sampled_from(NODE_NAMES),
              st.sampled_from(["batch", "web"])),
)
# What happens to the pod watch before the burst's changes land.
disruptions = st.sampled_from(["none", "ended", "dropped", "gone"])
bursts = st.lists(st.tuples(disruptions, st.lists(changes, min_size=1, max_size=8)),
                  min_size=1, max_size=4)


def apply(kube: FakeKubeApi, change: Change) -> None:
    pods = {pod["metadata"]["name"] for pod in kube.list("pods", "default")}
    if change.verb == "node":
        nodes = {node["metadata"]["name"] for node in kube.list("nodes")}
        if change.name in nodes:
            kube.delete("nodes", change.name)
        else:
            index = NODE_NAMES.index(change.name)
            kube.create("nodes", api_node(change.name, labels={"customer": change.customer},
                                          created=f"2026-11-21T10:0{index}:00Z"))
    elif change.verb == "create" and change.name not in pods:
        kube.create("pods", api_pod(
            change.name, cpu=f"{change.cpu_milli}m", memory=f"{change.cpu_milli}Mi",
            node=change.node, phase=change.phase,
            node_selector={"customer": change.customer}), namespace="default")
    elif change.verb == "patch" and change.name in pods:
        # As a kubelet and the scheduler would: the phase only moves on, the node is set once.
        pod = kube.get("pods", change.name, "default")
        phase = pod.get("status", {}).get("phase", "Pending")
        if PHASES.index(change.phase) < PHASES.index(phase):
            return
        spec = {"nodeName": change.node} if change.node and not pod["spec"].get("nodeName") \
            else {}
        kube.patch("pods", change.name, {"status": {"phase": change.phase}, "spec": spec},
                   namespace="default")
    elif change.verb == "delete" and change.name in pods:
        kube.delete("pods", change.name, "default")


def disrupt(kube: FakeKubeApi, how: str) -> Any:
    """Cut the pod watch; returns a fault to release once the burst has landed ("gone")."""
    if how == "none":
        return None
    if how == "dropped":  # the resumed watch's connection closes without an answer
        dropped = kube.faults.add("drop", method="GET", path="/api/v1/pods")
        kube.end_watches("pods")
        # The watch takes the drop, not the fresh list this test compares with.
        assert kube.faults.wait_fired(dropped, timeout=scaled(10))
        return None
    held = None
    if how == "gone":  # the resumed watch waits until the server has forgotten its version
        held = kube.faults.add("delay", method="GET", path="/api/v1/pods", delay_seconds=120)
    kube.end_watches("pods")
    return held


def fresh_state(kube_client: KubeClient) -> tuple[dict[Any, Any], dict[str, Any]]:
    return ({(pod.namespace, pod.name): pod for pod in kube_client.list_pods()},
            {node.name: node for node in kube_client.list_nodes()})


def cache_state(cache: ClusterCache) -> tuple[dict[Any, Any], dict[str, Any]]:
    return ({(pod.namespace, pod.name): pod for pod in cache.pods()},
            {node.name: node for node in cache.nodes()})


def canonical(pods: GroupPods) -> GroupPods:
    """Pods on a node in name order: the decision reads only how many there are."""
    return replace(pods, on_node={node: tuple(sorted(bound, key=lambda pod: pod.name))
                                  for node, bound in pods.on_node.items()})


def grouper(pod: Any) -> list[str]:
    return [name for name, members in pods_by_group([pod], GROUPS).items() if members]


@pytest.fixture(scope="module")
def asgs(fake_aws: FakeAws) -> FakeAws:
    fake_aws.create_asg("prop-asg", 0, 20, 2)
    fake_aws.create_asg("prop-web-asg", 0, 20, 1)
    return fake_aws


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(bursts=bursts)
def test_after_every_burst_the_cache_is_a_fresh_list_and_ticks_the_same(
        asgs: FakeAws, bursts: list[tuple[str, list[Change]]]) -> None:
    with FakeKubeApi(history_size=HISTORY) as kube, \
            ClusterCache(kube.api_client(), timeout_seconds=30, page_size=3,
                         retry_seconds=0.01) as cache:
        assert cache.wait_synced(10)
        kube_client = KubeClient(kube.api_client())
        adapters = Adapters(kube_client, AsgClient.from_environment(), "kube-system")
        for how, burst in bursts:
            relists = cache.loops["pods"].relists
            held = disrupt(kube, how)
            if held is not None:
                assert kube.faults.wait_fired(held, timeout=scaled(10))  # the resume is on hold
            for change in burst:
                apply(kube, change)
            if held is not None:
                for _ in range(HISTORY):  # past what the server remembers of pods
                    kube.create("pods", api_pod("filler"), namespace="default")
                    kube.delete("pods", "filler", "default")
                kube.faults.release()
                kube.faults.rearm()
                kube.faults.clear()
            if how == "gone":  # 410 Gone: listed again
                assert cache.wait_for(
                    lambda before=relists: cache.loops["pods"].relists > before, 15)
            # Converged: the cache equals a fresh list (the watch is asynchronous: wait, bounded).
            converged = cache.wait_for(
                lambda: cache_state(cache) == fresh_state(kube_client), 15)
            assert converged, (how, burst)
            pods, grouped, tallies = cache.grouped_pods("groups", grouper, PodTally)
            for name, members in pods_by_group(pods, GROUPS).items():
                assert grouped.get(name, []) == members
                assert canonical(tallies.get(name, GroupPods())) == canonical(
                    summarize_pods(members))
            listed = live_tick(run_plain, adapters, GROUPS, NOW, dry_run=True)
            cached = live_tick(run_plain, adapters, GROUPS, NOW, dry_run=True, cache=cache)
            assert [r.plan.to_json() for r in cached] == [r.plan.to_json() for r in listed]
