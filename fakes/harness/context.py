"""`fake_cluster()`: a `FakeCluster` for a `with` block or a decorated function (see the
package's docstring and docs/harness.md)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast

from kube_elevator.fakes.harness.cluster import AwsMode, FakeCluster
from kube_elevator.tasks.scheduler.profiles import DEFAULT_PROFILE

__all__ = ["current", "fake_cluster"]

F = TypeVar("F", bound=Callable[..., Any])
_ACTIVE: list[FakeCluster] = []


def current() -> FakeCluster:
    """The innermost `fake_cluster()` active now (RuntimeError if none)."""
    if not _ACTIVE:
        raise RuntimeError("no fake_cluster() is active")
    return _ACTIVE[-1]


class fake_cluster:  # named as moto's mock_aws, which it sits beside
    """A fresh `FakeCluster` for a `with` block, or for each call of a decorated function.

    `aws`: "in-process" (moto's `mock_aws`: boto3 in this process only, the fastest) or
    "server" (moto's HTTP server: `AWS_ENDPOINT_URL` reaches it from other processes too).
    `set_environment`: export `KUBECONFIG` and the `AWS_*` variables meanwhile.
    `validation`, `defaulting`, `admission_defaults`: the fake API's write layers, each on
    unless turned off (docs/harness.md, Validation and defaulting).
    """

    def __init__(self, *, aws: AwsMode = "in-process", start_time: float | None = None,
                 scheduler_profile: str = DEFAULT_PROFILE, seed: int = 1,
                 workdir: Path | None = None, set_environment: bool = True,
                 validation: bool = True, defaulting: bool = True,
                 admission_defaults: bool = True) -> None:
        self._options: dict[str, Any] = {"aws": aws, "start_time": start_time,
                                         "scheduler_profile": scheduler_profile, "seed": seed,
                                         "workdir": workdir, "validation": validation,
                                         "defaulting": defaulting,
                                         "admission_defaults": admission_defaults}
        self._set_environment = set_environment
        self._open: list[ExitStack] = []

    def __enter__(self) -> FakeCluster:
        with ExitStack() as stack:
            cluster = stack.enter_context(FakeCluster(**self._options))
            if self._set_environment:
                stack.enter_context(cluster.environment())
            _ACTIVE.append(cluster)
            stack.callback(_ACTIVE.remove, cluster)
            self._open.append(stack.pop_all())
        return cluster

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._open.pop().close()

    def __call__(self, func: F) -> F:
        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with self:
                    return await func(*args, **kwargs)
            return cast(F, run_async)

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)
        return cast(F, run)
