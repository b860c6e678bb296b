"""Issue 40, finding 5, with real processes: a run of the `autoscale` deployment that a killed
serve left Pending holds the deployment's one concurrency slot (cancel-new: every later run is
cancelled). `elevator serve` ends it Crashed at its start and while it serves, and the next
tick completes within an interval; its health check fails when ticks are due and only
cancelled runs happen; and a signal to its process group in `--ticks runs` leaves no child
and claims no run after it.

The run is left as a killed serve leaves it: a run of the deployment, claimed (Pending, which
takes the slot) and marked with the process that ran it (`host:pid:start`), a process that is
gone. The decision itself, run by run, is tests/unit/test_abandoned_runs.py's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psutil
import pytest

from benchmarks.deadlines import scaled
from benchmarks.event_latency import (
    API_POLL_SECONDS,
    FREE_HEALTH_PORT,
    ROOT,
    BurstCluster,
    Child,
    PrefectServer,
    fetch,
    health_url,
    wait_until,
)
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.abandoned_runs import LATE_SLACK
from tests.e2e.test_serve_schedules_and_signals import (
    elevator,
    group_stopped,
    postgres_url,  # noqa: F401 (a fixture, used by name)
    processes_of,
    temporary_server_env,
)

INTERVAL_SECONDS = 5.0
# A tick's run on a busy 2-CPU machine: `--ticks runs` starts a process for it (imports, the
# flow engine), which took up to 40 s here under load 6.
RUN_START_SLACK_SECONDS = 60.0
SERVE_START_SECONDS = 240.0  # a temporary server's first start under load, and the cache
# The health tests' --max-inactivity: over the interval (and a poll), so a tick was due and
# none finished when /health-check fails; no longer, as the tests wait it out each time.
HEALTH_INACTIVITY = f"{INTERVAL_SECONDS + 3:g}s"


def dead_process_mark() -> str:
    """The mark (`host:pid:start`) of a process that has exited: a killed serve's."""
    from kube_elevator.tasks.core.process_owner import mark_of

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    mark = mark_of(child.pid)
    child.kill()
    child.wait()
    return str(mark)


def leave_a_pending_run(nodegroups: str, kubeconfig: str, interval: float,
                        owner: str, claim_seconds: float = 60) -> dict[str, str]:
    """As a serve killed while it ran a tick leaves it: the `autoscale` deployment applied (as
    `elevator serve` applies it) and one run of it claimed (Pending: the slot is taken) and
    marked `owner`. The run's and the deployment's ids. On PREFECT_API_URL's server, or
    PREFECT_HOME's temporary one."""
    from prefect.client.orchestration import get_client
    from prefect.states import Pending
    from prefect.utilities.engine import propose_state_sync

    from kube_elevator.flows.cli.serve import served_deployments
    from kube_elevator.tasks.adapters.prefect_server import use_local_server

    use_local_server("own", schedules=True)  # none when PREFECT_API_URL names one
    scheduled, _ = served_deployments(Path(nodegroups), interval, Path(kubeconfig))
    deployment_id = scheduled.apply()
    with get_client(sync_client=True) as client:
        def claimed() -> Any:
            run = client.create_flow_run_from_deployment(deployment_id)
            state = propose_state_sync(client, Pending(), flow_run_id=run.id)
            return run if state.is_pending() else None  # a scheduled run of it held the slot

        run = wait_until(claimed, claim_seconds, "a claim of the autoscale deployment's slot",
                         0.5)
        client.update_flow_run(run.id, infrastructure_pid=owner)
        pending = client.read_flow_run(run.id)
        assert pending.state is not None and pending.state.is_pending()
    return {"run": str(run.id), "deployment": str(deployment_id)}


LEAVE_IN_A_PROCESS = ("import json, sys\n"
                      "from tests.e2e.test_serve_abandoned_runs import leave_a_pending_run\n"
                      "print(json.dumps(leave_a_pending_run(*sys.argv[1:3], float(sys.argv[3]),"
                      " sys.argv[4])))\n")


