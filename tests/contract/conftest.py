"""Fixtures of the contract tests: one fake API server per test module (`api`; tests/conftest.py's
`fake_kube` is one per test), and the official client's CoreV1Api and a raw HTTP client on it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from kubernetes import client

from kube_elevator.fakes.kube_api.server import FakeKubeApi


@pytest.fixture(scope="module")
def api() -> Iterator[FakeKubeApi]:
    """A fake API server shared by the module's tests (each keeps to its own names)."""
    with FakeKubeApi() as server:
        yield server


@pytest.fixture(scope="module")
def core(api: FakeKubeApi) -> Iterator[client.CoreV1Api]:
    with api.api_client() as api_client:
        yield client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def http(api: FakeKubeApi) -> Iterator[httpx.Client]:
    """Raw HTTP: what the official client would not send."""
    with httpx.Client(base_url=api.url, timeout=30) as raw:
        yield raw
