"""Fault injection (issue 14): each fault does what it says to the real clients, and the tick
holds under it: timeouts on every call, one retry layer, a truthful exit status.

The faults are set as an operator would, over HTTP at `/_faults`, or through the same rules
from Python (`FakeKubeApi.faults`, `AwsFaultProxy.faults`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import urllib3
import yaml
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from benchmarks.deadlines import scaled
from benchmarks.event_latency import wait_until
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.aws_faults import AwsFaultProxy
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.tasks.adapters.cloud import AsgClient, client_config
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.core.errors import CloudError, InputError
from kube_elevator.tasks.core.timeouts import READ_TIMEOUT_ENV, Timeouts, timeouts
from tests.builders import group_dict
from tests.hostile_shapes import billion_laughs

MiB = 2**20
CONFIG_MAP = "/api/v1/namespaces/default/configmaps/settings"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/"


def post_json(url: str, body: Any, method: str = "POST") -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=scaled(10)) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def core(fake_kube: FakeKubeApi) -> client.CoreV1Api:
    """The real client as the adapter configures it: no urllib3 retries underneath."""
    api = fake_kube.api_client()
    api.configuration.retries = False
    api.rest_client.pool_manager.connection_pool_kw["retries"] = False
    fake_kube.create("configmaps", {"metadata": {"name": "settings"}, "data": {"v": "0"}},
                     "default")
    return client.CoreV1Api(api)


def patch_settings(core: client.CoreV1Api, value: str, read_seconds: float = 5) -> None:
    core.patch_namespaced_config_map("settings", "default", {"data": {"v": value}},
                                     _request_timeout=(2, read_seconds))


def stored(fake_kube: FakeKubeApi) -> str:
    return str(fake_kube.get("configmaps", "settings", "default")["data"]["v"])


# --- the fake Kubernetes API's faults, against the real client --------------------------------


def test_kube_fault_status_answers_a_kubernetes_status(fake_kube: FakeKubeApi,
                                                       core: client.CoreV1Api) -> None:
    """An API server's error is a `Status` object (apimachinery metav1.Status); 429 says when
    to come back (Retry-After). Nothing is applied."""
    fake_kube.faults.add("status", method="PATCH", path=CONFIG_MAP, status=429)
    with pytest.raises(ApiException) as raised:
        patch_settings(core, "1")
    headers: Any = raised.value.headers
    assert raised.value.status == 429 and headers["Retry-After"] == "1"
    status = json.loads(raised.value.body or "{}")
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "TooManyRequests", 429)
    assert stored(fake_kube) == "0"
    patch_settings(core, "2")  # count 1: the next one passes
    assert stored(fake_kube) == "2"


def test_kube_fault_drop_is_a_connection_error_and_nothing_applied(
        fake_kube: FakeKubeApi, core: client.CoreV1Api) -> None:
    fake_kube.faults.add("drop", method="PATCH", path=CONFIG_MAP)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        patch_settings(core, "1")
    assert stored(fake_kube) == "0"


def test_kube_fault_apply_then_drop_applies_but_the_answer_is_lost(
        fake_kube: FakeKubeApi, core: client.CoreV1Api) -> None:
    """Issue 14's "lost answer": the write happened, the client only sees a broken connection."""
    fake_kube.faults.add("apply_then_drop", method="PATCH", path=CONFIG_MAP)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        patch_settings(core, "1")
    assert stored(fake_kube) == "1"


def test_kube_fault_hang_ends_with_the_clients_read_timeout(
        fake_kube: FakeKubeApi, core: client.CoreV1Api) -> None:
    fake_kube.faults.add("hang", method="PATCH", path=CONFIG_MAP)
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        patch_settings(core, "1", read_seconds=0.5)
    assert 0.5 <= time.monotonic() - started < 5
    assert stored(fake_kube) == "0"


def test_kube_fault_delay_serves_after_the_delay(fake_kube: FakeKubeApi,
                                                core: client.CoreV1Api) -> None:
    fake_kube.faults.add("delay", method="PATCH", path_prefix="/api/v1/", delay_seconds=0.3)
    started = time.monotonic()
    patch_settings(core, "1")
    assert time.monotonic() - started >= 0.3 and stored(fake_kube) == "1"


