"""kubectl against the fake API: a CRD and its objects, patches of every kind, server-side apply,
finalizers, events.  kubectl's of 1.20 to 1.33 are in use: steps a version lacks are skipped."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.builders import crd_manifest
from tests.tools import needs_kubectl

pytestmark = needs_kubectl

Obj = dict[str, Any]
CRD = crd_manifest("stable.example.com", "crontabs", "CronTab", short_names=("ct",))


def crontab(replicas: int, **labels: str) -> Obj:
    return {"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "tab", "namespace": "default", "labels": labels},
            "spec": {"cronSpec": "* * * * */5", "replicas": replicas}}


Kubectl = Callable[..., str]


@pytest.fixture(scope="module")
def minor() -> int:
    """kubectl's minor version (20 for Debian bookworm's 1.20)."""
    done = subprocess.run(["kubectl", "version", "--client", "-o", "json"], capture_output=True,
                          text=True, timeout=scaled(60), check=True)
    return int(re.sub(r"\D", "", json.loads(done.stdout)["clientVersion"]["minor"]))


@pytest.fixture(scope="module")
def kubectl(api: FakeKubeApi, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    tmp = tmp_path_factory.mktemp("kubectl")
    kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")

    def run(*args: str, stdin: Obj | None = None, ok: bool = True) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp / "cache"),
             *args], capture_output=True, text=True, timeout=scaled(60), check=False,
            input=yaml.safe_dump(stdin) if stdin is not None else None)
        assert (done.returncode == 0) == ok, done.stderr
        return done.stdout if ok else done.stderr

    return run


@pytest.fixture(scope="module")
def crd(kubectl: Kubectl) -> Iterator[None]:
    """The CRD, applied by kubectl (no OpenAPI document: client-side validation off)."""
    kubectl("apply", "--validate=false", "-f", "-", stdin=CRD)
    kubectl("wait", "--for=condition=established", f"--timeout={scaled(10):.0f}s",
            "crd/crontabs.stable.example.com")
    yield
    kubectl("delete", "crd", "crontabs.stable.example.com", "--ignore-not-found")


def test_kubectl_crd_and_custom_objects(api: FakeKubeApi, kubectl: Kubectl, crd: None,
                                        minor: int) -> None:
    assert "crontab.stable.example.com/tab created" in kubectl(
        "apply", "--validate=false", "-f", "-", stdin=crontab(1, tier="web"))
    assert re.search(r"^tab\s+\d+s$", kubectl("get", "ct", "--no-headers"), re.M)
    assert "crontabs" in kubectl("api-resources", "--api-group=stable.example.com")
    assert kubectl("get", "crontabs", "-l", "tier=web", "-o", "name") == \
        "crontab.stable.example.com/tab\n"
    assert kubectl("get", "crontabs", "--field-selector", "metadata.name=other",
                   "-o", "name") == ""
    kubectl("label", "crontab", "tab", "team=a")
    kubectl("patch", "crontab", "tab", "--type=merge", "-p", '{"spec":{"cronSpec":"@daily"}}')
    kubectl("patch", "crontab", "tab", "--type=json",
            "-p", '[{"op":"replace","path":"/spec/replicas","value":2}]')
    refused = kubectl("patch", "crontab", "tab", "-p", '{"spec":{"replicas":3}}', ok=False)
    assert "415" in refused or "unknown format" in refused  # strategic merge: not for CRs
    # Client-side apply again: a three-way JSON merge patch (the file's values win; the
    # label kubectl added stays, as the last-applied annotation never had it).
    kubectl("apply", "--validate=false", "-f", "-", stdin=crontab(3, tier="web"))
    got = json.loads(kubectl("get", "crontab", "tab", "-o", "json"))
    assert (got["spec"], got["metadata"]["labels"]) == (
        {"cronSpec": "* * * * */5", "replicas": 3}, {"tier": "web", "team": "a"})
    assert "scaled" in kubectl("scale", "crontab", "tab", "--replicas=4")
    assert api.get("crontabs", "tab", "default")["spec"]["replicas"] == 4
    if minor >= 24:  # --subresource came with 1.24
        kubectl("patch", "crontab", "tab", "--subresource=status", "--type=merge",
                "-p", '{"status":{"replicas":4}}')
        assert api.get("crontabs", "tab", "default")["status"] == {"replicas": 4}
    kubectl("delete", "crontab", "tab")
    assert api.list("crontabs") == []


def test_kubectl_server_side_apply_conflicts_and_forces(api: FakeKubeApi, kubectl: Kubectl,
                                                         crd: None) -> None:
    kubectl("apply", "--server-side", "--validate=false", "-f", "-", stdin=crontab(1))
    stderr = kubectl("apply", "--server-side", "--validate=false", "--field-manager=ops", "-f", "-",
                     stdin=crontab(2), ok=False)
    assert 'conflict with "kubectl"' in stderr and ".spec.replicas" in stderr
    kubectl("apply", "--server-side", "--validate=false", "--field-manager=ops",
            "--force-conflicts", "-f", "-", stdin=crontab(2))
    got = api.get("crontabs", "tab", "default")
    assert got["spec"]["replicas"] == 2
    assert {m["manager"] for m in got["metadata"]["managedFields"]} == {"kubectl", "ops"}
    kubectl("delete", "crontab", "tab")


def test_kubectl_finalizers_generate_name_and_events(api: FakeKubeApi, kubectl: Kubectl) -> None:
    made = kubectl("create", "--validate=false", "-o", "name", "-f", "-", stdin={
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"generateName": "held-", "namespace": "default",
                     "finalizers": ["example.com/hold"]}})
    name = made.strip().split("/")[1]
    assert re.fullmatch(r"held-[a-z0-9]{5}", name)
    kubectl("delete", "configmap", name, "--wait=false")
    assert api.get("configmaps", name, "default")["metadata"]["deletionTimestamp"]
    kubectl("patch", "configmap", name, "--type=json",
            "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    assert kubectl("get", "configmap", name, "--ignore-not-found", "-o", "name") == ""
    api.create("events", {"metadata": {"name": "e1", "namespace": "default"},
                          "reason": "Scaled", "type": "Normal", "message": "to 3",
                          "involvedObject": {"kind": "Deployment", "name": "web",
                                             "namespace": "default"}})
    listed = json.loads(kubectl("get", "events.v1.events.k8s.io", "-o", "json"))
    assert [(e["note"], e["regarding"]["name"]) for e in listed["items"]] == [("to 3", "web")]
