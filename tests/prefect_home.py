"""Each test process's own PREFECT_HOME (tests/conftest.py), removed when the process ends: 352
of them had piled up in /tmp when nothing removed them."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from pathlib import Path

KEEP_VARIABLE = "ELEVATOR_TEST_PREFECT_HOME"  # a home to use and keep


def remove_prefect_home(home: Path) -> None:
    """The shared local server a command of the tests started on `home` stopped, then the
    folder removed; best effort (a process left by a killed test may still write in it)."""
    from kube_elevator.tasks.adapters.prefect_server import stop_shared_server

    with contextlib.suppress(OSError):
        stop_shared_server(home, timeout=10)
    shutil.rmtree(home, ignore_errors=True)


def process_prefect_home() -> str:
    """`ELEVATOR_TEST_PREFECT_HOME` if set (kept), else a new folder removed at the process's
    exit. atexit runs its handlers last in, first out: Prefect's own, registered once Prefect
    is imported (after this), are done by then."""
    kept = os.environ.get(KEEP_VARIABLE)
    if kept:
        return kept
    home = tempfile.mkdtemp(prefix="elevator-tests-prefect-home-")
    atexit.register(remove_prefect_home, Path(home))
    return home
