"""A stranger's project (issue 35 item 5): a Prefect project of its own, laid out as Prefect's
examples are, with its own `flows/` and `tasks/` packages, installs the wheel with the runtime
lock into an empty venv and runs the example approval flow (`deployments/examples/approval_flow.py`,
copied into its `flows/`) against the fake cluster, on the session's Prefect server: its own
`flows.tick` and `tasks` still import, and kube-elevator's names come from `kube_elevator`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from benchmarks.deadlines import scaled
from benchmarks.event_latency import BurstCluster
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.locks import ROOT

# The stranger's own modules, named as ours were before they moved under kube_elevator.
THEIR_TICK = '"""Their own tick: nothing to do with kube-elevator."""\nWHOSE = "theirs"\n'
THEIR_TASKS = '"""Their own tasks, as Celery and invoke projects name them."""\nWHOSE = "theirs"\n'
# Run from the project's folder: the approval flow, the scale-up above its threshold and
# unanswered within its 1 s timeout, whose outcome is approve.
RUN = """
import json, sys
import flows.tick, tasks, kube_elevator
from flows.approval_flow import approved_autoscale

nodegroups, kubeconfig = sys.argv[1:3]
state = approved_autoscale(nodegroups=nodegroups, kubeconfig=kubeconfig, approve_above_nodes=2,
                           timeout_seconds=1, on_timeout="approve", poll_seconds=1,
                           return_state=True)
print(json.dumps({"their_tick": flows.tick.WHOSE, "their_tasks": tasks.WHOSE,
                  "kube_elevator": kube_elevator.__file__,
                  "state": [state.type.value, state.message]}))
"""


def project(root: Path) -> Path:
    """Their project: flows/ (with their tick and the approval flow) and tasks/."""
    (root / "flows").mkdir(parents=True)
    (root / "tasks").mkdir()
    (root / "flows" / "__init__.py").write_text("")
    (root / "flows" / "tick.py").write_text(THEIR_TICK)
    (root / "tasks" / "__init__.py").write_text(THEIR_TASKS)
    shutil.copyfile(ROOT / "deployments" / "examples" / "approval_flow.py",
                    root / "flows" / "approval_flow.py")
    return root


def test_the_approval_flow_runs_in_a_strangers_project_beside_its_own_flows_and_tasks(
        stranger_venv: Path, prefect_server: None, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    import json

    from prefect.settings import PREFECT_API_URL

    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    cluster.burst(10)
    before = cluster.desired()
    root = project(tmp_path / "their-project")
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("PREFECT_", "PYTHON", "VIRTUAL_ENV"))}
    environment.update(fake_aws.env(), HOME=str(tmp_path), PREFECT_HOME=str(tmp_path / "prefect"),
                       PREFECT_API_URL=str(PREFECT_API_URL.value()),
                       PREFECT_SERVER_ANALYTICS_ENABLED="false")
    done = subprocess.run([str(stranger_venv / "bin" / "python"), "-c", RUN,
                           str(cluster.nodegroups), str(cluster.kubeconfig)],
                          cwd=root, capture_output=True, text=True, timeout=scaled(600), check=False,
                          env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["their_tick"] == outcome["their_tasks"] == "theirs"
    assert outcome["kube_elevator"].startswith(str(stranger_venv))
    # Paused above the threshold, unanswered: on_timeout=approve let the tick act.
    assert outcome["state"][0] == "COMPLETED", outcome
    assert outcome["state"][1].startswith("approved: batch: acted"), outcome
    assert cluster.desired() > before
