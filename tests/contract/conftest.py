"""Fixtures of the contract tests: one fake API server per test module (`api`; tests/conftest.py's
`fake_kube` is one per test)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kube_elevator.fakes.kube_api.server import FakeKubeApi


@pytest.fixture(scope="module")
def api() -> Iterator[FakeKubeApi]:
    """A fake API server shared by the module's tests (each keeps to its own names)."""
    with FakeKubeApi() as server:
        yield server
