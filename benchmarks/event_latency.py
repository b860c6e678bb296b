"""Event-driven ticks: the time from a burst of pending pods to the ASG's SetDesiredCapacity.

Everything real but the cluster: `prefect server start`, `elevator serve` (the `autoscale`
deployment with its pending-pods trigger) and `elevator watch`, each its own process, against
the fake Kubernetes API and moto run in this process. A burst is `--pods` pending pods created
at once; its latency ends when DescribeAutoScalingGroups shows the raised desired capacity
(polled every 20 ms). Between bursts the pods are deleted and the tick has ended: each starts
from the same cluster (a 1 s cool-down releases the scale lock in time).

    .venv/bin/python -m benchmarks.event_latency --bursts 10

`PrefectServer`, `Child` and `BurstCluster` are also the rig of the end-to-end tests (tests/e2e/).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import itertools
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import yaml

from benchmarks.deadlines import scaled
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.prefect_compat import default_server_settings
from kube_elevator.tasks.adapters.prefect_server import (
    keep_template,
    prepare_registration,
    record_registered,
    seeded,
)

ROOT = Path(__file__).resolve().parent.parent
MiB = 2**20
# `elevator <command>` for the commands flows/cli/serve.py and flows/cli/watch.py register, whether or
# not the CLI has wired them in yet.
LAUNCHER = (
    "import sys, typer\n"
    "from kube_elevator.flows.cli import serve, watch\n"
    "app = typer.Typer(add_completion=False)\n"
    "serve.register(app)\n"
    "watch.register(app)\n"
    "app()\n"
)
_names = itertools.count()
# The health endpoint's default port is fixed (8085, the Cluster Autoscaler's): processes started
# side by side (tests run in parallel) take a free one each.
FREE_HEALTH_PORT = ("--health-address", "127.0.0.1:0")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# A wait whose condition reads Prefect's API asks twice a second, not twenty times: each read
# is a request that the server (and the waiting process, with a client of its own each time)
# spends CPU on, which the serve under test then lacks. Measured on the abandoned-run tests
# (tests/e2e/test_serve_abandoned_runs.py, on an idle 2-CPU machine, every process counted):
# 519 CPU-seconds with their waits at 0.05 s, 420 with them at 0.5 s.
API_POLL_SECONDS = 0.5


def wait_until(condition: Callable[[], Any], timeout: float, what: str,
               interval: float = 0.05) -> Any:
    """Poll `condition` until it returns something truthy; TimeoutError naming `what`, after
    `timeout` seconds scaled by the one deadline setting (benchmarks/deadlines.py)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def elevator(*args: str) -> list[str]:
    """The command line of `elevator <args>` in this interpreter."""
    return [sys.executable, "-c", LAUNCHER, *args]


class Child:
    """A child process whose output goes to a file, read back to wait for a line."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str], log: Path,
                 cwd: Path = ROOT, new_session: bool = False) -> None:
        """`new_session`: the process leads a process group of its own, as a command started
        from a terminal does (its pid is the group's id: `kill -INT -- -PID`, Ctrl-C)."""
        self.log = log
        self._out: IO[bytes] = log.open("wb")
        self.process = subprocess.Popen(list(command), env=dict(env), cwd=cwd,
                                        stdout=self._out, stderr=subprocess.STDOUT,
                                        start_new_session=new_session)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float) -> None:
        def seen() -> bool:
            if self.process.poll() is not None and text not in self.output():
                raise RuntimeError(f"exited with {self.process.returncode} before printing "
                                   f"{text!r}:\n{self.output()[-3000:]}")
            return text in self.output()

        try:
            wait_until(seen, timeout, f"{text!r} from {self.log.name}", interval=0.1)
        except TimeoutError as error:
            raise TimeoutError(f"{error}\n{self.output()[-3000:]}") from None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then SIGKILL if it has not exited within `timeout`; the exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()
        return self.process.returncode


def health_url(child: Child) -> str:
    """The base URL the process says it serves its health endpoint on."""
    child.wait_for("health: http://", 120)
    match = re.search(r"health: (http://\S+)/health-check", child.output())
    if match is None:
        raise RuntimeError(f"no health address in {child.log.name}")
    return match.group(1)


def identity(child: Child) -> str:
    """The process's identity in the leader election (and in its User-Agent)."""
    child.wait_for("electing a leader on the Lease", 120)
    match = re.search(r"electing a leader on the Lease \S+ as (\S+)", child.output())
    if match is None:
        raise RuntimeError(f"no election identity in {child.log.name}")
    return match.group(1)