def test_kube_fault_matches_method_path_regex_and_count(fake_kube: FakeKubeApi,
                                                        core: client.CoreV1Api) -> None:
    rule = fake_kube.faults.add("status", method="GET", path_regex=r"/configmaps/settings$",
                                status=503, count=2)
    for _ in range(2):
        with pytest.raises(ApiException, match="503"):
            core.read_namespaced_config_map("settings", "default")
    patch_settings(core, "1")  # another method: not matched
    assert core.read_namespaced_config_map("settings", "default").data == {"v": "1"}
    assert (rule.fired, rule.remaining) == (2, 0)


def test_kube_faults_over_http(fake_kube: FakeKubeApi, core: client.CoreV1Api) -> None:
    """`POST /_faults` adds rules (all or none), `GET` lists them with how often each fired,
    `DELETE` clears them; `/_faults` is no path a Kubernetes API serves."""
    status, body = post_json(fake_kube.faults_url, [
        {"method": "PATCH", "path": CONFIG_MAP, "action": "status", "status": 500},
        {"method": "GET", "path": "/api/v1/nodes", "action": "hang", "count": None}])
    assert status == 201 and [f["action"] for f in body["faults"]] == ["status", "hang"]
    with pytest.raises(ApiException, match="500"):
        patch_settings(core, "1")
    status, body = post_json(fake_kube.faults_url, None, "GET")
    assert [(f["fired"], f["remaining"]) for f in body["faults"]] == [(1, 0), (0, None)]
    for bad, problem in [({"action": "explode"}, "action"), ({"action": "drop", "count": 0},
                         "count"), ({"action": "drop", "operation": "X"}, "cannot match"),
                         ({"action": "delay"}, "delay_seconds"), ([{"action": "drop"}, 3],
                         "JSON object")]:
        status, body = post_json(fake_kube.faults_url, bad)
        assert status == 400 and problem in body["error"], bad
    assert len(fake_kube.faults.list()) == 2  # the rejected list added nothing
    status, body = post_json(fake_kube.faults_url, None, "DELETE")
    assert status == 200 and len(body["faults"]) == 2 and fake_kube.faults.list() == []
    patch_settings(core, "2")
    assert stored(fake_kube) == "2"


def test_kube_hung_request_does_not_hold_the_server_stop(tmp_path: Path) -> None:
    """Stopping the server drops a hung request at once (the client sees a broken connection)
    instead of waiting for uvicorn's graceful shutdown."""
    kube = FakeKubeApi().start()
    kube.faults.add("hang", method="GET", path="/api/v1/nodes", count=None)
    api = kube.api_client()
    api.rest_client.pool_manager.connection_pool_kw["retries"] = False
    outcome: list[BaseException] = []

    def hung() -> None:
        try:
            client.CoreV1Api(api).list_node(_request_timeout=(2, 60))
        except BaseException as error:
            outcome.append(error)

    caller = threading.Thread(target=hung)
    caller.start()
    while kube.faults.list()[0].fired == 0:
        time.sleep(0.01)
    started = time.monotonic()
    kube.stop()
    caller.join(timeout=scaled(10))
    assert time.monotonic() - started < 2
    assert len(outcome) == 1 and isinstance(outcome[0], urllib3.exceptions.ProtocolError)


# --- the AWS fault proxy, against real boto3 ---------------------------------------------------


@pytest.fixture
def proxy(fake_aws: FakeAws) -> Iterator[AwsFaultProxy]:
    with AwsFaultProxy(fake_aws.endpoint_url) as running:
        yield running


def proxied(fake_aws: FakeAws, proxy: AwsFaultProxy, service: str,
            config: Config | None = None) -> Any:
    session: Any = fake_aws.session()
    return session.client(service, endpoint_url=proxy.url,
                          config=config or client_config(Timeouts(2, 1)))


def desired(fake_aws: FakeAws, name: str) -> int:
    groups = fake_aws.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[name])["AutoScalingGroups"]
    return int(groups[0]["DesiredCapacity"])


