"""The wheel without its `harness` extra (no moto): `fake_cluster()` and the plugin's fixtures
say in one line which extra to install, not moto's bare `No module named 'moto'` (issue 40: the
bare wheel beside a stranger's flows). moto is hidden from a child Python (`sys.modules`), as
if it were not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.deadlines import scaled
from kube_elevator.fakes.harness.context import HARNESS_SERVER_VARIABLE
from kube_elevator.tasks.adapters.prefect_server import RECORD_NAME, stop_shared_server

INSTALL_LINE = "pip install 'kube-elevator[harness]'"
HIDE = "import sys\nsys.modules[{module!r}] = None  # as if moto[server] were not installed\n"

# the harness in the user's process (moto's mock_aws), and moto's server (flask) for processes
# of their own
IN_PROCESS = """
from kube_elevator.harness import fake_cluster

with fake_cluster() as cluster:
    print("started")
"""
SERVER = """
from kube_elevator.harness import FakeAws

with FakeAws() as aws:
    print("started")
"""

# a user's flow: Prefect imported, so `fake_cluster()` would start the shared Prefect server
USERS_FLOW = """
from prefect import flow

from kube_elevator.harness import fake_cluster

with fake_cluster() as cluster:
    print("started")
"""

USERS_TEST = """
def test_drain(fake_cluster):
    assert fake_cluster.kube
"""


@pytest.mark.parametrize(("module", "users_script"), [("moto", IN_PROCESS), ("flask", SERVER)],
                         ids=["in-process", "server"])
def test_a_users_script_without_the_extra_is_told_what_to_install(
        module: str, users_script: str, tmp_path: Path) -> None:
    script = tmp_path / "mine.py"
    script.write_text(HIDE.format(module=module) + users_script)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=scaled(120), check=False)
    assert done.returncode == 1
    assert "started" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("kube_elevator.fakes.aws.MotoMissing: "), done.stderr[-2000:]
    assert INSTALL_LINE in last
    # one error, not moto's under ours
    assert "During handling of the above exception" not in done.stderr


def test_a_users_flow_without_the_extra_is_told_before_any_prefect_server_starts(
        tmp_path: Path) -> None:
    """Before: without PREFECT_API_URL the shared Prefect server started first (12.9 s at load
    ~8, 39 s on a new PREFECT_HOME at load 8.5, s62's walkthrough from the wheel), then the
    refusal, and the server stayed until idle (5 min)."""
    home = tmp_path / "prefect-home"
    env = {name: value for name, value in os.environ.items()
           if name not in ("PREFECT_API_URL", HARNESS_SERVER_VARIABLE)}
    script = tmp_path / "mine.py"
    script.write_text(HIDE.format(module="moto") + USERS_FLOW)
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              env={**env, "PREFECT_HOME": str(home)}, timeout=scaled(120),
                              check=False)
        assert done.returncode == 1
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("kube_elevator.fakes.aws.MotoMissing: "), done.stderr[-2000:]
        assert INSTALL_LINE in last
        assert not (home / RECORD_NAME).exists(), "a Prefect server was started first"
    finally:
        stop_shared_server(home)


def test_a_users_pytest_without_the_extra_is_told_what_to_install(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(HIDE.format(module="moto"))
    (tmp_path / "test_mine.py").write_text(USERS_TEST)
    # the plugin is the wheel's pytest11 entry point, as in the user's venv
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=scaled(300),
                          check=False)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "1 error" in done.stdout
    assert INSTALL_LINE in done.stdout
