"""The collector policy of a process that keeps a cluster in memory (tasks/core/collector.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kube_elevator.tasks.core.collector import (
    TICKING_PROCESS_THRESHOLD,
    collect_less_often,
    keep_out_of_collections,
)


@pytest.fixture
def collector_restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()


class Record:
    def __init__(self) -> None:
        self.partner: Record | None = None


def in_a_generation(target: object) -> bool:
    return any(candidate is target for candidate in gc.get_objects())


@pytest.mark.usefixtures("collector_restored")
def test_what_was_listed_is_frozen_and_cyclic_garbage_is_not() -> None:
    kept = [Record() for _ in range(3)]
    cycle_a, cycle_b = Record(), Record()
    cycle_a.partner, cycle_b.partner = cycle_b, cycle_a
    gone = weakref.ref(cycle_a)
    del cycle_a, cycle_b
    assert in_a_generation(kept[0])
    keep_out_of_collections()
    assert gone() is None  # collected before the freeze, so never frozen for good
    assert not in_a_generation(kept[0])
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("collector_restored")
def test_the_ticking_process_collects_young_objects_less_often_never_more() -> None:
    gc.set_threshold(700, 10, 10)
    collect_less_often()
    assert gc.get_threshold() == (TICKING_PROCESS_THRESHOLD, 10, 10)
    gc.set_threshold(50_000, 5, 7)
    collect_less_often()
    assert gc.get_threshold() == (50_000, 5, 7)


def test_a_pause_leaves_a_collector_that_was_off_off() -> None:
    """gc_paused turns the collector back on only if it was on: the harness's `fake_cluster()`
    pauses it while moto loads (issue 40) in a user's process that may run without it."""
    from kube_elevator.tasks.core.collector import gc_paused

    was_on = gc.isenabled()
    try:
        gc.enable()
        with gc_paused(), gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was_on else gc.disable)()
