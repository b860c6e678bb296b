"""Objects from real clusters through the watch cache (issue 16): every public dump the project
reads (`test_real_objects.py`'s corpus) is loaded into the fake API server, half before the cache
lists and half while it watches, and the cache the watching process keeps must hold what a fresh
list holds, sort it into the same groups with the same tallies, and give a tick the same
decisions.

The property test (`test_kube_cache_properties.py`) drives change and disruption with objects our
builders make; these are the objects our builders do not make. Across the eight dumps: 96 pods
with init containers, 43 DaemonSet and 12 mirror pods, 155 pods without requests, 35 pending
pods and a finished one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import live_tick
from kube_elevator.tasks.adapters.cloud import AsgClient
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.adapters.kube_cache import ClusterCache
from kube_elevator.tasks.core.records import PodRecord
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.filter_nodes import pods_by_group
from kube_elevator.tasks.escalator.utilization import GroupPods, PodTally, summarize_pods
from kube_elevator.tasks.steps.node_groups import Adapters
from tests.builders import make_group
from tests.contract.test_kube_cache_properties import canonical
from tests.contract.test_real_objects import (
    extract_lists,
    items_of,
    shared_dump,
    synthetic_nodes,
)

NOW = 1_767_225_600.0  # 2026-01-01, as test_real_objects' plans
# The dumps, all beside the clone (../shared/real_dumps): those with a licence to copy...
COMMITTED = ("honeycomb-eks", "gemyang-init", "minikube-graph")
SHARED = ("aks-arena", "describecluster", "eks-ecommerce", "hkube-jobs", "oke-amsterdam")


def dump_objects(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The dump's pods and nodes; SYNTHETIC nodes (as in test_real_objects) where it has none."""
    folder = shared_dump(name)
    if name == "eks-ecommerce":  # a `kubectl cluster-info dump` pasted into Markdown
        lists = extract_lists((folder / "cluster-info.md").read_text(), ("PodList", "NodeList"))
        pods = [item for found in lists if found["kind"] == "PodList"
                for item in found["items"] or ()]  # a namespace without pods: "items": null
        nodes = [item for found in lists if found["kind"] == "NodeList"
                 for item in found["items"] or ()]
    else:
        pods = [item for path in sorted(folder.glob("*pods.json")) for item in items_of(path)]
        nodes = items_of(folder / "nodes.json") if (folder / "nodes.json").exists() else []
    return pods, nodes or synthetic_nodes(pods, {})


def groups_for(pods: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]],
               name: str) -> list[NodeGroupConfig]:
    """A `default` group on a label every node has, and one group per label the pods ask for
    by nodeSelector or by a required node-affinity `In` (Escalator's config needs a value:
    `node-role...: ""` gets none): the groups a user of this cluster would write."""
    shared_labels = set.intersection(*({(key, value) for key, value in
                                        (node["metadata"].get("labels") or {}).items()}
                                       for node in nodes))
    key, value = min(shared_labels)
    groups = [make_group(name="default", label_key=key, label_value=value,
                         cloud_provider_group_name=f"{name}-default")]
    groups += [make_group(name=f"label-{index}", label_key=key_, label_value=value_,
                          cloud_provider_group_name=f"{name}-label-{index}")
               for index, (key_, value_) in enumerate(sorted(asked_labels(pods)))]
    return groups


def asked_labels(pods: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    asked = set()
    for pod in pods:
        spec = pod.get("spec") or {}
        asked |= {(key, value) for key, value in (spec.get("nodeSelector") or {}).items()
                  if value}
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or {}
        asked |= {(expression["key"], expression["values"][0])
                  for term in required.get("nodeSelectorTerms") or ()
                  for expression in term.get("matchExpressions") or ()
                  if expression.get("operator") == "In" and expression.get("values")}
    return asked


@contextmanager
def loaded(nodes: Sequence[Mapping[str, Any]]) -> Iterator[FakeKubeApi]:
    with FakeKubeApi() as kube:
        for node in nodes:
            kube.create("nodes", _without_version(node))
        yield kube


def create_pods(kube: FakeKubeApi, pods: Sequence[Mapping[str, Any]]) -> None:
    for pod in pods:
        kube.create("pods", _without_version(pod), pod["metadata"]["namespace"])


def _without_version(item: Mapping[str, Any]) -> dict[str, Any]:
    """The object as a client creates it: a create carries no resourceVersion."""
    metadata = {key: value for key, value in item["metadata"].items()
                if key != "resourceVersion"}
    return {**item, "metadata": metadata}


@pytest.mark.parametrize("name", COMMITTED + SHARED)
def test_a_real_cluster_through_the_cache_is_a_fresh_list_and_ticks_the_same(
        name: str, fake_aws: FakeAws) -> None:
    pods, nodes = dump_objects(name)
    groups = groups_for(pods, nodes, name)
    for group in groups:
        fake_aws.create_asg(group.cloud_provider_group_name, 0, 100, 3)
    # Half the pods are there when the cache lists (in pages of 7), half come by its watch.
    listed_first, watched = pods[: len(pods) // 2], pods[len(pods) // 2:]
    with loaded(nodes) as kube:
        create_pods(kube, listed_first)
        kube_client = KubeClient(kube.api_client())
        with ClusterCache(kube.api_client(), page_size=7) as cache:
            assert cache.wait_synced(30)
            create_pods(kube, watched)

            def fresh_pods() -> dict[tuple[str, str], PodRecord]:
                return {(pod.namespace, pod.name): pod for pod in kube_client.list_pods()}

            def cached() -> dict[tuple[str, str], PodRecord]:
                return {(pod.namespace, pod.name): pod for pod in cache.pods()}

            assert cache.wait_for(lambda: cached() == fresh_pods(), 30), \
                set(fresh_pods()) ^ set(cached())
            cached_pods = cached()
            assert {node.name: node for node in cache.nodes()} == {
                node.name: node for node in kube_client.list_nodes()}
            # The dump's finished pods are not in either: the list asks the server to leave
            # them out, and the cache keeps what the list holds.
            finished = sum(1 for pod in pods
                           if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"))
            assert len(cached_pods) == len(pods) - finished

            def grouper(pod: Any) -> list[str]:
                return [group_name for group_name, members
                        in pods_by_group([pod], groups).items() if members]

            every, grouped, tallies = cache.grouped_pods(name, grouper, PodTally)
            for group_name, members in pods_by_group(every, groups).items():
                assert grouped.get(group_name, []) == members
                assert canonical(tallies.get(group_name, GroupPods())) == canonical(
                    summarize_pods(members))

            adapters = Adapters(kube_client, AsgClient.from_environment(), "kube-system")
            from_list = live_tick(run_plain, adapters, groups, NOW, dry_run=True)
            from_cache = live_tick(run_plain, adapters, groups, NOW, dry_run=True, cache=cache)
            assert [result.plan.to_json() for result in from_cache] == [
                result.plan.to_json() for result in from_list]
            # Not a tick of empty groups: the dump's pods reach the decisions.
            assert sum(result.plan.pods for result in from_cache) > 0