def fetch(url: str) -> tuple[int, str]:
    """(status, body) of a GET; (0, why) when nothing answers (not listening yet)."""
    try:
        with urllib.request.urlopen(url, timeout=scaled(10)) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:  # not listening (yet)
        return 0, str(error)


class PrefectServer:
    """`prefect server start` on 127.0.0.1, a free port and a temporary PREFECT_HOME."""

    def __init__(self, ui: bool = False, startup_timeout: float = 180.0,
                 settings: Mapping[str, str] | None = None,
                 launcher: Sequence[str] = ("-m", "prefect")) -> None:
        """`settings`: the server's own, before kube-elevator's defaults; `launcher`: how the
        interpreter runs the `prefect` command line (the soak's patches its vacuum's clock)."""
        self.port = free_port()
        self.settings = dict(settings or {})
        self.launcher = tuple(launcher)
        self.home = Path(tempfile.mkdtemp(prefix="elevator-prefect-server-"))
        self.client_home = Path(tempfile.mkdtemp(prefix="elevator-prefect-client-"))
        self.ui = ui
        self.startup_timeout = startup_timeout
        self._child: Child | None = None
        self._fresh = False  # its database new and not seeded: kept as the template once up
        self._launched_as: tuple[object, ...] | None = None  # spare_key() at its launch
        self._registers = False  # it registers Prefect's block types at its start

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"

    def env(self, **extra: str) -> dict[str, str]:
        """Environment of a process talking to this server (CLI, worker, serve, watch)."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
        env.update(PREFECT_API_URL=self.api_url, PREFECT_HOME=str(self.client_home),
                   PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_LOGGING_LEVEL="INFO")
        env.update(extra)
        return env

    def server_env(self) -> dict[str, str]:
        """Environment of the server process itself."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
        env.update(PREFECT_HOME=str(self.home), PREFECT_SERVER_ANALYTICS_ENABLED="false",
                   PREFECT_UI_ENABLED="true" if self.ui else "false",
                   # The UI asks the API at this URL (by default at port 4200).
                   PREFECT_UI_API_URL=self.api_url, PREFECT_LOGGING_LEVEL="WARNING")
        env.update(self.settings)
        default_server_settings(env)  # as docs/deploying.md advises
        return env

    def launch(self, niced: bool = False) -> None:
        """`prefect server start`, not waited for; on a database seeded from the template.
        `niced`: at a low CPU priority (a spare's start takes only what the running tests leave)
        where it can be given back (root); set on the process, not by a `nice` command in
        front, which runs at priority 0 until it execs the server."""
        database = self.database()
        self._fresh = database is not None and not self.seed()
        self._launched_as = self.spare_key()
        env = self.server_env()
        self._registers = prepare_registration(database, env)
        self._child = Child([sys.executable, *self.launcher, "server", "start", "--host",
                             "127.0.0.1", "--port", str(self.port)], env,
                            self.home / "server.log")
        if niced and os.geteuid() == 0:
            with contextlib.suppress(OSError):  # gone already: the start's wait says why
                os.setpriority(os.PRIO_PROCESS, self._child.process.pid, 10)

    def start(self) -> PrefectServer:
        spare = _take_spare(self)
        if spare is None:
            self.launch()
        else:
            self._adopt(spare)

        def healthy() -> bool:
            if self._child is not None and self._child.process.poll() is not None:
                raise RuntimeError(f"prefect server exited:\n{self._child.output()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=scaled(2)):
                    return True
            except OSError:
                return False

        try:
            try:
                wait_until(healthy, self.startup_timeout, "prefect server start", interval=0.2)
            except RuntimeError:
                if spare is None:
                    raise
                self._renew()  # the spare exited before answering: a start of its own
                self.launch()
                wait_until(healthy, self.startup_timeout, "prefect server start", interval=0.2)
        except BaseException:
            self.stop()
            raise
        database = self.database()
        if self._fresh and database is not None:
            keep_template(database)  # migrated, and nothing written yet: it seeds the next
        if self._registers and database is not None:
            record_registered(database)
        _keep_a_spare_like(self)
        return self

    def spare_key(self) -> tuple[object, ...] | None:
        """What a spare must have been started with to stand in for this server: the same
        command and environment but for its own port and home; None where no spare may (the
        suite's setting is off, or a UI, another launcher or database, settings of its own)."""
        if (os.environ.get(SPARE_VARIABLE) != str(os.getpid()) or self.ui or self.settings
                or self.launcher != ("-m", "prefect")):
            return None
        env = self.server_env()
        for own in ("PREFECT_HOME", "PREFECT_UI_API_URL"):
            env.pop(own)
        return (sys.executable, self.startup_timeout, tuple(sorted(env.items())))

    def _renew(self) -> None:
        """Its process stopped, a new port and new homes, as a new server has."""
        self.stop()
        self.port = free_port()
        self.home = Path(tempfile.mkdtemp(prefix="elevator-prefect-server-"))
        self.client_home = Path(tempfile.mkdtemp(prefix="elevator-prefect-client-"))

    def _adopt(self, spare: PrefectServer) -> None:
        """Become `spare`: its port, homes and process (this one's empty homes go)."""
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.client_home, ignore_errors=True)
        self.port, self.home, self.client_home = spare.port, spare.home, spare.client_home
        self._child, self._fresh, self._registers = spare._child, spare._fresh, spare._registers
        if self._child is not None:  # the test's server: at the usual priority again
            import psutil

            with contextlib.suppress(psutil.Error):
                server = psutil.Process(self._child.process.pid)
                for process in [server, *server.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        process.nice(0)

    def database(self) -> Path | None:
        """The server's SQLite file in its new home; None on another database (PostgreSQL).
        A new one is seeded from the Prefect release's migrated template, as the temporary
        server's is (tasks/adapters/prefect_server.py): its migrations took 12-15 s of a
        30-45 s start on a loaded 2-CPU machine, 0.4 s to check on the copy."""
        if "PREFECT_API_DATABASE_CONNECTION_URL" in self.settings:
            return None
        return self.home / "prefect.db"

    def seed(self) -> bool:
        """The new home's database copied from the template, if there is one (and no other
        database is set)."""
        database = self.database()
        return database is not None and not database.exists() and seeded(database)

    def log_tail(self, chars: int = 6000) -> str:
        """The end of the server's own log (warnings and errors: a locked SQLite database),
        for a test's failure message."""
        return self._child.output()[-chars:] if self._child is not None else ""

    def stop(self) -> None:
        if self._child is not None:
            self._child.stop()
            self._child = None
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.client_home, ignore_errors=True)

    def prefect(self, *args: str, cwd: Path = ROOT, timeout: float = 120.0) -> str:
        """Run the `prefect` CLI against this server; its output, or CalledProcessError."""
        done = subprocess.run([sys.executable, "-m", "prefect", *args], env=self.env(),
                              cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              check=False)
        if done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout,
                                                done.stderr + done.stdout[-3000:])
        return done.stdout

    def __enter__(self) -> PrefectServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


