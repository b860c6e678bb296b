"""The order `make test` hands test modules to its workers: the longest first.

`--dist loadfile` gives each of the two workers a whole module at a time, in the order of the
collection; xdist's own order (`--loadscope-reorder`, its default) puts the modules with the
most tests first, so the few-test modules that take minutes (serve's real processes, a child
pytest, Prefect's crash detection) came last, and one worker ran the last of them while the
other had finished. Longest first (the longest-processing-time rule) leaves the short modules
to fill in at the end. The Makefile's targets pass `--no-loadscope-reorder`, keeping this order.

The seconds are measured (`make test --durations`, a loaded 2-CPU machine, issue 40): a module's
tests summed. Only the rank matters; a module not listed keeps its place after these.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

MODULE_SECONDS = {
    "test_serve_abandoned_runs.py": 940,
    "test_serve_first_tick.py": 570,
    "test_serve_signal_mid_tick.py": 245,
    "test_serve_silent_runs.py": 150,
    "test_serve_stray_runs.py": 120,
    "test_crashed_runs.py": 90,
    "test_serve_stop_before_begun.py": 320,
    "test_prefect_server_spare.py": 100,
    "test_serve_schedules_and_signals.py": 250,
    "test_least_privilege.py": 65,
    "test_serve_watch.py": 80,
    "test_faults.py": 60,
    "test_replay_upstream.py": 60,
    "test_approval_flow.py": 55,
    "test_local_prefect_server.py": 55,
    "test_prefect_server_blocks.py": 50,
    "test_deployments.py": 50,
    "test_plugin_types.py": 47,
    "test_silent_watch_e2e.py": 35,
    "test_ui.py": 34,
    "test_fast_simulation.py": 34,
    "test_tune.py": 33,
    "test_crd_cel_library.py": 31,
    "test_cli_run.py": 28,
    "test_tune_dask.py": 26,
    "test_health_leader.py": 20,
}


def longest_first(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """`items` with the listed modules' tests first, longest module first; every module's
    tests, and the unlisted modules, in the order they came."""
    order = {id(item): index for index, item in enumerate(items)}
    return sorted(items, key=lambda item: (-MODULE_SECONDS.get(item.path.name, 0),
                                           order[id(item)]))
