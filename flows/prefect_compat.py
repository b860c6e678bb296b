"""Fixes for Prefect 3 (every release pyproject.toml admits): its flow-run heartbeat costs every
sync flow run up to a second; the temporary server a command starts for itself (no
PREFECT_API_URL) never deletes old flow runs, schedules no runs, dies with the command's Ctrl-C
and times out with a traceback; and the settings of a server that records ticks.

The engine's heartbeat thread sleeps in 1-second slices (`time.sleep(1)`) and is joined when the
run ends, so a run that finishes between two slices waits for the slice to end: measured here,
a flow run of zero tasks takes 1.08 s, of which 0.88 s is that join. The fixed loop waits on its
stop event instead, so it ends the moment the run does. Heartbeats themselves stay on: the
server needs them to find crashed runs and free their concurrency slots.

The temporary server (`prefect.server.api.server.SubprocessASGIServer`, "ephemeral" in
Prefect's words) is started by the first API call of a process without PREFECT_API_URL. Here
it runs in a session of its own, so a signal to the command's process group (Ctrl-C in a
terminal, `kill -INT -- -PGID`) reaches the command and not its server: the command stops
cleanly, talking to a server that is still there, and stops the server as it exits; the
server stops by itself when the command's process is gone (even after a SIGKILL). It runs
Prefect's flow-run vacuum, and, for `elevator serve`, Prefect's scheduler service (see
`start_temporary_server`). A server that does not answer in time is one line saying what to
do (`TemporaryServerTimeout`), after `TEMPORARY_SERVER_STARTUP_SECONDS` rather than 20 s.

Each fix is installed where Prefect shows the behaviour it fixes and the shape it replaces
(`heartbeat_loop_sleeps_in_slices`, `temporary_server_fits`), never on a version number: a
release that fixed the heartbeat keeps its own loop, one whose internals moved keeps Prefect's
own code. docs/deploying.md, "Prefect releases", lists what remains and why.
"""

from __future__ import annotations

import contextvars
import inspect
import os
import signal
import threading
import types
from collections.abc import Generator, MutableMapping
from contextlib import contextmanager
from typing import Any

# How long a command waits for its temporary server to answer, unless
# PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS says otherwise. Prefect's 20 s is short for a
# first start (the database's migrations) on a busy machine: measured 15-25 s on a loaded
# 2-core one, which timed out about one start in three.
TEMPORARY_SERVER_STARTUP_SECONDS = 120
# The temporary server's environment: the process it belongs to, and whether it schedules runs.
PARENT_PID_VARIABLE = "ELEVATOR_TEMPORARY_SERVER_PARENT"
SCHEDULES_VARIABLE = "ELEVATOR_TEMPORARY_SERVER_SCHEDULES"


class TemporaryServerTimeout(RuntimeError):
    """The temporary Prefect server did not answer in time: what to do, on one line."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(
            f"the temporary Prefect server this command starts (no PREFECT_API_URL) did not "
            f"answer within {seconds:g} s: set PREFECT_API_URL to a running Prefect server "
            f"(start one with `prefect server start`), or allow it longer with "
            f"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS")


def heartbeat_loop_sleeps_in_slices(engine_module: types.ModuleType) -> bool:
    """Whether this Prefect's flow-run heartbeat is the one `install` fixes: a
    `_send_heartbeats(engine, join_on_exit)` context manager (Prefect 3.6.24 and later) whose
    `heartbeat_loop` sleeps (`time.sleep`) between checks of its stop event, joined when the
    run ends, with the engine methods our loop calls. A release whose loop waits on its event
    instead, or whose heartbeat has another shape, keeps Prefect's own."""
    send = getattr(engine_module, "_send_heartbeats", None)
    engine_class = getattr(engine_module, "FlowRunEngine", None)
    if send is None or engine_class is None or not hasattr(engine_module,
                                                            "MINIMUM_HEARTBEAT_INTERVAL"):
        return False
    if not all(hasattr(engine_class, name) for name in (
            "heartbeat_seconds", "_build_heartbeat_event_template", "_emit_flow_run_heartbeat")):
        return False
    function = inspect.unwrap(send)
    if list(inspect.signature(function).parameters) != ["engine", "join_on_exit"]:
        return False
    loops = [const for const in function.__code__.co_consts
             if isinstance(const, types.CodeType) and const.co_name == "heartbeat_loop"]
    return len(loops) == 1 and "sleep" in loops[0].co_names


