"""kubectl against the fake API's validation and defaulting: the refusals print as kubectl
prints a real server's (`The Pod "x" is invalid: ...`), and what it reads back is defaulted.
A representative subset of the cases test_fake_validation_*.py run through the client."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.tools import needs_kubectl

pytestmark = needs_kubectl

Obj = dict[str, Any]
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def kubectl(api: FakeKubeApi, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    tmp = tmp_path_factory.mktemp("kubectl-validation")
    kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")

    def run(*args: str, stdin: Obj | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp / "cache"),
             "-n", "kctl", *args], capture_output=True, text=True, timeout=scaled(60), check=False,
            input=yaml.safe_dump(stdin) if stdin is not None else None)
    return run


def pod(name: str, **container: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", **container}]}}


def test_a_pod_without_image(kubectl: Kubectl) -> None:
    """validation_test.go TestValidateContainers: image required."""
    done = kubectl("create", "--validate=false", "-f", "-", stdin=pod("noimage"))
    assert done.returncode == 1
    assert 'The Pod "noimage" is invalid: spec.containers[0].image: Required value' in \
        done.stderr


def test_several_causes_are_listed(kubectl: Kubectl) -> None:
    """Each cause on its own line, as kubectl lists a real server's."""
    body = pod("Bad_Name", image="i", imagePullPolicy="Sometimes")
    done = kubectl("create", "--validate=false", "-f", "-", stdin=body)
    assert done.returncode == 1
    assert 'The Pod "Bad_Name" is invalid' in done.stderr
    assert '* metadata.name: Invalid value: "Bad_Name"' in done.stderr
    assert ('* spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported '
            'values: "Always", "IfNotPresent", "Never"') in done.stderr


def test_a_taint_effect_that_does_not_exist(kubectl: Kubectl) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "kctl-node"},
            "spec": {"taints": [{"key": "k", "effect": "NoScheduleNoAdmit"}]}}
    done = kubectl("create", "--validate=false", "-f", "-", stdin=node)
    assert done.returncode == 1
    assert ('The Node "kctl-node" is invalid: metadata.taints[0].effect: Unsupported value: '
            '"NoScheduleNoAdmit"') in done.stderr


def test_a_pod_update_that_touches_resources(kubectl: Kubectl) -> None:
    """TestValidatePodUpdate through `kubectl apply`: the image may change, resources not."""
    body = pod("applied", image="busybox:1", resources={"requests": {"cpu": "100m"}})
    assert kubectl("apply", "--validate=false", "-f", "-", stdin=body).returncode == 0
    body["spec"]["containers"][0]["image"] = "busybox:2"
    assert kubectl("apply", "--validate=false", "-f", "-", stdin=body).returncode == 0
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "200m"}}
    done = kubectl("apply", "--validate=false", "-f", "-", stdin=body)
    assert done.returncode == 1
    assert 'The Pod "applied" is invalid: spec: Forbidden: pod updates may not change fields ' \
        "other than `spec.containers[*].image`" in done.stderr


def test_what_kubectl_reads_back_is_defaulted(kubectl: Kubectl) -> None:
    assert kubectl("create", "--validate=false", "-f", "-",
                   stdin=pod("defaulted", image="nginx:1.27")).returncode == 0
    done = kubectl("get", "pod", "defaulted", "-o",
                   "jsonpath={.spec.restartPolicy} {.spec.dnsPolicy} {.spec.schedulerName} "
                   "{.spec.containers[0].imagePullPolicy} {.spec.serviceAccountName} "
                   "{.spec.tolerations[0].tolerationSeconds}")
    assert done.stdout == "Always ClusterFirst default-scheduler IfNotPresent default 300"
