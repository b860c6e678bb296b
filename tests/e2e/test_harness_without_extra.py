"""The wheel without its `harness` extra (no moto): `fake_cluster()` and the plugin's fixtures
say in one line which extra to install, not moto's bare `No module named 'moto'` (issue 40: the
bare wheel beside a stranger's flows). moto is hidden from a child Python (`sys.modules`), as
if it were not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.deadlines import scaled

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
