"""Quantities, per-pod requests (spec §5.3) and decoding of API JSON into records."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from kube_elevator.tasks.core.api_objects import OBJECT_DECODER
from kube_elevator.tasks.core.decode import decode_list_document, load_asg_file, load_cluster_files
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.quantity import cpu_milli, memory_bytes, parse_quantity
from kube_elevator.tasks.core.records import pod_record


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", Fraction(1, 2)), ("2", 2), ("1.5", Fraction(3, 2)), ("100n", Fraction(1, 10**7)),
     ("3u", Fraction(3, 10**6)), ("1k", 1000), ("1M", 10**6), ("2G", 2 * 10**9),
     ("1T", 10**12), ("1P", 10**15), ("1E", 10**18), ("1Ki", 1024), ("1Mi", 2**20),
     ("1.5Gi", 3 * 2**29), ("1Ti", 2**40), ("1Pi", 2**50), ("1Ei", 2**60), ("1e3", 1000),
     ("1E3", 1000), ("12e-1", Fraction(6, 5)), ("+1", 1), ("-1", -1), (".5", Fraction(1, 2)),
     ("5.", 5)],
)
def test_quantity_suffixes(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1KB", "1 Gi", "1ki", "m", "1.2.3", "1e", "--1"])
def test_malformed_quantities(text: str) -> None:
    with pytest.raises(ValueError, match="malformed quantity"):
        parse_quantity(text)


def test_cpu_rounds_up_to_millicores_and_memory_to_bytes() -> None:
    assert cpu_milli("0.0001") == 1
    assert cpu_milli("1") == 1000
    assert cpu_milli("250m") == 250
    assert cpu_milli(2) == 2000
    assert memory_bytes("1.5") == 2
    assert memory_bytes("1Gi") == 2**30
    assert memory_bytes("100M") == 10**8
    assert memory_bytes(None) == 0


def decode_pod(spec: dict[str, Any]) -> Any:
    return pod_record(OBJECT_DECODER.decode(orjson.dumps(
        {"kind": "Pod", "metadata": {"name": "p", "namespace": "n"}, "spec": spec,
         "status": {"phase": "Pending"}})))


def test_pod_request_is_max_of_containers_and_init_plus_overhead() -> None:
    pod = decode_pod({
        "containers": [{"resources": {"requests": {"cpu": "200m", "memory": "100Mi"}}},
                       {"resources": {"requests": {"cpu": "300m"}}}, {}],
        "initContainers": [{"resources": {"requests": {"cpu": "1", "memory": "50Mi"}}}],
        "overhead": {"cpu": "10m", "memory": "1Mi"},
    })
    # cpu: max(200+300, 1000) + 10; memory: max(100Mi, 50Mi) + 1Mi
    assert pod.cpu_request_milli == 1010
    assert pod.memory_request_bytes == 101 * 2**20


def test_pod_without_requests_counts_zero() -> None:
    pod = decode_pod({"containers": [{"name": "a"}]})
    assert (pod.cpu_request_milli, pod.memory_request_bytes) == (0, 0)


def cluster_file(tmp_path: Path, items: list[dict[str, Any]], kind: str = "List") -> Path:
    path = tmp_path / "cluster.json"
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": kind, "items": items}))
    return path


def test_mixed_list_decodes_pods_nodes_and_leases(tmp_path: Path) -> None:
    items = [
        {"kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"},
                                      "creationTimestamp": "2026-11-21T12:00:00Z",
                                      "annotations": {"atlassian.com/no-delete": "yes"}},
         "spec": {"providerID": "aws:///us-east-1a/i-1", "unschedulable": True,
                  "taints": [{"key": "atlassian.com/escalator", "value": "17",
                              "effect": "NoSchedule"}]},
         "status": {"allocatable": {"cpu": "2", "memory": "4Gi"},
                    "conditions": [{"type": "Ready", "status": "True"}]}},
        {"kind": "Pod", "metadata": {"name": "p1", "namespace": "ns",
                                     "ownerReferences": [{"kind": "DaemonSet", "name": "ds"}],
                                     "annotations": {"kubernetes.io/config.source": "file"}},
         "spec": {"nodeName": "n1", "nodeSelector": {"a": "b"},
                  "affinity": {"podAntiAffinity": {}}},
         "status": {"phase": "Running",
                    "conditions": [{"type": "PodScheduled", "status": "True"}]}},
        {"kind": "Lease", "metadata": {"name": "elevator-g", "namespace": "kube-system",
                                       "resourceVersion": "9",
                                       "annotations": {"elevator.io/scale-locked": "true",
                                                       "elevator.io/scale-lock-requested-nodes":
                                                           "3"}}},
        {"kind": "Lease", "metadata": {"name": "someone-else", "namespace": "kube-system"}},
        {"kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}},
    ]
    snapshot = load_cluster_files([cluster_file(tmp_path, items)])
    (node,) = snapshot.nodes
    assert node.created_unix_seconds == 1795262400.0
    assert node.unschedulable and node.ready and node.no_delete
    assert node.taint_value("atlassian.com/escalator") == "17"
    assert (node.cpu_allocatable_milli, node.memory_allocatable_bytes) == (2000, 4 * 2**30)
    (pod,) = snapshot.pods
    assert pod.owned_by_daemonset and pod.static and pod.has_affinity and pod.scheduled
    assert pod.node_name == "n1" and pod.node_selector == {"a": "b"}
    state = snapshot.states[("kube-system", "elevator-g")]
    assert state.lock.is_locked and state.lock.requested_nodes == 3
    assert state.resource_version == "9"
    assert list(snapshot.states) == [("kube-system", "elevator-g")]


def test_typed_list_items_without_kind_take_the_lists_kind() -> None:
    data = orjson.dumps({"kind": "PodList", "items": [{"metadata": {"name": "p"}}]})
    assert [pod.name for pod in decode_list_document(data, "page").pods] == ["p"]


@pytest.mark.parametrize("budget", [False, True])  # a budget takes the slower, JSON path
def test_an_item_of_a_list_without_its_kind_is_named_not_skipped(
        tmp_path: Path, budget: bool) -> None:
    """A bare array of pods wrapped as `kind: List` by hand: each item needs its kind, or its
    pods would be dropped without a word and the group would look empty."""
    items: list[dict[str, Any]] = [{"kind": "Pod", "metadata": {"name": "a"}},
                                   {"metadata": {"name": "b"}}]
    if budget:
        items.insert(0, {"kind": "PodDisruptionBudget",
                         "metadata": {"name": "pdb", "namespace": "a"}})
    path = cluster_file(tmp_path, items)
    with pytest.raises(InputError) as caught:
        load_cluster_files([path])
    where = 2 if budget else 1
    assert caught.value.problems[0].startswith(f"{path}: items[{where}]: kind: missing: ")


@pytest.mark.parametrize("kind", ["PodList", "NodeList", "PodDisruptionBudgetList", "List"])
def test_a_list_with_null_items_is_empty(tmp_path: Path, kind: str) -> None:
    """`kubectl cluster-info dump` writes `"items": null` for a namespace without pods."""
    pods = cluster_file(tmp_path, [{"kind": "Pod", "metadata": {"name": "p"}}])
    empty = tmp_path / "empty.json"
    empty.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": kind, "items": None}))
    snapshot = load_cluster_files([pods, empty])
    assert [pod.name for pod in snapshot.pods] == ["p"] and snapshot.nodes == []


def test_bad_quantity_names_file_item_and_field(tmp_path: Path) -> None:
    items = [{"kind": "Pod", "metadata": {"name": "ok", "namespace": "a"}},
             {"kind": "Pod", "metadata": {"name": "bad", "namespace": "a"},
              "spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}}]
    path = cluster_file(tmp_path, items)
    with pytest.raises(InputError) as caught:
        load_cluster_files([path])
    assert caught.value.problems == [
        f"{path}: items[1]: Pod a/bad spec.containers[0].resources.requests.cpu: "
        "malformed quantity 'lots'"]


def test_node_without_name_is_bad_input(tmp_path: Path) -> None:
    path = cluster_file(tmp_path, [{"kind": "Node", "metadata": {}}])
    with pytest.raises(InputError, match=r"items\[0\]: Node <no name>: node has no metadata.name"):
        load_cluster_files([path])


def test_wrong_json_type_names_the_path(tmp_path: Path) -> None:
    path = cluster_file(tmp_path, [{"kind": "Pod", "metadata": {"name": 5}}])
    with pytest.raises(InputError, match=r"items\[0\]: metadata.name: Expected `str`, got `int`"):
        load_cluster_files([path])


def test_not_a_list_and_not_json(tmp_path: Path) -> None:
    single = tmp_path / "pod.json"
    single.write_bytes(orjson.dumps({"kind": "Pod", "metadata": {"name": "p"}}))
    with pytest.raises(InputError, match="expected a Kubernetes List"):
        load_cluster_files([single])
    garbage = tmp_path / "x.json"
    garbage.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_cluster_files([garbage])
    with pytest.raises(InputError, match="cannot read file"):
        load_cluster_files([tmp_path / "absent.json"])


def test_asg_file_validation(tmp_path: Path) -> None:
    path = tmp_path / "asgs.json"
    path.write_text('{"AutoScalingGroups": [{"AutoScalingGroupName": "a", "MinSize": 1, '
                    '"MaxSize": 5, "DesiredCapacity": 2, "Instances": [{"InstanceId": "i-1", '
                    '"AvailabilityZone": "us-east-1a"}]}]}')
    asg = load_asg_file(path)["a"]
    assert (asg.min_size, asg.max_size, asg.desired_capacity) == (1, 5, 2)
    assert asg.provider_ids() == frozenset({"aws:///us-east-1a/i-1"})
    path.write_text('{"AutoScalingGroups": [{"AutoScalingGroupName": "a", "MinSize": -1}]}')
    with pytest.raises(InputError) as caught:
        load_asg_file(path)
    assert f"{path}: AutoScalingGroups.0.MinSize: Input should be greater than or equal to 0" \
        in caught.value.problems
    assert any("MaxSize: Field required" in problem for problem in caught.value.problems)


def test_decoder_skips_unknown_fields() -> None:
    raw = OBJECT_DECODER.decode(b'{"kind":"Pod","metadata":{"name":"p","managedFields":[{}]},'
                                b'"spec":{"volumes":[{"name":"v"}]},"unknown":1}')
    assert raw.metadata.name == "p"
    assert isinstance(raw, msgspec.Struct)


def test_a_big_yaml_snapshot_without_aliases_is_read(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`kubectl get pods -A -o yaml` of a few thousand pods holds more than the million values
    aliases may add; only what aliases add is limited, so a "billion laughs" is still refused.
    (The limit is lowered to 5,000 here, to keep the file small.)"""
    import yaml

    from kube_elevator.tasks.core import documents

    monkeypatch.setattr(documents, "MAX_NODES", 5_000)
    count = 100  # about 95 values each
    items = [{"kind": "Pod", "metadata": {"name": f"p{index}", "namespace": "a",
                                          "labels": {f"k{n}": "v" for n in range(40)}},
              "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "10m"}}}]}}
             for index in range(count)]  # no object shared: safe_dump writes no alias
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert "&id" not in path.read_text()
    snapshot = load_cluster_files([path])
    assert len(snapshot.pods) == count and snapshot.pods[-1].cpu_request_milli == 10

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(
        ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
        + [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 5)]
        + ["kind: List", "items: *l4"]))  # 9 ** 5 = 59,049 values from 50
    with pytest.raises(InputError, match="its aliases expand to more than 5,000 values"):
        load_cluster_files([bomb])