def test_a_client_that_leaves_mid_request_is_dropped_without_an_error(
        fake_aws: FakeAws, proxy: AwsFaultProxy, caplog: pytest.LogCaptureFixture) -> None:
    """A process killed while its call's body was on the way (`kill -9` of a serve mid-call,
    behind `elevator fake-cluster`'s proxy): the proxy drops that request, logs no error (it
    printed uvicorn's 40-line traceback), and answers the next call."""
    host, port = proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=scaled(10)) as raw:
        raw.sendall(b"POST / HTTP/1.1\r\nHost: autoscaling\r\nContent-Type: "
                    b"application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
                    b"Action=SetDesired")  # 17 of its 100 bytes, then gone
    wait_until(lambda: proxy.faults.client_disconnects == 1, scaled(30),
               "the proxy to see its client leave")
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR], \
        caplog.text
    fake_aws.create_asg("faults-after-a-client-left", 1, 10, 2)
    autoscaling = proxied(fake_aws, proxy, "autoscaling")
    assert autoscaling.describe_auto_scaling_groups(
        AutoScalingGroupNames=["faults-after-a-client-left"])["AutoScalingGroups"]


@pytest.mark.parametrize(("action", "error", "applied"), [
    ("status", ClientError, False),
    ("drop", ConnectionClosedError, False),
    ("apply_then_drop", ConnectionClosedError, True),
    ("hang", ReadTimeoutError, False),
], ids=["throttled", "dropped", "lost-answer", "hung"])
def test_aws_fault_proxy_actions(fake_aws: FakeAws, proxy: AwsFaultProxy, action: str,
                                 error: type[Exception], applied: bool) -> None:
    name = f"faults-{action}"
    fake_aws.create_asg(name, 1, 10, 2)
    proxy.faults.add(action, operation="SetDesiredCapacity", status=400, code="Throttling")
    autoscaling = proxied(fake_aws, proxy, "autoscaling")
    with pytest.raises(error) as raised:
        autoscaling.set_desired_capacity(AutoScalingGroupName=name, DesiredCapacity=5)
    if action == "status":
        assert raised.value.response["Error"]["Code"] == "Throttling"  # type: ignore[attr-defined]
    assert desired(fake_aws, name) == (5 if applied else 2)


def test_aws_fault_proxy_speaks_ec2_errors_and_http(fake_aws: FakeAws,
                                                    proxy: AwsFaultProxy) -> None:
    status, body = post_json(proxy.faults_url, {"operation": "DescribeInstances",
                                                "action": "status", "status": 503,
                                                "code": "RequestLimitExceeded"})
    assert status == 201
    with pytest.raises(ClientError) as raised:
        proxied(fake_aws, proxy, "ec2").describe_instances()
    assert raised.value.response["Error"]["Code"] == "RequestLimitExceeded"
    status, body = post_json(proxy.faults_url, None, "GET")
    assert body["faults"][0]["fired"] == 1
    assert [seen.fault for seen in proxy.attempts("DescribeInstances")] == ["status"]


@pytest.mark.parametrize(("retries", "requests"), [
    ({"total_max_attempts": 1, "mode": "standard"}, 1),
    ({"max_attempts": 1, "mode": "standard"}, 2),
], ids=["total_max_attempts-1-is-one-request", "max_attempts-1-is-one-retry"])
def test_botocore_attempts_semantics(fake_aws: FakeAws, proxy: AwsFaultProxy,
                                     retries: dict[str, Any], requests: int) -> None:
    """botocore's Config docs: `total_max_attempts` includes the initial request (1: no
    retry); `max_attempts` counts retries only. What the proxy receives for one throttled call."""
    proxy.faults.add("status", operation="DescribeAutoScalingGroups", count=None,
                     code="Throttling")
    autoscaling = proxied(fake_aws, proxy, "autoscaling",
                          Config(retries=retries, connect_timeout=2, read_timeout=2))  # type: ignore[arg-type]
    with pytest.raises(ClientError):
        autoscaling.describe_auto_scaling_groups()
    assert len(proxy.attempts("DescribeAutoScalingGroups")) == requests


