"""Prefect's blocks and a person in the loop (issue 35 items 3 and 4), on the session's Prefect
server and the fake cluster (fake API server and moto):

- a run of the `autoscale` deployment started by hand through the Prefect API with a
  prefect-kubernetes cluster block and a prefect-aws credentials block chosen, executed as a
  worker executes it (a process of its own, without the fake AWS's environment): it scales the
  ASG the blocks point at;
- `deployments/examples/approval_flow.py`: paused, then approved through the API, the ASG
  rises; refused, nothing changes and the run says why; unanswered, `on_timeout` holds."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any
from uuid import UUID

import pytest
import yaml

from benchmarks.deadlines import scaled
from benchmarks.event_latency import BurstCluster, wait_until
from kube_elevator.fakes.aws import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY, FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.locks import ROOT

APPROVAL_FLOW = ROOT / "deployments" / "examples" / "approval_flow.py"
# The blocks extra (prefect-aws, prefect-kubernetes) needs Prefect 3.8.4 or later: the venv of
# an older release in CI's Prefect matrix (make test-prefect) goes without it.
needs_blocks = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("prefect_aws", "prefect_kubernetes")),
    reason="the blocks extra is not installed (prefect-aws and prefect-kubernetes need "
           "Prefect >= 3.8.4)")


def load_approval_flow() -> ModuleType:
    spec = importlib.util.spec_from_file_location("approval_flow", APPROVAL_FLOW)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def approval() -> ModuleType:
    return load_approval_flow()


@pytest.fixture
def cluster(fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path) -> BurstCluster:
    """Two nodes of 1 CPU, and ten pending pods of half a CPU: the tick wants more nodes."""
    burst = BurstCluster(fake_kube, fake_aws, tmp_path)
    burst.burst(10)
    return burst


def final(run_id: UUID) -> Any:
    from prefect.client.orchestration import get_client

    def ended() -> Any:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(run_id)
        return run if run.state is not None and run.state.is_final() else None

    return wait_until(ended, 120, "the flow run's final state", interval=0.2)


# --- blocks -----------------------------------------------------------------------------------


@needs_blocks
def test_a_run_started_by_hand_with_blocks_chosen_scales_the_asg_they_name(
        prefect_server: None, cluster: BurstCluster, fake_aws: FakeAws, tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.deployments.runner import EntrypointType
    from prefect.settings import PREFECT_API_URL
    from prefect_aws import AwsCredentials
    from prefect_aws.client_parameters import AwsClientParameters
    from prefect_kubernetes.credentials import KubernetesClusterConfig

    from kube_elevator import autoscale, register_block_types

    assert register_block_types() == ["kubernetes-cluster-config", "kubernetes-credentials",
                                      "aws-credentials"]
    suffix = cluster.asg[-12:].lower().replace("_", "-")
    cluster_block_id = KubernetesClusterConfig(
        config=yaml.safe_load(cluster.kubeconfig.read_text()), context_name="fake",
    ).save(f"fake-cluster-{suffix}")
    AwsCredentials(aws_access_key_id=FAKE_ACCESS_KEY_ID,
                   aws_secret_access_key=FAKE_SECRET_ACCESS_KEY, region_name=fake_aws.region,
                   aws_client_parameters=AwsClientParameters(endpoint_url=fake_aws.endpoint_url),
                   ).save(f"moto-{suffix}")
    deployment_id = autoscale.to_deployment(
        name=f"blocks-{suffix}", entrypoint_type=EntrypointType.MODULE_PATH).apply()
    before = cluster.desired()
    with get_client(sync_client=True) as client:
        # The cluster as the form's block picker sends it, the credentials by name.
        run = client.create_flow_run_from_deployment(deployment_id, parameters={
            "nodegroups": str(cluster.nodegroups),
            "cluster_block": {"$ref": {"block_document_id": str(cluster_block_id)}},
            "aws_credentials_block": f"moto-{suffix}"})
    # As a worker runs it: a process of its own (`prefect flow-run execute`, public on every
    # release of the range; Runner.execute_flow_run is gone in 3.9), which knows the cluster
    # and the cloud only through the blocks (no kubeconfig parameter, no AWS environment).
    environment = {key: value for key, value in os.environ.items() if key not in fake_aws.env()}
    environment.update(KUBECONFIG="/nonexistent", PREFECT_API_URL=str(PREFECT_API_URL.value()))
    # In a folder of its own: a deployment without pull steps or a path has its runs copy the
    # process's working directory first (Prefect's flow code "from storage"), which from the
    # checkout is every venv in it (2.7 GB here: 60 s of CPU on 3.8.6, 24 s on 3.9.1). The
    # module-path entrypoint needs no file.
    subprocess.run([sys.executable, "-m", "prefect", "flow-run", "execute", str(run.id)],
                   env=environment, cwd=tmp_path, capture_output=True, timeout=scaled(600),
                   check=False)
    ended = final(run.id)
    assert ended.state.is_completed(), ended.state.message
    assert cluster.desired() > before
    assert "scaled-up" in ended.tags


@needs_blocks
def test_the_run_form_offers_the_saved_blocks_of_each_type() -> None:
    """The parameters' schema names the collections' block types as their own classes do, so
    the UI's form shows a block picker for each (and still takes a name)."""
    from prefect.utilities.callables import parameter_schema
    from prefect_aws import AwsCredentials
    from prefect_kubernetes.credentials import KubernetesClusterConfig

    from kube_elevator import autoscale

    schema = parameter_schema(autoscale).model_dump()
    for parameter, block_type in (("cluster_block", KubernetesClusterConfig),
                                  ("aws_credentials_block", AwsCredentials)):
        choices = schema["properties"][parameter]["anyOf"]
        (reference,) = [choice["$ref"] for choice in choices if "$ref" in choice]
        offered = schema["definitions"][reference.rsplit("/", 1)[1]]
        assert offered["block_type_slug"] == block_type.get_block_type_slug()
        assert {"type": "string"} in choices and {"type": "null"} in choices


