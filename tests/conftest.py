"""Shared fixtures: one Prefect server per session, fake AWS per session, fake Kubernetes per test.

The fake Kubernetes fixtures (`fake_kube`, `kubeconfig`, `api_client`) and `fake_cluster` are the
harness's pytest plugin's (fakes/harness/plugin.py, installed with the package): this suite is
its first user. `fake_aws` here overrides the plugin's in-process moto with moto's server for the
session, which the flows' other processes (Prefect workers, the CLI) can reach too.
"""

from __future__ import annotations

import os

from tests.prefect_home import process_prefect_home

# Never the user's own Prefect home (~/.prefect): a command without PREFECT_API_URL runs the
# local server on PREFECT_HOME's database, and a database that another Prefect release (CI's
# matrix, another checkout) has migrated makes this release's server exit at its start. One
# home per test process, removed at its exit; `ELEVATOR_TEST_PREFECT_HOME` names one to keep.
os.environ["PREFECT_HOME"] = process_prefect_home()

# Before any step is built: retries without waiting, and a quiet, local Prefect.
os.environ.setdefault("ELEVATOR_RETRY_DELAY_SECONDS", "0")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# The fake cluster lives on the tests' clock: a live `autoscale` run may take `now`.
os.environ.setdefault("ELEVATOR_SIMULATED_CLOCK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# The harness's `fake_cluster()` points Prefect at the shared local server of PREFECT_HOME when
# Prefect is imported; the suite's tests choose their server (the `prefect_server` fixture).
os.environ.setdefault("ELEVATOR_HARNESS_PREFECT_SERVER", "0")

from collections.abc import Iterator

import hypothesis
import pytest

from kube_elevator.fakes.aws import FakeAws
from kube_elevator.flows.prefect_compat import default_server_settings
from tests.module_order import longest_first

default_server_settings(os.environ)  # the session's Prefect server, as docs/deploying.md advises

# `make test` ends with its skips counted by reason (what to install for them).
pytest_plugins = ["tests.skip_summary"]


@pytest.fixture(scope="session", autouse=True)
def record_adapter_requests() -> Iterator[None]:
    """Record what the adapters send all session long, for the least-privilege check."""
    from tests import recording

    uninstall = recording.install()
    yield
    uninstall()
    recording.dump_if_asked()


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[None]:
    """A temporary Prefect server for the whole session (it takes 8-15 s to start here)."""
    from prefect.testing.utilities import prefect_test_harness

    from benchmarks.deadlines import scaled

    with prefect_test_harness(server_startup_timeout=int(scaled(180))):
        yield


@pytest.fixture(scope="session")
def fake_aws() -> Iterator[FakeAws]:
    """moto's server for the whole session, `AWS_*` pointing at it (unique ASG names a test)."""
    with FakeAws() as aws, aws.environment():
        yield aws


_KINDS = ("unit", "contract", "e2e")
# The modules whose tests reach Prefect without the session's `prefect_server` fixture: the CLI
# in a subprocess (run, serve, watch, pods run start a local server or use one), the local
# server's adapter and its template database, the deployments, the UI, the wheel's installs that
# run flows (a stranger's project, the harness's), serve's abandoned runs, first tick, silent
# runs and a signal mid-tick (on Prefect 3.8.4 their `--ticks runs` cases waited minutes for a
# run in flight: its server stalled, hence the floor 3.8.6, docs/deploying.md "Prefect
# releases"), and what prefect_compat detects in the installed engine.
# tests/unit/test_prefect_marker.py holds every module that starts Prefect to this list.
PREFECT_MODULES = frozenset({
    "test_cli_run.py", "test_command_imports.py", "test_deployments.py",
    "test_harness_start_cost.py", "test_harness_stranger.py", "test_harness_without_extra.py",
    "test_local_prefect_server.py",
    "test_plugin_docs.py", "test_pods_cli.py", "test_prefect_compat_detection.py",
    "test_prefect_database_template.py", "test_prefect_retention.py",
    "test_prefect_server_blocks.py", "test_prefect_server_seeded.py",
    "test_serve_abandoned_runs.py", "test_serve_first_tick.py",
    "test_serve_schedules_and_signals.py", "test_serve_signal_mid_tick.py",
    "test_serve_silent_runs.py", "test_serve_stop_before_begun.py",
    "test_serve_stop_deadline.py", "test_serve_stray_runs.py", "test_serve_watch.py",
    "test_silent_watch_e2e.py", "test_ui.py",
})


def pytest_configure(config: pytest.Config) -> None:
    """The suite's `prefect server start`s (benchmarks/event_latency.py `PrefectServer`) start
    one ahead: a test takes a new server that started while the previous test waited. In this
    process only (each xdist worker's own), not in the processes its tests start;
    `ELEVATOR_TEST_PREFECT_SPARE=0` turns it off."""
    if os.environ.get("ELEVATOR_TEST_PREFECT_SPARE") != "0":
        os.environ["ELEVATOR_TEST_PREFECT_SPARE"] = str(os.getpid())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """No spare Prefect server left running after the session (benchmarks/event_latency.py)."""
    import sys

    event_latency = sys.modules.get("benchmarks.event_latency")
    if event_latency is not None:
        event_latency.stop_spares()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before a test of a module that uses hypothesis: no Prefect sender left running by an
    earlier test of this process, whose websocket pings draw from the global `random` while
    hypothesis draws examples (tests/prefect_senders.py)."""
    module = getattr(item, "module", None)
    if module is not None and getattr(module, "given", None) is hypothesis.given:
        from benchmarks.deadlines import scaled
        from tests.prefect_senders import stop_prefect_senders

        stop_prefect_senders(timeout_seconds=scaled(30))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by its folder, so `pytest -m "not e2e"` is the fast loop; and `prefect`
    on every test that touches Prefect (the session's server, or a module above), the subset
    CI also runs on the floor Prefect release (`make test-prefect`; the lock holds the newest)."""
    items[:] = longest_first(items)  # for xdist's workers (tests/module_order.py)
    for item in items:
        kind = item.path.parent.name
        if kind in _KINDS:
            item.add_marker(getattr(pytest.mark, kind))
        if "prefect_server" in getattr(item, "fixturenames", ()) or (
                item.path.name in PREFECT_MODULES):
            item.add_marker(pytest.mark.prefect)
