"""A pod's requests as kube-scheduler counts them: k8s.io/component-helpers resource.PodRequests.

The tables are ported from kubernetes/kubernetes
staging/src/k8s.io/component-helpers/resource/helpers_test.go (TestPodResourceRequests,
TestPodRequestsAndLimits, TestPodRequestsAndLimitsWithoutOverhead): each case keeps its
upstream description as its id. Restartable init containers (`restartPolicy: Always`, native
sidecars, KEP-753) add to the containers' sum and to every later init container's need.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kube_elevator.tasks.core.api_objects import OBJECT_DECODER
from kube_elevator.tasks.core.records import PodRecord, pod_record

GiB = 2**30


def decode_pod(spec: dict[str, Any]) -> PodRecord:
    return pod_record(OBJECT_DECODER.decode(orjson.dumps(
        {"kind": "Pod", "metadata": {"name": "p", "namespace": "n"}, "spec": spec,
         "status": {"phase": "Pending"}})))


def container(cpu: str | None = None, memory: str | None = None, sidecar: bool = False,
              other: dict[str, str] | None = None) -> dict[str, Any]:
    requests = dict(other or {})
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    body: dict[str, Any] = {"name": "c", "resources": {"requests": requests}}
    if sidecar:
        body["restartPolicy"] = "Always"
    return body


# (upstream description, init containers, containers, overhead, cpu milli, memory bytes)
COMPONENT_HELPERS_CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]],
                                    dict[str, str] | None, int, int]] = [
    ("nil options, larger init container",
     [container("4")], [container("1")], None, 4000, 0),
    ("nil options, larger containers",
     [container("2")], [container("2"), container("3")], None, 5000, 0),
    ("pod overhead included",
     [container("2")], [container("2"), container("3")], {"cpu": "1", "memory": "1Gi"},
     6000, GiB),
    ("restartable init container",
     [container("1", sidecar=True)], [container("1")], None, 2000, 0),
    ("multiple restartable init containers",
     # max(5, restartable init containers(3+2+1) + regular(1)) = 7
     [container("5"), container("1", sidecar=True), container("2", sidecar=True),
      container("3", sidecar=True)], [container("1")], None, 7000, 0),
    ("multiple restartable and regular init containers",
     # init-2 requires 5 + the restartable init containers before it (1+2) = 8; the
     # restartable one that starts after it does not count
     [container("5"), container("1", sidecar=True), container("2", sidecar=True),
      container("5"), container("3", sidecar=True)], [container("1")], None, 8000, 0),
    ("restartable-init, init and regular",
     [container("10", sidecar=True), container("200")], [container("100")], None,
     210_000, 0),
    ("req-and-overhead",
     [], [container("1", "10")], {"cpu": "5", "memory": "5"}, 6000, 15),
    ("two container with overhead, massive init - should just be the largest init",
     [container("1", "5"), container("40", "120")], [container("1", "5"), container("4", "12")],
     {"cpu": "3", "memory": "8"}, 43_000, 128),  # upstream excludes overhead: 40 / 120
    ("two container no overhead - should just be sum of containers",
     [], [container("1", "5"), container("4", "12")], None, 5000, 17),
]


@pytest.mark.parametrize(("init", "containers", "overhead", "cpu_milli", "memory"),
                         [case[1:] for case in COMPONENT_HELPERS_CASES],
                         ids=[case[0] for case in COMPONENT_HELPERS_CASES])
def test_pod_requests_restartable_init_containers_component_helpers(
        init: list[dict[str, Any]], containers: list[dict[str, Any]],
        overhead: dict[str, str] | None, cpu_milli: int, memory: int) -> None:
    """k8s.io/component-helpers resource.PodRequests (AggregateContainerRequests)."""
    spec: dict[str, Any] = {"containers": containers, "initContainers": init}
    if overhead:
        spec["overhead"] = overhead
    pod = decode_pod(spec)
    assert (pod.cpu_request_milli, pod.memory_request_bytes) == (cpu_milli, memory)


def test_pod_requests_without_sidecars_is_escalators_formula() -> None:
    """Escalator §5.3: max(sum(containers), max(init)) + overhead, per resource: the special
    case of PodRequests without restartable init containers."""
    pod = decode_pod({
        "containers": [container("200m", "100Mi"), container("300m")],
        "initContainers": [container("1", "50Mi"), container("100m", "300Mi")],
        "overhead": {"cpu": "10m", "memory": "1Mi"},
    })
    assert pod.cpu_request_milli == 1000 + 10
    assert pod.memory_request_bytes == 300 * 2**20 + 2**20


def test_pod_requests_extended_resources_follow_the_same_rule() -> None:
    """PodRequests aggregates every resource name alike: extended resources are summed over
    containers and sidecars and maxed against init containers; hugepages count in bytes."""
    pod = decode_pod({
        "containers": [container("1", other={"nvidia.com/gpu": "1", "hugepages-2Mi": "4Mi"}),
                       container("1", other={"nvidia.com/gpu": "1"})],
        "initContainers": [container("1", other={"nvidia.com/gpu": "3"}),
                           container("100m", sidecar=True, other={"example.com/foo": "2"}),
                           container("100m", other={"example.com/foo": "5"})],
    })
    # gpu: max(1+1, 3) = 3; foo: sidecar 2 runs beside the containers (2), the later init
    # needs 5 + 2 = 7; hugepages from the container.
    assert pod.extended_requests == (("example.com/foo", 7), ("hugepages-2Mi", 4 * 2**20),
                                     ("nvidia.com/gpu", 3))
    assert pod.cpu_request_milli == 2100


def test_pod_requests_without_extended_resources_have_none() -> None:
    pod = decode_pod({"containers": [container("1", "1Gi")]})
    assert pod.extended_requests == ()
    zero = decode_pod({"containers": [container("1", other={"nvidia.com/gpu": "0"})]})
    assert zero.extended_requests == ()  # a zero request is no request (NodeResourcesFit)


def test_pod_requests_pod_level_resources_replace_the_aggregate() -> None:
    """component-helpers PodRequests: pod-level requests (spec.resources, PodLevelResources)
    replace the containers' aggregate for cpu, memory and hugepages; overhead is added after;
    other resources keep the containers' sum."""
    pod = decode_pod({
        "resources": {"requests": {"cpu": "4", "memory": "2Gi"}},
        "containers": [container("1", "1Gi", other={"nvidia.com/gpu": "1"})],
        "overhead": {"cpu": "100m"},
    })
    assert (pod.cpu_request_milli, pod.memory_request_bytes) == (4100, 2 * GiB)
    assert pod.extended_requests == (("nvidia.com/gpu", 1),)


def test_the_fields_ca_reads_beside_requests_are_decoded() -> None:
    """spec.priority, the deletion timestamp with its grace period, status.nominatedNodeName."""
    raw = {"kind": "Pod", "metadata": {"name": "p", "namespace": "n",
                                       "deletionTimestamp": "2026-11-21T12:00:00Z"},
           "spec": {"priority": -100, "terminationGracePeriodSeconds": 5, "containers": []},
           "status": {"phase": "Pending", "nominatedNodeName": "node-a"}}
    record = pod_record(OBJECT_DECODER.decode(orjson.dumps(raw)))
    assert (record.priority, record.termination_grace_seconds, record.nominated_node) == \
        (-100, 5, "node-a")
    assert record.deleting_since_unix_seconds == 1795262400.0
    plain = decode_pod({"containers": []})
    assert (plain.priority, plain.deleting_since_unix_seconds, plain.termination_grace_seconds,
            plain.nominated_node) == (0, 0.0, 30, "")