@needs_blocks
def test_a_missing_cluster_block_fails_the_run_naming_it(prefect_server: None,
                                                         cluster: BurstCluster) -> None:
    from kube_elevator import autoscale

    state = autoscale(nodegroups=str(cluster.nodegroups), cluster_block="no-such-cluster",
                      return_state=True)
    assert state.is_failed()
    assert "cluster_block" in (state.message or "") and "no-such-cluster" in (state.message or "")


# --- a person in the loop ---------------------------------------------------------------------


def paused_run(call: Callable[[], Any], flow_name: str) -> tuple[UUID, dict[str, Any]]:
    """Start the flow in a thread, wait until the server has it Paused; (its id, its outcome
    once the thread ends: `outcome["state"]`)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.update(state=call()), daemon=True)
    with get_client(sync_client=True) as client:
        known = {run.id for run in client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])))}
    thread.start()

    def paused() -> UUID | None:
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
                flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
                    type=FlowRunFilterStateType(any_=[StateType.PAUSED]))))
        fresh = [run.id for run in runs if run.id not in known]
        if not thread.is_alive() and not fresh:
            raise AssertionError(f"the run ended without pausing: {outcome}")
        return fresh[0] if fresh else None

    run_id = wait_until(paused, 120, "the approval flow's pause", interval=0.2)
    outcome["thread"] = thread
    return run_id, outcome


def ended(outcome: dict[str, Any]) -> Any:
    outcome["thread"].join(120)
    assert not outcome["thread"].is_alive(), "the resumed run did not end"
    return outcome["state"]


def run_approval(approval: ModuleType, cluster: BurstCluster, **parameters: Any) -> Any:
    return approval.approved_autoscale(
        nodegroups=str(cluster.nodegroups), kubeconfig=str(cluster.kubeconfig),
        approve_above_nodes=3, poll_seconds=1, return_state=True, **parameters)


def test_paused_then_approved_through_the_api_the_asg_rises(
        prefect_server: None, approval: ModuleType, cluster: BurstCluster) -> None:
    from prefect.flow_runs import resume_flow_run

    before = cluster.desired()
    run_id, outcome = paused_run(lambda: run_approval(approval, cluster), "approved-autoscale")
    assert cluster.desired() == before  # nothing acted while it waits
    resume_flow_run(run_id, run_input={"approve": True, "reason": "expected burst"})
    state = ended(outcome)
    assert state.is_completed(), state.message
    assert cluster.desired() > 3 >= before
    assert (state.message or "").startswith("approved: batch: acted")


def test_refused_nothing_changes_and_the_run_says_why(
        prefect_server: None, approval: ModuleType, cluster: BurstCluster,
        fake_kube: FakeKubeApi) -> None:
    from prefect.flow_runs import resume_flow_run

    before = cluster.desired()
    run_id, outcome = paused_run(lambda: run_approval(approval, cluster), "approved-autoscale")
    resume_flow_run(run_id, run_input={"approve": False, "reason": "budget freeze"})
    state = ended(outcome)
    assert state.is_completed()
    message = state.message or ""
    assert message.startswith("scale-up refused (budget freeze): batch: ASG 2 -> "), message
    assert message.endswith("nothing changed")
    assert cluster.desired() == before
    assert not [r for r in fake_kube.requests if r.verb in ("create", "update", "patch")
                and r.resource == "leases"], "a refused tick claimed its Lease"


@pytest.mark.parametrize(("on_timeout", "rises"), [("refuse", False), ("approve", True)])
def test_unanswered_the_on_timeout_policy_holds(
        prefect_server: None, approval: ModuleType, cluster: BurstCluster, on_timeout: str,
        rises: bool) -> None:
    before = cluster.desired()
    state = run_approval(approval, cluster, timeout_seconds=1, on_timeout=on_timeout)
    assert state.is_completed(), state.message
    assert (cluster.desired() > before) is rises
    if not rises:
        assert "(no answer within 1 s: refuse)" in (state.message or "")


def test_a_scale_up_under_the_threshold_needs_no_approval(
        prefect_server: None, approval: ModuleType, cluster: BurstCluster) -> None:
    before = cluster.desired()
    state = approval.approved_autoscale(
        nodegroups=str(cluster.nodegroups), kubeconfig=str(cluster.kubeconfig),
        approve_above_nodes=100, return_state=True)
    assert state.is_completed(), state.message
    assert cluster.desired() > before
