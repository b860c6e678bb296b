"""A stop with a deadline: the first SIGTERM or SIGINT stops a command gently, and a command
that cannot finish stopping still ends, in time for Kubernetes' terminationGracePeriodSeconds.

A gentle stop talks to the Prefect server: the run in flight records its end, the Runner pauses
its schedules and cancels what still runs, Prefect's clients flush their logs and events as the
process exits. When that server does not answer (a remote PREFECT_API_URL that is down, a
server stopped with SIGSTOP), each of those calls waits out Prefect's timeouts and retries, and
the stop would hang for minutes. So the first signal also arms a deadline; when it passes, or
at a second SIGTERM or SIGINT, the command gives up the Lease (it talks to the Kubernetes API,
not to Prefect: best effort, within `RELEASE_SECONDS`), says on one line what it left behind,
and exits 1 at once, without Prefect's exit handlers (`os._exit`). The temporary server a
command starts for itself stops when its command is gone (`prefect_server.stop_with`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from kube_elevator.tasks.adapters.prefect_server import answers

# After SIGTERM the run (or tick) in flight may finish for this long: `serve` then cancels it
# (`--stop-grace`), `watch` and `run --interval` wait for it within the deadline.
STOP_GRACE_SECONDS = 20.0
# After the grace the run in flight has, how long the rest of the stop may take: the Runner's
# shutdown, the schedule's pause, the clients' flush, each one round trip when the server answers.
SHUTDOWN_SECONDS = 5.0
# Of SHUTDOWN_SECONDS, what the command keeps for its exit once its stop is done: the event
# loop's close, the Lease's release, Prefect's clients flushing their logs and events.
EXIT_SECONDS = 2.0
# The Lease's release when the deadline forces the stop: its own timeout, on top of the deadline.
RELEASE_SECONDS = 2.0
# How long the forced stop asks the Prefect server whether it answers, to say so (while the
# Lease is released: no time of its own).
PROBE_SECONDS = 1.0


class StopDeadline:
    """Signal handling for a command that stops gently (`on_first`) and, if that hangs, by force.

    `seconds`: from the first signal to the forced stop. `server_url`: the Prefect API the
    gentle stop talks to, named in the forced stop's line (None: `prefect_api_url()` when the
    stop is forced, the temporary server started by then). `release`: set by whoever holds the
    Lease (`liveness.kept_alive`); called with a timeout, True when the Lease is free. `doing`:
    what the gentle stop is busy with, for the line. `on_force`: what the forced stop ends
    first, needing no server (serve: its runs' processes, which would outlive it). `handler`:
    the signal handler, once installed (serve hands it to Prefect's Runner, which installs its
    own for SIGTERM as it starts).
    """

    def __init__(self, command: str, seconds: float, server_url: str | None,
                 say: Callable[[str], None], doing: str = "stopping") -> None:
        self.command = command
        self.seconds = seconds
        self.server_url = server_url
        self.say = say
        self.release: Callable[[float], bool] | None = None
        self.on_force: list[Callable[[], None]] = []
        self.handler: Callable[[int, FrameType | None], None] | None = None
        self.doing = doing
        self.exit: Callable[[int], None] = os._exit
        self._forced = threading.Event()
        self._armed_at: float | None = None
        self._why = ""
        self._watch: threading.Thread | None = None

    def install(self, on_first: Callable[[], None]) -> None:
        """SIGTERM and SIGINT: the first calls `on_first` and arms the deadline, the next forces
        the stop at once. From the main thread (Python's signal handlers run there). Installed
        again with another `on_first`, a signal that came already is not lost: `on_first` is
        called now (and may be called twice: it must not mind)."""
        def signalled(signum: int, _frame: FrameType | None) -> None:
            if self._watch is None:
                self.arm()
                on_first()
            else:
                self.force(f"a second {signal.Signals(signum).name}")

        self.handler = signalled
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signalled)
        if self._watch is not None:
            on_first()

    def arm(self) -> None:
        """Start the deadline's clock (once)."""
        if self._watch is None:
            self._armed_at = time.monotonic()
            self._watch = threading.Thread(target=self._wait, name="stop-deadline", daemon=True)
            self._watch.start()

    def left(self) -> float:
        """Seconds until the stop is forced (all of them before the first signal)."""
        if self._armed_at is None:
            return self.seconds
        return max(0.0, self._armed_at + self.seconds - time.monotonic())

    def force(self, why: str) -> None:
        self._why = why
        self.arm()
        self._forced.set()

    def _wait(self) -> None:
        # A daemon thread: it outlives the main thread's end, so it also bounds the exit
        # handlers Prefect runs after the command returned (flushing logs and events).
        self.say(f"stopping within {self.seconds:g}s (a second Ctrl-C or SIGTERM stops at once)")
        if not self._forced.wait(self.seconds):
            self._why = f"the stop did not finish within {self.seconds:g}s"
        for end in self.on_force:
            try:
                end()
            except Exception as error:  # best effort: the exit comes all the same
                self.say(f"{type(error).__name__}: {error}")
        server: list[str] = []
        probe = threading.Thread(target=lambda: server.append(self.left_behind()),
                                 name="probe-prefect-server", daemon=True)
        probe.start()
        released = self.release(RELEASE_SECONDS) if self.release is not None else None
        probe.join(PROBE_SECONDS + 0.5)
        self.say(f"{self._why}: {server[0] if server else self.left_behind(answered=False)}"
                 + {None: "", True: "; the Lease is released",
                    False: "; the Lease is not released (it expires)"}[released]
                 + "; exit 1")
        sys.stdout.flush()
        sys.stderr.flush()
        self.exit(1)

    def left_behind(self, answered: bool | None = None) -> str:
        """What the forced stop leaves undone, by whether the Prefect server answers now
        (`answered`: asked already)."""
        url = self.server_url
        if url is None:
            try:
                url = prefect_api_url()
            except Exception:  # Prefect's settings unreadable: say it without the server
                url = None
        if answered is None and url is not None:
            answered = answers(url, PROBE_SECONDS)
        if url is not None and not answered:
            return (f"the Prefect server at {url} did not answer; stopped without it "
                    f"({self.doing})")
        return f"stopped without finishing ({self.doing})"


def stop_signals(command: str) -> tuple[threading.Event, StopDeadline]:
    """An event the first SIGTERM or SIGINT sets, so a loop stops between ticks (`watch`, `run
    --interval`, `pods run`), and the deadline that bounds that stop: the tick in flight may
    finish for `STOP_GRACE_SECONDS`, the rest take `SHUTDOWN_SECONDS`. Pass the deadline to
    `liveness.kept_alive`, which releases the Lease when it forces the stop."""
    from kube_elevator.flows.cli.common import say_as

    stop = threading.Event()
    stopping = StopDeadline(command, STOP_GRACE_SECONDS + SHUTDOWN_SECONDS, None,
                            say_as(command), doing="waiting for the tick in flight")
    stopping.install(stop.set)
    return stop, stopping


def prefect_api_url() -> str | None:
    """The Prefect API this process talks to: PREFECT_API_URL's, else its temporary server's
    (once started)."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if url:
        return str(url)
    if "prefect.server.api.server" not in sys.modules:
        return None
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    return server.api_url if server.running else None


@contextmanager
def ctrl_c_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread while inside: a process forked here starts with it blocked
    (the signal mask survives fork and exec; a Python child keeps it, its KeyboardInterrupt
    never raised). A Ctrl-C meanwhile is not lost: another thread takes it, or it waits,
    pending, until the block ends; Python runs the handler in the main thread either way."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class RunsShieldedFromCtrlC(asyncio.SelectorEventLoop):
    """The event loop of a command whose children run flow runs (`serve`'s Prefect Runner):
    each process it starts has Ctrl-C blocked. A Ctrl-C in a terminal reaches the whole
    process group; a run's process that took it would end its tick Crashed (Prefect's engine
    treats a KeyboardInterrupt as a crash) while the command meant to let it finish within
    its grace, or to end it Cancelled saying why. The command stops it itself
    (`serve_runs.end_processes`), with SIGTERM, which stays unblocked, as Prefect's own cancel."""

    async def subprocess_exec(self, *args: Any, **kwargs: Any) -> Any:
        with ctrl_c_blocked():  # the fork happens in this call, in this thread
            return await super().subprocess_exec(*args, **kwargs)
