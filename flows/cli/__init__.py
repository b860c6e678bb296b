"""`elevator`: the command line. Bad input prints every problem and exits 2, never a traceback."""

from __future__ import annotations

import atexit
import contextlib
import gc
import os

# No cyclic GC while the commands' modules load: imports build no garbage cycles worth looking
# for, and the full collections a growing heap triggers were a fifth of the import's CPU
# (issue 40: 2.5 s -> 2.06 s for the CLI, Prefect and the tick's modules). On again once the
# commands are registered (at the foot of this module: a process that imports the CLI, a test's
# included, keeps its collector); `gc_paused` pauses it around a command's own big imports.
_COLLECTING = gc.isenabled()
gc.disable()

import typer  # noqa: E402

app = typer.Typer(
    help="kube-elevator: Escalator's node-group autoscaling (and more) as Prefect flows.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)


# The process's exit status, for `_end_without_teardown`.
_STATUS = [1]


def _exit_status(code: object) -> int:
    """What Python makes of `SystemExit(code)` (a message other than a number: printed, 1)."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _end_without_teardown() -> None:
    """The last exit handler of an `elevator` process: every other one has run (Prefect's, which
    send the runs' last events and logs, among them), then the process ends without Python's
    teardown of its modules and objects, which cost a repeat `run --once` about 1 s of its
    5 (issue 40; what is left to do is freeing memory the process gives back whole). Logging's
    own handler was registered before this one, so it is called here."""
    import logging
    import sys

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing can reach it
            stream.flush()
    os._exit(_STATUS[0])


def main() -> None:
    """The `elevator` process (its entry point: ends the process, see `_end_without_teardown`)."""
    atexit.register(_end_without_teardown)  # runs after every handler registered later
    try:
        _main()
    except SystemExit as done:
        _STATUS[0] = _exit_status(done.code)
        raise
    except BaseException:  # Python prints the traceback, then exits 1
        _STATUS[0] = 1
        raise
    _STATUS[0] = 0


def _main() -> None:
    # An ephemeral Prefect server started by this process has no use for telemetry, whose
    # writes race the run recorder on SQLite ("database is locked" tracebacks).
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # Its services' own errors (SQLite "database is locked" under load, retried by the server)
    # would print tracebacks among the command's lines; a server of one's own logs as it likes.
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
    from kube_elevator.flows.prefect_compat import default_server_settings

    default_server_settings(os.environ)  # task runs recorded in batches
    from kube_elevator.tasks.adapters.prefect_server import TemporaryServerTimeout

    try:
        app()
    except TemporaryServerTimeout as error:  # a command that started it at a Prefect call
        from kube_elevator.flows.cli.common import print_error

        print_error(str(error))
        raise SystemExit(1) from None


def _register_services() -> None:
    """Every command lives in a module of its own; the order here is `--help`'s."""
    from kube_elevator.flows.cli import (
        nodes,
        pods,
        pods_validate,
        prefect_server,
        scenario,
        serve,
        services,
        simulate,
        tune,
        watch,
    )

    nodes.register(app)
    simulate.register(app)
    tune.register(app)
    scenario.register(app)
    serve.register(app)
    watch.register(app)
    services.register(app)
    pods_validate.register(pods.register(app))
    prefect_server.register(app)
    from kube_elevator.flows.cli.examples import add_examples

    add_examples(app)  # an example at the foot of every command's --help


_register_services()
if _COLLECTING:
    gc.enable()
