"""The suite's `prefect server start`s start one ahead (benchmarks/event_latency.py): the server a
test takes was started while the previous test ran, yet is its own: a new home and port, its
database empty of everything the previous test wrote, and nothing talks to it before."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import psutil

from benchmarks import event_latency
from benchmarks.event_latency import SPARE_VARIABLE, PrefectServer


@contextlib.contextmanager
def client_of(server: PrefectServer) -> Iterator[Any]:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: server.api_url}), \
            get_client(sync_client=True) as client:
        yield client


def written(server: PrefectServer) -> dict[str, list[str]]:
    """What a test may have written to the server, by name."""
    with client_of(server) as client:
        return {"flows": [flow.name for flow in client.read_flows()],
                "flow runs": [run.name for run in client.read_flow_runs()],
                "deployments": [item.name for item in client.read_deployments()],
                "work pools": [pool.name for pool in client.read_work_pools()],
                "variables": [variable.name for variable in client.read_variables()]}


def test_the_next_server_is_the_spare_and_has_nothing_of_the_previous_test() -> None:
    from prefect import flow
    from prefect.client.schemas.actions import VariableCreate, WorkPoolCreate

    @flow(name="left-by-the-first")
    def left() -> None:
        """A flow whose run the first server records (made, never run)."""

    assert os.environ.get(SPARE_VARIABLE) == str(os.getpid())  # tests/conftest.py's setting
    with PrefectServer() as first:
        assert len(event_latency._spares) == 1  # the next one, starting meanwhile
        spare = event_latency._spares[0]
        assert spare._child is not None
        spare_pid = spare._child.process.pid
        if os.geteuid() == 0:  # it starts at a low priority, taking what the tests leave
            assert psutil.Process(spare_pid).nice() == 10
        with client_of(first) as client:
            client.create_work_pool(WorkPoolCreate(name="left-by-the-first", type="process"))
            client.create_variable(VariableCreate(name="left_by_the_first", value="1"))
            client.create_flow_run(left, name="run-left-by-the-first")
        assert written(first)["flow runs"] == ["run-left-by-the-first"]
    with PrefectServer() as second:
        assert second._child is not None and second._child.process.pid == spare_pid
        assert psutil.Process(spare_pid).nice() == 0  # the test's: the usual priority
        assert second.port != first.port and second.home != first.home
        assert second.client_home != first.client_home
        seen = written(second)
        assert "left-by-the-first" not in seen.pop("work pools"), seen
        assert seen == {"flows": [], "flow runs": [], "deployments": [], "variables": []}
    # A server of other settings never takes the spare: it is stopped, and the server starts
    # its own; nor does a server take a spare that has exited.
    assert len(event_latency._spares) == 1
    unusable = event_latency._spares[0]
    other = PrefectServer(settings={"PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false"})
    like = PrefectServer()
    try:
        assert other.spare_key() is None
        assert event_latency._take_spare(other) is None
        assert not event_latency._spares and unusable._child is None
        event_latency._spares.append(dead := PrefectServer())
        dead.launch()
        assert dead._child is not None
        dead._child.process.kill()
        dead._child.process.wait()
        assert event_latency._take_spare(like) is None
        assert not event_latency._spares and dead._child is None and not dead.home.exists()
    finally:
        other.stop()
        like.stop()
