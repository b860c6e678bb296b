"""A tick's outcome comes from the process that computed it, never read back from the Prefect
server (issue 27 §4, DESIGN.md §7); the server's copy says what it did, for the UI (§5).

Two `elevator run --once` started together against one busy Prefect server: one printed
`error: the tick failed: MissingResult: State data is missing...` and exited 1 although its
tick had acted. Under load the answer to a state transition can be lost after the server
applied it; Prefect's client sends it again, the server rejects the duplicate and answers with
its own copy of the state, and with `persist_result=False` that copy holds no result. The
proxy here loses that answer on purpose, every time, instead of waiting for a loaded machine
to lose it one round in twenty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from prefect import get_client
from prefect.client.schemas.filters import FlowFilter, FlowFilterName
from prefect.settings import PREFECT_API_URL

from benchmarks.deadlines import scaled
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.fakes.prefect_faults import LostAnswerProxy
from kube_elevator.flows.autoscale import autoscale
from kube_elevator.flows.run_state import RunOutcome, run_here
from kube_elevator.tasks.core.errors import InputError
from tests.builders import group_dict
from tests.e2e.test_autoscale_flow import T0, Cluster, at

pytestmark = pytest.mark.usefixtures("prefect_server")

MiB = 2**20


def batch_group(aws: FakeAws, kube: FakeKubeApi, directory: Path, pending: int) -> Path:
    """One group of two nodes, `pending` pods of half a node waiting: the tick scales up."""
    asg = f"outcome-{directory.name[-12:]}"
    aws.create_asg(asg, 1, 20, 2)
    for index, instance in enumerate(aws.instances(asg)):
        kube.create("nodes", node_for_instance(instance, {"customer": "batch"}, 1000,
                                               4000 * MiB, 1_800_000_000 + index))
    for index in range(pending):
        kube.create("pods", {"metadata": {"name": f"job-{index}", "namespace": "jobs"},
                             "spec": {"nodeSelector": {"customer": "batch"}, "containers": [
                                 {"name": "c", "image": "pause", "resources": {"requests": {
                                     "cpu": "500m", "memory": "100Mi"}}}]},
                             "status": {"phase": "Pending"}}, namespace="jobs")
    nodegroups = directory / "nodegroups.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": [group_dict(
        cloud_provider_group_name=asg)]}))
    return nodegroups


def test_run_once_reports_its_tick_when_the_completed_answer_is_lost(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path) -> None:
    nodegroups = batch_group(fake_aws, fake_kube, tmp_path, pending=10)
    with LostAnswerProxy(str(PREFECT_API_URL.value())) as proxy:
        env = {**os.environ, **fake_aws.env(), "PREFECT_API_URL": proxy.api_url}
        tick = subprocess.run(
            [sys.executable, "-m", "kube_elevator.flows.cli", "run", "--nodegroups", str(nodegroups),
             "--kubeconfig", str(kubeconfig), "--once", "--format", "json"],
            env=env, capture_output=True, text=True, timeout=scaled(300), check=False)
    assert proxy.lost == 1, "the Completed transition's answer was never lost"
    assert "MissingResult" not in tick.stderr
    assert tick.returncode == 0, tick.stderr[-3000:]
    (result,) = json.loads(tick.stdout.strip().splitlines()[-1])
    assert (result["status"], result["delta"], result["done"]["asg_desired_set"]) == \
        ("acted", 6, 8)
    # The server applied the transition once, before the answer was lost.
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(
            any_=["autoscale"])))
    [run] = [run for run in runs if run.parameters.get("nodegroups") == str(nodegroups)]
    assert run.state is not None and run.state.is_completed()


def read_back(flow_run_id: Any) -> tuple[str, list[str]]:
    """The run's state message and tags as the UI reads them (`GET /flow_runs/<id>`)."""
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
    assert run.state is not None
    return run.state.message or "", sorted(run.tags)


def test_each_run_says_what_it_did_in_its_state_message_and_tags(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path) -> None:
    cluster = Cluster(fake_aws, fake_kube, kubeconfig, tmp_path, 2)
    for index in range(10):
        cluster.pod(f"job-{index}")

    def tick(now: float, nodegroups: Path = cluster.config) -> RunOutcome:
        return run_here(lambda: autoscale(nodegroups=str(nodegroups), now=at(now),
                                          kubeconfig=str(kubeconfig), return_state=True))

    scaled = tick(T0)
    assert scaled.results()[0]["delta"] == 6
    assert read_back(scaled.state.state_details.flow_run_id) == (
        "batch ASG +6 (2 -> 8): usage 250.0% is above scale_up_threshold 70%: scale up by 6",
        ["group:batch", "scaled-up"])

    held = tick(T0 + 30)  # the scale lock holds for the 2-minute cool-down
    assert read_back(held.state.state_details.flow_run_id) == (
        "nothing: batch 250% (locked)", ["nothing"])

    broken = tmp_path / "broken.yaml"
    broken.write_text("node_groups: [{name: x}]\n")
    failed = tick(T0 + 60, broken)
    with pytest.raises(InputError):
        failed.results()
    message, tags = read_back(failed.state.state_details.flow_run_id)
    assert failed.state.is_failed() and tags == ["failed"] and "node_groups[0]" in message
