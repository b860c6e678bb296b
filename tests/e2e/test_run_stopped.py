"""`run --interval` says it stopped (issue 42 item 8), as `serve` does: a last line
`run: stopped` after SIGTERM, the command exiting 0."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from benchmarks.event_latency import FREE_HEALTH_PORT, BurstCluster, Child, fetch, health_url
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi


def test_run_interval_ends_saying_run_stopped(prefect_server: None, fake_kube: FakeKubeApi,
                                             fake_aws: FakeAws, tmp_path: Path) -> None:
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, **fake_aws.env(), "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    run = Child([sys.executable, "-m", "kube_elevator.flows.cli", "run", "--nodegroups",
                 str(cluster.nodegroups), "--kubeconfig", str(cluster.kubeconfig),
                 "--no-leader-elect", "--interval", "1h", *FREE_HEALTH_PORT], env,
                tmp_path / "run.log")
    try:
        url = health_url(run)
        assert fetch(f"{url}/ready")[0] == 200
        run.wait_for("batch:", 300)  # the first tick's line
    finally:
        code = run.stop()
    assert code == 0, run.output()[-3000:]
    assert run.output().rstrip().splitlines()[-1] == "run: stopped", run.output()[-3000:]