@contextlib.contextmanager
def on(server: PrefectServer) -> Iterator[Any]:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: server.api_url}), \
            get_client(sync_client=True) as client:
        yield client


def serve_deployment_ids(server: PrefectServer) -> list[UUID]:
    """The ids of serve's two deployments, `autoscale/autoscale` first, then `autoscale/plan`."""
    with on(server) as client:
        return [client.read_deployment_by_name(f"autoscale/{name}").id
                for name in ("autoscale", "plan")]


def runs_of(server: PrefectServer, deployment_id: UUID) -> list[Any]:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    with on(server) as client:
        return list(client.read_flow_runs(deployment_filter=DeploymentFilter(
            id=DeploymentFilterId(any_=[deployment_id]))))


def state_of(server: PrefectServer, run_id: UUID) -> Any:
    with on(server) as client:
        return client.read_flow_run(run_id).state


def serve_command(cluster: BurstCluster, ticks: str, *options: str) -> list[str]:
    return elevator("serve", "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                    str(cluster.kubeconfig), "--interval", f"{INTERVAL_SECONDS:g}s",
                    "--poll", "1s", "--ticks", ticks, *FREE_HEALTH_PORT, *options)


def completed_after(server: PrefectServer, deployment_id: UUID, after: datetime) -> Any:
    return next((run for run in runs_of(server, deployment_id)
                 if run.state_type is not None and run.state_type.value == "COMPLETED"
                 and run.start_time is not None and run.start_time >= after), None)


def crashed_saying_why(state: Any) -> bool:
    return state is not None and state.is_crashed() and "abandoned: its process" in (
        state.message or "")


def crashed_state(server: PrefectServer, run_id: UUID) -> Any:
    """The run's state once serve has ended it Crashed saying why; None before."""
    state = state_of(server, run_id)
    return state if crashed_saying_why(state) else None


# --- the restart tests' setup (here and tests/e2e/test_serve_first_tick.py) --------------------


def left_on(server: PrefectServer, cluster: BurstCluster, owner: str,
            interval: float = INTERVAL_SECONDS, claim_seconds: float = 60) -> tuple[UUID, UUID]:
    """`leave_a_pending_run` on `server`: the left run's and the deployment's ids."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: server.api_url}):
        left = leave_a_pending_run(str(cluster.nodegroups), str(cluster.kubeconfig), interval,
                                   owner, claim_seconds)
    return UUID(left["run"]), UUID(left["deployment"])


def left_in_a_process(cluster: BurstCluster, env: dict[str, str], owner: str) -> dict[str, str]:
    """`leave_a_pending_run` in a process of its own, on `env`'s server (none: PREFECT_HOME's
    temporary one, as serve will find it): the left run's and the deployment's ids."""
    left = subprocess.run(
        [sys.executable, "-c", LEAVE_IN_A_PROCESS, str(cluster.nodegroups),
         str(cluster.kubeconfig), str(INTERVAL_SECONDS), owner],
        env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=scaled(SERVE_START_SECONDS), check=False)
    assert left.returncode == 0, left.stdout + left.stderr
    return dict(json.loads(left.stdout.strip().splitlines()[-1]))


def restarted_serve(cluster: BurstCluster, ticks: str, env: dict[str, str], log: Path,
                    *options: str) -> contextlib.AbstractContextManager[Child]:
    """`elevator serve` started again (a session of its own), its group stopped at the end."""
    return group_stopped(Child(serve_command(cluster, ticks, *options), env, log,
                               new_session=True))


# --- at the next start -------------------------------------------------------------------------


# On a shared SQLite and a PostgreSQL server, both --ticks modes: the left run ends Crashed at
# the start, serve says why, and the next tick completes within an interval;
# tests/e2e/test_serve_first_tick.py's test_the_first_tick_after_a_restart_..., which times
# the same setup (one server and one serve for both checks, not two).


def test_on_the_temporary_server_the_left_run_is_crashed_at_the_next_start(
        fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path) -> None:
    """No PREFECT_API_URL: the run is in PREFECT_HOME's database, as the killed serve left it;
    the next serve's temporary server has it, and ticks again."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    env = temporary_server_env(tmp_path / "prefect-home", **fake_aws.env())
    assert left_in_a_process(cluster, env, dead_process_mark())["run"]
    with restarted_serve(cluster, "in-process", env, tmp_path / "serve.log") as serve:
        serve.wait_for("ended Crashed: its process", SERVE_START_SECONDS)
        crashed_at = time.monotonic()
        serve.wait_for("tick (leading): batch: ", INTERVAL_SECONDS + RUN_START_SLACK_SECONDS)
        print(f"\ntemporary server: the next tick {time.monotonic() - crashed_at:.1f} s "
              "after the left run ended Crashed")
        os.killpg(serve.process.pid, signal.SIGTERM)
        assert serve.process.wait(timeout=scaled(60)) == 0, serve.output()[-3000:]
    # No run cancelled by the deployment's limit (the left run's slot was freed). Runs the
    # left serve had scheduled that came due before this one started (a busy machine's slow
    # start) are ended Cancelled by the sweep, saying so: a missed tick is not made up.
    cancelled = [line for line in serve.output().lower().splitlines() if "cancelled" in line
                 and "past their time ended cancelled (abandoned" not in line]
    assert not cancelled, serve.output()[-3000:]


