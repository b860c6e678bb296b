"""A Prefect server on a database seeded from the template (tasks/adapters/prefect_server.py) has
every block type the template's server registered, and does not register them again: Prefect's
registration imports every installed collection at each start, a third of a start's CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.event_latency import SPARE_VARIABLE, PrefectServer
from kube_elevator.tasks.adapters.prefect_server import template_path
from tests.e2e.test_prefect_server_spare import client_of


def block_types(server: PrefectServer) -> set[str]:
    with client_of(server) as client:
        return {block_type.slug for block_type in client.read_block_types()}


def test_a_server_on_the_template_has_its_block_types_without_registering_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no template yet
    monkeypatch.delenv("ELEVATOR_PREFECT_DATABASE_TEMPLATE", raising=False)
    monkeypatch.delenv(SPARE_VARIABLE, raising=False)  # each server started here, not a spare
    template = template_path()
    assert template is not None and not template.exists()
    with PrefectServer() as first:
        registered = block_types(first)
        # Prefect's own memo of its registration, written by the server that registered.
        assert (first.home / "memo_store.toml").is_file()
    assert template.is_file()  # kept from the first, migrated and registered
    assert "secret" in registered  # Prefect's own, at the least
    with PrefectServer() as second:
        assert second.database() is not None and not second._fresh  # seeded from the template
        assert block_types(second) == registered
        assert not (second.home / "memo_store.toml").exists()  # it registered nothing