def temporary_server_fits() -> bool:
    """Whether Prefect's temporary server has the shape `_install_temporary_server` and
    `ephemeral_server_app` build on (Prefect 3.6.21 to 3.9.x): `SubprocessASGIServer` starting
    its server by `_run_uvicorn_command`, and perpetual services for the flow-run vacuum and
    the scheduler, each marked `run_in_ephemeral`."""
    try:
        from prefect.server.api.server import SubprocessASGIServer
        from prefect.server.services.db_vacuum import schedule_vacuum_tasks  # noqa: F401
        from prefect.server.services.perpetual_services import get_perpetual_services
        from prefect.server.services.scheduler import (  # noqa: F401
            schedule_deployments,
            schedule_recent_deployments,
        )
    except ImportError:
        return False
    services = get_perpetual_services()
    return (callable(getattr(SubprocessASGIServer, "_run_uvicorn_command", None))
            and "timeout" in inspect.signature(SubprocessASGIServer.start).parameters
            and all(hasattr(service, "run_in_ephemeral") and hasattr(service, "function")
                    for service in services))


def install() -> bool:
    """Replace `prefect.flow_engine._send_heartbeats` where its loop sleeps in slices
    (`heartbeat_loop_sleeps_in_slices`), and, without PREFECT_API_URL, start the temporary
    server as the module docstring says (`_install_temporary_server`, where
    `temporary_server_fits`); True when the heartbeat fix is installed.

    `ELEVATOR_PREFECT_ENGINE_FIX=0` keeps Prefect's own engine (the benchmark's baseline uses it).
    """

    import prefect.flow_engine as engine_module
    from prefect.settings import get_current_settings

    if not get_current_settings().api.url and temporary_server_fits():
        _install_temporary_server()  # Prefect starts a server of its own: it imports the
                                     # server's module then anyway
    if os.environ.get("ELEVATOR_PREFECT_ENGINE_FIX", "1") == "0":
        return False
    if getattr(getattr(engine_module, "_send_heartbeats", None), "__elevator_fix__", False):
        return True
    if not heartbeat_loop_sleeps_in_slices(engine_module):
        return False
    minimum = engine_module.MINIMUM_HEARTBEAT_INTERVAL

    @contextmanager
    def _send_heartbeats(engine: Any, join_on_exit: bool = True) -> Generator[None, None, None]:
        # Prefect's code, except the wait: `stop_event.wait` instead of `time.sleep(1)` slices.
        heartbeat_seconds = engine.heartbeat_seconds
        if heartbeat_seconds is None:
            yield
            return
        heartbeat_seconds = max(heartbeat_seconds, minimum)
        resource, related = engine._build_heartbeat_event_template()
        stop_event = threading.Event()

        def heartbeat_loop() -> None:
            while not stop_event.is_set():
                run = engine.flow_run
                if run and run.state and run.state.is_final():
                    return
                try:
                    engine._emit_flow_run_heartbeat(resource, related)
                except Exception:
                    engine.logger.debug("Failed to emit heartbeat", exc_info=True)
                stop_event.wait(heartbeat_seconds)

        context = contextvars.copy_context()  # as Prefect does: the same settings and API URL
        thread = threading.Thread(target=context.run, args=(heartbeat_loop,), daemon=True,
                                  name="flow-run-heartbeat")
        thread.start()
        try:
            yield
        finally:
            stop_event.set()
            if join_on_exit:
                thread.join(timeout=2)

    _send_heartbeats.__elevator_fix__ = True  # type: ignore[attr-defined]
    engine_module._send_heartbeats = _send_heartbeats
    return True


