"""Issue 34 item 3, the rest: a stop that hangs on a Prefect server that does not answer still
ends. `elevator serve` (and `run --interval`) against a real `prefect server start`, which the
test freezes (SIGSTOP: connections open, nothing answers, as a remote server that hangs) before
it signals the command: it ends at its stop deadline, or at once on a second signal, releases
the Lease, says on one line that the server did not answer, and exits 1, without a traceback.
One server for the module, thawed (SIGCONT) after each test."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from benchmarks.event_latency import (
    FREE_HEALTH_PORT,
    BurstCluster,
    Child,
    PrefectServer,
    wait_until,
)
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.cli.stopping import RELEASE_SECONDS, SHUTDOWN_SECONDS
from tests.e2e.test_serve_abandoned_runs import SERVE_START_SECONDS, descendants
from tests.e2e.test_serve_schedules_and_signals import LEADER_LEASE, elevator, group_stopped

GRACE_SECONDS = 2.0  # --stop-grace: the deadline is this and SHUTDOWN_SECONDS
SLACK_SECONDS = 4.0  # a loaded 2-core machine: the interpreter's exit, the signal's delivery


@pytest.fixture(scope="module")
def server() -> Iterator[PrefectServer]:
    with PrefectServer() as running:
        yield running


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (`prefect server start` runs its server in a child)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry.name)] = int(stat[1])
    tree, grown = [pid], True
    while grown:
        children = [child for child, parent in parents.items()
                    if parent in tree and child not in tree]
        tree.extend(children)
        grown = bool(children)
    return tree


@contextlib.contextmanager
def frozen(server: PrefectServer) -> Iterator[None]:
    """The server's processes stopped (SIGSTOP) in the body, continued after it."""
    assert server._child is not None
    processes = process_tree(server._child.process.pid)
    for pid in processes:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in processes:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


# What each command's stop may be waiting for when it gives up: a call to the frozen server, the
# first of which depends on when the signal came (serve: its look for due runs, or after).
STAGES = {
    "serve": ("waiting for the run in flight", "pausing the schedules",
              "stopping Prefect's Runner",
              "exiting: Prefect's clients flushing their logs and events"),
    "run": ("waiting for the tick in flight",
            "exiting: Prefect's clients flushing their logs and events"),
}
SERVE = ("serve", "--poll", "0.5s")
RUN = ("run", "--leader-elect")


