"""A live tick in a process of its own, killed (`kill -9`) once it reaches a call: what a crashed
worker leaves behind, for the next tick to find (issue 14's claims, issue 30's fleets)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from benchmarks.deadlines import scaled
from kube_elevator.fakes.faults import Fault, FaultInjector

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """\
import sys
import boto3
from kube_elevator.flows.autoscale import live_tick
from tests.e2e.test_fault_ticks import run_retrying
from kube_elevator.tasks.steps.node_groups import Adapters
from kube_elevator.tasks.adapters.cloud import AsgClient
from kube_elevator.tasks.node_group_file import load_node_groups
from kube_elevator.tasks.adapters.kube import KubeClient
kubeconfig, config, endpoint, now = sys.argv[1:]
session = boto3.Session(region_name='us-east-1', aws_access_key_id='testing',
                        aws_secret_access_key='testing')
cloud = AsgClient(session.client('autoscaling', endpoint_url=endpoint),
                  session.client('ec2', endpoint_url=endpoint))
live_tick(run_retrying, Adapters(KubeClient.from_config(kubeconfig), cloud),
          load_node_groups(config).node_groups, float(now))
"""


def kill_tick_at(faults: FaultInjector, hang: Fault, scratch: Path, kubeconfig: Path,
                 config: Path, aws_endpoint: str, now: float) -> None:
    """Run one tick of `config` at `now` against `aws_endpoint`; kill it once `hang` (a rule
    of `faults` that holds the call the tick should die in) has fired."""
    script = scratch / "tick.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ELEVATOR_READ_TIMEOUT_SECONDS": "600"}
    process = subprocess.Popen([sys.executable, str(script), str(kubeconfig), str(config),
                                aws_endpoint, str(now)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        assert faults.wait_fired(hang, timeout=scaled(120)), process.communicate(timeout=scaled(5))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=scaled(30))
    finally:
        if process.poll() is None:
            process.kill()