def start_temporary_server(schedules: bool = False) -> None:
    """Without PREFECT_API_URL, start the temporary Prefect server now, in this thread, rather
    than at the first API call, wherever that happens: a server that does not answer is
    `TemporaryServerTimeout` before the command has started anything else. Every later call
    of this process uses it. With PREFECT_API_URL, nothing.

    `schedules`: the server runs Prefect's scheduler service, which makes the runs of the
    deployments' schedules (`elevator serve`). Prefect runs it only in `prefect server start`:
    a temporary server lives as long as its command, so its schedules would have no one to
    run them, except when the command is the one that serves them. Other commands' servers
    stay without it, so a deployment left unpaused in `$PREFECT_HOME`'s database (a serve that
    was killed) gets no runs from an `elevator run --once`.
    """
    from prefect.settings import get_current_settings

    if get_current_settings().api.url:
        return
    if schedules:
        os.environ[SCHEDULES_VARIABLE] = "1"  # the server's environment is this one's
    install()
    from prefect.server.api.server import SubprocessASGIServer

    SubprocessASGIServer().start()


@contextmanager
def one_client_for_runs() -> Generator[None, None, None]:
    """One Prefect API client for every flow run a loop starts (`elevator run`, `elevator
    watch`'s in-process ticks).

    Prefect's engine reuses the client of an open `SyncClientContext` and otherwise builds one
    per flow run: a new HTTP connection, TLS context and CSRF-token request each tick (measured
    ~40 ms of a tick's overhead here). Prefect's own API, no patch.
    """
    from prefect.context import SyncClientContext

    with SyncClientContext.get_or_create():
        yield


# Settings for a Prefect server that records kube-elevator's ticks.
#
# The task-run recorder writes each task-run event in a transaction of its own by default
# (batch size 1), and SQLAlchemy compiles every one of those inserts afresh: profiled with
# py-spy, that was half of the server's CPU while ticks ran, and every API call of the tick
# waited behind it (a flow run of 6 task runs: 0.53 s, and 0.20-0.25 s with these). Batched, a
# task run reaches the UI within a second instead of at once; every one is still recorded.
#
# Retention (prefect/server/services/db_vacuum.py, Prefect 3.6.21 and later): a tick a minute is 1,440 flow
# runs a day, kept forever by Prefect's defaults (its vacuum deletes only events, after 7 days).
# With `flow_runs` enabled the vacuum deletes, every `..._LOOP_SECONDS` (default 3600), the
# finished top-level flow runs that ended more than `..._RETENTION_PERIOD` ago, with their task
# runs, states, logs and artifacts; and events older than `PREFECT_SERVER_EVENTS_RETENTION_PERIOD`.
# Seven days for both: a week of "when did it scale, and why" (a Monday can look back at the
# weekend), and a run and its events leave together. Measured in benchmarks/RESULTS.md: a
# week of idle ticks a minute from the watch cache is about 0.6 GB on SQLite (57 kB a tick,
# three quarters of it the runs' events).
RETENTION = "P7D"  # ISO 8601: both settings read it (the events one takes no bare seconds)
SERVER_SETTINGS = {
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1",
    "PREFECT_SERVER_SERVICES_DB_VACUUM_ENABLED": "events,flow_runs",
    "PREFECT_SERVER_SERVICES_DB_VACUUM_RETENTION_PERIOD": RETENTION,
    "PREFECT_SERVER_EVENTS_RETENTION_PERIOD": RETENTION,
}


def default_server_settings(environ: MutableMapping[str, str]) -> None:
    """`SERVER_SETTINGS` for a Prefect server this process starts, where `environ` does not
    say otherwise (a user's own setting wins)."""
    for name, value in SERVER_SETTINGS.items():
        environ.setdefault(name, value)