def test_asg_client_sends_one_request_per_attempt(fake_aws: FakeAws, proxy: AwsFaultProxy,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 14 item 6: the step's Prefect retries are the one retry layer, so a throttled
    SetDesiredCapacity reaches AWS once per attempt, as the comment in tasks/adapters/cloud.py says."""
    fake_aws.create_asg("faults-one-try", 1, 10, 2)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    cloud = AsgClient.from_environment()
    proxy.faults.add("status", operation="SetDesiredCapacity", count=None, code="Throttling")
    with pytest.raises(CloudError) as raised:
        cloud.set_desired_capacity(cloud.group("faults-one-try"), 4)
    assert raised.value.retryable
    assert len(proxy.attempts("SetDesiredCapacity")) == 1


def test_asg_client_times_out_a_hung_endpoint(fake_aws: FakeAws, proxy: AwsFaultProxy,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    monkeypatch.setenv(READ_TIMEOUT_ENV, "0.5")
    cloud = AsgClient.from_environment()
    proxy.faults.add("hang", operation="DescribeAutoScalingGroups", count=None)
    started = time.monotonic()
    with pytest.raises(CloudError) as raised:
        cloud.describe(["faults-hung"])
    assert raised.value.retryable and time.monotonic() - started < 5
    assert len(proxy.attempts("DescribeAutoScalingGroups")) == 1


# --- the Kubernetes adapter: timeouts, no hidden retries ---------------------------------------


def test_kube_client_times_out_a_hung_list_once(fake_kube: FakeKubeApi, kubeconfig: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 14 item 4: every call has a read timeout, and urllib3 does not resend it."""
    monkeypatch.setenv(READ_TIMEOUT_ENV, "0.5")
    kube = KubeClient.from_config(kubeconfig)
    rule = fake_kube.faults.add("hang", method="GET", path="/api/v1/pods", count=None)
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        kube.list_pods()
    assert time.monotonic() - started < 5 and rule.fired == 1


def test_kube_client_does_not_resend_a_write_whose_answer_was_lost(
        fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    """urllib3 resends a dropped PUT by default: a Lease write whose answer was lost would come
    back as a 409 from our own first write. The adapter leaves retrying to the step."""
    kube = KubeClient.from_config(kubeconfig)
    written = kube.write_state("kube-system", "elevator-batch", kube.read_state(
        "kube-system", "elevator-batch"), now=1_800_000_000)
    rule = fake_kube.faults.add("apply_then_drop", method="PUT",
                                path=LEASES + "elevator-batch")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        kube.write_state("kube-system", "elevator-batch", written, now=1_800_000_060)
    assert rule.fired == 1
    assert kube.read_state("kube-system", "elevator-batch").resource_version != \
        written.resource_version


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon", "1e400"])
def test_timeouts_from_the_environment_are_checked(value: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(READ_TIMEOUT_ENV, value)
    with pytest.raises(InputError, match=READ_TIMEOUT_ENV):
        timeouts()


# --- the command line ---------------------------------------------------------------------------


def elevator(*args: str | Path, env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    environment.pop("PREFECT_API_URL", None)  # an ephemeral Prefect server of its own
    return subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env=environment)


KUBECONFIGS = {
    "unknown-context": ({"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": [],
                         "users": [], "current-context": "nope"},
                        "current-context: 'nope' names no entry of contexts"),
    "no-clusters": ({"apiVersion": "v1", "kind": "Config", "current-context": "a",
                     "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
                     "users": [{"name": "u", "user": {"token": "t"}}]},
                    "clusters: must be a list, but it is missing"),
    "no-server": ({"apiVersion": "v1", "kind": "Config", "current-context": "a",
                   "clusters": [{"name": "c", "cluster": {}}],
                   "contexts": [{"name": "a", "context": {"cluster": "c"}}]},
                  "clusters[c].server: must be the API server's URL"),
    "server-not-a-url": ({"apiVersion": "v1", "kind": "Config", "current-context": "a",
                          "clusters": [{"name": "c", "cluster": {"server": "not a url"}}],
                          "contexts": [{"name": "a", "context": {"cluster": "c"}}]},
                         "clusters[c].server: must be the API server's URL"),
    "not-a-mapping": (["a"], "a kubeconfig is a mapping"),
}


@pytest.mark.parametrize("case", [*KUBECONFIGS, "missing", "not-yaml", "impossible-date",
                                  "recursive-alias"])
def test_run_with_an_unusable_kubeconfig_is_one_error_line(case: str, tmp_path: Path) -> None:
    """Issue 14 item 7: one line naming the file and the problem, exit 2, no traceback."""
    nodegroups = tmp_path / "ng.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": [group_dict()]}))
    path = tmp_path / "kubeconfig.yaml"
    expected = "no such kubeconfig file"
    if case in KUBECONFIGS:
        document, expected = KUBECONFIGS[case]
        path.write_text(yaml.safe_dump(document))
    elif case == "not-yaml":
        path.write_text("clusters: [\n")
        expected = "line 2, column 1: not valid YAML"
    elif case == "impossible-date":  # parses, but builds no value
        path.write_text("current-context: 2001-02-30\n")
        expected = "not valid YAML: a value cannot be read (day is out of range for month)"
    elif case == "recursive-alias":  # read by the client's own YAML loader after the check
        path.write_text("current-context: a\ncontexts: &c [{name: a, context: *c}]\n")
        expected = "line 2, column 11: a YAML alias inside the node its anchor names"
    result = elevator("run", "--nodegroups", nodegroups, "--kubeconfig", path, "--once")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"error: {path}: {expected}" or \
        result.stderr.strip().startswith(f"error: {path}: {expected}")
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_default_kubeconfig_is_read_within_the_same_limits(tmp_path: Path) -> None:
    """Without --kubeconfig the client reads $KUBECONFIG itself: a billion laughs there ran it
    out of memory writing its error message (a MemoryError traceback, issue 27)."""
    nodegroups = tmp_path / "ng.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": [group_dict()]}))
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump({"current-context": "a", "users": billion_laughs()}))
    result = elevator("run", "--nodegroups", nodegroups, "--once", env={"KUBECONFIG": str(path)})
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"error: {path}: its aliases expand to more than 1,000,000 " \
        "values"


