"""Issue 34 items 1, 3 and 4 with real processes: `elevator serve` ticks on its schedule on the
temporary server a command starts for itself (no PREFECT_API_URL), on `prefect server start`
(SQLite) and on one backed by PostgreSQL; Ctrl-C and SIGTERM, to the process or to its whole
process group (which holds the temporary server's parent too), stop `serve`, `watch` and
`run --interval` within seconds, release the leader Lease and exit 0; and a temporary server
that does not answer in time is one line saying what to do, not a traceback."""

from __future__ import annotations

import contextlib
import itertools
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

import pytest

from benchmarks.deadlines import scaled
from benchmarks.event_latency import (
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
from tests.tools import postgresql_missing

INTERVAL_SECONDS = 3.0
INTERVALS = 3  # scheduled ticks counted, one interval apart
# Besides an interval, how late a scheduled tick may start past its time, and past the end of
# the tick before it: a --poll (0.5 s), the claim's round trips and the flow's start. Scaled
# (`benchmarks.deadlines`): on a busy machine these take seconds. A tick's own length is not in
# it: under load a tick outlasts the 3 s interval, and the runs due meanwhile are skipped.
START_SLACK_SECONDS = 5.0
# The time a scheduled tick is for is before its start by at most this (two processes' reads
# of one clock).
CLOCK_SLACK_SECONDS = 0.5
# The temporary server's address, from the run's first log line.
VIEW_AT = re.compile(r"View at (http://127\.0\.0\.1:\d+)/runs/flow-run/")
STOPPED_WITHIN_SECONDS = 15.0  # a tick in flight on a loaded machine, then the clean stop
LEADER_LEASE = ("leases", "elevator-leader", "kube-system")
# A tick's line for the group: `run`'s `batch: ...`, `watch`'s `tick (schedule): batch: ...`.
TICK_LINE = re.compile(r"^(?:tick \([^)]*\): )?batch: ", re.MULTILINE)


def elevator(*args: str) -> list[str]:
    """The `elevator` command line as a user runs it (its `main`, with its defaults)."""
    return [sys.executable, "-m", "kube_elevator.flows.cli", *args]


def temporary_server_env(home: Path, **extra: str) -> dict[str, str]:
    """No PREFECT_API_URL: the command starts a temporary server, its database in `home`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_LOGGING_LEVEL="INFO", **extra)
    return env


def processes_of(home: Path) -> list[int]:
    """The processes whose environment names `home` as PREFECT_HOME: the command and its
    temporary server."""
    wanted = f"PREFECT_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if wanted in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def signalled(child: Child, signum: signal.Signals, group: bool) -> float:
    """Send `signum` to the child, or to its whole process group (`kill -INT -- -PGID`, as
    Ctrl-C in a terminal does); the seconds it took to exit, which must be 0."""
    started = time.monotonic()
    if group:
        os.killpg(child.process.pid, signum)
    else:
        child.process.send_signal(signum)
    try:
        code = child.process.wait(timeout=STOPPED_WITHIN_SECONDS)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running {STOPPED_WITHIN_SECONDS:g} s after "
                             f"{signum.name}:\n{child.output()[-3000:]}") from None
    assert code == 0, child.output()[-3000:]
    return time.monotonic() - started


@contextlib.contextmanager
def group_stopped(child: Child) -> Iterator[Child]:
    """The child, and whatever is left of its process group killed at the end (a command that
    hangs, or a server it left behind), so a failing test leaves no process running."""
    try:
        yield child
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.process.pid, signal.SIGKILL)
        child.stop()


@contextlib.contextmanager
def a_fresh_serve_on(server: PrefectServer) -> Iterator[PrefectServer]:
    """`server`, shared by a module's tests, as new to this test's `serve`: at the end every
    flow is deleted, and with it (the database cascades) its deployments and runs, so the next
    test's `serve` registers new deployments, with new ids and free concurrency slots, and
    finds no run of this one. A `prefect server start` costs ~9.5 s of CPU; the checks are
    about the signal, not the server."""
    try:
        yield server
    finally:
        from prefect.client.orchestration import get_client
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: server.api_url}), \
                get_client(sync_client=True) as client:
            for flow in client.read_flows():
                client.delete_flow(flow.id)
            assert not client.read_flow_runs(), "a run outlived its flow"


def printed(child: Child) -> str:
    """The child's output so far; an error once it has exited."""
    if child.process.poll() is not None:
        raise RuntimeError(f"exited with {child.process.returncode}:\n"
                           f"{child.output()[-3000:]}")
    return child.output()


def scheduled_ticks(child: Child, count: int, timeout: float) -> list[float]:
    """This test's clock as each of the first `count` `tick (schedule)` lines appeared."""
    seen: list[float] = []

    def enough() -> bool:
        seen.extend([time.monotonic()] * (printed(child).count("tick (schedule)") - len(seen)))
        return len(seen) >= count

    try:
        wait_until(enough, timeout, f"{count} scheduled ticks", interval=0.1)
    except TimeoutError as error:
        raise AssertionError(f"{error} ({len(seen)} seen):\n{child.output()[-3000:]}") from None
    return seen[:count]


def scheduled_runs(api_url: str) -> list[Any]:
    """The runs the `autoscale` deployment's schedule made, as the Prefect server at `api_url`
    recorded them, by the time each is for."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api_url}), \
            get_client(sync_client=True) as client:
        runs = client.read_flow_runs(deployment_filter=DeploymentFilter(
            name=DeploymentFilterName(any_=["autoscale"])))
    return sorted((run for run in runs if run.auto_scheduled),
                  key=lambda run: run.expected_start_time)


def schedule_broken(runs: list[Any], interval: float, slack: float) -> list[str]:
    """How the ticks the server recorded break the schedule's rules; none when they keep it.

    Each tick runs for a time of its own (no run twice), not before it, and within an interval
    and `slack` of it: a run that came due while a tick ran is skipped, never made up later
    (Escalator does not make up a missed tick). After a tick ends, the next starts within an
    interval and `slack`, never while another runs. (A run due while a tick ran ends Cancelled,
    by our skip or by the server's late-runs service, "Deployment concurrency limit reached":
    either is the schedule kept.) The server's times, so neither the test's load nor how long
    a tick takes enters them."""
    broken = []
    ran = [run for run in runs if run.state is not None and run.state.is_completed()]
    times = [run.expected_start_time for run in ran]
    if len(set(times)) != len(times):
        broken.append(f"a time ran twice: {times}")
    for run in ran:
        late = (run.start_time - run.expected_start_time).total_seconds()
        if not -CLOCK_SLACK_SECONDS <= late <= interval + slack:
            broken.append(f"{run.name} for {run.expected_start_time:%H:%M:%S.%f} started "
                          f"{late:.1f} s after it")
    for before, after in itertools.pairwise(ran):
        gap = (after.start_time - before.end_time).total_seconds()
        if gap > interval + slack:
            broken.append(f"{after.name} started {gap:.1f} s after {before.name} ended")
        elif gap < 0:
            broken.append(f"{after.name} started while {before.name} ran")
    return broken


# --- serve ticks on every kind of server, and stops on a signal -------------------------------


@pytest.fixture
def postgres_url() -> Iterator[str]:
    problem = postgresql_missing()
    if problem is not None:
        pytest.skip(problem)
    from benchmarks.prefect_overhead import postgres

    with postgres() as url:
        yield url


@contextlib.contextmanager
def prefect_server(kind: str, request: pytest.FixtureRequest) -> Iterator[PrefectServer | None]:
    """None for the temporary server; else a `prefect server start` on SQLite or PostgreSQL."""
    if kind == "temporary":
        yield None
        return
    settings = {}
    if kind == "postgres":
        settings["PREFECT_API_DATABASE_CONNECTION_URL"] = request.getfixturevalue(
            "postgres_url")
    with PrefectServer(settings=settings) as server:
        yield server


@pytest.mark.parametrize(("kind", "signum", "group"), [
    pytest.param("temporary", signal.SIGINT, True, id="temporary-server-ctrl-c-to-the-group"),
    pytest.param("sqlite", signal.SIGTERM, False, id="sqlite-sigterm-to-the-process"),
    pytest.param("postgres", signal.SIGINT, False, id="postgres-sigint-to-the-process"),
])
def test_serve_ticks_on_its_schedule_and_stops_on_a_signal(
        kind: str, signum: signal.Signals, group: bool, fake_kube: FakeKubeApi,
        fake_aws: FakeAws, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    home = tmp_path / "prefect-home"
    with prefect_server(kind, request) as server:
        env = (server.env(**fake_aws.env()) if server is not None
               else temporary_server_env(home, **fake_aws.env()))
        command = elevator("serve", "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                           str(cluster.kubeconfig), "--interval", f"{INTERVAL_SECONDS:g}s",
                           "--poll", "0.5s", "--max-inactivity", "20s", *FREE_HEALTH_PORT)
        with group_stopped(Child(command, env, tmp_path / "serve.log",
                                 new_session=True)) as serve:
            serve.wait_for("tick (leading)", scaled(120))
            # The schedule's runs: within a few seconds of registering the deployment (the
            # scheduler's loop for new deployments runs every 5 s), then one an interval, or
            # as soon as the tick before ends where a tick outlasts the interval (under load).
            first, *_, last = scheduled_ticks(serve, INTERVALS + 1, scaled(
                60 + INTERVALS * (INTERVAL_SECONDS + 2)))
            print(f"\n{kind}: {INTERVALS} scheduled ticks after the first in "
                  f"{last - first:.1f} s (--interval {INTERVAL_SECONDS:g}s)")
            # The server's record of the runs (its address: the run's `View at` line).
            api_url = server.api_url if server is not None else (
                f"{VIEW_AT.findall(serve.output())[0]}/api")
            runs = scheduled_runs(api_url)
            # What the server logged, where the test started it (a locked SQLite database).
            server_log = server.log_tail() if server is not None else ""
            assert sum(run.state is not None and run.state.is_completed()
                       for run in runs) >= INTERVALS + 1, (runs, server_log)
            broken = schedule_broken(runs, INTERVAL_SECONDS, scaled(START_SLACK_SECONDS))
            assert not broken, (broken, [(run.name, run.state_type, run.start_time)
                                         for run in runs], serve.output(), server_log)
            # Leading, and alive by the liveness clock of the ticks that finished.
            assert fetch(f"{health_url(serve)}/health-check") == (200, "leading\n")
            took = signalled(serve, signum, group)
            print(f"{signum.name} to the {'group' if group else 'process'}: exit 0 in "
                  f"{took:.1f} s")
            assert "serve: stopped" in serve.output()
    assert fake_kube.get(*LEADER_LEASE)["spec"]["holderIdentity"] == ""  # released
    # The temporary server stopped with its command.
    wait_until(lambda: not processes_of(home), scaled(10), "the temporary server to stop")


def recorded_run(name: str, for_second: float, started: float | None = None,
                 ended: float | None = None, message: str | None = None) -> Any:
    """A scheduled run as the server records one, its times in seconds after 10:00:00."""
    from types import SimpleNamespace

    from prefect.states import Cancelled, Completed

    at = datetime(2026, 1, 1, 10, tzinfo=UTC)
    done = started is not None
    return SimpleNamespace(
        name=name, expected_start_time=at + timedelta(seconds=for_second),
        start_time=at + timedelta(seconds=started) if done else None,
        end_time=at + timedelta(seconds=ended or 0) if done else None,
        state=Completed() if done else Cancelled(message=message))


def test_the_schedule_rules_take_a_tick_longer_than_the_interval_and_refuse_a_made_up_one() -> None:
    """The rules `schedule_broken` reads from the server's record: on a busy machine a tick
    takes 12 s at a 3 s interval, and the runs due meanwhile are skipped (the schedule kept);
    a run made up for a time long past, or two at once, breaks it."""
    slow = [recorded_run("a", 0, 0.2, 12.0), recorded_run("b", 3, message="skipped"),
            recorded_run("c", 6, message="skipped"), recorded_run("d", 9, 12.3, 24.0),
            recorded_run("e", 12, message="skipped"), recorded_run("f", 21, 24.4, 36.1)]
    assert schedule_broken(slow, 3.0, 1.0) == []
    made_up = [recorded_run("a", 0, 0.2, 12.0), recorded_run("b", 3, 12.3, 13.0),
               recorded_run("c", 6, 13.2, 14.0)]  # the missed times run in a burst
    assert [line.split(" ")[0] for line in schedule_broken(made_up, 3.0, 1.0)] == ["b", "c"]
    twice = [recorded_run("a", 0, 0.2, 1.0), recorded_run("b", 0, 1.2, 2.0)]
    assert "a time ran twice" in schedule_broken(twice, 3.0, 1.0)[0]
    stalled = [recorded_run("a", 0, 0.2, 1.0), recorded_run("b", 6, 6.1, 7.0)]
    assert schedule_broken(stalled, 3.0, 1.0) == ["b started 5.1 s after a ended"]
    at_once = [recorded_run("a", 0, 0.2, 5.0), recorded_run("b", 3, 3.1, 4.0)]
    assert schedule_broken(at_once, 3.0, 1.0) == ["b started while a ran"]
    # A run due while a tick ran, cancelled by the server's late-runs service: kept.
    late_cancelled = [recorded_run("a", 0, 0.2, 5.0), recorded_run(
        "b", 3, message="Deployment concurrency limit reached."), recorded_run("c", 6, 6.1, 7.0)]
    assert schedule_broken(late_cancelled, 3.0, 1.0) == []


# --- watch and run --interval on the temporary server, signalled as a group ---------------------


@pytest.mark.parametrize(("command", "signum"), [
    pytest.param(("watch",), signal.SIGTERM, id="watch-sigterm-to-the-group"),
    pytest.param(("run", "--leader-elect"), signal.SIGINT, id="run-interval-ctrl-c-to-the-group"),
])
def test_a_signal_to_the_group_stops_the_command_and_its_temporary_server(
        command: tuple[str, ...], signum: signal.Signals, fake_kube: FakeKubeApi,
        fake_aws: FakeAws, tmp_path: Path) -> None:
    """The temporary server sits in a session of its own: the group's signal reaches the
    command, which stops between ticks, releases the Lease while the server still records, and
    stops the server as it exits."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    home = tmp_path / "prefect-home"
    child = Child(elevator(*command, "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                           str(cluster.kubeconfig), "--interval", "1s", *FREE_HEALTH_PORT),
                  temporary_server_env(home, **fake_aws.env()), tmp_path / "command.log",
                  new_session=True)
    with group_stopped(child):
        wait_until(lambda: len(TICK_LINE.findall(printed(child))) >= 2, scaled(120),
                   "two ticks")
        took = signalled(child, signum, group=True)
        print(f"\n{command[0]}: {signum.name} to the group: exit 0 in {took:.1f} s")
    assert "released the Lease kube-system/elevator-leader" in child.output()
    assert fake_kube.get(*LEADER_LEASE)["spec"]["holderIdentity"] == ""
    assert "Traceback" not in child.output(), child.output()[-3000:]
    wait_until(lambda: not processes_of(home), scaled(10), "the temporary server to stop")


# --- a temporary server slow to start ---------------------------------------------------------


def test_a_temporary_server_that_does_not_answer_in_time_is_one_line(
        fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path) -> None:
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    home = tmp_path / "prefect-home"
    done = subprocess.run(
        elevator("serve", "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                 str(cluster.kubeconfig), *FREE_HEALTH_PORT),
        env=temporary_server_env(home, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="1"),
        cwd=ROOT, capture_output=True, text=True, timeout=scaled(120), check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    # Prefect's own lines say it starts and stops the server; ours says what to do.
    assert [line for line in done.stderr.splitlines() if "error" in line.lower()] == [
        "error: the temporary Prefect server this command starts (no PREFECT_API_URL) did not "
        "answer within 1 s: set PREFECT_API_URL to a running Prefect server (start one with "
        "`prefect server start`), or allow it longer with "
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"], done.stderr
    assert not processes_of(home)  # the server it was still starting is stopped too


def test_the_temporary_server_gets_longer_to_start_unless_told_otherwise() -> None:
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings

    from kube_elevator.tasks.adapters.prefect_server import (
        TEMPORARY_SERVER_STARTUP_SECONDS,
        temporary_server_timeout_seconds,
    )

    assert temporary_server_timeout_seconds() == TEMPORARY_SERVER_STARTUP_SECONDS == 120
    with temporary_settings({PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: 7}):
        assert temporary_server_timeout_seconds() == 7  # the user's setting wins


# --- a temporary server outlives no command ---------------------------------------------------

# A command (`parent`) that starts a process in a session of its own, as the temporary server
# is, which watches it with the server's own watch (`prefect_server.stop_with`); SIGTERM ends
# that process as it ends uvicorn.
SERVER_LIKE = ("import os, pathlib, signal, sys\n"
               "from kube_elevator.tasks.adapters.prefect_server import stop_with\n"
               "signal.signal(signal.SIGTERM, lambda *_: os._exit(0))\n"
               "pathlib.Path(sys.argv[2]).write_text(str(os.getpid()))\n"
               "stop_with(int(sys.argv[1]))\n")
COMMAND_LIKE = ("import os, signal, subprocess, sys\n"
                "subprocess.Popen([sys.executable, '-c', sys.argv[1], str(os.getpid()),"
                " sys.argv[2]], start_new_session=True)\n"
                "signal.pause()\n")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has ended; its reaper may be slow to notice


def test_the_temporary_server_stops_when_its_command_is_killed(tmp_path: Path) -> None:
    written = tmp_path / "server.pid"
    command = subprocess.Popen([sys.executable, "-c", COMMAND_LIKE, SERVER_LIKE, str(written)],
                               cwd=ROOT)
    try:
        server = int(wait_until(lambda: written.exists() and written.read_text(), 60,
                                "the server-like process to start"))
        assert alive(server)
        command.kill()  # no atexit, no chance to stop it: kill -9
        command.wait()
        wait_until(lambda: not alive(server), 10, "the server-like process to stop")
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()


# --- a --max-inactivity the ticks cannot keep ---------------------------------------------------


@pytest.mark.parametrize(("options", "warned"), [
    pytest.param(("--interval", "15m"), True, id="default-10m-under-a-15m-interval"),
    pytest.param(("--interval", "15m", "--max-inactivity", "20m"), False, id="20m-over-15m"),
    pytest.param(("--interval", "15m", "--health-address", ""), False, id="no-health-endpoint"),
    # --ticks runs counts the runs that ended an interval after one was due (issue 40).
    pytest.param(("--interval", "15m", "--ticks", "runs"), False, id="ticks-runs-counts-runs"),
])
def test_a_max_inactivity_no_longer_than_the_interval_is_a_warning(
        options: tuple[str, ...], warned: bool, tmp_path: Path) -> None:
    """Only finished ticks move the liveness clock: under an interval as long as
    --max-inactivity the probe would fail between two ticks. Said before anything starts (here
    a missing kubeconfig then stops the command)."""
    from typer.testing import CliRunner

    from kube_elevator.flows.cli import app

    nodegroups = tmp_path / "nodegroups.yaml"
    nodegroups.write_text("node_groups: []\n")
    answer = CliRunner().invoke(app, ["serve", "--nodegroups", str(nodegroups), "--kubeconfig",
                                      str(tmp_path / "missing"), *options])
    assert answer.exit_code == 2 and "--kubeconfig" in answer.output, answer.output
    warning = ("warning: --max-inactivity 600s is not longer than --interval 900s: "
               "/health-check will fail between two ticks")
    said = " ".join(answer.output.split())
    assert (warning in said) if warned else ("warning:" not in said), answer.output