def leave_a_late_run(nodegroups: str, kubeconfig: str, interval: float,
                     late_seconds: float) -> dict[str, str]:
    """As a serve that stopped leaves the runs made for it: the `autoscale` deployment applied
    and one run of it still Scheduled, `late_seconds` past its time (a burst's, as in-process
    mode makes them). The run's and the deployment's ids, on PREFECT_API_URL's server."""
    from prefect.client.orchestration import get_client
    from prefect.states import Scheduled

    from kube_elevator.flows.cli.serve import served_deployments
    from kube_elevator.flows.deployment_runs import BURST_TAG

    scheduled, _ = served_deployments(Path(nodegroups), interval, Path(kubeconfig))
    deployment_id = scheduled.apply()
    with get_client(sync_client=True) as client:
        client.pause_deployment(deployment_id)  # as a stopped serve leaves it
        run = client.create_flow_run_from_deployment(
            deployment_id, state=Scheduled(scheduled_time=datetime.now(UTC) - timedelta(
                seconds=late_seconds)), tags=[BURST_TAG])
    return {"run": str(run.id), "deployment": str(deployment_id)}


def test_a_run_left_scheduled_past_its_time_is_ended_at_the_next_start(
        fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path) -> None:
    """A run left Scheduled ten minutes late: the next serve ends it Cancelled saying why
    (before: in-process ran it as a tick, the Runner claimed it with every other late run
    and the limit cancelled them, saying only that the limit was reached), and the next tick
    completes within an interval. Each --ticks mode in turn, a run left late for each, on the
    one server."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    with PrefectServer() as server:
        for ticks in ("in-process", "runs"):
            late_run_ended_at_the_start(server, cluster, ticks, server.env(**fake_aws.env()),
                                        tmp_path / f"serve-{ticks}.log")


def late_run_ended_at_the_start(server: PrefectServer, cluster: BurstCluster, ticks: str,
                                env: dict[str, str], log: Path) -> None:
    """A run left late on `server`; a serve started: the run ends Cancelled saying why, a tick
    completes after; then SIGTERM, exit 0."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: server.api_url}):
        left = leave_a_late_run(str(cluster.nodegroups), str(cluster.kubeconfig),
                                INTERVAL_SECONDS, late_seconds=600)
    run_id, deployment_id = UUID(left["run"]), UUID(left["deployment"])
    started = datetime.now(UTC)
    with group_stopped(Child(serve_command(cluster, ticks), env, log,
                             new_session=True)) as serve:
        serve.wait_for("serving autoscale/autoscale", SERVE_START_SECONDS)
        state = state_of(server, run_id)
        assert state.is_cancelled(), (ticks, state, serve.output()[-3000:])
        assert (state.message or "").startswith("abandoned: Scheduled for "), state.message
        late = re.search(r" (\d+) s late \(over (\d+) s\)", state.message)
        assert late is not None and int(late.group(1)) >= 600, state.message
        assert int(late.group(2)) == INTERVAL_SECONDS + LATE_SLACK.total_seconds()
        ended_at = time.monotonic()
        done = wait_until(lambda: completed_after(server, deployment_id, started),
                          INTERVAL_SECONDS + RUN_START_SLACK_SECONDS,
                          "a tick to complete after the late run ended", API_POLL_SECONDS)
        print(f"\n--ticks {ticks}: the next tick completed "
              f"{time.monotonic() - ended_at:.1f} s after the late run ended Cancelled "
              f"(--interval {INTERVAL_SECONDS:g}s)")
        assert done.id != run_id
        with on(server) as client:  # it never ran: Scheduled (and Late), then Cancelled
            *before, last = [s.type.value for s in client.read_flow_run_states(run_id)]
        assert set(before) == {"SCHEDULED"} and last == "CANCELLED", (ticks, before, last)
        os.killpg(serve.process.pid, signal.SIGTERM)
        assert serve.process.wait(timeout=scaled(60)) == 0, serve.output()[-3000:]