# The test suite's servers start one ahead: as a test's `prefect server start` answers, the next
# one starts in the background, on a new home and port, and the next test that asks for a server
# like it takes it instead of waiting 10-45 s for its own start. Nothing talks to a spare before
# a test takes it, so each test still has a server of its own, new: the start's cost moves into
# the previous test's waits (most of an end-to-end test waits on servers and subprocesses), it
# does not go away; a spare starts at a low CPU priority, the test's again once taken. On where
# SPARE_VARIABLE holds this process's pid (tests/conftest.py sets it in each test process), so
# never in the processes the tests start.
SPARE_VARIABLE = "ELEVATOR_TEST_PREFECT_SPARE"
_spares: list[PrefectServer] = []
_spares_registered: list[bool] = []


# Held while the spare is taken or made: a test may start servers side by side, in threads.
_spares_lock = threading.Lock()


def _take_spare(server: PrefectServer) -> PrefectServer | None:
    """The spare started like `server` and still running, taken; any other spare stopped."""
    key = server.spare_key()
    with _spares_lock:
        while _spares:
            spare = _spares.pop()
            child = spare._child
            if key is not None and spare._launched_as == key and child is not None \
                    and child.process.poll() is None:
                return spare
            spare.stop()
    return None


def _keep_a_spare_like(server: PrefectServer) -> None:
    with _spares_lock:
        if _spares or server.spare_key() is None:
            return
        if not _spares_registered:
            atexit.register(stop_spares)
            _spares_registered.append(True)
        spare = PrefectServer(startup_timeout=server.startup_timeout)
        spare.launch(niced=True)
        _spares.append(spare)


def stop_spares() -> None:
    """Stop the spare server, if one is running (at the session's end)."""
    while _spares:
        _spares.pop().stop()


