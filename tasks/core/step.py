"""A tick step: a plain function that runs as a Prefect task run inside a flow, or plainly without.

The typed runner (`Runner`) lets a composition be written once and run both ways, with every
`run(step, ...)` call checked against the step's parameters.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

from kube_elevator.tasks.core.retry import RETRIES, backoff_seconds, retry_only_transient

if TYPE_CHECKING:
    from prefect import Task

P = ParamSpec("P")
R = TypeVar("R")


class Step(Generic[P, R]):
    """A tick step: the plain function (`.fn`) and, built on first use, its Prefect task.

    Building the task lazily keeps Prefect's ~1 s import out of `elevator plan` and of pure
    tests; calling a Step inside a flow runs it as a task run with our retry policy.

    Example:
        >>> @ke.step
        ... def double(x: int) -> int:
        ...     return 2 * x
        >>> isinstance(double, ke.Step), double.fn(21)
        (True, 42)
    """

    def __init__(self, function: Callable[P, R], name: str | None = None) -> None:
        self.fn = function
        self.name = name or function.__name__.replace("_", "-")
        # The function's name, docstring and signature (`__wrapped__`), as Prefect's own
        # tasks carry them: `help()`, editors and the API reference show the step's.
        functools.update_wrapper(self, function)
        self._task: Task[P, Boxed[R]] | None = None

    def __get__(self, instance: object, owner: type | None = None) -> Step[P, R]:
        """A step is a routine, as a Prefect task is (a step held by a class is not bound)."""
        return self

    @property
    def task(self) -> Task[P, Boxed[R]]:
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
            )(boxed(self.fn))
        return self._task

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        task: Any = self.task
        result: Boxed[R] = task(*map(_unvisited, args),
                                **{key: _unvisited(value) for key, value in kwargs.items()})
        return result.value


# Prefect walks a task's arguments item by item (for futures and states to resolve and record as
# inputs) and its return value (to link each item to the task run). A tick passes records, never
# futures, and its records are many: at 150,000 pods the walks cost seconds a tick. So arguments
# go in `quote`d (the function still gets them as they are), and the result comes out in a box
# the engine sees as one object. Task runs, states and retries are recorded as before; the UI's
# graph just draws no data edges between the steps.
class Boxed(Generic[R]):
    """The box a step's Prefect task returns its value in (`Step.task`): one object to the
    engine, however many records it holds; `Step.__call__` opens it.

    Example:
        >>> ke.Boxed([1, 2]).value
        [1, 2]
    """

    __slots__ = ("value",)

    def __init__(self, value: R) -> None:
        self.value = value


def boxed(function: Callable[P, R]) -> Callable[P, Boxed[R]]:
    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> Boxed[R]:
        return Boxed(function(*args, **kwargs))

    return run


_PLAIN = (str, int, float, bool, bytes, type(None))


def _unvisited(value: object) -> object:
    if isinstance(value, _PLAIN):
        return value
    from prefect.utilities.annotations import quote

    return quote(value)


def step(function: Callable[P, R], name: str | None = None) -> Step[P, R]:
    """Make `function` a step (as a decorator, or with a task name of its own).

    Example:
        >>> count_pods = ke.step(lambda pods: len(pods), name="count-pods")
        >>> count_pods.fn([1, 2, 3])
        3
    """
    return Step(function, name)


class Runner(Protocol):
    """How a step runs: `run(step, *args)` type-checks the arguments against the step.

    Example:
        >>> run: ke.Runner = ke.run_plain
        >>> run(ke.compute_utilization, [], []).requests.cpu_milli
        0
    """

    def __call__(self, step: Step[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R: ...


def run_as_task(step: Step[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Inside a flow: a recorded task run with retries.

    Example:
        ```python
        from prefect import flow

        @flow
        def my_tick(nodegroups: str) -> None:
            groups = ke.load_node_groups(nodegroups).node_groups
            source = ke.LiveSource(ke.make_adapters(None, "kube-system", None))
            ke.tick(ke.run_as_task, source, None, groups, now=time.time())   # each step a task run
        ```
    """
    return step(*args, **kwargs)


def run_plain(step: Step[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Without Prefect (`elevator plan`, the simulator's fast mode): the function itself.

    Example:
        >>> pod = ke.PodRecord("web-0", "default", node_name="", phase="Pending",
        ...     cpu_request_milli=500, memory_request_bytes=2**30)
        >>> node = ke.NodeRecord("n1", {"pool": "batch"}, created_unix_seconds=0.0,
        ...     cpu_allocatable_milli=2000, memory_allocatable_bytes=8 * 2**30)
        >>> ke.run_plain(ke.compute_utilization, [pod], [node]).requests.memory_bytes
        1073741824
    """
    return step.fn(*args, **kwargs)