@pytest.mark.parametrize("ticks", ["in-process", "runs"])
def test_a_serve_killed_mid_tick_on_the_temporary_server_ticks_again_after_a_restart(
        ticks: str, fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path) -> None:
    """The issue's walkthrough: no PREFECT_API_URL, `kill -9` of serve (and of the run's
    process, as a container's end kills all of them) while a tick runs; the same command
    again: the run it left ends Crashed at its start, it takes the killed one's Lease at once
    and it ticks again."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    env = temporary_server_env(tmp_path / "prefect-home", **fake_aws.env())
    with group_stopped(Child(serve_command(cluster, ticks), env, tmp_path / "killed.log",
                             new_session=True)) as killed:
        killed.wait_for("Beginning flow run", SERVE_START_SECONDS)
        os.killpg(killed.process.pid, signal.SIGKILL)
        killed.process.wait(timeout=scaled(30))
    output = ticks_again_after_a_restart(
        cluster, ticks, env, tmp_path / "again.log",
        "tick (leading): batch: " if ticks == "in-process" else "Finished in state Completed",
        f"temporary server, --ticks {ticks}")
    if ticks == "in-process":  # the mode that elects a leader
        # the killed serve's Lease was taken at once (its holder, a process here, has ended),
        # not after its 15 s lease ran out
        assert "has ended: taking the Lease" in output, output[-3000:]


def ticks_again_after_a_restart(cluster: BurstCluster, ticks: str, env: dict[str, str],
                                log: Path, tick_line: str, what: str) -> str:
    """The killed serve's command again, on its database: the run it left ends Crashed at the
    start (its process gone), `tick_line` comes within an interval and a run's start, and
    SIGTERM exits 0. Its output."""
    with group_stopped(Child(serve_command(cluster, ticks), env, log,
                             new_session=True)) as again:
        again.wait_for("serving autoscale/autoscale", SERVE_START_SECONDS)
        serving_at = time.monotonic()
        assert "ended Crashed: its process" in again.output(), again.output()[-3000:]
        again.wait_for(tick_line, INTERVAL_SECONDS + RUN_START_SLACK_SECONDS)
        print(f"\n{what}: a tick completed {time.monotonic() - serving_at:.1f} s after the "
              f"restarted serve served (--interval {INTERVAL_SECONDS:g}s; load "
              f"{os.getloadavg()[0]:.1f})")
        os.killpg(again.process.pid, signal.SIGTERM)
        assert again.process.wait(timeout=scaled(60)) == 0, again.output()[-3000:]
        return again.output()


# --- while serving ------------------------------------------------------------------------------


def test_a_pending_run_left_while_serving_is_crashed_and_ticks_go_on(
        fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path) -> None:
    """Another serve on this host, sharing the server, was killed holding the slot while this
    one served: this one ends the run at its next poll, and its next tick completes within
    an interval; its health check, counting completed ticks, stays 200. Each --ticks mode in
    turn, a serve of its own, on the one server."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    # Ticks far enough apart that the slot is free between them, for the test to take it.
    interval = 4 * INTERVAL_SECONDS
    with PrefectServer() as server:
        for ticks in ("in-process", "runs"):
            with group_stopped(Child(
                    serve_command(cluster, ticks, "--max-inactivity", "5m", "--interval",
                                  f"{interval:g}s"),
                    server.env(**fake_aws.env()), tmp_path / f"serve-{ticks}.log",
                    new_session=True)) as serve:
                left_while_serving(server, cluster, serve, ticks, interval)


