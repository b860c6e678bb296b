"""A snapshot item of the wrong JSON type is named as other bad items are: its kind and
namespace/name, and the full key path, a map's key included (`metadata.labels.version`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from kube_elevator.tasks.core import decode
from kube_elevator.tasks.core.decode import load_cluster_files
from kube_elevator.tasks.core.errors import InputError


def kube_proxy(**labels: Any) -> dict[str, Any]:
    return {"kind": "Pod",
            "metadata": {"name": "kube-proxy-cxkwh", "namespace": "kube-system",
                         "labels": {"k8s-app": "kube-proxy", **labels}},
            "spec": {"containers": [{"name": "kube-proxy",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}


def node(**capacity: Any) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": "ip-10-0-1-7"},
            "status": {"capacity": {"cpu": "4", **capacity}, "allocatable": {"cpu": "4"}}}


def problems(tmp_path: Path, items: list[dict[str, Any]], kind: str = "List") -> list[str]:
    """The one-line problems `elevator plan` prints for this file ("{path}" for its name)."""
    path = tmp_path / "cluster.json"
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": kind, "items": items}))
    with pytest.raises(InputError) as caught:
        load_cluster_files([path])
    return [problem.replace(str(path), "{path}") for problem in caught.value.problems]


@pytest.fixture(params=["one call", "item by item"])
def decoder_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """An API page is decoded in one call, a file past the limit item by item: same messages."""
    if request.param == "item by item":
        monkeypatch.setattr(decode, "_ONE_CALL_LIMIT_BYTES", 0)


@pytest.mark.usefixtures("decoder_path")
@pytest.mark.parametrize(("items", "kind", "expected"), [
    pytest.param(
        [kube_proxy(), kube_proxy(version=2)], "List",
        "{path}: items[1]: Pod kube-system/kube-proxy-cxkwh metadata.labels.version: "
        "Expected `str`, got `int`", id="the-reported-label"),
    pytest.param(
        [{k: v for k, v in kube_proxy(version=2).items() if k != "kind"}], "PodList",
        "{path}: items[0]: Pod kube-system/kube-proxy-cxkwh metadata.labels.version: "
        "Expected `str`, got `int`", id="kind-from-a-typed-list"),
    pytest.param(
        [kube_proxy(**{"app.kubernetes.io/version": 2.1, "tier": 3})], "List",
        "{path}: items[0]: Pod kube-system/kube-proxy-cxkwh "
        "metadata.labels.app.kubernetes.io/version: Expected `str`, got `float`",
        id="the-first-bad-label-of-two"),
    pytest.param(
        [{**kube_proxy(), "spec": {"containers": [
            {"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "1", "memory": True}}},
        ]}}], "List",
        "{path}: items[0]: Pod kube-system/kube-proxy-cxkwh "
        "spec.containers[1].resources.requests.memory: Expected `int | float | str`, got `bool`",
        id="a-request-in-a-list"),
    pytest.param(
        [node(memory=None)], "List",
        "{path}: items[0]: Node ip-10-0-1-7 status.capacity.memory: "
        "Expected `int | float | str`, got `null`", id="a-cluster-scoped-object"),
    pytest.param(
        [{**kube_proxy(), "spec": {"nodeSelector": ["zone-a"]}}], "List",
        "{path}: items[0]: Pod kube-system/kube-proxy-cxkwh spec.nodeSelector: "
        "Expected `object | null`, got `array`", id="no-map-key-in-the-path"),
    pytest.param(
        [{"kind": 7, "metadata": {"name": "web-1", "namespace": "shop"}}], "PodList",
        "{path}: items[0]: Pod shop/web-1 kind: Expected `str`, got `int`",
        id="the-kind-is-the-bad-field"),
    pytest.param(
        [{"kind": "Pod", "metadata": {"name": "web-1", "namespace": ["shop"]}}], "List",
        "{path}: items[0]: Pod web-1 metadata.namespace: Expected `str`, got `array`",
        id="the-namespace-is-the-bad-field"),
])
def test_a_wrong_type_names_the_object_and_the_key(
        tmp_path: Path, items: list[dict[str, Any]], kind: str, expected: str) -> None:
    assert problems(tmp_path, items, kind) == [expected]


def test_a_bad_name_leaves_the_index_to_find_it(tmp_path: Path) -> None:
    """With its name the wrong type the item cannot be named, only placed: a `<no name>` would
    say it has none, and the kind alone adds nothing to the path's `metadata.name`."""
    items = [kube_proxy(), {"kind": "Pod", "metadata": {"name": 5, "namespace": "kube-system"}}]
    assert problems(tmp_path, items) == [
        "{path}: items[1]: metadata.name: Expected `str`, got `int`"]


def test_a_yaml_snapshot_names_the_label_too(tmp_path: Path) -> None:
    """`kubectl get -o yaml` with an unquoted number: YAML reads `version: 2` as an int."""
    path = tmp_path / "cluster.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata:\n"
                    "    name: web-1\n    namespace: shop\n    labels:\n      app: web\n"
                    "      version: 2\n")
    with pytest.raises(InputError) as caught:
        load_cluster_files([path])
    assert caught.value.problems == [
        f"{path}: items[0]: Pod shop/web-1 metadata.labels.version: Expected `str`, got `int`"]
