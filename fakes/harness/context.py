"""`fake_cluster()`: a `FakeCluster` for a `with` block or a decorated function (see the
package's docstring and docs/harness.md)."""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast

from kube_elevator.fakes.aws import IN_PROCESS_MOTO_MODULES, MOTO_MODULES, require_moto
from kube_elevator.fakes.harness.cluster import AwsMode, FakeCluster
from kube_elevator.tasks.scheduler.profiles import DEFAULT_PROFILE

__all__ = ["current", "fake_cluster"]

F = TypeVar("F", bound=Callable[..., Any])
_ACTIVE: list[FakeCluster] = []
HARNESS_SERVER_VARIABLE = "ELEVATOR_HARNESS_PREFECT_SERVER"


def current() -> FakeCluster:
    """The innermost `fake_cluster()` active now (RuntimeError if none).

    Example:
        ```python
        @fake_cluster()
        def test_my_script():
            current().add_node_group("workers", desired=2)
        ```
    """
    if not _ACTIVE:
        raise RuntimeError("no fake_cluster() is active")
    return _ACTIVE[-1]


def wants_prefect_server(asked: bool | None) -> bool:
    """`fake_cluster(prefect_server=...)`'s choice (see there)."""
    if asked is not None:
        return asked
    switch = os.environ.get(HARNESS_SERVER_VARIABLE, "")
    if switch in ("0", "1"):
        return switch == "1"
    return "prefect" in sys.modules


@contextmanager
def flow_heartbeats_off() -> Iterator[None]:
    """No heartbeat thread in the flow runs this context starts: Prefect's own setting
    (`PREFECT_FLOWS_HEARTBEAT_FREQUENCY`, None: no heartbeats) in a settings context of its own.
    """
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    settings = temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})
    settings.__enter__()
    try:
        yield
    finally:
        # ValueError: ended in another context (an async fixture's teardown task); the one it
        # was entered in has ended, and the setting with it.
        with suppress(ValueError):
            settings.__exit__(None, None, None)


class fake_cluster:  # named as moto's mock_aws, which it sits beside
    """A fresh `FakeCluster` for a `with` block, or for each call of a decorated function.

    `aws`: "in-process" (moto's `mock_aws`: boto3 in this process only, the fastest) or
    "server" (moto's HTTP server: `AWS_ENDPOINT_URL` reaches it from other processes too).
    `set_environment`: export `KUBECONFIG` and the `AWS_*` variables meanwhile.
    `prefect_server`: without PREFECT_API_URL, point Prefect at the local server `elevator`'s
    commands share (`tasks/adapters/prefect_server.py`: started once, found by every later
    process, stopped when idle), so a flow run costs a round trip instead of Prefect's
    temporary server's start (20-50 s) in each process; PREFECT_API_URL then stays set for the
    process. None: yes when Prefect is imported already (the code under test runs flows) and
    `ELEVATOR_HARNESS_PREFECT_SERVER` is not "0" ("1": always).
    `flow_heartbeats`: whether the flow runs of the block (its thread) send Prefect's heartbeats.
    None: not while Prefect talks to that local server, which the harness chose (a throwaway
    server no automation watches for silent runs; a sync run's end otherwise waits up to 1 s
    for Prefect's heartbeat thread, docs/harness.md); as Prefect's settings say otherwise.
    True: as Prefect's settings say. False: none.
    `validation`, `defaulting`, `admission_defaults`: the fake API's write layers, each on
    unless turned off (docs/harness.md, Validation and defaulting).

    Example:
        ```python
        with fake_cluster() as cluster:
            cluster.add_node_group("workers", desired=2)
            subprocess.run(["kubectl", "get", "nodes"], check=True)   # KUBECONFIG names the fake
        ```
    """

    def __init__(self, *, aws: AwsMode = "in-process", start_time: float | None = None,
                 scheduler_profile: str = DEFAULT_PROFILE, seed: int = 1,
                 workdir: Path | None = None, set_environment: bool = True,
                 prefect_server: bool | None = None, flow_heartbeats: bool | None = None,
                 validation: bool = True, defaulting: bool = True,
                 admission_defaults: bool = True) -> None:
        self._options: dict[str, Any] = {"aws": aws, "start_time": start_time,
                                         "scheduler_profile": scheduler_profile, "seed": seed,
                                         "workdir": workdir, "validation": validation,
                                         "defaulting": defaulting,
                                         "admission_defaults": admission_defaults}
        self._set_environment = set_environment
        self._prefect_server = prefect_server
        self._flow_heartbeats = flow_heartbeats
        self._open: list[ExitStack] = []

    def __enter__(self) -> FakeCluster:
        aws = self._options["aws"]
        if isinstance(aws, str):  # the extra's absence in one line at once, not after a server
            require_moto(IN_PROCESS_MOTO_MODULES if aws == "in-process" else MOTO_MODULES)
        on_chosen_server = False
        if wants_prefect_server(self._prefect_server):
            from kube_elevator.tasks.adapters.prefect_server import (
                on_a_local_server,
                use_local_server,
            )

            use_local_server("shared")
            on_chosen_server = on_a_local_server()  # this block's, or an earlier block's
        heartbeats = (self._flow_heartbeats if self._flow_heartbeats is not None
                      else not on_chosen_server)
        with ExitStack() as stack:
            if not heartbeats:
                stack.enter_context(flow_heartbeats_off())
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