class BurstCluster:
    """One node group, `batch`: an ASG in moto whose instances joined the fake API as Nodes.

    A 1 s cool-down releases the scale lock before the next burst.
    """

    def __init__(self, kube: FakeKubeApi, aws: FakeAws, directory: Path, nodes: int = 2,
                 max_nodes: int = 200, **group: Any) -> None:
        self.kube, self.aws, self.directory = kube, aws, directory
        self.asg = f"burst-asg-{next(_names)}-{os.getpid()}-{directory.name[-10:]}"
        aws.create_asg(self.asg, 1, max_nodes, nodes)
        now = time.time()
        for index, instance in enumerate(aws.instances(self.asg)):
            kube.create("nodes", node_for_instance(instance, {"customer": "batch"}, 1000,
                                                   4000 * MiB, now - 3600 + index * 60))
        settings = {
            "name": "batch", "label_key": "customer", "label_value": "batch",
            "cloud_provider_group_name": self.asg, "min_nodes": 1, "max_nodes": max_nodes,
            "taint_upper_capacity_threshold_percent": 40,
            "taint_lower_capacity_threshold_percent": 10, "scale_up_threshold_percent": 70,
            "slow_node_removal_rate": 1, "fast_node_removal_rate": 2,
            "soft_delete_grace_period": "1m", "hard_delete_grace_period": "10m",
            "scale_up_cool_down_period": "1s", **group,
        }
        self.nodegroups = directory / "nodegroups.yaml"
        self.nodegroups.write_text(yaml.safe_dump({"node_groups": [settings]}))
        self.kubeconfig = kube.write_kubeconfig(directory / "kubeconfig")
        self._bursts = itertools.count()

    def desired(self) -> int:
        answer = self.aws.client("autoscaling").describe_auto_scaling_groups(
            AutoScalingGroupNames=[self.asg])
        return int(answer["AutoScalingGroups"][0]["DesiredCapacity"])

    def pending_pod(self, name: str, namespace: str = "jobs", cpu: str = "500m") -> None:
        self.kube.create("pods", {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeSelector": {"customer": "batch"}, "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]},
            "status": {"phase": "Pending"}}, namespace=namespace)

    def burst(self, pods: int) -> list[str]:
        """`pods` pending pods of the group, created at once; their names."""
        number = next(self._bursts)
        names = [f"burst-{number}-{index}" for index in range(pods)]
        for name in names:
            self.pending_pod(name)
        return names

    def delete(self, names: Sequence[str], namespace: str = "jobs") -> None:
        for name in names:
            self.kube.delete("pods", name, namespace)


class EventRig:
    """`elevator serve` and `elevator watch` against `server`, for `cluster`."""

    def __init__(self, server: PrefectServer, cluster: BurstCluster, logs: Path,
                 interval: str = "1h", env: Mapping[str, str] | None = None) -> None:
        self.server, self.cluster, self.logs = server, cluster, logs
        self.interval = interval
        self.extra_env = dict(env or {})  # e.g. the watch cache's bounds
        self.serve: Child | None = None
        self.watch: Child | None = None

    def env(self) -> dict[str, str]:
        """The environment of the rig's processes: the Prefect server's, AWS's, and ours."""
        return self.server.env(**self.cluster.aws.env(), **self.extra_env)

    def start(self) -> Self:
        cluster = self.cluster
        env = self.env()
        self.serve = Child(elevator("serve", "--nodegroups", str(cluster.nodegroups),
                                    "--kubeconfig", str(cluster.kubeconfig),
                                    "--interval", self.interval, "--ticks", "runs",
                                    *FREE_HEALTH_PORT), env,
                           self.logs / "serve.log")
        self.watch = Child(elevator("watch", "--nodegroups", str(cluster.nodegroups),
                                    "--kubeconfig", str(cluster.kubeconfig), "--ticks", "events",
                                    *FREE_HEALTH_PORT),
                           env, self.logs / "watch.log")
        self.serve.wait_for("serving autoscale/autoscale", 120)
        self.watch.wait_for("watching pending pods", 60)
        if not cluster.kube.wait_for_watchers("pods", 1, timeout=scaled(30)):
            raise TimeoutError("elevator watch did not open its pod watch")
        return self

    def stop(self) -> dict[str, int]:
        codes = {}
        for name, child in (("watch", self.watch), ("serve", self.serve)):
            if child is not None:
                codes[name] = child.stop()
        return codes

    def measure_burst(self, pods: int = 10, timeout: float = 90.0) -> float:
        """Seconds from creating `pods` pending pods to the ASG's raised desired capacity."""
        cluster = self.cluster
        before = cluster.desired()
        start = time.monotonic()
        names = cluster.burst(pods)
        try:
            wait_until(lambda: cluster.desired() > before, timeout,
                       f"the ASG to grow past {before}", interval=0.02)
        except TimeoutError as error:
            raise TimeoutError(f"{error}\n--- serve:\n{self._tail(self.serve)}\n--- watch:\n"
                               f"{self._tail(self.watch)}") from None
        latency = time.monotonic() - start
        cluster.delete(names)
        return latency

    @staticmethod
    def _tail(child: Child | None) -> str:
        return child.output()[-4000:] if child is not None else ""

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class InProcessRig(EventRig):
    """`elevator watch --ticks in-process` alone: the watch cache and the ticks in one process
    (scheduled every `interval`; the bursts start the others)."""

    def start(self) -> Self:
        cluster = self.cluster
        self.watch = Child(elevator("watch", "--nodegroups", str(cluster.nodegroups),
                                    "--kubeconfig", str(cluster.kubeconfig),
                                    "--interval", self.interval, *FREE_HEALTH_PORT),
                           self.env(), self.logs / "watch.log")
        self.watch.wait_for("watching the cluster", 120)
        if not cluster.kube.wait_for_watchers("pods", 1, timeout=scaled(30)):
            raise TimeoutError("elevator watch did not open its pod watch")
        # the first tick, as it takes the lead at start, has ended
        self.watch.wait_for("tick (leading)", 120)
        return self


