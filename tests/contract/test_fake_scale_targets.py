"""Every kind a pod autoscaler scales (Deployment, StatefulSet, ReplicaSet) through `/scale`,
with the real client over HTTP, as a real API server serves it: the Scale reads the workload's
spec and status replicas and its selector; a write sets spec.replicas and nothing else."""

from __future__ import annotations

import pytest

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.tasks.adapters.kube import KubeClient

PLURALS = {"Deployment": "deployments", "StatefulSet": "statefulsets",
           "ReplicaSet": "replicasets"}


@pytest.mark.parametrize("kind", sorted(PLURALS))
def test_the_scale_of_each_target_kind_reads_and_writes_its_replicas(kind: str) -> None:
    with FakeKubeApi() as kube:
        kube.create(PLURALS[kind], {
            "apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"replicas": 2}}, namespace="shop")
        client = KubeClient(kube.api_client())
        scale = client.read_scale(kind, "shop", "web")
        assert scale is not None
        assert (scale.spec_replicas, scale.status_replicas, scale.selector) == (3, 2, "app=web")
        assert client.patch_scale(kind, "shop", "web", 5) == 5
        stored = kube.get(PLURALS[kind], "web", "shop")
        assert stored["spec"]["replicas"] == 5 and stored["status"] == {"replicas": 2}
        assert stored["spec"]["template"]["metadata"]["labels"] == {"app": "web"}
        assert client.read_scale(kind, "shop", "missing") is None


def test_a_statefulset_created_without_replicas_has_one() -> None:
    """apps/v1 defaulting, as for Deployments."""
    with FakeKubeApi() as kube:
        created = kube.create("statefulsets", {"metadata": {"name": "db", "namespace": "a"},
                                               "spec": {"selector": {"matchLabels": {"x": "y"}},
                                                        "template": {
                                                            "metadata": {"labels": {"x": "y"}},
                                                            "spec": {"containers": [
                                                                {"name": "db", "image": "i"}]}}}},
                              namespace="a")
        assert created["spec"]["replicas"] == 1
