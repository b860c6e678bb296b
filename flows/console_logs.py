"""Console log lines without tracebacks (house rule: an error is its line; the Prefect server's
run logs keep the traceback).

A module of its own, with nothing but `logging` in it: the `autoscale` flow's module calls it
when it runs in a process of its own under `elevator serve --ticks runs`, whose start should not
import the command line's typer and rich (issue 40: the run's start). `flows.cli.common` says it
too.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from uuid import UUID


class _WithoutTraceback(logging.Formatter):
    """A console formatter that prints a log record's message but not its traceback."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            return self.inner.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


# The flow runs whose end the command has said itself (serve: Cancelled before the flow began,
# then the process killed). Prefect's Runner then says of the killed process "SIGKILL ...
# Typically caused by the operating system terminating the process for exceeding memory
# limits" and "Check whether the flow run exceeded its memory allocation" (3.8.6 to 3.9.1,
# prefect/_internal/infrastructure_exit_codes.py): wrong on the console beside serve's line,
# kept in the server's run logs.
_SAID_RUNS: set[str] = set()


class _NotOfSaidRuns(logging.Filter):
    """Drops a console record below ERROR about a run in `_SAID_RUNS` (Prefect's loggers put
    the run's id on the record, `flow_run_id`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        run_id = getattr(record, "flow_run_id", None)
        return run_id is None or record.levelno >= logging.ERROR or str(run_id) not in _SAID_RUNS


def said_on_console(run_ids: Iterable[UUID]) -> None:
    """The command has said how these runs ended: Prefect's console lines about them stop
    (installed by `console_logs_without_tracebacks`)."""
    _SAID_RUNS.update(str(run_id) for run_id in run_ids)


def console_logs_without_tracebacks() -> None:
    """Prefect logs a failed task or flow run with its traceback; on the console the error
    line says it all (house rule: no traceback), the Prefect server's run logs keep it. Also
    drops Prefect's lines about runs whose end the command said itself (`said_on_console`)."""
    loggers = [logging.getLogger(), *(logger for logger in logging.root.manager.loggerDict
                                      .values() if isinstance(logger, logging.Logger))]
    consoles = (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream in consoles \
                    and not isinstance(handler.formatter, _WithoutTraceback):
                handler.setFormatter(_WithoutTraceback(handler.formatter))
                handler.addFilter(_NotOfSaidRuns())
