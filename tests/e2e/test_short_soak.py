"""A short soak (issue 27 §2): ticks from the watch cache while the cluster moves all along, then
the cache must equal a fresh list of the cluster, pod for pod, node for node, tally for tally.

The cluster is `benchmarks.soak.SoakWorld` (pods arriving and finishing, bursts, a spot node
replaced now and then) on the tests' clock: each round the world moves two seconds, then a
tick runs from the cache (the tick's steps called plainly; the flow runs are the benchmark's).
The long soak, with RSS, tick times and the Prefect database, is `python -m benchmarks.soak`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kubernetes.client

from benchmarks.soak import DRY_GROUP, make_world
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import live_tick, make_adapters
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.adapters.kube_cache import ClusterCache
from kube_elevator.tasks.core.lease_state import DRY_MODE_TAINTED, lease_name, name_list
from kube_elevator.tasks.core.records import PodRecord
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.escalator.filter_nodes import pods_by_group
from kube_elevator.tasks.escalator.utilization import GroupPods, summarize_pods
from kube_elevator.tasks.node_group_file import load_node_groups
from kube_elevator.tasks.steps.source import CachedSource

T0 = 1_800_000_000.0
ROUNDS = 100
STEP_SECONDS = 2.0


def comparable(pods: GroupPods) -> tuple[Any, ...]:
    """A group's tally, order aside (the cache keeps a node's pods in arrival order)."""
    def names(records: Sequence[PodRecord]) -> frozenset[tuple[str, str]]:
        return frozenset((pod.namespace, pod.name) for pod in records)

    return (pods.count, pods.requests, names(pods.pending),
            {node: names(on) for node, on in pods.on_node.items() if on},
            dict(pods.used_on_node))


def test_after_a_short_soak_the_cache_equals_a_fresh_list(
        fake_kube: FakeKubeApi, fake_aws: FakeAws, api_client: kubernetes.client.ApiClient,
        tmp_path: Path) -> None:
    # The session's moto is every test's (and moto's backends are the process's): ASG names of
    # its own, as the fixture asks, so a scenario's `batch-asg` made earlier cannot collide.
    world, nodegroups, kubeconfig = make_world(fake_kube, fake_aws, tmp_path, T0,
                                               asg_suffix="-short-soak")
    groups = load_node_groups(nodegroups).node_groups
    adapters = make_adapters(str(kubeconfig), "kube-system", None)
    statuses: dict[str, int] = {}
    tracked_ever: set[str] = set()
    with ClusterCache(api_client) as cache:
        assert cache.wait_synced(60)
        now = T0
        for _ in range(ROUNDS):
            now += STEP_SECONDS
            world.step(now)
            for result in live_tick(run_plain, adapters, groups, now, cache=cache):
                statuses[result.status] = statuses.get(result.status, 0) + 1
            tracked_ever |= set(tracked(fake_kube))
        assert world.created >= ROUNDS * STEP_SECONDS * world.pods_per_second
        assert world.bursts >= 2 and world.interruptions >= 2
        assert statuses.get("acted", 0) >= 2 and "failed" not in statuses, statuses

        fresh = KubeClient.from_config(kubeconfig)
        source = CachedSource(cache, adapters, tuple(groups))

        def equal_to_a_fresh_list() -> bool:
            listed_pods, listed_nodes = fresh.list_pods(), fresh.list_nodes()
            cached_pods = source.list_pods()
            summaries = source.summaries(cached_pods, groups)
            assert summaries is not None
            expected = {name: summarize_pods(members) for name, members
                        in pods_by_group(listed_pods, groups).items()}
            return (sorted(cached_pods, key=_key) == sorted(listed_pods, key=_key)
                    and sorted(cache.nodes(), key=lambda node: node.name)
                    == sorted(listed_nodes, key=lambda node: node.name)
                    and all(comparable(summaries[name]) == comparable(expected[name])
                            for name in expected))

        # The world has stopped: once the watch has delivered its last events, they agree.
        assert _eventually(equal_to_a_fresh_list), "the cache never matched a fresh list"

        # The dry-mode group's tracker (in its Lease) names only nodes that exist now.
        assert tracked_ever, "the dry-mode group never tainted a node: nothing was checked"
        live_tick(run_plain, adapters, groups, now + STEP_SECONDS, cache=cache)
        assert set(tracked(fake_kube)) <= {node.name for node in fresh.list_nodes()}


def tracked(kube: FakeKubeApi) -> tuple[str, ...]:
    """The nodes the dry-mode group's Lease holds as tainted."""
    for lease in kube.list("leases", "kube-system"):  # none before the group's first write
        if lease["metadata"]["name"] == lease_name(DRY_GROUP):
            return name_list(lease["metadata"].get("annotations", {}).get(DRY_MODE_TAINTED, ""))
    return ()


def _key(pod: PodRecord) -> tuple[str, str]:
    return pod.namespace, pod.name


def _eventually(check: Any, seconds: float = 15.0) -> bool:
    from benchmarks.event_latency import wait_until

    try:
        return bool(wait_until(check, seconds, "the cache to match a fresh list", 0.2))
    except TimeoutError:
        return False
