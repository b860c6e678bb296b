"""Fixtures the end-to-end modules share: the image's build context and its wheel, made once;
a module's one `prefect server start`, new to each test's serve."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.event_latency import PrefectServer
from tests.e2e.test_serve_schedules_and_signals import a_fresh_serve_on
from tests.locks import REQUIREMENTS


@pytest.fixture(scope="session")
def build_context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the Dockerfile's build stage copies, laid out as its WORKDIR, with every lock
    of requirements/ (an install of another extra than the image's takes its own)."""
    from tests.e2e.test_image import DOCKERFILE, lay_out_build_context, stages

    build, _ = stages(DOCKERFILE.read_text())
    context = tmp_path_factory.mktemp("build-context")
    lay_out_build_context(build, context)
    for lock in REQUIREMENTS.glob("*.txt"):
        shutil.copyfile(lock, context / "requirements" / lock.name)
    return context


@pytest.fixture(scope="session")
def wheel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where install.sh builds the wheel the first time and finds it after ($WHEEL_DIR)."""
    return tmp_path_factory.mktemp("wheel")


@pytest.fixture(scope="session")
def stranger_venv(tmp_path_factory: pytest.TempPathFactory, build_context: Path,
                  wheel_dir: Path) -> Path:
    """An empty venv with the runtime lock (hashes checked, nothing resolved) and the wheel,
    by the image's install script: the session's wheel, shared with test_image.py; a
    stranger's project runs and type-checks against it."""
    from tests.e2e.test_image import DOCKERFILE, install_call, run_install, stages

    script, *_ = install_call(stages(DOCKERFILE.read_text())[0])
    venv = tmp_path_factory.mktemp("stranger") / "venv"
    done = run_install(build_context, [script, str(venv), "requirements/runtime.txt"], wheel_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv


@pytest.fixture(scope="module")
def shared_server() -> Iterator[PrefectServer]:
    """One `prefect server start` for a module whose tests are about serve's stop, not the
    server (~9.5 s of CPU a start). A module with servers of its own defines `server`."""
    with PrefectServer() as running:
        yield running


@pytest.fixture
def server(shared_server: PrefectServer) -> Iterator[PrefectServer]:
    """The module's server, its flows, deployments and runs deleted after each test."""
    with a_fresh_serve_on(shared_server) as fresh:
        yield fresh
