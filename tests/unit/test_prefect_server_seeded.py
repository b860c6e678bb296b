"""The test rig's `prefect server start` (benchmarks/event_latency.py `PrefectServer`) starts on
a copy of the Prefect release's migrated database, as the temporary server does
(tasks/adapters/prefect_server.py): a copy of the empty template, never of another server's
database, and only for its own SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from benchmarks.event_latency import PrefectServer
from kube_elevator.tasks.adapters.prefect_server import template_path


@pytest.fixture
def template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A template in a cache of this test's own: a database with its migrations' table."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ELEVATOR_PREFECT_DATABASE_TEMPLATE", raising=False)
    path = template_path()
    assert path is not None
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE alembic_version (version_num TEXT)")
        db.execute("INSERT INTO alembic_version VALUES ('head')")
    return path


def test_a_new_server_home_starts_on_the_migrated_template(template: Path) -> None:
    server = PrefectServer()
    try:
        assert server.seed()
        database = server.database()
        assert database is not None and database.parent == server.home
        with sqlite3.connect(database) as db:
            assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [
                ("head",)]
        # A database that exists is the server's own: never replaced.
        with sqlite3.connect(database) as db:
            db.execute("INSERT INTO alembic_version VALUES ('written')")
        assert not server.seed()
        with sqlite3.connect(database) as db:
            assert len(db.execute("SELECT * FROM alembic_version").fetchall()) == 2
    finally:
        server.stop()


def test_no_template_or_another_database_leaves_the_home_to_prefect(
        template: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_postgres = PrefectServer(settings={
        "PREFECT_API_DATABASE_CONNECTION_URL": "postgresql+asyncpg://x@127.0.0.1:1/prefect"})
    monkeypatch.setenv("ELEVATOR_PREFECT_DATABASE_TEMPLATE", "0")
    without = PrefectServer()
    try:
        assert on_postgres.database() is None and not on_postgres.seed()
        assert not without.seed()
        assert not any(path.name.startswith("prefect.db") for path in
                       [*on_postgres.home.iterdir(), *without.home.iterdir()])
    finally:
        on_postgres.stop()
        without.stop()
