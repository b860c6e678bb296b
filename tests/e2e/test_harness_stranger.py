"""Issue 36's acceptance: a stranger's project (a temporary folder: its own drain script and its
tests, no conftest.py) with the wheel and its `harness` extra installed from the lock into an
empty venv, runs its tests against the fake with the plugin's fixtures only (pytest in a
subprocess, from outside the checkout). The project is tests/data/stranger_project, which
docs/harness.md shows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.deadlines import scaled
from tests.e2e.test_image import DOCKERFILE, install_call, run_install, stages
from tests.locks import ROOT

PROJECT = ROOT / "tests" / "data" / "stranger_project"


@pytest.fixture(scope="module")
def harness_venv(tmp_path_factory: pytest.TempPathFactory, build_context: Path,
                 wheel_dir: Path) -> Iterator[Path]:
    """kube-elevator[harness] from the wheel, with requirements/harness.txt's hashed pins."""
    script, *_ = install_call(stages(DOCKERFILE.read_text())[0])
    target = tmp_path_factory.mktemp("stranger") / "venv"
    done = run_install(build_context,
                       [script, str(target), "requirements/harness.txt", "harness"], wheel_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    yield target


def test_a_strangers_project_tests_its_drain_script_against_the_fake(
        harness_venv: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("AWS_", "PYTEST_", "KUBECONFIG", "PYTHONPATH",
                                          "VIRTUAL_ENV", "PREFECT_", "ELEVATOR_"))}
    done = subprocess.run(
        [str(harness_venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-W", "error::pytest.PytestUnknownMarkWarning"],
        cwd=project, capture_output=True, text=True, timeout=scaled(600), check=False,
        env={**environment, "HOME": str(tmp_path), "PYTHONPATH": str(project)})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\b5 passed\b", done.stdout), done.stdout
    # only the venv's packages: nothing of the checkout was imported
    where = subprocess.run(
        [str(harness_venv / "bin" / "python"), "-c",
         "import kube_elevator.harness as h, pytest; print(h.__file__)"],
        cwd=project, capture_output=True, text=True, timeout=scaled(120), check=True, env=environment)
    assert where.stdout.startswith(str(harness_venv)), where.stdout


def test_the_plugin_costs_a_session_that_uses_no_fixture_nothing(harness_venv: Path,
                                                                 tmp_path: Path) -> None:
    """pytest imports every installed plugin at its start: this one registers fixtures and
    imports none of the fakes, moto or the client until a test asks for a fixture."""
    done = subprocess.run(
        [str(harness_venv / "bin" / "python"), "-c",
         "import sys, importlib.metadata as m\n"
         "(plugin,) = [e for e in m.entry_points(group='pytest11') if e.name == 'kube_elevator']\n"
         "plugin.load()\n"
         "print(sorted(n for n in sys.modules if n.startswith(('kube_elevator.fakes.kube_api',"
         " 'moto', 'kubernetes', 'boto3'))))"],
        cwd=tmp_path, capture_output=True, text=True, timeout=scaled(120), check=False,
        env={**os.environ, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
