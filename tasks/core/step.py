"""A tick step: a plain function that runs as a Prefect task run inside a flow, or plainly without.

The typed runner (`Runner`) lets a composition be written once and run both ways, with every
`run(step, ...)` call checked against the step's parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, ParamSpec, Protocol, TypeVar

from tasks.core.retry import RETRIES, backoff_seconds, retry_only_transient

if TYPE_CHECKING:
    from prefect import Task

P = ParamSpec("P")
R = TypeVar("R")


class Step(Generic[P, R]):
    """A tick step: the plain function (`.fn`) and, built on first use, its Prefect task.

    Building the task lazily keeps Prefect's ~1 s import out of `elevator plan` and of pure
    tests; calling a Step inside a flow runs it as a task run with our retry policy.
    """

    def __init__(self, function: Callable[P, R], name: str | None = None) -> None:
        self.fn = function
        self.name = name or function.__name__.replace("_", "-")
        self.__doc__ = function.__doc__
        self._task: Task[P, R] | None = None

    @property
    def task(self) -> Task[P, R]:
        if self._task is None:
            from prefect import task
            from prefect.cache_policies import NO_CACHE

            self._task = task(
                name=self.name,
                retries=RETRIES,
                retry_delay_seconds=backoff_seconds(RETRIES),
                retry_jitter_factor=0.5,
                retry_condition_fn=retry_only_transient,
                cache_policy=NO_CACHE,  # never cached: the cluster moves between ticks
                persist_result=False,
            )(self.fn)
        return self._task

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.task(*args, **kwargs)


def step(function: Callable[P, R], name: str | None = None) -> Step[P, R]:
    """Make `function` a step (as a decorator, or with a task name of its own)."""
    return Step(function, name)


class Runner(Protocol):
    """How a step runs: `run(step, *args)` type-checks the arguments against the step."""

    def __call__(self, step: Step[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R: ...


def run_as_task(step: Step[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Inside a flow: a recorded task run with retries."""
    return step(*args, **kwargs)


def run_plain(step: Step[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Without Prefect (`elevator plan`, the simulator's fast mode): the function itself."""
    return step.fn(*args, **kwargs)
