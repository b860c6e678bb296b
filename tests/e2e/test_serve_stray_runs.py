"""Issue 40, finding 5, found by hand (a Prefect user's walkthrough, no PREFECT_API_URL): a serve
`kill -9`ed while it follows another replica's Lease (as after a killed leader, whose Lease
runs until it expires) leaves its warm-up dry run, a run of the `autoscale` flow outside the
deployments, Running on the server for good: nothing ended it, restart after restart.

Now the warm-up's run carries its serve's mark (`host:pid:start`, as the deployment's runs do),
and serve's sweep ends, Crashed, a run of the flow outside the deployments whose mark is a
process of this host that is gone; an unmarked one (anyone's own call of the flow) is left be.
The decision itself is tests/unit/test_abandoned_runs.py's `why_stray` cases.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from benchmarks.deadlines import scaled
from benchmarks.event_latency import API_POLL_SECONDS, BurstCluster, Child, PrefectServer, wait_until
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.e2e.test_serve_abandoned_runs import (
    SERVE_START_SECONDS,
    dead_process_mark,
    on,
    serve_command,
)
from tests.e2e.test_serve_schedules_and_signals import group_stopped


def running_outside_the_deployments(server: PrefectServer, owner: str | None) -> UUID:
    """A run of the `autoscale` flow of no deployment, Running, marked `owner` (None: no mark),
    as a serve killed during its warm-up leaves it."""
    from prefect.states import Running
    from prefect.utilities.engine import propose_state_sync

    from kube_elevator.flows.autoscale import autoscale

    with on(server) as client:
        run = client.create_flow_run(autoscale, parameters={"nodegroups": "x", "dry_run": True})
        assert propose_state_sync(client, Running(), flow_run_id=run.id).is_running()
        if owner is not None:
            client.update_flow_run(run.id, infrastructure_pid=owner)
    return run.id


def hold_the_leader_lease(kube: FakeKubeApi, holder: str) -> None:
    """Another replica leads, renewed just now, for an hour: the serve started follows."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    kube.create("leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "elevator-leader", "namespace": "kube-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3600, "acquireTime": now,
                 "renewTime": now, "leaseTransitions": 0}})


def warm_up_runs(server: PrefectServer, before: set[UUID]) -> list[Any]:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterDeploymentId

    with on(server) as client:
        return [run for run in client.read_flow_runs(flow_run_filter=FlowRunFilter(
            deployment_id=FlowRunFilterDeploymentId(is_null_=True)))
            if run.id not in before and run.parameters.get("dry_run") is True]


def test_a_killed_serves_run_outside_the_deployments_is_ended_and_a_warm_up_is_marked(
        fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path) -> None:
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    hold_the_leader_lease(fake_kube, "another-replica")
    with PrefectServer() as server:
        left = running_outside_the_deployments(server, dead_process_mark())
        users_own = running_outside_the_deployments(server, None)
        with group_stopped(Child(serve_command(cluster, "in-process"),
                                 server.env(**fake_aws.env()), tmp_path / "serve.log",
                                 new_session=True)) as serve:
            serve.wait_for("serving autoscale/autoscale", SERVE_START_SECONDS)
            serve.wait_for("warmed up for a takeover by a dry run", 120)
            with on(server) as client:
                state = wait_until(lambda: (s := client.read_flow_run(left).state)
                                   and s.is_crashed() and s, 30,
                                   "the left run outside the deployments to end Crashed", API_POLL_SECONDS)
                assert "abandoned: its process" in (state.message or ""), state
                # a run of the flow with no mark may be anyone's: left as it is
                own = client.read_flow_run(users_own).state
                assert own is not None and own.is_running(), own
            # The warm-up's own run carries this serve's mark, so a serve killed during it
            # leaves a run the next sweep ends (the case above).
            from kube_elevator.tasks.core.process_owner import mark_of

            warmed = warm_up_runs(server, {left, users_own})
            assert [run.infrastructure_pid for run in warmed] == [
                str(mark_of(serve.process.pid))], warmed
            assert warmed[0].state is not None and warmed[0].state.is_completed(), warmed
            assert "outside the deployments) ended Crashed" in serve.output()
            started = time.monotonic()
            os.killpg(serve.process.pid, signal.SIGTERM)
            assert serve.process.wait(timeout=scaled(60)) == 0, serve.output()[-3000:]
            print(f"\nserve stopped in {time.monotonic() - started:.1f} s")
