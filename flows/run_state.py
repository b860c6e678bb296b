"""The final state of a flow run whose work is many independent parts (node groups, autoscalers),
and its outcome as the process that ran it computed it.

One part failing does not stop the others (Escalator logs it and goes on to the next group),
but the run ends Failed, naming the parts: the Prefect UI, and the automations that notify on a
failed run, see a run that failed, not a green one. A plain call of the flow raises `RunFailed`,
which carries every part's result.

A caller reads a run's outcome from this process, never from the state the engine hands back
(DESIGN.md §7). That state can be the server's copy: when the answer to a state transition is
lost after the server applied it, Prefect's client sends it again, the server rejects the
duplicate and answers with its own state, and with `persist_result=False` that state holds no
data: `State.result()` then raises MissingResult for a tick that acted. So the flow hands its
parts' results to `report_results`, and `run_here` calls the flow and returns them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from logging import getLogger
from typing import Any

from prefect.client.schemas.objects import State
from prefect.states import Completed, Failed

Results = list[dict[str, Any]]
MESSAGE_CHARACTERS = 300  # of each part's error, on one line
# The results a flow run reported, for `run_here` in the same process (a list it appends to:
# the engine may run the flow in a copy of the caller's context).
_REPORTED: ContextVar[list[tuple[Results, tuple[str, ...]]] | None] = ContextVar(
    "elevator_reported_results", default=None)


class RunFailed(Exception):
    """One or more parts of the run failed; `results` holds every part's result."""

    def __init__(self, message: str, results: Results) -> None:
        super().__init__(message)
        self.results = results


def one_line(text: str, limit: int = MESSAGE_CHARACTERS) -> str:
    return " ".join(text.split())[:limit]


def final_state(what: str, failures: Sequence[tuple[str, str]], total: int, results: Results,
                summary: str = "", notes: Sequence[str] = ()) -> State[Any]:
    """The run's final state, its message one line: `summary` (what each part did) when none
    failed; else Failed, naming each failed part (name, error), then `summary`. `notes` say
    what the run could not see (a CRD not installed, Prometheus out of reach): in the message,
    and for `run_here`'s caller."""
    report_results(results, notes)
    summary = "; ".join(part for part in (summary, *notes) if part)
    if not failures:
        return Completed(message=summary or None, data=results)
    message = f"{len(failures)} of {total} {what} failed: " + "; ".join(
        f"{name}: {one_line(error)}" for name, error in failures)
    if summary:
        message += f" | {summary}"
    return Failed(message=message, data=RunFailed(message, results))


def report_results(results: Results, notes: Sequence[str] = ()) -> None:
    """The flow's parts' results (and its notes), for `run_here`'s caller in this process."""
    reported = _REPORTED.get()
    if reported is not None:
        reported.append((results, tuple(notes)))


@dataclass(frozen=True)
class RunOutcome:
    """A flow run this process ran: its final state, and the results its flow reported
    (None when the run stopped before it had any: bad input, a crash, a cancel)."""

    state: State[Any]
    reported: Results | None
    notes: tuple[str, ...] = ()  # what the run could not see, one line each

    def results(self) -> Results:
        """Every part's result, whether some failed or none did; raises what stopped the run
        when it reported none."""
        if self.reported is not None:
            return self.reported
        if not (self.state.is_failed() or self.state.is_crashed() or self.state.is_cancelled()):
            raise RuntimeError(f"the run ended {self.state.name} without results")
        # A failed state's exception: the engine's own, or rebuilt from the state's message.
        error = self.state.result(raise_on_failure=False)
        if isinstance(error, BaseException):
            raise error
        raise RuntimeError(f"the run ended {self.state.name}: {self.state.message}")


def run_here(call: Callable[[], State[Any]]) -> RunOutcome:
    """Run a flow (`call` returns its final state: `return_state=True`) and take its outcome
    from this process."""
    reported: list[tuple[Results, tuple[str, ...]]] = []
    token = _REPORTED.set(reported)
    try:
        state = call()
    finally:
        _REPORTED.reset(token)
    if not reported:
        return RunOutcome(state, None)
    results, notes = reported[-1]
    return RunOutcome(state, results, notes)


def tag_run(tags: Sequence[str]) -> None:
    """Add `tags` to the flow run in flight, in one call, so the UI's tag filter and Prefect's
    automations find runs by what they did. A run that cannot be tagged is logged, and the
    tick goes on: its outcome stands without them."""
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    if context is None or context.flow_run is None or not isinstance(context.client,
                                                                     SyncPrefectClient):
        return
    run = context.flow_run
    try:
        context.client.update_flow_run(run.id, tags=list(dict.fromkeys([*run.tags, *tags])))
    except Exception as error:  # the server is for the UI: the tick's outcome stands
        getLogger(__name__).warning("flow run %s not tagged %s: %s", run.id, tags, error)
