"""Issue 40: a Ctrl-C to `elevator serve`'s process group must not reach the processes its
Prefect Runner starts for runs (`flows.cli.stopping.RunsShieldedFromCtrlC`): one that took it
ended its tick Crashed. Real processes: a child started on that loop, then SIGINT to it, as a
terminal sends it to the whole group."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading

from kube_elevator.flows.cli.stopping import RunsShieldedFromCtrlC, ctrl_c_blocked

# The child says it started, then sleeps; the test sends it SIGINT. A KeyboardInterrupt would
# end it with code 1; blocked, the signal waits and the child ends its work: code 0. The child
# takes Python's own handler first: a shell without job control (a script's `cmd &`) starts the
# suite with SIGINT ignored, which every child inherits, and then no child would take it at all;
# setting a handler leaves the inherited mask, the thing under test, as it was.
CHILD = ("import signal, sys, time\n"
         "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
         "print('started', flush=True)\n"
         "time.sleep(1.0)\n"
         "print('finished', flush=True)\n")


async def child_after_sigint() -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, stdout=asyncio.subprocess.PIPE)
    assert process.stdout is not None
    assert await process.stdout.readline() == b"started\n"
    process.send_signal(signal.SIGINT)
    rest = await process.stdout.read()
    return await process.wait(), rest.decode()


def test_a_child_of_the_shielded_loop_finishes_its_work_through_a_ctrl_c() -> None:
    with asyncio.Runner(loop_factory=RunsShieldedFromCtrlC) as runner:
        code, output = runner.run(child_after_sigint())
    assert (code, output) == (0, "finished\n")


def test_without_the_shield_the_same_child_is_interrupted() -> None:
    """The check above can fail: on a plain loop the child takes the Ctrl-C."""
    with asyncio.Runner() as runner:
        code, output = runner.run(child_after_sigint())
    assert code != 0 and "finished" not in output


def test_the_shield_leaves_the_command_its_own_ctrl_c() -> None:
    """The block is the spawning thread's, for the spawn only: afterwards this process takes
    SIGINT again (its handler runs), and a SIGINT sent during the block is not lost."""
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: received.append(signum))
    try:
        with ctrl_c_blocked():
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # pending, not lost
            assert received == []
        assert received == [signal.SIGINT]
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    finally:
        signal.signal(signal.SIGINT, previous)
