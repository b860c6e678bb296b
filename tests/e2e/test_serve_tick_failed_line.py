"""`serve`'s word on a tick that stopped (issue 42): one line, `tick failed: <reason>`, the
traceback left to the flow run's logs on the Prefect server; a real flow run that fails."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from uuid import UUID

import pytest

from benchmarks.deadlines import scaled
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


# A tick as `serve` runs it, in a process of its own so that its stderr is the console's:
# Prefect's console handlers made traceback-free first, as `serve` does once they exist.
SERVED_TICK = """
from kube_elevator.flows.autoscale import autoscale
from kube_elevator.flows.cli.common import console_logs_without_tracebacks
from kube_elevator.flows.cli.serve import tell_outcome
from kube_elevator.flows.run_state import run_here

console_logs_without_tracebacks()
outcome = run_here(lambda: autoscale(nodegroups=" ", return_state=True))
tell_outcome("schedule", outcome, print)
print(outcome.state.state_details.flow_run_id)
"""


def test_a_failed_ticks_traceback_is_in_its_runs_logs_and_stderr_has_one_line_for_it() -> None:
    """Issue 42 item 8 end to end: a served tick that fails says so on the console without a
    traceback, one line for the error; the flow run's logs on the Prefect server (what the UI
    shows under the run) hold the traceback."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.settings import PREFECT_API_URL

    environment = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    done = subprocess.run([sys.executable, "-c", SERVED_TICK], capture_output=True, text=True,
                          timeout=scaled(300), env=environment, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    told, run_id = done.stdout.strip().splitlines()[-2:]
    assert told == ("tick failed: InputError: nodegroups: give the path of the node-group file "
                    "on the worker (schedule)")
    assert "Traceback" not in done.stderr and '  File "' not in done.stderr, done.stderr
    encountered = [line for line in done.stderr.splitlines() if "Encountered exception" in line]
    assert len(encountered) == 1 and encountered[0].endswith(
        "InputError('nodegroups: give the path of the node-group file on the worker')"), \
        done.stderr
    # The process drained its logs to the server before it exited (Prefect's log worker).
    with get_client(sync_client=True) as client:
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(
            any_=[UUID(run_id)])))
    kept = "\n".join(log.message for log in logs)
    assert "Traceback (most recent call last)" in kept, kept
    assert "give the path of the node-group file on the worker" in kept
