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


def console_logs_without_tracebacks() -> None:
    """Prefect logs a failed task or flow run with its traceback; on the console the error
    line says it all (house rule: no traceback), the Prefect server's run logs keep it."""
    loggers = [logging.getLogger(), *(logger for logger in logging.root.manager.loggerDict
                                      .values() if isinstance(logger, logging.Logger))]
    consoles = (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream in consoles \
                    and not isinstance(handler.formatter, _WithoutTraceback):
                handler.setFormatter(_WithoutTraceback(handler.formatter))
