"""A new PREFECT_HOME's database seeded from one just migrated (tasks/adapters/prefect_server.py):
the template is a consistent copy, per Prefect version, and a database that exists is never
replaced."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from kube_elevator.tasks.adapters.prefect_server import (
    keep_template,
    prepare_registration,
    record_registered,
    seeded,
    template_path,
)


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


def test_the_template_is_named_by_the_release_and_the_collections_it_registered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server on a seeded database skips Prefect's block registration (its template's server
    registered them), so a template serves only the release and collections it was made with."""
    import prefect

    def installed(*versions: str) -> None:
        points = [SimpleNamespace(dist=SimpleNamespace(name="prefect-aws", version=version))
                  for version in versions]
        monkeypatch.setattr("importlib.metadata.entry_points", lambda group: points)

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ELEVATOR_PREFECT_DATABASE_TEMPLATE", raising=False)
    installed()
    without = template_path()
    installed("0.7.12")
    with_aws = template_path()
    installed("0.7.13")
    with_newer_aws = template_path()
    assert without is not None and with_aws is not None and with_newer_aws is not None
    assert all(path.name.startswith(f"prefect-{prefect.__version__}-")
               for path in (without, with_aws, with_newer_aws))
    assert len({without, with_aws, with_newer_aws}) == 3
    installed("0.7.12", "0.7.12")  # one distribution with several entry points
    assert template_path() == with_aws


def test_a_database_that_holds_the_block_types_skips_registration(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded after a registering server's start, or a template's copy: the release's and
    collections' block types are in this database, so its next server skips registering them,
    unless they are gone (a database reset) or the collections changed, or the user said."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    database = tmp_path / "home" / "prefect.db"
    database.parent.mkdir()
    environ: dict[str, str] = {}
    assert prepare_registration(database, environ)  # nothing there: it registers
    assert environ == {}
    with sqlite3.connect(database) as db:  # as a registering server leaves it
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE block_type (slug TEXT)")
        db.executemany("INSERT INTO block_type VALUES (?)", [("secret",), ("aws-credentials",)])
    record_registered(database)
    assert not prepare_registration(database, environ)
    assert environ == {"PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false",
                       "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION": "false"}
    # The user's own setting wins, under any of its names.
    mine = {"PREFECT_API_BLOCKS_REGISTER_ON_START": "true"}
    assert prepare_registration(database, mine)
    assert mine == {"PREFECT_API_BLOCKS_REGISTER_ON_START": "true"}
    memo_only = {"PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION": "true"}
    assert prepare_registration(database, memo_only)
    assert memo_only == {"PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION": "true"}
    assert not prepare_registration(database, {"PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "0"})
    # Another set of collections registers its own.
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [
        SimpleNamespace(dist=SimpleNamespace(name="prefect-gcp", version="1.0"))])
    assert prepare_registration(database, {})
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert not prepare_registration(database, {})
    # A reset database (its block types gone) registers them again.
    with sqlite3.connect(database) as db:
        db.execute("DELETE FROM block_type")
    assert prepare_registration(database, {})