def serving(server: PrefectServer, fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path,
            *command: str) -> Child:
    """`command` (serve, or run --interval) on `server`, leading, after its first tick."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    child = Child(elevator(*command, "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                           str(cluster.kubeconfig), "--interval", "2s", *FREE_HEALTH_PORT),
                  server.env(**fake_aws.env()), tmp_path / "command.log", new_session=True)
    try:
        child.wait_for("batch: ", 240)
    except BaseException:
        child.stop()
        raise
    return child


def exit_code_within(child: Child, seconds: float) -> tuple[int, float]:
    started = time.monotonic()
    try:
        code = child.process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running {seconds:g} s on:\n"
                             f"{child.output()[-3000:]}") from None
    return code, time.monotonic() - started


def assert_stopped_without_the_server(child: Child, server: PrefectServer, command: str,
                                      why: str, fake_kube: FakeKubeApi) -> None:
    output = child.output()
    forced = [line for line in output.splitlines() if "did not answer" in line]
    doing = "|".join(re.escape(stage) for stage in STAGES[command])
    assert len(forced) == 1 and re.fullmatch(
        f"{command}: {re.escape(why)}: the Prefect server at {re.escape(server.api_url)} did "
        f"not answer; stopped without it \\(({doing})\\); the Lease is released; exit 1",
        forced[0]), output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert fake_kube.get(*LEADER_LEASE)["spec"]["holderIdentity"] == ""


def test_a_stop_that_hangs_on_the_server_ends_at_its_deadline(
        server: PrefectServer, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    deadline = GRACE_SECONDS + SHUTDOWN_SECONDS
    with group_stopped(serving(server, fake_kube, fake_aws, tmp_path, *SERVE, "--stop-grace",
                               f"{GRACE_SECONDS:g}s")) as serve, frozen(server):
        serve.process.send_signal(signal.SIGTERM)
        code, took = exit_code_within(serve, deadline + RELEASE_SECONDS + SLACK_SECONDS)
        print(f"\nSIGTERM with the server frozen: exit {code} in {took:.1f} s "
              f"(deadline {deadline:g} s)")
        assert code == 1, serve.output()[-3000:]
        assert took >= deadline - 0.5  # the gentle stop had its time
        assert f"serve: stopping within {deadline:g}s" in serve.output()
    assert "serve: stopped" not in serve.output()  # the gentle stop never finished
    assert_stopped_without_the_server(serve, server, "serve", f"the stop did not finish within "
                                                              f"{deadline:g}s", fake_kube)


@pytest.mark.parametrize(("command", "signum"), [
    pytest.param(SERVE, signal.SIGINT, id="serve-ctrl-c-twice-to-the-group"),
    pytest.param(RUN, signal.SIGTERM, id="run-interval-sigterm-twice"),
])
def test_a_second_signal_stops_at_once(command: tuple[str, ...], signum: signal.Signals,
                                       server: PrefectServer, fake_kube: FakeKubeApi,
                                       fake_aws: FakeAws, tmp_path: Path) -> None:
    """The default deadline, 25 s, which the second signal cuts short."""
    with group_stopped(serving(server, fake_kube, fake_aws, tmp_path, *command)) as child, \
            frozen(server):
        os.killpg(child.process.pid, signum)  # Ctrl-C, `kill -- -PGID`: to the group
        child.wait_for(f"{command[0]}: stopping within 25s", 30)
        os.killpg(child.process.pid, signum)
        code, took = exit_code_within(child, RELEASE_SECONDS + SLACK_SECONDS)
        print(f"\n{command[0]}: a second {signum.name} with the server frozen: exit {code} in "
              f"{took:.1f} s")
        assert code == 1, child.output()[-3000:]
    assert_stopped_without_the_server(child, server, command[0], f"a second {signum.name}",
                                      fake_kube)


def test_the_whole_stop_fits_in_the_pods_termination_grace_period() -> None:
    """The grace, the rest of the stop and the Lease's release at the deadline: inside the
    serve overlay's terminationGracePeriodSeconds (Kubernetes' default 30 s), with a second to
    spare for the probe's line and the exit."""
    import yaml

    from benchmarks.event_latency import ROOT
    from kube_elevator.flows.cli.stopping import PROBE_SECONDS, STOP_GRACE_SECONDS

    manifest = ROOT / "deployments" / "kubernetes" / "overlays" / "serve" / "serve.yaml"
    pod = next(document for document in yaml.safe_load_all(manifest.read_text())
               if document and document.get("kind") == "Deployment")["spec"]["template"]["spec"]
    whole = STOP_GRACE_SECONDS + SHUTDOWN_SECONDS + max(RELEASE_SECONDS, PROBE_SECONDS + 0.5)
    assert whole + 1 <= pod["terminationGracePeriodSeconds"] == 30


def test_a_forced_stop_leaves_no_run_process_behind(
        server: PrefectServer, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    """`--ticks runs`, a run's process in flight (its pod list held) when the stop is forced:
    killed with serve, not left to finish its tick after the signal, nor left frozen (the
    stop stops a run's process while it looks at the run, on the server that froze)."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    fake_kube.faults.add("delay", count=None, method="GET", path="/api/v1/pods",
                         delay_seconds=120)
    with group_stopped(Child(
            elevator("serve", "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                     str(cluster.kubeconfig), "--interval", "1s", "--poll", "0.5s",
                     "--ticks", "runs", "--stop-grace", f"{GRACE_SECONDS:g}s",
                     *FREE_HEALTH_PORT),
            server.env(**fake_aws.env()), tmp_path / "serve.log", new_session=True)) as serve:
        serve.wait_for("serving autoscale/autoscale", SERVE_START_SECONDS)
        runs = wait_until(lambda: [process for process in descendants(serve.process.pid)
                                   if "prefect.engine" in process.cmdline()],
                          120, "a run's process", interval=0.2)
        with frozen(server):
            serve.process.send_signal(signal.SIGTERM)
            code, _ = exit_code_within(serve, GRACE_SECONDS + SHUTDOWN_SECONDS
                                       + RELEASE_SECONDS + SLACK_SECONDS)
            assert code == 1, serve.output()[-3000:]
            _, alive = psutil.wait_procs(runs, timeout=5)
            assert not alive, [(process.pid, process.status()) for process in alive]
