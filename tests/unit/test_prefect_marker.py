"""The `prefect` marker, which picks the tests CI runs again on the floor of Prefect's range
(`make test-prefect`, issue 40), misses no module that starts Prefect: a module left out is
tested on the lock's release only, and a break on the floor ships unseen (last stop's
`test_serve_first_tick.py` and `test_serve_silent_runs.py`, serve's own tests, were not in it)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import PREFECT_MODULES

TESTS = Path(__file__).resolve().parents[1]

# What starts or imports Prefect in a test module: a `prefect server start`, the local server's
# adapter, Prefect itself (a flow run, its engine, its client), or Prefect's test harness.
STARTS_PREFECT = re.compile(
    r"PrefectServer\(|use_local_server\(|^\s*(?:from|import) prefect\b|prefect_test_harness",
    re.MULTILINE)
# A test that asks for the session's server, itself or through a fixture of its module, is marked
# by that (tests/conftest.py).
ASKS_THE_SESSION_SERVER = re.compile(r"def \w+\([^)]*\bprefect_server\b|"
                                     r"usefixtures\([^)]*\"prefect_server\"")

# Modules that start Prefect for the suite's own machinery, not kube-elevator's behaviour on a
# release: each says why it is not run on the floor.
NOT_ON_THE_FLOOR = {
    "test_prefect_server_spare.py": "the suite's spare `prefect server start` "
                                    "(benchmarks/event_latency.py), not kube-elevator's code",
}


def starting_prefect(path: Path) -> bool:
    text = path.read_text()
    return bool(STARTS_PREFECT.search(text)) and not ASKS_THE_SESSION_SERVER.search(text)


def test_every_module_that_starts_prefect_runs_on_the_floor_or_says_why_not() -> None:
    modules = sorted(TESTS.rglob("test_*.py"))
    assert len(modules) > 100, "the suite's modules were not found"
    unmarked = [str(path.relative_to(TESTS)) for path in modules
                if starting_prefect(path) and path.name not in PREFECT_MODULES
                and path.name not in NOT_ON_THE_FLOOR and "data" not in path.parts]
    assert unmarked == [], ("these modules start Prefect but are not marked `prefect`: add "
                            "them to tests/conftest.py's PREFECT_MODULES, or to "
                            f"NOT_ON_THE_FLOOR with the reason: {unmarked}")


def test_the_list_names_only_modules_that_exist() -> None:
    names = {path.name for path in TESTS.rglob("test_*.py")}
    assert sorted(PREFECT_MODULES - names) == []
    assert sorted(set(NOT_ON_THE_FLOOR) - names) == []


def test_a_module_that_starts_a_server_is_caught_and_one_that_does_not_is_left(
        tmp_path: Path) -> None:
    starts = tmp_path / "test_starts.py"
    starts.write_text("def test_x() -> None:\n    with PrefectServer() as server:\n        ...\n")
    imports = tmp_path / "test_imports.py"
    imports.write_text("def test_x() -> None:\n    from prefect import flow\n")
    asks = tmp_path / "test_asks.py"
    asks.write_text("from prefect import flow\n\ndef test_x(tmp_path, prefect_server) -> None:\n"
                    "    ...\n")
    mentions = tmp_path / "test_mentions.py"
    mentions.write_text('"""No prefect here: kube_elevator.tasks.adapters.prefect_server."""\n')
    assert [starting_prefect(path) for path in (starts, imports, asks, mentions)] == [
        True, True, False, False]
