"""The local Prefect server of a process without PREFECT_API_URL: shared by `elevator`'s one-shot
commands and the harness, or a command's own, started through Prefect's public surface only.

Without PREFECT_API_URL, Prefect starts a temporary ("ephemeral") server in every process at its
first API call. Measured on this 2-CPU machine (load 8-12, benchmarks/RESULTS.md): importing the
server 17.6 s, a server answering after 50 s on a new PREFECT_HOME (the migrations) and 23 s on
an existing one, for a tick of under a second. So:

- `shared`: the first command that needs a server starts one, detached (a session of its own) on
  127.0.0.1 and a free port, and records its URL and pid in `$PREFECT_HOME/elevator-server.json`,
  behind a file lock so that concurrent commands start one; later commands find it answering and
  use it. Each registers its pid (`elevator-server-users/`); the server stops itself once no
  registered process is alive and no request came for `ELEVATOR_PREFECT_SERVER_IDLE_SECONDS`
  (default `IDLE_SECONDS`). `elevator prefect-server stop` stops it at once.
- `own`: a long-running command (`serve`, `watch`, `run --interval`, `pods run`) starts a server
  of its own that stops when the command is gone, as Prefect's temporary one does; `serve`'s
  runs Prefect's scheduler service (`schedules`).

Either is `prefect server start`'s app (uvicorn with `prefect.server.api.server:create_app`), its
services chosen with Prefect's settings: the scheduler only where something serves the schedules
(a deployment left unpaused by a killed `serve` gets no runs from a one-shot command's server),
the rest as Prefect's defaults, the flow-run vacuum included (`SERVER_SETTINGS`). Then
PREFECT_API_URL names it, in this process's environment (the processes it starts inherit it,
such as `serve --ticks runs`'s runs) and in Prefect's settings. Each run is a flow run in the
PREFECT_HOME's database, as before: `prefect server start` shows them.

A server that does not answer in time is one line saying what to do (`TemporaryServerTimeout`),
and it is stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kube_elevator.tasks.core.collector import gc_paused

# How long a command waits for a server to answer, unless
# PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS says otherwise (Prefect's 20 s timed out about
# one start in three on a loaded 2-core machine: a first start's migrations took 15-50 s).
TEMPORARY_SERVER_STARTUP_SECONDS = 120
# The shared server stops when no registered process is alive and no request came for this long.
IDLE_SECONDS = 300.0
IDLE_VARIABLE = "ELEVATOR_PREFECT_SERVER_IDLE_SECONDS"
RECORD_NAME = "elevator-server.json"
LOCK_NAME = "elevator-server.lock"
USERS_NAME = "elevator-server-users"
LOG_NAME = "elevator-server.log"
# How long a recorded server may take to answer its health check before it is taken for gone.
HEALTH_SECONDS = 5.0

Kind = Literal["shared", "own"]


class TemporaryServerTimeout(RuntimeError):
    """The local Prefect server did not answer in time: what to do, on one line."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(
            f"the temporary Prefect server this command starts (no PREFECT_API_URL) did not "
            f"answer within {seconds:g} s: set PREFECT_API_URL to a running Prefect server "
            f"(start one with `prefect server start`), or allow it longer with "
            f"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS")


class TemporaryServerExited(TemporaryServerTimeout):
    """The local Prefect server exited before it answered: its log says why."""

    def __init__(self, code: int, log: Path) -> None:
        self.seconds = 0.0
        RuntimeError.__init__(
            self, f"the temporary Prefect server this command starts (no PREFECT_API_URL) "
                  f"exited with {code} before answering (its log: {log}): set PREFECT_API_URL "
                  f"to a running Prefect server (start one with `prefect server start`)")


@dataclass(frozen=True)
class LocalServer:
    url: str  # Prefect's API, ".../api"
    pid: int
    kind: Kind


def temporary_server_timeout_seconds() -> float:
    """PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS when set (the environment or the
    profile), else `TEMPORARY_SERVER_STARTUP_SECONDS`."""
    from prefect.settings import get_current_settings

    ephemeral = get_current_settings().server.ephemeral
    if "startup_timeout_seconds" in ephemeral.model_fields_set:
        return float(ephemeral.startup_timeout_seconds)
    return float(TEMPORARY_SERVER_STARTUP_SECONDS)


def idle_seconds() -> float:
    return float(os.environ.get(IDLE_VARIABLE, IDLE_SECONDS))


def on_a_local_server() -> bool:
    """Whether Prefect talks to the local server `use_local_server` pointed this process at
    (found now, or by an earlier call: PREFECT_API_URL stays set for the process)."""
    return bool(_POINTED_AT) and configured_api_url() == _POINTED_AT[0]