def left_while_serving(server: PrefectServer, cluster: BurstCluster, serve: Child, ticks: str,
                       interval: float) -> None:
    """A run left Pending while `serve` serves: it ends Crashed, a tick completes after, and
    `serve` stays healthy and is ready; then SIGTERM, exit 0."""
    serve.wait_for("serving autoscale/autoscale", SERVE_START_SECONDS)
    run_id, deployment_id = left_on(server, cluster, dead_process_mark(), interval,
                                    claim_seconds=180)
    ended = wait_until(lambda: crashed_state(server, run_id), 30, "the left run to end Crashed",
                       API_POLL_SECONDS)
    crashed_at = time.monotonic()
    # From the state's own time, not when a poll saw it: a tick started in between counts.
    wait_until(lambda: completed_after(server, deployment_id, ended.timestamp),
               interval + RUN_START_SLACK_SECONDS,
               "a tick to complete after the left run ended", API_POLL_SECONDS)
    print(f"\n--ticks {ticks}: the next tick completed "
          f"{time.monotonic() - crashed_at:.1f} s after the left run ended Crashed")
    assert fetch(f"{health_url(serve)}/health-check")[0] == 200, ticks
    # Ready: ticks complete (--ticks runs learns of it at its next pass).
    wait_until(lambda: fetch(f"{health_url(serve)}/ready") == (200, "ready\n"), 30,
               "/ready once a tick completed")
    os.killpg(serve.process.pid, signal.SIGTERM)
    assert serve.process.wait(timeout=scaled(60)) == 0, serve.output()[-3000:]


# --- health: due ticks that never complete -----------------------------------------------------


def test_health_fails_when_ticks_are_due_but_every_run_is_cancelled(
        fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path) -> None:
    """The slot is held by a run of a live process (this test's: not abandoned), so every run
    of the schedule is cancelled by the limit: no tick, and `/health-check` fails once
    --max-inactivity has passed, saying so. (Before: 200 `serving` all along.) Each --ticks
    mode in turn, a serve of its own, on the one server and the one left run."""
    from kube_elevator.tasks.core.process_owner import mark_of

    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    with PrefectServer() as server:
        run_id, deployment_id = left_on(server, cluster, str(mark_of()))
        for ticks in ("runs", "in-process"):
            begun = datetime.now(UTC)
            with restarted_serve(cluster, ticks, server.env(**fake_aws.env()),
                                 tmp_path / f"serve-{ticks}.log", "--max-inactivity",
                                 HEALTH_INACTIVITY) as serve:
                every_run_cancelled(server, deployment_id, serve, begun, ticks)
                assert state_of(server, run_id).is_pending(), ticks  # its owner lives
                os.killpg(serve.process.pid, signal.SIGTERM)
                assert serve.process.wait(timeout=scaled(60)) == 0, serve.output()[-3000:]


