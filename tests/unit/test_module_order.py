"""The order `make test` hands modules to xdist's workers (tests/module_order.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from tests.module_order import MODULE_SECONDS, longest_first

TESTS = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Item:
    path: Path
    name: str


def test_the_longest_modules_come_first_each_whole_and_in_its_own_order() -> None:
    items = [Item(TESTS / "unit" / "test_a.py", "1"), Item(TESTS / "e2e" / "test_ui.py", "1"),
             Item(TESTS / "unit" / "test_a.py", "2"),
             Item(TESTS / "e2e" / "test_serve_abandoned_runs.py", "1"),
             Item(TESTS / "e2e" / "test_ui.py", "2"), Item(TESTS / "unit" / "test_b.py", "1"),
             Item(TESTS / "e2e" / "test_serve_abandoned_runs.py", "2")]
    ordered = longest_first(cast(Any, items))
    assert [(item.path.name, item.name) for item in ordered] == [
        ("test_serve_abandoned_runs.py", "1"), ("test_serve_abandoned_runs.py", "2"),
        ("test_ui.py", "1"), ("test_ui.py", "2"),
        ("test_a.py", "1"), ("test_a.py", "2"), ("test_b.py", "1")]


def test_every_module_the_order_names_exists() -> None:
    """A module renamed or split would silently lose its place."""
    modules = {path.name for path in TESTS.rglob("test_*.py")}
    assert sorted(set(MODULE_SECONDS) - modules) == []
