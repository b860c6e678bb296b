"""The final state of a flow run whose work is many independent parts (node groups, autoscalers).

One part failing does not stop the others (Escalator logs it and goes on to the next group),
but the run ends Failed, naming the parts: the Prefect UI, and the automations that notify on a
failed run, see a run that failed, not a green one. Its state still carries every part's result
(`RunFailed.results`, read with `run_results`); a plain call of the flow raises `RunFailed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prefect.client.schemas.objects import State
from prefect.states import Failed

Results = list[dict[str, Any]]
MESSAGE_CHARACTERS = 300  # of each part's error, on one line


class RunFailed(Exception):
    """One or more parts of the run failed; `results` holds every part's result."""

    def __init__(self, message: str, results: Results) -> None:
        super().__init__(message)
        self.results = results


def failed_run(what: str, failures: Sequence[tuple[str, str]], total: int,
               results: Results) -> State[Any] | None:
    """A Failed state naming each failed part (name, error), or None when none failed."""
    if not failures:
        return None
    message = f"{len(failures)} of {total} {what} failed: " + "; ".join(
        f"{name}: {' '.join(error.split())[:MESSAGE_CHARACTERS]}" for name, error in failures)
    return Failed(message=message, data=RunFailed(message, results))


def run_results(state: State[Any]) -> Results:
    """Every part's result of a run (`return_state=True`), whether some failed or none did;
    raises what stopped the run itself (bad input, a crash)."""
    result = state.result(raise_on_failure=False)
    if isinstance(result, RunFailed):
        return result.results
    if isinstance(result, BaseException):
        raise result
    return result  # type: ignore[no-any-return]