def every_run_cancelled(server: PrefectServer, deployment_id: UUID, serve: Child,
                        begun: datetime, ticks: str) -> None:
    """Once `serve` (started at `begun`) serves: a run of it cancelled by the limit, never
    ready, and `/health-check` fails, saying why."""
    url = f"{health_url(serve)}/health-check"
    serve.wait_for("serving autoscale/autoscale", SERVE_START_SECONDS)
    cancelled = wait_until(lambda: [
        run for run in runs_of(server, deployment_id)
        if run.state is not None and run.state.type.value == "CANCELLED"
        and run.state.timestamp > begun], 90,  # not a run an earlier serve's limit cancelled
        "a run cancelled by the concurrency limit", API_POLL_SECONDS)
    # No tick can run: not ready, from the start (before: ready once the cache had
    # synced, or at once with --ticks runs).
    ready = f"{health_url(serve)}/ready"
    not_ready = (503, "not ready: no tick has completed since the start\n")
    assert fetch(ready) == not_ready, ticks
    _, body = wait_until(lambda: (answer := fetch(url))[0] == 500 and answer, 60,
                         "/health-check to fail")
    assert "no tick finished" in body, (ticks, body)
    assert fetch(ready) == not_ready, ticks
    assert cancelled


# --- a signal to the group ----------------------------------------------------------------------


def descendants(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.NoSuchProcess):
        return list(psutil.Process(pid).children(recursive=True))
    return []


def claimed_after(server: PrefectServer, deployment_ids: list[UUID],
                  moment: datetime) -> list[str]:
    """The runs of the deployments that went Pending after `moment`, but for those serve
    ended unstarted (a claim in flight at the signal, which the server accepted after it:
    Cancelled, never Running; `flows.cli.serve_runs.SubmissionGuard`)."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    from kube_elevator.flows.cli.serve_runs import NOT_BEGUN_MESSAGE

    found = []
    with on(server) as client:
        for run in client.read_flow_runs(deployment_filter=DeploymentFilter(
                id=DeploymentFilterId(any_=deployment_ids))):
            states = client.read_flow_run_states(run.id)
            if states and states[-1].message == NOT_BEGUN_MESSAGE and not any(
                    state.is_running() for state in states):
                continue
            for state in states:
                # The claim (Pending), not the Runner's Submitting after a claim made before.
                if state.name == "Pending" and state.timestamp > moment:
                    found.append(f"{run.name} {state.name} at {state.timestamp}")
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_group_in_ticks_runs_leaves_no_child_and_claims_no_run(
        signum: signal.Signals, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    """Runs come due every second, each a process of its own, one in flight (its pod list
    takes 3 s) when Ctrl-C (or SIGTERM) reaches the whole group: serve exits 0 within its
    grace, every process it started is gone, and no run was claimed after the signal."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    fake_kube.faults.add("delay", count=None, method="GET", path="/api/v1/pods",
                         delay_seconds=3)
    with PrefectServer() as server, group_stopped(Child(
            elevator("serve", "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                     str(cluster.kubeconfig), "--interval", "1s", "--poll", "0.5s",
                     "--ticks", "runs", "--stop-grace", "10s", *FREE_HEALTH_PORT),
            server.env(**fake_aws.env()), tmp_path / "serve.log", new_session=True)) as serve:
        serve.wait_for("serving autoscale/autoscale", SERVE_START_SECONDS)
        deployment_ids = serve_deployment_ids(server)
        wait_until(lambda: [run for run in runs_of(server, deployment_ids[0])
                            if run.state_type is not None
                            and run.state_type.value == "RUNNING"], 120,
                   "a run in flight", API_POLL_SECONDS)
        children = descendants(serve.process.pid)
        assert children, "a run in flight is a child process"
        signalled_at = datetime.now(UTC)
        started = time.monotonic()
        os.killpg(serve.process.pid, signum)
        code = serve.process.wait(timeout=10 + 5 + 10)  # the grace, the shutdown, slack
        took = time.monotonic() - started
        print(f"\n{signum.name} to the group: exit {code} in {took:.1f} s")
        assert code == 0, serve.output()[-3000:]
        _, alive = psutil.wait_procs(children, timeout=5)
        assert not alive, [process.cmdline() for process in alive]
        # Nor one started after the signal (orphaned by now): none has serve's environment.
        assert not processes_of(server.client_home)
        assert not claimed_after(server, deployment_ids, signalled_at + timedelta(seconds=1))
