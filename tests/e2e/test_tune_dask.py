"""`elevator tune --dask` on workers that cannot see the scenario's files (issue 29): a Dask
scheduler and worker processes started by `dask scheduler` / `dask worker` in an empty
directory, as on other machines. The batches carry the loaded workload, scattered to the
workers once, so a relative scenario path gives the same search as without `--dask`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.deadlines import scaled

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "deployments/examples/scenario.yaml"  # relative: to the directory tune runs in
WORKERS = 2


def dask(*args: str, cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A `dask` command of this environment (`python -m distributed.cli.dask_*`)."""
    command, *rest = args
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", f"distributed.cli.dask_{command}", *rest], cwd=cwd, env=env,
            stdout=output, stderr=subprocess.STDOUT)


@pytest.fixture
def prefect_env(prefect_server: None) -> dict[str, str]:
    """This session's Prefect server for the command and the workers alike (each would start
    a temporary server of its own otherwise)."""
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}


@pytest.fixture
def elsewhere(tmp_path: Path, prefect_env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """(scheduler address, the workers' directory): a scheduler and `WORKERS` worker
    processes whose working directory holds none of the repository's files."""
    from distributed import Client

    workdir = tmp_path / "workers"
    workdir.mkdir()
    scheduler_file = workdir / "scheduler.json"
    processes = [dask("scheduler", "--host", "127.0.0.1", "--port", "0",
                      "--dashboard-address", "127.0.0.1:0", "--scheduler-file",
                      str(scheduler_file), cwd=workdir, env=prefect_env,
                      log=tmp_path / "scheduler.log")]
    try:
        deadline = time.monotonic() + scaled(60)
        while not (scheduler_file.exists() and scheduler_file.stat().st_size):
            assert processes[0].poll() is None, (tmp_path / "scheduler.log").read_text()
            assert time.monotonic() < deadline, "the scheduler wrote no address in 60 s"
            time.sleep(0.1)  # starting: poll with a deadline
        address = json.loads(scheduler_file.read_text())["address"]
        processes.append(dask("worker", address, "--nworkers", str(WORKERS), "--nthreads", "1",
                              "--no-dashboard", "--local-directory", str(workdir / "dask"),
                              cwd=workdir, env=prefect_env, log=tmp_path / "workers.log"))
        with Client(address, timeout=scaled(30)) as client:
            client.wait_for_workers(WORKERS, timeout=scaled(120))
        yield address, workdir
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=scaled(30))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=scaled(10))


def tune(output: Path, env: dict[str, str], *options: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "kube_elevator.flows.cli", "tune", SCENARIO, "--trials", "4", "--seeds", "1",
         "--held-out", "2", "--batch", "1", "--parallel", "2", "--seed", "7", "--output",
         str(output), "--format", "json", *options],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=scaled(600), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary.pop("output") == str(output)
    return summary


def test_a_relative_scenario_on_workers_without_its_files_tunes_as_without_dask(
        elsewhere: tuple[str, Path], prefect_env: dict[str, str], tmp_path: Path) -> None:
    from distributed import Client

    address, workdir = elsewhere
    assert (ROOT / SCENARIO).is_file() and not (workdir / SCENARIO).exists()
    on_dask = tune(tmp_path / "dask.yaml", prefect_env, "--dask", address)
    here = tune(tmp_path / "here.yaml", prefect_env)
    assert on_dask == here  # the same trials, held-out figures and savings
    assert (tmp_path / "dask.yaml").read_text() == (tmp_path / "here.yaml").read_text()
    with Client(address, timeout=scaled(30)) as client:
        # (key, new state) of every transition so far; a lambda, as the scheduler's process
        # cannot import this module
        transitions = client.run_on_scheduler(lambda dask_scheduler: [
            (str(entry[0]), str(entry[2])) for entry in dask_scheduler.transition_log])
    batches = {key for key, state in transitions
               if key.startswith("evaluate") and state == "memory"}
    workloads = {key for key, _ in transitions if key.startswith("LoadedScenario-")}
    assert len(batches) >= 4  # every trial after the file's ran as a batch on the workers
    assert len(workloads) == 1  # the workload went out once for the run, not once a batch
