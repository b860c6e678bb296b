"""Issue 34 items 1, 3 and 4 with real processes: `elevator serve` ticks on its schedule on the
temporary server a command starts for itself (no PREFECT_API_URL), on `prefect server start`
(SQLite) and on one backed by PostgreSQL; Ctrl-C and SIGTERM, to the process or to its whole
process group (which holds the temporary server's parent too), stop `serve`, `watch` and
`run --interval` within seconds, release the leader Lease and exit 0; and a temporary server
that does not answer in time is one line saying what to do, not a traceback."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

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

INTERVAL_SECONDS = 3.0
INTERVALS = 3  # scheduled ticks counted, one interval apart
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


# --- serve ticks on every kind of server, and stops on a signal -------------------------------


@pytest.fixture
def postgres_url() -> Iterator[str]:
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql; "
                    ".ci/run does)")
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
            serve.wait_for("tick (leading)", 240)
            # The schedule's runs: within a few seconds of registering the deployment (the
            # scheduler's loop for new deployments runs every 5 s), then one an interval.
            first, *_, last = scheduled_ticks(serve, INTERVALS + 1, 60 + INTERVALS * (
                INTERVAL_SECONDS + 2))
            span = last - first
            print(f"\n{kind}: {INTERVALS} scheduled ticks after the first in {span:.1f} s "
                  f"(--interval {INTERVAL_SECONDS:g}s)")
            # An interval's slack either way, and 2 s for the lines' own timing (printed as
            # each run ends; a first run may be late and slow): a late run is skipped, never
            # made up in a burst, and no run comes twice.
            assert (INTERVALS - 1) * INTERVAL_SECONDS - 2 <= span <= (
                INTERVALS + 1) * INTERVAL_SECONDS + 2, serve.output()[-3000:]
            # Leading, and alive by the liveness clock of the ticks that finished.
            assert fetch(f"{health_url(serve)}/health-check") == (200, "leading\n")
            took = signalled(serve, signum, group)
            print(f"{signum.name} to the {'group' if group else 'process'}: exit 0 in "
                  f"{took:.1f} s")
            assert "serve: stopped" in serve.output()
    assert fake_kube.get(*LEADER_LEASE)["spec"]["holderIdentity"] == ""  # released
    # The temporary server stopped with its command.
    wait_until(lambda: not processes_of(home), 10, "the temporary server to stop")


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
        wait_until(lambda: len(TICK_LINE.findall(printed(child))) >= 2, 240, "two ticks")
        took = signalled(child, signum, group=True)
        print(f"\n{command[0]}: {signum.name} to the group: exit 0 in {took:.1f} s")
    assert "released the Lease kube-system/elevator-leader" in child.output()
    assert fake_kube.get(*LEADER_LEASE)["spec"]["holderIdentity"] == ""
    assert "Traceback" not in child.output(), child.output()[-3000:]
    wait_until(lambda: not processes_of(home), 10, "the temporary server to stop")


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
