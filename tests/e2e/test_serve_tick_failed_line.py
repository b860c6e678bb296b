"""`serve`'s word on a tick that stopped (issue 42): one line, `tick failed: <reason>`, the
traceback left to the flow run's logs on the Prefect server; a real flow run that fails."""

from __future__ import annotations

import logging
import sys

import pytest

from kube_elevator.flows.autoscale import autoscale
from kube_elevator.flows.cli.common import console_logs_without_tracebacks
from kube_elevator.flows.cli.serve import tell_outcome
from kube_elevator.flows.run_state import run_here

pytestmark = pytest.mark.usefixtures("prefect_server")


def test_a_failed_tick_is_one_line() -> None:
    outcome = run_here(lambda: autoscale(nodegroups=" ", return_state=True))
    assert outcome.state.is_failed()
    said: list[str] = []
    tell_outcome("schedule", outcome, said.append)
    assert said == ["tick failed: InputError: nodegroups: give the path of the node-group file "
                    "on the worker (schedule)"]


def test_the_console_handler_drops_a_failed_runs_traceback() -> None:
    handler = logging.StreamHandler(sys.stderr)
    logger = logging.getLogger("test-serve-console")
    logger.addHandler(handler)
    try:
        console_logs_without_tracebacks()
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            record = logger.makeRecord(logger.name, logging.ERROR, __file__, 1,
                                       "Finished in state Failed", (), sys.exc_info())
        assert handler.format(record) == "Finished in state Failed"
    finally:
        logger.removeHandler(handler)
