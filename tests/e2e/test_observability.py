"""A tick's report: Escalator's metrics through a real Pushgateway, the table artifact, events."""

from __future__ import annotations

import re
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.deadlines import scaled
from kube_elevator.tasks.escalator.metrics import EscalatorMetrics
from kube_elevator.tasks.steps.node_groups import ActionsDone, GroupResult
from kube_elevator.tasks.steps.report import events_for
from tests import tools
from tests.builders import make_asg, make_group, make_node, make_pod
from tests.e2e.test_autoscale_flow import T0, Cluster


def parse_exposition(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        assert match, line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(3) or ""))
        samples[(match.group(1), labels)] = float(match.group(4))
    return samples


def test_counters_keep_escalators_names_and_histograms_have_its_buckets() -> None:
    metrics = EscalatorMetrics()
    metrics.add("run_count", 1)
    metrics.add("run_count", 1)
    metrics.observe("node_group_scale_lock_duration", 130.0, node_group="batch")
    metrics.set("node_group_nodes", 3, node_group='we"ird')
    text = metrics.render()
    assert "# TYPE escalator_run_count counter\nescalator_run_count 2\n" in text
    assert "_total" not in text
    samples = parse_exposition(text)
    bucket = "escalator_node_group_scale_lock_duration_bucket"
    assert samples[(bucket, frozenset({("node_group", "batch"), ("le", "120")}))] == 0
    assert samples[(bucket, frozenset({("node_group", "batch"), ("le", "180")}))] == 1
    assert samples[(bucket, frozenset({("node_group", "batch"), ("le", "+Inf")}))] == 1
    assert len([key for key in samples if key[0] == bucket]) == 30  # 29 bounds and +Inf
    assert samples[("escalator_node_group_nodes",
                    frozenset({("node_group", 'we\\"ird')}))] == 3


def test_events_say_what_happened() -> None:
    from kube_elevator.tasks.core.lease_state import GroupState
    from kube_elevator.tasks.escalator.decide import plan_group

    nodes = [make_node("n1"), make_node("n2")]
    plan = plan_group(make_group(), [make_pod(f"p{i}") for i in range(10)], nodes,
                      make_asg(2), GroupState(), T0)
    acted = GroupResult(plan, "acted", ActionsDone(asg_desired_set=8))
    assert [name for name, _ in events_for(acted)] == ["elevator.node-group.scaled-up"]
    assert events_for(acted)[0][1]["asg_desired"] == 8
    failed = GroupResult(plan, "failed", message="boom")
    assert [name for name, _ in events_for(failed)] == ["elevator.node-group.error"]
    assert events_for(GroupResult(plan, "dry run")) == []


@pytest.fixture(scope="module")
def pushgateway() -> Iterator[str]:
    binary = tools.pushgateway()
    if binary is None:
        pytest.skip(tools.pushgateway_missing() or "")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + scaled(30)
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=scaled(2)):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # the gateway is starting: poll with a deadline
    yield url
    process.terminate()
    process.wait(timeout=scaled(10))


@pytest.mark.usefixtures("prefect_server")
def test_a_tick_pushes_escalators_metrics_and_publishes_an_artifact(
        pushgateway: str, fake_aws: Any, fake_kube: Any, kubeconfig: Path,
        tmp_path: Path) -> None:
    cluster = Cluster(fake_aws, fake_kube, kubeconfig, tmp_path, 2)
    for index in range(10):
        cluster.pod(f"job-{index}")
    result = cluster.tick(T0, pushgateway=pushgateway)
    assert result["delta"] == 6

    with urllib.request.urlopen(f"{pushgateway}/metrics", timeout=scaled(10)) as response:
        samples = parse_exposition(response.read().decode())

    def value(name: str, **labels: str) -> float:
        wanted = {("job", "kube-elevator"), ("instance", ""), *labels.items()}
        matches = [v for (n, found), v in samples.items() if n == name and wanted <= found]
        assert matches, f"{name} {labels} not pushed"
        return matches[0]

    group = {"node_group": "batch"}
    assert value("escalator_node_group_nodes", **group) == 2
    assert value("escalator_node_group_untainted_nodes", **group) == 2
    assert value("escalator_node_group_pods", **group) == 10
    assert value("escalator_node_group_cpu_percent", **group) == 250
    assert value("escalator_node_group_cpu_request", **group) == 5000
    assert value("escalator_node_group_mem_capacity", **group) == 2 * 4000 * 2**20
    assert value("escalator_node_group_scale_delta", **group) == 6
    assert value("escalator_node_group_scale_lock", **group) == 1
    assert value("escalator_cloud_provider_target_size", cloud_provider="aws", id=cluster.asg,
                 **group) == 2  # as described at the start of the tick
    assert value("escalator_run_count") >= 1

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        (artifact,) = client.read_artifacts(  # this test's tick made the newest one
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["autoscale-tick"])),
            sort=ArtifactSort.CREATED_DESC, limit=1)
    assert "usage 250.0% is above scale_up_threshold 70%" in str(artifact.data)


def test_the_grafana_dashboard_queries_only_metrics_we_export() -> None:
    import json

    from kube_elevator.tasks.escalator.metrics import COUNTERS, GAUGES, HISTOGRAMS

    dashboard = json.loads((Path(__file__).resolve().parents[2] / "deployments" / "grafana"
                            / "kube-elevator-dashboard.json").read_text())
    exported = {f"escalator_{name}" for name in (*GAUGES, *COUNTERS, *HISTOGRAMS)}
    queried = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name in re.findall(r"escalator_[a-z_]+", target["expr"]):
                queried.add(name.removesuffix("_bucket"))
    assert queried and queried <= exported
