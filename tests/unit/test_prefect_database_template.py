"""A new PREFECT_HOME's database seeded from one just migrated (tasks/adapters/prefect_server.py):
the template is a consistent copy, per Prefect version, and a database that exists is never
replaced."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from kube_elevator.tasks.adapters.prefect_server import keep_template, seeded, template_path


def test_a_migrated_database_seeds_the_next_new_one(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import prefect

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ELEVATOR_PREFECT_DATABASE_TEMPLATE", raising=False)
    template = template_path()
    assert template is not None and prefect.__version__ in template.name
    first = tmp_path / "home-1" / "prefect.db"
    first.parent.mkdir()
    assert not seeded(first)  # no template yet: Prefect migrates this one itself
    with sqlite3.connect(first) as db:  # as a server leaves it: WAL, a table of migrations
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE alembic_version (version_num TEXT)")
        db.execute("INSERT INTO alembic_version VALUES ('head')")
    keep_template(first)
    assert template.is_file()
    second = tmp_path / "home-2" / "prefect.db"
    assert seeded(second)
    with sqlite3.connect(second) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [("head",)]
    monkeypatch.setenv("ELEVATOR_PREFECT_DATABASE_TEMPLATE", "0")
    assert template_path() is None and not seeded(tmp_path / "home-3" / "prefect.db")
