"""The suite's own hygiene: each test process's PREFECT_HOME (tests/conftest.py) is gone when
the process ends, with the shared local server a command of its tests started on it; a home
named by `ELEVATOR_TEST_PREFECT_HOME` is kept. (352 homes had piled up in /tmp.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kube_elevator.tasks.adapters.prefect_server import RECORD_NAME, alive

ROOT = Path(__file__).resolve().parents[2]

# A test process in short: the suite's conftest imported, something written in its home (a
# server record naming the pid given, as `elevator`'s shared server writes one), the home said.
PROCESS = f"""
import json, os, sys
from pathlib import Path
import tests.conftest
home = Path(os.environ["PREFECT_HOME"])
(home / "prefect.db").write_text("written by a test")
if len(sys.argv) > 1:
    (home / "{RECORD_NAME}").write_text(json.dumps({{"url": "http://127.0.0.1:9/api",
                                                "pid": int(sys.argv[1])}}))
print(home)
"""


def a_test_process(*args: str, **env: str) -> Path:
    clean = {key: value for key, value in os.environ.items()
             if key not in ("PREFECT_HOME", "ELEVATOR_TEST_PREFECT_HOME")}
    done = subprocess.run([sys.executable, "-c", PROCESS, *args], env={**clean, **env},
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    return Path(done.stdout.strip().splitlines()[-1])


def test_a_test_processs_prefect_home_is_removed_at_its_exit() -> None:
    home = a_test_process()
    assert home.name.startswith("elevator-tests-prefect-home-")
    assert not home.exists()


def test_the_shared_server_recorded_in_it_is_stopped_first() -> None:
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        home = a_test_process(str(server.pid))
        assert server.wait(timeout=30) is not None  # stopped by the exit of the test process
        assert not alive(server.pid)
        assert not home.exists()
    finally:
        server.kill()
        server.wait()


def test_a_home_named_to_keep_is_kept(tmp_path: Path) -> None:
    kept = tmp_path / "kept-home"
    kept.mkdir()
    home = a_test_process(ELEVATOR_TEST_PREFECT_HOME=str(kept))
    assert home == kept
    assert (kept / "prefect.db").read_text() == "written by a test"
