"""Fixes for Prefect 3 (every release pyproject.toml admits): its flow-run heartbeat costs every
sync flow run up to a second; and the settings of a server that records ticks.

The engine's heartbeat thread sleeps in 1-second slices (`time.sleep(1)`) and is joined when the
run ends, so a run that finishes between two slices waits for the slice to end: measured here,
a flow run of zero tasks takes 1.08 s, of which 0.88 s is that join. The fixed loop waits on its
stop event instead, so it ends the moment the run does. Heartbeats themselves stay on: the
server needs them to find crashed runs and free their concurrency slots.

The server a command uses without PREFECT_API_URL is no longer Prefect's temporary one but a
local `prefect server start` of our own, through Prefect's public surface only
(`tasks/adapters/prefect_server.py`).

Each fix is installed where Prefect shows the behaviour it fixes and the shape it replaces
(`heartbeat_loop_sleeps_in_slices`), never on a version number: a release that fixed the
heartbeat keeps its own loop, one whose internals moved keeps Prefect's own code.
docs/deploying.md, "Prefect releases", lists what remains and why.
"""

from __future__ import annotations

import contextvars
import inspect
import os
import threading
import types
from collections.abc import Generator, MutableMapping
from contextlib import contextmanager
from typing import Any


def heartbeat_loop_sleeps_in_slices(engine_module: types.ModuleType) -> bool:
    """Whether this Prefect's flow-run heartbeat is the one `install` fixes: a
    `_send_heartbeats(engine, join_on_exit)` context manager (Prefect 3.6.24 and later) whose
    `heartbeat_loop` sleeps (`time.sleep`) between checks of its stop event, joined when the
    run ends, with the engine methods our loop calls. A release whose loop waits on its event
    instead, or whose heartbeat has another shape, keeps Prefect's own."""
    send = getattr(engine_module, "_send_heartbeats", None)
    # Once `install` replaced it, the question is about Prefect's own, which it keeps.
    send = getattr(send, "__elevator_original__", send)
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


def install() -> bool:
    """Replace `prefect.flow_engine._send_heartbeats` where its loop sleeps in slices
    (`heartbeat_loop_sleeps_in_slices`); True when the heartbeat fix is installed.

    `ELEVATOR_PREFECT_ENGINE_FIX=0` keeps Prefect's own engine (the benchmark's baseline uses it).
    """

    import prefect.flow_engine as engine_module
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
    _send_heartbeats.__elevator_original__ = engine_module._send_heartbeats  # type: ignore[attr-defined]
    engine_module._send_heartbeats = _send_heartbeats
    return True


@contextmanager
def one_client_for_runs() -> Generator[None, None, None]:
    """One Prefect API client for every flow run a loop starts (`elevator run`, `elevator
    watch`'s in-process ticks).

    Prefect's engine reuses the client of an open `SyncClientContext` and otherwise builds one
    per flow run: a new HTTP connection, TLS context and CSRF-token request each tick (measured
    ~40 ms of a tick's overhead here). Prefect's own API, no patch.

    Only where an API URL is set (the commands set it, `use_local_server`): without one,
    opening the client starts Prefect's own temporary server, with its 20 s start timeout,
    before any run needs it, and a loop whose cycles run no flow would wait for it.
    """
    from prefect.context import SyncClientContext
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        yield
        return
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