def configured_api_url() -> str | None:
    """The PREFECT_API_URL Prefect's settings hold (the environment, a profile, a .env)."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url) if url else None


def prefect_home() -> Path:
    from prefect.settings import get_current_settings

    home = Path(get_current_settings().home).expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home


def use_local_server(kind: Kind = "shared", *, schedules: bool = False,
                     timeout: float | None = None) -> LocalServer | None:
    """Without PREFECT_API_URL: a local server for this process (`kind`, see the module), and
    PREFECT_API_URL pointing at it here and in the processes this one starts. None when
    PREFECT_API_URL is set. `TemporaryServerTimeout` when it does not answer in time.

    Without cyclic GC: the first call imports Prefect (its settings, client and schemas), whose
    import spends a fifth of its CPU in full collections otherwise (issue 40)."""
    with gc_paused():
        return _use_local_server(kind, schedules, timeout)


def _use_local_server(kind: Kind, schedules: bool, timeout: float | None) -> LocalServer | None:
    if configured_api_url():
        return None
    home = prefect_home()
    seconds = temporary_server_timeout_seconds() if timeout is None else timeout
    if kind == "own":
        server = start_server(home, "own", seconds, schedules=schedules, parent=os.getpid())
    else:
        with locked(home):
            found = recorded_server(home)
            server = found if found is not None else start_server(
                home, "shared", seconds, idle=idle_seconds())
            if found is None:
                (home / RECORD_NAME).write_text(json.dumps(
                    {"url": server.url, "pid": server.pid}))
            register_user(home, os.getpid())
    point_prefect_at(server.url)
    return server


# The URL `point_prefect_at` last set in this process.
_POINTED_AT: list[str] = []


def point_prefect_at(url: str) -> None:
    """PREFECT_API_URL = `url` in the environment, and in Prefect's process-wide settings when
    Prefect has read them already (`prefect.context.refresh_global_settings_context`, which
    rereads the environment; a settings context entered by the caller keeps its own)."""
    _POINTED_AT[:] = [url]
    os.environ["PREFECT_API_URL"] = url
    context = sys.modules.get("prefect.context")
    if context is None:
        return
    refresh: Callable[[], None] | None = getattr(context, "refresh_global_settings_context", None)
    if refresh is not None:
        refresh()
    else:  # a Prefect without it: the same, by hand
        setattr(context, "GLOBAL_SETTINGS_CONTEXT", context.root_settings_context())  # noqa: B010


@contextlib.contextmanager
def locked(home: Path) -> Iterator[None]:
    """The shared server's lock (an flock: released by the kernel if its holder dies)."""
    with open(home / LOCK_NAME, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def recorded_server(home: Path) -> LocalServer | None:
    """The shared server the record names, if it is alive and answers."""
    try:
        record = json.loads((home / RECORD_NAME).read_text())
        url, pid = str(record["url"]), int(record["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not alive(pid) or not answers(url, HEALTH_SECONDS):
        return None
    return LocalServer(url, pid, "shared")


def answers(api_url: str, timeout: float) -> bool:
    """Whether the Prefect API at `api_url` answers its health check within `timeout`."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def started_at(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22): a pid
    with another start time is another process. None when there is no such process (or a
    zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]


def alive(pid: int) -> bool:
    return started_at(pid) is not None


def register_user(home: Path, pid: int) -> None:
    """`pid` uses the shared server: it stays while that process lives."""
    users = home / USERS_NAME
    users.mkdir(exist_ok=True)
    (users / f"{pid}-{started_at(pid)}").touch()


def live_users(home: Path) -> list[int]:
    """The registered processes still alive; the others' entries are removed."""
    found = []
    with contextlib.suppress(OSError):
        for entry in (home / USERS_NAME).iterdir():
            pid, _, start = entry.name.partition("-")
            if pid.isdigit() and started_at(int(pid)) == start:
                found.append(int(pid))
            else:
                entry.unlink(missing_ok=True)
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(home: Path, kind: Kind, seconds: float, *, schedules: bool = False,
                 parent: int | None = None, idle: float | None = None) -> LocalServer:
    """Start a server in a session of its own (a signal to the command's process group reaches
    the command, which stops while its server still records) and wait `seconds` for it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    from prefect.settings import get_current_settings

    settings = get_current_settings().to_environment_variables(exclude_unset=True)
    env = {**os.environ, **settings, "PREFECT_HOME": str(home), "PREFECT_UI_ENABLED": "0",
           "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "true" if schedules else "false"}
    env.pop("PREFECT_API_URL", None)
    database = sqlite_database()
    fresh = database is not None and not database.exists()
    if fresh and database is not None:
        fresh = not seeded(database)
    registers = prepare_registration(database, env)
    args = [sys.executable, "-m", __name__, "--port", str(port)]
    if parent is not None:
        args += ["--parent", str(parent)]
    if idle is not None:
        args += ["--idle-seconds", f"{idle:g}", "--home", str(home)]
    log = home / LOG_NAME
    with open(log, "ab") as output:
        process = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=output,
                                   stderr=output, start_new_session=True)
    deadline = time.monotonic() + seconds
    while not answers(url, 1.0):
        code = process.poll()
        if code is not None:
            raise TemporaryServerExited(code, log)
        if time.monotonic() >= deadline:
            stop_process(process)
            raise TemporaryServerTimeout(seconds)
        time.sleep(0.1)  # polling a server that is starting: there is nothing to await
    if fresh and database is not None:
        keep_template(database)
    if registers and database is not None:
        record_registered(database)
    return LocalServer(url, process.pid, kind)


# A new PREFECT_HOME's SQLite database must first be migrated (measured: about half of a first
# start, 27 of 50 s on a loaded 2-core machine). A copy of one just migrated, before any run is
# written, saved once per Prefect version and set of collections in the user's cache, seeds the
# next new PREFECT_HOME: Prefect's own start then finds its migrations done (and checks them, as
# always), and the block types registered (`SKIP_REGISTRATION_SETTINGS`).
TEMPLATE_VARIABLE = "ELEVATOR_PREFECT_DATABASE_TEMPLATE"  # "0": no template

# Prefect registers at every server start the block types of its release and of each installed
# collection (entry points `prefect.collections`: prefect-aws, prefect-kubernetes, prefect-dask),
# importing every collection to learn them even when its memo says nothing changed
# (`_memoize_block_auto_registration`, prefect/server/api/server.py): 4.9 of a start's 14 s of
# CPU here (py-spy, Prefect 3.9.1, the `blocks` extra installed; benchmarks/RESULTS.md). Where
# the database holds them already, registered there by a server of the same release and
# collections (or seeded from such a server's template), the server is told so by Prefect's own
# settings and skips it; a record beside the database says which release and collections, and
# how many block types (`prefect server database reset` empties the table: then it registers).
# A user's own setting wins.
SKIP_REGISTRATION_SETTINGS = {
    "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false",
    "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION": "false",
}
# Every name Prefect reads those two settings by (its settings' aliases, 3.8.6 to 3.9.1), the
# register setting's first.
REGISTER_NAMES = ("PREFECT_SERVER_REGISTER_BLOCKS_ON_START", "PREFECT_API_BLOCKS_REGISTER_ON_START")
REGISTRATION_NAMES = (*REGISTER_NAMES, "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION",
                      "PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION")
REGISTERED_SUFFIX = ".elevator-blocks.json"


def collections_key() -> str:
    """The Prefect release and the installed collections, by distribution and version: what a
    server's block registration depends on."""
    import hashlib
    from importlib.metadata import entry_points

    import prefect

    found = sorted({f"{point.dist.name}=={point.dist.version}"
                    for point in entry_points(group="prefect.collections")
                    if point.dist is not None})
    digest = hashlib.sha256("\n".join(found).encode()).hexdigest()[:12]
    return f"{prefect.__version__}-{digest}"


def template_path() -> Path | None:
    if os.environ.get(TEMPLATE_VARIABLE) == "0":
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "kube-elevator" / f"prefect-{collections_key()}.db"


def block_type_count(database: Path) -> int:
    """How many block types `database` holds; 0 when it cannot tell (no file, no table yet)."""
    import sqlite3

    if not database.is_file():
        return 0
    try:  # read-write, as its server opens it: a WAL database needs its -shm file to be read
        connection = sqlite3.connect(database, timeout=5)
        try:
            return int(connection.execute("SELECT count(*) FROM block_type").fetchone()[0])
        finally:
            connection.close()
    except sqlite3.Error:
        return 0


def registration_record(database: Path) -> Path:
    return database.with_name(database.name + REGISTERED_SUFFIX)


def record_registered(database: Path) -> None:
    """After a server that registered its block types answered (or a copy of a template that
    one made): this release's and these collections' block types are in `database`."""
    count = block_type_count(database)
    if count > 0:
        with contextlib.suppress(OSError):
            registration_record(database).write_text(
                json.dumps({"key": collections_key(), "block_types": count}))


def registered(database: Path) -> bool:
    """Whether `database` holds the block types a server would register at its start."""
    try:
        record = json.loads(registration_record(database).read_text())
        key, count = str(record["key"]), int(record["block_types"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return key == collections_key() and 0 < count <= block_type_count(database)


def prepare_registration(database: Path | None, environ: dict[str, str]) -> bool:
    """`environ`, a server's, skips the block registration where `database` holds its block
    types already (and the user did not say otherwise). Whether the server registers them, so
    that `record_registered` follows its start."""
    users_own = any(name in environ for name in REGISTRATION_NAMES)
    if database is not None and not users_own and registered(database):
        environ.update(SKIP_REGISTRATION_SETTINGS)
    value = next((environ[name] for name in REGISTER_NAMES if name in environ), "true")
    return database is not None and value.strip().lower() not in {"0", "false", "no", "off"}


def sqlite_database() -> Path | None:
    """The SQLite file of Prefect's database setting; None for another database."""
    from prefect.settings import get_current_settings

    url = get_current_settings().server.database.connection_url
    text = url.get_secret_value() if url is not None else ""
    prefix = "sqlite+aiosqlite:///"
    return Path(text[len(prefix):]) if text.startswith(prefix) else None


def seeded(database: Path) -> bool:
    """A new database copied from the template, if there is one."""
    template = template_path()
    if template is None or not template.is_file():
        return False
    database.parent.mkdir(parents=True, exist_ok=True)
    partial = database.with_name(database.name + ".seeding")
    import shutil

    shutil.copyfile(template, partial)
    partial.replace(database)
    record_registered(database)  # the template's server registered them
    return True


def keep_template(database: Path) -> None:
    """The database a server has just migrated (no run written yet), as the template: SQLite's
    online backup, a consistent copy of a database in use. Best effort."""
    template = template_path()
    if template is None or template.exists():
        return
    import sqlite3

    with contextlib.suppress(OSError, sqlite3.Error):
        template.parent.mkdir(parents=True, exist_ok=True)
        # The process's and the thread's: a test starts servers side by side, in threads.
        partial = template.with_name(
            f"{template.name}.{os.getpid()}.{threading.get_native_id()}")
        source = sqlite3.connect(database, timeout=30)
        target = sqlite3.connect(partial)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
        partial.replace(template)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """A server still starting: SIGTERM, then SIGKILL (a frozen one hears only that)."""
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_shared_server(home: Path, timeout: float = 30.0) -> int | None:
    """`elevator prefect-server stop`: stop the shared server of `home` now; its pid, or None
    when none runs."""
    with locked(home):
        try:
            pid = int(json.loads((home / RECORD_NAME).read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        (home / RECORD_NAME).unlink(missing_ok=True)
    if not alive(pid):
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # another process's exit: polled with a deadline
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
    return pid


# --- in the server's process ------------------------------------------------------------------

_last_request = [time.monotonic()]


def server_app() -> Any:
    """`prefect server start`'s app (Prefect's public factory), its requests timed for the idle
    stop."""
    from prefect.server.api.server import create_app

    app = create_app(final=True)

    async def timed(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            _last_request[0] = time.monotonic()
        await app(scope, receive, send)

    return timed


def stop_when_idle(home: Path, idle: float, clock: Callable[[], float] = time.monotonic,
                   wait: Callable[[float], None] = time.sleep,
                   stop: Callable[[], None] | None = None,
                   last_request: list[float] = _last_request) -> None:
    """The shared server: stop (SIGTERM to itself: uvicorn shuts down gracefully) once, for
    `idle` seconds, no registered process was alive and no request came. The record goes first,
    under the lock, so that no command picks a server that is stopping. `clock`, `wait`,
    `stop` and `last_request` (the time of the last request, on `clock`): the tests' own."""
    check = max(min(idle / 4, 5.0), 0.05)
    while True:
        wait(check)  # a clock's tick: the idle bound is time itself
        if live_users(home):  # a process that uses the server keeps it, requests or not
            last_request[0] = clock()
        if clock() - last_request[0] < idle:
            continue
        with locked(home):
            if live_users(home):
                last_request[0] = clock()
                continue
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                if int(json.loads((home / RECORD_NAME).read_text())["pid"]) == os.getpid():
                    (home / RECORD_NAME).unlink()
        (stop or (lambda: os.kill(os.getpid(), signal.SIGTERM)))()
        return


def stop_with(parent_pid: int) -> None:
    """A command's own server: SIGTERM to itself once the command that started it is gone. It
    runs in a session of its own, so nothing else would stop it after a SIGKILL of its command."""
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--parent", type=int)
    parser.add_argument("--idle-seconds", type=float)
    parser.add_argument("--home", type=Path)
    args = parser.parse_args(argv)
    if args.parent is not None:
        threading.Thread(target=stop_with, args=(args.parent,), daemon=True,
                         name="stop-with-its-command").start()
    if args.idle_seconds is not None:
        threading.Thread(target=stop_when_idle, args=(args.home, args.idle_seconds),
                         daemon=True, name="stop-when-idle").start()
    import uvicorn

    uvicorn.run(server_app, factory=True, host="127.0.0.1", port=args.port, log_level="error",
                lifespan="on")


if __name__ == "__main__":
    main()
