"""The shared local Prefect server's idle stop (tasks/adapters/prefect_server.py), on a clock of
the test's own: it stays while a registered process lives, and stops `idle` seconds after the
last one is gone and the last request came, its record removed first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kube_elevator.tasks.adapters.prefect_server import (
    RECORD_NAME,
    live_users,
    register_user,
    stop_when_idle,
)

IDLE_SECONDS = 60.0


def test_the_server_stays_while_a_user_lives_and_stops_idle_seconds_after(tmp_path: Path) -> None:
    user = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
    try:
        register_user(tmp_path, user.pid)
        (tmp_path / RECORD_NAME).write_text(json.dumps({"url": "http://127.0.0.1:1/api",
                                                        "pid": os.getpid()}))
        now = [0.0]
        last_request = [0.0]
        stopped: list[float] = []
        user_gone_at: list[float] = []

        def wait(seconds: float) -> None:
            now[0] += seconds
            if now[0] >= 10 * IDLE_SECONDS and not user_gone_at:  # long past the bound
                assert not stopped and (tmp_path / RECORD_NAME).exists()
                user.kill()
                user.wait()
                user_gone_at.append(now[0])
            assert now[0] < 100 * IDLE_SECONDS, "never stopped"

        stop_when_idle(tmp_path, IDLE_SECONDS, clock=lambda: now[0], wait=wait,
                       stop=lambda: stopped.append(now[0]), last_request=last_request)
    finally:
        if user.poll() is None:
            user.kill()
            user.wait()
    (gone,) = user_gone_at
    (stop,) = stopped
    # The bound after the user was last seen alive (one check, 5 s, before its exit at most),
    # and within one check of it.
    check = 5.0
    assert gone - check + IDLE_SECONDS - 1e-9 <= stop <= gone + IDLE_SECONDS + check
    assert not (tmp_path / RECORD_NAME).exists()
    assert live_users(tmp_path) == []  # the dead user's entry is removed too


def test_a_request_keeps_an_unused_server(tmp_path: Path) -> None:
    now = [0.0]
    last_request = [0.0]
    stopped: list[float] = []

    def wait(seconds: float) -> None:
        now[0] += seconds
        if now[0] <= 3 * IDLE_SECONDS:
            last_request[0] = now[0]  # a request every check

    stop_when_idle(tmp_path, IDLE_SECONDS, clock=lambda: now[0], wait=wait,
                   stop=lambda: stopped.append(now[0]), last_request=last_request)
    (stop,) = stopped
    assert 3 * IDLE_SECONDS + IDLE_SECONDS - 5 - 1e-9 <= stop <= 4 * IDLE_SECONDS + 5
