"""Shared fixtures: one Prefect server per session, fake AWS per session, fake Kubernetes per test."""

from __future__ import annotations

import os

# Before any step is built: retries without waiting, and a quiet, local Prefect.
os.environ.setdefault("ELEVATOR_RETRY_DELAY_SECONDS", "0")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# The fake cluster lives on the tests' clock: a live `autoscale` run may take `now`.
os.environ.setdefault("ELEVATOR_SIMULATED_CLOCK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from collections.abc import Iterator
from pathlib import Path

import kubernetes.client
import pytest

from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.prefect_compat import default_server_settings

default_server_settings(os.environ)  # the session's Prefect server, as docs/deploying.md advises


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

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture(scope="session")
def kube_elevator_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once a session from the Dockerfile's build context as the image's
    install script builds it (tests/image_build.py)."""
    from tests.image_build import UV, build_context, build_wheel

    if not UV.exists():
        pytest.skip(f"uv is not in the test venv ({UV}): make installs it from requirements/")
    context = build_context(tmp_path_factory.mktemp("build-context"))
    return build_wheel(context, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def fake_aws() -> Iterator[FakeAws]:
    with FakeAws() as aws, aws.environment():
        yield aws


@pytest.fixture
def fake_kube(tmp_path: Path) -> Iterator[FakeKubeApi]:
    with FakeKubeApi() as api:
        yield api


@pytest.fixture
def kubeconfig(fake_kube: FakeKubeApi, tmp_path: Path) -> Path:
    return fake_kube.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def api_client(fake_kube: FakeKubeApi) -> Iterator[kubernetes.client.ApiClient]:
    """The real client's ApiClient on this test's fake API server."""
    with fake_kube.api_client() as api:
        yield api


_KINDS = ("unit", "contract", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by its folder, so `pytest -m "not e2e"` is the fast loop."""
    for item in items:
        kind = item.path.parent.name
        if kind in _KINDS:
            item.add_marker(getattr(pytest.mark, kind))
