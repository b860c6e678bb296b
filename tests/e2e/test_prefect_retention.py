"""A Prefect server `elevator` starts keeps a week of ticks, not every tick forever (issue 27 §1).

The settings are Prefect's own (`prefect/server/services/db_vacuum.py`, 3.6.21 and later), read back here
through Prefect's settings model, so a misspelt name fails here instead of being ignored. The
local server a command without PREFECT_API_URL uses is `prefect server start`'s app with its
services (tasks/adapters/prefect_server.py): it runs the flow-run vacuum too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from benchmarks.deadlines import scaled
from kube_elevator.flows.prefect_compat import SERVER_SETTINGS, default_server_settings

ROOT = Path(__file__).resolve().parents[2]


def settings_of(environ: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Prefect's settings as a process whose only server settings are `environ` reads them."""
    from prefect.settings import Settings

    for name in SERVER_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_the_server_settings_are_prefects_own_and_a_users_own_wins(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ours: dict[str, str] = {}
    default_server_settings(ours)
    settings = settings_of(ours, monkeypatch)
    vacuum = settings.server.services.db_vacuum
    assert vacuum.enabled_vacuum_types >= {"events", "flow_runs"}
    assert vacuum.retention_period == timedelta(days=7)
    assert settings.server.events.retention_period == timedelta(days=7)
    assert settings.server.services.task_run_recorder.batch_size == 200
    # Every setting we set is one Prefect knows (its env name round-trips).
    assert set(ours) <= set(settings.to_environment_variables(exclude_unset=True))

    mine = {"PREFECT_SERVER_SERVICES_DB_VACUUM_RETENTION_PERIOD": "P30D"}
    default_server_settings(mine)
    vacuum = settings_of(mine, monkeypatch).server.services.db_vacuum
    assert vacuum.retention_period == timedelta(days=30)


# The local server a command uses (no PREFECT_API_URL), in a PREFECT_HOME of its own: two
# finished runs, one of which ended eight days ago (its end_time moved back in the database,
# as a week would); the vacuum, every second here, deletes that one and keeps the other.
EPHEMERAL = r"""
import os, sqlite3, sys, time
from benchmarks.deadlines import scaled
from datetime import UTC, datetime, timedelta
from kube_elevator.flows.prefect_compat import default_server_settings
default_server_settings(os.environ)
from kube_elevator.tasks.adapters.prefect_server import stop_shared_server, use_local_server
from pathlib import Path
assert use_local_server() is not None
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.states import Completed

@flow(name="autoscale")
def tick() -> None: ...

database = os.path.join(os.environ["PREFECT_HOME"], "prefect.db")
with get_client(sync_client=True) as client:
    old, new = (client.create_flow_run(tick, state=Completed()) for _ in range(2))
    ended = (datetime.now(UTC) - timedelta(days=8)).strftime("%Y-%m-%d %H:%M:%S.%f")
    with sqlite3.connect(database, timeout=scaled(60)) as db:
        db.execute("UPDATE flow_run SET end_time = ? WHERE id = ?", (ended, str(old.id)))
    deadline = time.monotonic() + scaled(120)
    while True:
        kept = {run.id for run in client.read_flow_runs()}
        if old.id not in kept or time.monotonic() > deadline:
            break
        time.sleep(0.5)  # the vacuum runs every second: poll with a deadline
stop_shared_server(Path(os.environ["PREFECT_HOME"]))
print("old deleted" if old.id not in kept else "old kept",
      "new kept" if new.id in kept else "new deleted")
"""


def test_the_local_server_deletes_runs_past_the_retention(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_SERVER_SERVICES_DB_VACUUM_LOOP_SECONDS="1",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180",
               PREFECT_LOGGING_LEVEL="WARNING")
    done = subprocess.run([sys.executable, "-c", EPHEMERAL], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=scaled(600), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "old deleted new kept"