class ServeRig(EventRig):
    """`elevator serve --ticks in-process` alone: the watch cache, and the `autoscale`
    deployment's runs executed in the same process (scheduled every `interval`, started from
    the UI, or made at once for a burst)."""

    def start(self) -> Self:
        cluster = self.cluster
        self.serve = Child(elevator("serve", "--nodegroups", str(cluster.nodegroups),
                                    "--kubeconfig", str(cluster.kubeconfig),
                                    "--interval", self.interval, "--poll", "1s",
                                    *FREE_HEALTH_PORT),
                           self.env(), self.logs / "serve.log")
        self.serve.wait_for("serve: watching the cluster", 120)
        if not cluster.kube.wait_for_watchers("pods", 1, timeout=scaled(30)):
            raise TimeoutError("elevator serve did not open its pod watch")
        return self


def wait_for_idle(server: PrefectServer, timeout: float = 60.0) -> None:
    """Until no flow run is pending or running (the burst's tick has ended)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.settings import PREFECT_API_URL, temporary_settings

    active = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(
        any_=[StateType.PENDING, StateType.RUNNING])))
    with temporary_settings({PREFECT_API_URL: server.api_url}), \
            get_client(sync_client=True) as client:
        wait_until(lambda: not client.read_flow_runs(flow_run_filter=active), timeout,
                   "the tick to end", interval=0.2)


RIGS: dict[str, type[EventRig]] = {"events": EventRig, "watch": InProcessRig, "serve": ServeRig}


def measure(bursts: int, pods: int, rig_name: str = "events") -> list[float]:
    """Latency of each of `bursts` bursts of `pods` pods, in seconds: through the event and the
    served deployment's trigger (`events`), with `elevator watch` running the ticks (`watch`),
    or with `elevator serve` running the deployment's runs in its process (`serve`)."""
    from kube_elevator.tasks.escalator.pending_bursts import DEFAULT_DEBOUNCE_SECONDS

    scratch = Path(tempfile.mkdtemp(prefix="elevator-event-latency-"))
    latencies = []
    try:
        with FakeKubeApi() as kube, FakeAws() as aws, PrefectServer() as server:
            cluster = BurstCluster(kube, aws, scratch)
            with RIGS[rig_name](server, cluster, scratch) as rig:
                for number in range(bursts):
                    started = time.monotonic()
                    latencies.append(rig.measure_burst(pods))
                    print(f"burst {number + 1}: {latencies[-1]:.2f} s", flush=True)
                    wait_for_idle(server)
                    # The watch sends a group at most one event per debounce window: let the
                    # window pass, so each burst is measured from a quiet start.
                    time.sleep(max(0.0, started + DEFAULT_DEBOUNCE_SECONDS - time.monotonic()))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bursts", type=int, default=10)
    parser.add_argument("--pods", type=int, default=10, help="pending pods per burst")
    parser.add_argument("--rig", choices=sorted(RIGS), default="events",
                        help="events: elevator watch's events and a served deployment's "
                             "trigger; watch: elevator watch running the ticks; serve: elevator "
                             "serve running the deployment's runs, both from a watch cache")
    parser.add_argument("--in-process", action="store_const", const="watch", dest="rig",
                        help="the same as --rig watch")
    options = parser.parse_args()
    latencies = measure(options.bursts, options.pods, options.rig)
    print(f"pod creation → SetDesiredCapacity, {options.pods} pods a burst: median "
          f"{statistics.median(latencies):.2f} s over {len(latencies)} bursts (min "
          f"{min(latencies):.2f} s, max {max(latencies):.2f} s)")


if __name__ == "__main__":
    main()