def ephemeral_server_app() -> Any:
    """The app of the Prefect server a command starts for itself (no PREFECT_API_URL), with
    the flow-run vacuum among its services, the scheduler when its command serves schedules,
    and a watch on its command's process.

    Prefect runs its flow-run vacuum only in `prefect server start`: an ephemeral server
    (`PREFECT__SERVER_EPHEMERAL`) runs the services marked `run_in_ephemeral`, and the vacuum
    of flow runs is not one (3.8.8, `schedule_vacuum_tasks`). Yet its SQLite database lives in
    PREFECT_HOME across every `elevator run` and `watch`, and would keep every tick. Marked so
    here, the server deletes runs past the retention when it starts and every loop after.
    The orphan scan stays off: it reads the whole log table, at every `run --once`. The two
    scheduler loops (`schedule_deployments`, `schedule_recent_deployments`) are marked the
    same way when `start_temporary_server(schedules=True)` asked for them.
    """
    from prefect.server.api.server import create_app
    from prefect.server.services.db_vacuum import schedule_vacuum_tasks
    from prefect.server.services.perpetual_services import get_perpetual_services
    from prefect.server.services.scheduler import (
        schedule_deployments,
        schedule_recent_deployments,
    )

    wanted: set[Any] = {schedule_vacuum_tasks}
    if os.environ.get(SCHEDULES_VARIABLE) == "1":
        wanted |= {schedule_deployments, schedule_recent_deployments}
    for service in get_perpetual_services():
        if service.function in wanted:
            service.run_in_ephemeral = True
    parent = os.environ.get(PARENT_PID_VARIABLE)
    if parent:
        threading.Thread(target=_stop_with, args=(int(parent),), daemon=True,
                         name="stop-with-its-command").start()
    return create_app()


def _stop_with(parent_pid: int) -> None:
    """In the temporary server: SIGTERM to itself (uvicorn then shuts down gracefully) once
    the command that started it is gone. The server runs in a session of its own, so nothing
    else would stop it after a SIGKILL of its command."""
    try:
        exited = os.pidfd_open(parent_pid)  # readable once the process has exited
    except OSError:  # gone already, or no pidfd (Linux before 5.3)
        exited = None
    if exited is not None and os.getppid() == parent_pid:  # the pid is still our parent's
        import select

        select.select([exited], [], [])
    else:
        while os.getppid() == parent_pid:
            threading.Event().wait(1.0)  # no pidfd: a reparented server notices within 1 s
    os.kill(os.getpid(), signal.SIGTERM)


def temporary_server_timeout_seconds() -> float:
    """PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS when set (the environment or the
    profile), else `TEMPORARY_SERVER_STARTUP_SECONDS`."""
    from prefect.settings import get_current_settings

    ephemeral = get_current_settings().server.ephemeral
    if "startup_timeout_seconds" in ephemeral.model_fields_set:
        return float(ephemeral.startup_timeout_seconds)
    return float(TEMPORARY_SERVER_STARTUP_SECONDS)


def _install_temporary_server() -> None:
    """Start the temporary server with `ephemeral_server_app`, in a session of its own (Prefect's
    command line for it, `SubprocessASGIServer._run_uvicorn_command`, but the factory and the
    session), and wait `temporary_server_timeout_seconds` for it, a timeout raising
    `TemporaryServerTimeout`. Only without PREFECT_API_URL: importing the server's module
    costs a second."""
    import subprocess
    import sys

    import prefect
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import get_current_settings

    if getattr(SubprocessASGIServer.start, "__elevator_fix__", False):
        return

    def _run_uvicorn_command(self: SubprocessASGIServer) -> subprocess.Popen[Any]:
        server_env = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
                      "PREFECT__SERVER_FINAL": "1", PARENT_PID_VARIABLE: str(os.getpid())}
        return subprocess.Popen(
            args=[sys.executable, "-m", "uvicorn", "--app-dir",
                  str(prefect.__module_path__.parent), "--factory",
                  f"{__name__}:ephemeral_server_app", "--host", "127.0.0.1", "--port",
                  str(self.port), "--log-level", "error", "--lifespan", "on"],
            env={**os.environ, **server_env,
                 **get_current_settings().to_environment_variables(exclude_unset=True)},
            start_new_session=True)

    prefect_start = SubprocessASGIServer.start

    def start(self: SubprocessASGIServer, timeout: int | None = None) -> None:
        seconds = timeout or temporary_server_timeout_seconds()
        try:
            prefect_start(self, int(seconds))
        except RuntimeError as error:
            if not str(error).startswith("Timed out while attempting to connect"):
                raise
            self.stop()  # still starting: it would outlive the command in its own session
            raise TemporaryServerTimeout(seconds) from None

    start.__elevator_fix__ = True  # type: ignore[attr-defined]
    SubprocessASGIServer._run_uvicorn_command = _run_uvicorn_command  # type: ignore[method-assign]
    SubprocessASGIServer.start = start  # type: ignore[method-assign]
