"""tasks/adapters/kube_calls.py asks what the generated kubernetes API classes ask, byte for byte,
without importing them (issue 40: `CoreV1Api` alone was 0.6-0.9 s of a command's CPU)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kube_elevator.tasks.adapters.kube_calls import AppsCalls, CoordinationCalls, CoreCalls

ROOT = Path(__file__).resolve().parents[2]
MERGE_PATCH = "application/merge-patch+json"


class Sent(Exception):
    """What the client was about to send."""


class RecordingClient(client.ApiClient):
    """The real ApiClient (its serialization, its auth), stopped at the wire."""

    def call_api(self, method: Any, url: Any, header_params: Any = None, body: Any = None,
                 post_params: Any = None, _request_timeout: Any = None) -> Any:
        raise Sent((method, url, header_params, body, post_params, _request_timeout))


def recording_client() -> RecordingClient:
    configuration = client.Configuration(host="https://kube.example:6443")
    configuration.api_key = {"BearerToken": "Bearer secret-token"}
    return RecordingClient(configuration)


def sent(call: Callable[..., Any], *args: Any, **options: Any) -> Any:
    with pytest.raises(Sent) as caught:
        call(*args, **options)
    return caught.value.args[0]


NODE_PATCH = {"metadata": {"resourceVersion": "7"}, "spec": {"taints": []}}
EVICTION = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "p", "namespace": "ns"},
            "deleteOptions": {"preconditions": {"uid": "u-1"}}}
LEASE = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
         "metadata": {"name": "g", "namespace": "kube-system", "resourceVersion": "3"},
         "spec": {"holderIdentity": "kube-elevator"}}
RAW: dict[str, Any] = {"_preload_content": False}

CORE_CASES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("list_pod_for_all_namespaces", (), {"limit": 500, "_continue": "tok",
                                         "field_selector": "status.phase!=Failed",
                                         "_request_timeout": (3.0, 30.0), **RAW}),
    ("list_pod_for_all_namespaces", (), {"watch": True, "resource_version": "12",
                                         "allow_watch_bookmarks": True, "timeout_seconds": 60,
                                         **RAW}),
    ("list_node", (), {"limit": 3, "_continue": None, **RAW}),
    ("list_namespaced_pod", ("ns",), {"label_selector": "app=web", "limit": 500, **RAW}),
    ("read_node", ("node-1",), RAW),
    ("patch_node", ("node-1", NODE_PATCH), {"_content_type": MERGE_PATCH, **RAW}),
    ("delete_node", ("node-1",), RAW),
    ("create_namespaced_pod_eviction", ("p", "ns", EVICTION), RAW),
    ("read_namespaced_config_map", ("cluster-autoscaler-priority-expander", "kube-system"),
     RAW),
]
COORDINATION_CASES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("read_namespaced_lease", ("g", "kube-system"), RAW),
    ("replace_namespaced_lease", ("g", "kube-system", LEASE), RAW),
    ("create_namespaced_lease", ("kube-system", LEASE), RAW),
]
APPS_CASES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    (f"{verb}_namespaced_{kind}_scale", ("web", "ns", *body), RAW)
    for kind in ("deployment", "stateful_set", "replica_set")
    for verb, body in (("read", ()), ("patch", ({"spec": {"replicas": 4}},)))
]


@pytest.mark.parametrize(("generated", "ours", "name", "args", "options"), [
    *[(client.CoreV1Api, CoreCalls, *case) for case in CORE_CASES],
    *[(client.CoordinationV1Api, CoordinationCalls, *case) for case in COORDINATION_CASES],
    *[(client.AppsV1Api, AppsCalls, *case) for case in APPS_CASES],
], ids=lambda value: value if isinstance(value, str) else None)
def test_each_call_sends_what_the_generated_method_sends(
        generated: Any, ours: Any, name: str, args: tuple[Any, ...],
        options: dict[str, Any]) -> None:
    api = recording_client()
    assert sent(getattr(ours(api), name), *args, **options) == \
        sent(getattr(generated(api), name), *args, **options)


def test_an_unknown_list_option_is_refused_not_dropped() -> None:
    with pytest.raises(TypeError, match="pretty_much"):
        CoreCalls(recording_client()).list_node(pretty_much=True)


ONE_SHOT = """
import sys
from pathlib import Path
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.tasks.adapters.kube import KubeClient
from tests.builders import api_node, api_pod

before = set(sys.modules)
with FakeKubeApi() as kube:
    kube.create("nodes", api_node("n1"))
    kube.create("pods", api_pod("p1"), namespace="default")
    adapter = KubeClient.from_config(kube.write_kubeconfig(Path(sys.argv[1])))
    assert [pod.name for pod in adapter.list_pods()] == ["p1"]
    assert [node.name for node in adapter.list_nodes()] == ["n1"]
    assert adapter.ensure_tainted("n1", "1", "NoSchedule")
    assert adapter.read_node("n1").has_taint("atlassian.com/escalator")
    assert adapter.read_node("gone") is None
    state = adapter.write_state("default", "g", adapter.read_state("default", "g"), 0.0)
    assert adapter.read_state("default", "g").resource_version == state.resource_version
    assert adapter.delete_node("n1") and not adapter.delete_node("n1")
    assert adapter.read_scale("Deployment", "default", "none") is None
    assert adapter.read_config_map("kube-system", "none") is None
print(sorted(m for m in set(sys.modules) - before if m.startswith("kubernetes.client.api.")))
"""


def test_a_tick_s_calls_import_none_of_the_generated_api_classes(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", ONE_SHOT, str(tmp_path / "kubeconfig")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"
