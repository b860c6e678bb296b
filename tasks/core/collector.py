"""The cyclic garbage collector in a process that keeps a whole cluster in memory.

A watch cache holds 150,000 pod records for hours, and a tick allocates tens of thousands of
short-lived objects. Left to its defaults, the collector runs about 35 times a tick, and each run
walks the tick's lists of every pod again (and, in full collections, the cache itself): measured
at 150k pods, 40 ms of a plain tick and up to 0.1 s of a flow run. Records hold no cycles, so
reference counting frees them either way; for the same reason the collector is paused while a
list is decoded (`gc_paused`).
"""

from __future__ import annotations

import atexit
import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Young objects before a collection (Python's default is 700): a tick's burst of temporaries
# then costs one or two collections, not dozens. The older generations keep their defaults.
TICKING_PROCESS_THRESHOLD = 20_000


def keep_out_of_collections() -> None:
    """Hide what a fresh list built from the collector (`gc.freeze`): it lives until the next
    relist. Collected first, so no cyclic garbage is frozen with it."""
    gc.collect()
    gc.freeze()


def collect_less_often() -> None:
    """For a long-lived process that ticks from a cache (`elevator watch`, `elevator serve`)."""
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(TICKING_PROCESS_THRESHOLD, young), older, oldest)


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_on = True
_imports_frozen = False


def keep_imports_out_of_collections() -> None:
    """Once per process, after its big imports (the harness's: Prefect's, pydantic's and moto's
    models, ~260,000 objects that live as long as the process): `gc.freeze` them, so that a
    full collection walks only what was made since. Measured in a user's flow on a fake
    cluster: its collections took 0.3 s of CPU rather than 0.7 (benchmarks/RESULTS.md). Not
    collected first (a full pass costs 0.15 s of the 0.4 saved): what was cyclic garbage at that
    moment, ~3,400 objects measured, is never freed."""
    global _imports_frozen
    with _gc_lock:
        if not _imports_frozen:
            _imports_frozen = True
            gc.freeze()


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC while a list is decoded: records hold no cycles, and 150,000 of them would
    trigger full collections that cost more than the decoding itself. Counted, since several
    watches may list at once."""
    global _gc_pauses, _gc_was_on
    with _gc_lock:
        _gc_pauses += 1
        if _gc_pauses == 1:
            _gc_was_on = gc.isenabled()  # a process that runs without it (the harness's user)
            gc.disable()
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_on:
                gc.enable()


_exit_registered = False


def no_collections_at_exit() -> None:
    """At this process's end, freeze what is alive (`gc.freeze`) so Python's teardown does not
    walk it again: after the exit handlers, finalizing the modules runs several full
    collections over every object still tracked, ~1.2 s of CPU and ~2 s of wall in a process
    that ran a fake cluster and a Prefect flow (benchmarks/RESULTS.md). Registered once; the
    freeze comes after every exit handler registered later (Prefect's, which send a run's
    last events and logs), and before those registered earlier, whose own garbage is still
    collected. What freezing gives up: `__del__` of objects left in reference cycles at exit,
    which Python does not promise to call ("It is not guaranteed that __del__() methods are
    called for objects that still exist when the interpreter exits", the data model's
    `object.__del__`); weakref.finalize's exit calls and the flushing of sys.stdout/stderr
    do not depend on the collector."""
    global _exit_registered
    with _gc_lock:
        if not _exit_registered:
            atexit.register(gc.freeze)
            _exit_registered = True