def test_fake_cluster_takes_faults_from_another_process(tmp_path: Path) -> None:
    """`elevator fake-cluster` prints both admin URLs; rules posted there reach the clients."""
    kubeconfig = tmp_path / "kubeconfig.yaml"
    server = subprocess.Popen(
        [sys.executable, "-m", "kube_elevator.flows.cli", "fake-cluster",
         "--kubeconfig-out", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        lines = [server.stdout.readline() for _ in range(7)]
        exports = dict(re.findall(r"(\w+)=(\S+)", lines[3]))
        kube_faults = lines[5].split()[-1]
        aws_faults = lines[6].split()[-1]
        assert kube_faults.endswith("/_faults") and aws_faults.endswith("/_faults")
        assert post_json(kube_faults, {"method": "GET", "path": "/api/v1/nodes",
                                       "action": "status", "status": 503})[0] == 201
        assert post_json(aws_faults, {"operation": "DescribeAutoScalingGroups",
                                      "action": "status", "code": "Throttling"})[0] == 201
        from kubernetes import config

        with pytest.raises(ApiException, match="503"):
            client.CoreV1Api(config.new_client_from_config(  # type: ignore[no-untyped-call]
                str(kubeconfig))).list_node()
        autoscaling = boto3.client(
            "autoscaling", endpoint_url=exports["AWS_ENDPOINT_URL"],
            region_name=exports["AWS_DEFAULT_REGION"],
            aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"], config=client_config())
        with pytest.raises(ClientError, match="Throttling"):
            autoscaling.describe_auto_scaling_groups()
        assert autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"] == []
    finally:
        server.terminate()
        assert server.wait(timeout=scaled(30)) == 0


def two_groups(fake_aws: FakeAws, fake_kube: FakeKubeApi, tmp_path: Path, tag: str) -> Path:
    """Groups `<tag>-a` and `<tag>-b`, each an ASG of 2 with its nodes, and pending pods."""
    groups = []
    for suffix in ("a", "b"):
        name = f"{tag}-{suffix}"
        fake_aws.create_asg(f"{name}-asg", 1, 10, 2)
        for index, instance in enumerate(fake_aws.instances(f"{name}-asg")):
            fake_kube.create("nodes", node_for_instance(instance, {"customer": name}, 1000,
                                                        4000 * MiB, 1_800_000_000 + index))
        for index in range(4):
            fake_kube.create("pods", {"metadata": {"name": f"{name}-{index}"}, "spec": {
                "nodeSelector": {"customer": name}, "containers": [{
                    "name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "500m", "memory": "100Mi"}}}]}}, "jobs")
        groups.append(group_dict(name=name, label_value=name,
                                 cloud_provider_group_name=f"{name}-asg"))
    nodegroups = tmp_path / "nodegroups.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": groups}))
    return nodegroups


def run_once(nodegroups: Path, kubeconfig: Path, fake_aws: FakeAws
             ) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**fake_aws.env(), READ_TIMEOUT_ENV: "1", "ELEVATOR_RETRY_DELAY_SECONDS": "0",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    started = time.monotonic()
    result = elevator("run", "--nodegroups", nodegroups, "--kubeconfig", kubeconfig, "--once",
                      env=env, timeout=scaled(180))
    return result, time.monotonic() - started


def test_run_once_ends_on_a_hung_api_with_a_line_per_failed_group(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path) -> None:
    """Issue 14 items 4 and 5: an API that accepts and never answers (every Lease read hangs)
    fails each group within the read timeout times the step's attempts; `run --once` exits 1
    with one line per failed group and no traceback."""
    nodegroups = two_groups(fake_aws, fake_kube, tmp_path, "hung")
    rule = fake_kube.faults.add("hang", method="GET", path_prefix=LEASES, count=None)
    result, seconds = run_once(nodegroups, kubeconfig, fake_aws)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    failed = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert [line.split(":")[1] for line in failed] == [" node group hung-a", " node group hung-b"]
    assert all("ReadTimeoutError" in line for line in failed), failed
    # One read-locks step for both groups: the first try and 3 retries, each stopped by the
    # first Lease read that hangs; the step's error fails every group.
    assert rule.fired == 4
    assert seconds < 120


def test_run_once_exits_1_without_traceback_when_the_pods_list_keeps_failing(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path) -> None:
    """Issue 14 item 5: the whole collect step fails: one line, exit 1, no traceback."""
    nodegroups = two_groups(fake_aws, fake_kube, tmp_path, "nolist")
    fake_kube.faults.add("status", method="GET", path="/api/v1/pods", status=500, count=None)
    result, _ = run_once(nodegroups, kubeconfig, fake_aws)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    failed = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert failed == ["error: the tick failed: ServiceException: the Kubernetes API answered 500 "
                      "Internal Server Error: Internal error occurred: injected fault"], failed


def test_run_loop_reports_a_failed_tick_and_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 14 item 5, looping mode: a failed tick is one error line, and the next tick runs."""
    import signal

    from kube_elevator.flows.cli.common import OutputFormat, run_until_stopped
    from kube_elevator.flows.cli.nodes import failed_groups

    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    ticks: list[int] = []

    def cycle() -> list[dict[str, Any]]:
        ticks.append(len(ticks))
        if len(ticks) == 1:
            raise ConnectionResetError("the API went away\nmid-answer")
        if len(ticks) == 2:
            return [{"name": "a", "status": "failed", "message": "ReadTimeoutError: slow"},
                    {"name": "b", "status": "acted", "message": ""}]
        os.kill(os.getpid(), signal.SIGTERM)  # what stops the loop between ticks
        return []

    try:
        run_until_stopped(cycle, lambda result: f"{result['name']}: {result['status']}",
                          OutputFormat.table, once=False, period=0, failures=failed_groups)
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    captured = capsys.readouterr()
    assert len(ticks) == 3
    assert captured.err.splitlines() == [
        "error: the tick failed: ConnectionResetError: the API went away mid-answer",
        "error: node group a: failed: ReadTimeoutError: slow"]
    assert captured.out.splitlines() == ["a: failed", "b: acted"]
