"""What one tick leaves in the Prefect database: bytes and rows a tick, idle and acting, on
SQLite and on Postgres (issue 27).

`elevator watch`'s ticks, in this process: three node groups on the fake API server and moto,
read through the watch cache, every tick an `autoscale` flow run against a `prefect server
start` of its own (SQLite, or a throwaway PostgreSQL). After warm-up ticks the database is
measured, `--ticks` more run, the server's recorders are waited for (task runs and events
are written in batches), and the database is measured again.

- idle: every group between its thresholds, nothing to do;
- acting: each tick brings every group pending pods, so each scales up.

    .venv/bin/python -m benchmarks.prefect_database --ticks 60

Bytes are the pages the tables and their indexes use (SQLite: `dbstat`, free pages left out;
Postgres: `pg_total_relation_size`, dead rows included until autovacuum reclaims them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.cluster import POD_NAMESPACE, node_for_instance, pod_body
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.fakes.scenario import Wave

MiB = 2**20
GROUPS = ("shared", "batch", "spot")
TICKS_A_DAY = 24 * 60  # one tick a minute, Escalator's default scan interval
# The tables a tick writes to (and the rows worth counting); the rest stay the same size.
TABLES = ("flow_run", "flow_run_state", "task_run", "task_run_state", "events",
          "event_resources", "artifact", "artifact_collection", "log")
EVENT_NAMES = "SELECT event, COUNT(*) FROM events GROUP BY event"
_names = itertools.count()


class ThreeGroups:
    """Three node groups, two 1-CPU nodes each, half full: nothing to do until pods come.

    `scale_up_cool_down_period` is 1 s and each tick is stamped 10 minutes after the last
    (`ELEVATOR_SIMULATED_CLOCK`), so a group with pending pods scales up again every tick.
    """

    def __init__(self, kube: FakeKubeApi, aws: FakeAws, directory: Path, nodes: int = 2,
                 max_nodes: int = 10_000) -> None:
        self.kube, self.aws = kube, aws
        run = f"{next(_names)}-{os.getpid()}-{directory.name[-8:]}"
        self.asgs = {group: f"{group}-asg-{run}" for group in GROUPS}
        self.nodes: dict[str, list[str]] = {}
        settings = []
        for group, asg in self.asgs.items():
            aws.create_asg(asg, 1, max_nodes, nodes)
            self.nodes[group] = []
            for index, instance in enumerate(aws.instances(asg)):
                node = node_for_instance(instance, {"customer": group}, 1000, 4000 * MiB,
                                         time.time() - 3600 + index * 60)
                kube.create("nodes", node)
                self.nodes[group].append(node["metadata"]["name"])
                self.pod(group, f"{group}-steady-{index}", node=node["metadata"]["name"])
            settings.append({
                "name": group, "label_key": "customer", "label_value": group,
                "cloud_provider_group_name": asg, "min_nodes": 1, "max_nodes": max_nodes,
                "taint_upper_capacity_threshold_percent": 40,
                "taint_lower_capacity_threshold_percent": 10,
                "scale_up_threshold_percent": 70, "slow_node_removal_rate": 1,
                "fast_node_removal_rate": 2, "soft_delete_grace_period": "1m",
                "hard_delete_grace_period": "10m", "scale_up_cool_down_period": "1s"})
        self.nodegroups = directory / "nodegroups.yaml"
        self.nodegroups.write_text(yaml.safe_dump({"node_groups": settings}))
        self.kubeconfig = kube.write_kubeconfig(directory / "kubeconfig")

    def pod(self, group: str, name: str, cpu: str = "500m", node: str | None = None) -> None:
        """A pod of `group` (a workload controller's, as the simulator makes them): running on
        `node`, or pending."""
        body = pod_body(name, Wave(at=0, count=1, cpu=cpu, memory="100Mi"),
                        {"customer": group}, time.time())
        if node is not None:
            body["spec"]["nodeName"] = node
            body["status"] = {"phase": "Running",
                              "conditions": [{"type": "PodScheduled", "status": "True"}]}
        self.kube.create("pods", body, namespace=POD_NAMESPACE)

    def delete_pod(self, name: str) -> None:
        self.kube.delete("pods", name, POD_NAMESPACE)


@dataclass(frozen=True)
class DatabaseSize:
    """The bytes the tables (with their indexes) use, their rows, and the events by name."""

    total_bytes: int
    table_bytes: dict[str, int]
    rows: dict[str, int]
    events: dict[str, int]

    def minus(self, before: DatabaseSize) -> DatabaseSize:
        def less(now: dict[str, int], then: dict[str, int]) -> dict[str, int]:
            return {name: value - then.get(name, 0) for name, value in now.items()}

        return DatabaseSize(self.total_bytes - before.total_bytes,
                            less(self.table_bytes, before.table_bytes),
                            less(self.rows, before.rows), less(self.events, before.events))


def sqlite_size(path: Path) -> DatabaseSize:
    """Pages in use by each table and its indexes (free pages left out), and their rows."""
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True,
                                            timeout=60)) as db:
        owner = dict(db.execute("SELECT name, tbl_name FROM sqlite_schema").fetchall())
        table_bytes: dict[str, int] = {}
        for name, size in db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            table_bytes[table] = table_bytes.get(table, 0) + int(size)
        rows = {table: int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
                for table in TABLES}
        events = dict(db.execute(EVENT_NAMES).fetchall())
    return DatabaseSize(sum(table_bytes.values()), table_bytes, rows, events)


def postgres_size(url: str) -> DatabaseSize:
    """The database's tables with their indexes and TOAST (dead rows until autovacuum)."""
    import asyncpg

    async def read() -> DatabaseSize:
        connection = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
        try:
            sizes = await connection.fetch(
                "SELECT relname, pg_total_relation_size(oid) AS size FROM pg_class "
                "WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace")
            rows = {table: int(await connection.fetchval(f"SELECT COUNT(*) FROM {table}"))
                    for table in TABLES}
            events = {record[0]: int(record[1]) for record in await connection.fetch(EVENT_NAMES)}
        finally:
            await connection.close()
        table_bytes = {record["relname"]: int(record["size"]) for record in sizes}
        return DatabaseSize(sum(table_bytes.values()), table_bytes, rows, events)

    return asyncio.run(read())


def wait_for_recorders(size: Any, quiet_seconds: float = 8.0, timeout: float = 180.0) -> Any:
    """The database once the server's batched recorders have written what the ticks sent:
    this process's events sent, then the rows unchanged for `quiet_seconds` (the event
    persister flushes every 5 s)."""
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=timeout)
    deadline = time.monotonic() + timeout
    last = size()
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(1.0)  # the recorders flush on intervals of their own: poll, with a deadline
        now = size()
        if now.rows != last.rows:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_seconds:
            return now
    return last


@contextlib.contextmanager
def prefect_database(backend: str) -> Iterator[tuple[str, Any]]:
    """A lean Prefect server on `backend` ("sqlite" or "postgres"): its API URL and a function
    that measures its database."""
    from benchmarks.prefect_overhead import postgres, prefect_server

    if backend == "postgres":
        with postgres() as url, prefect_server(url) as api_url:
            yield api_url, lambda: postgres_size(url)
        return
    with tempfile.TemporaryDirectory(prefix="elevator-prefect-db-") as directory:
        path = Path(directory) / "prefect.db"
        with prefect_server(f"sqlite+aiosqlite:///{path}") as api_url:
            yield api_url, lambda: sqlite_size(path)


def _at_least(cache: Any, pods: int) -> bool:
    return bool(cache.counts()["pods"] >= pods)


def _at_most(cache: Any, pods: int) -> bool:
    return bool(cache.counts()["pods"] <= pods)


def measure(backend: str, acting: bool, ticks: int, warm_up: int = 3) -> dict[str, Any]:
    """Bytes and rows `ticks` ticks add to the database, per tick, with what they decided."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from kube_elevator.flows.autoscale import autoscale
    from kube_elevator.flows.prefect_compat import one_client_for_runs
    from kube_elevator.flows.run_state import run_here
    from kube_elevator.tasks.adapters.kube_cache import ClusterCache, install_process_cache

    os.environ["ELEVATOR_SIMULATED_CLOCK"] = "1"  # ticks stamped 10 minutes apart
    statuses: dict[str, int] = {}
    start_seconds = 1_800_000_000.0
    with tempfile.TemporaryDirectory(prefix="elevator-prefect-db-") as scratch, \
            FakeKubeApi() as kube, FakeAws() as aws, aws.environment(), \
            prefect_database(backend) as (api_url, size), \
            temporary_settings({PREFECT_API_URL: api_url}), kube.api_client() as api:
        cluster = ThreeGroups(kube, aws, Path(scratch))
        cache = ClusterCache(api).start()
        assert cache.wait_synced(60), "the watch cache did not sync"
        install_process_cache(cache, str(cluster.kubeconfig))
        try:
            with one_client_for_runs():  # as elevator watch runs its ticks
                before = None
                for index in range(warm_up + ticks):
                    if index == warm_up:
                        before = wait_for_recorders(size)
                    pending = []
                    if acting:
                        for group in GROUPS:
                            for number in range(4):
                                name = f"{group}-pending-{index}-{number}"
                                cluster.pod(group, name)
                                pending.append(name)
                    wanted = 3 * 2 + len(pending)
                    cache.wait_for(partial(_at_least, cache, wanted))
                    results = run_here(partial(
                        autoscale, nodegroups=str(cluster.nodegroups),
                        kubeconfig=str(cluster.kubeconfig), return_state=True,
                        now=datetime.fromtimestamp(start_seconds + 600 * index, UTC))).results()
                    if index >= warm_up:
                        for result in results:
                            statuses[result["status"]] = statuses.get(result["status"], 0) + 1
                    for name in pending:
                        cluster.delete_pod(name)
                    cache.wait_for(partial(_at_most, cache, 3 * 2))
        finally:
            install_process_cache(None)
            cache.stop()
        assert before is not None
        after = wait_for_recorders(size)
    added = after.minus(before)
    return {"backend": backend, "acting": acting, "ticks": ticks, "statuses": statuses,
            "bytes_per_tick": added.total_bytes / ticks,
            "bytes_per_day": added.total_bytes / ticks * TICKS_A_DAY,
            "rows_per_tick": {name: count / ticks for name, count in added.rows.items()},
            "events_per_tick": {name: count / ticks for name, count in added.events.items()
                                if count},
            "table_bytes_per_tick": {name: size / ticks for name, size
                                     in sorted(added.table_bytes.items(),
                                               key=lambda item: -item[1]) if size}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=60)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--only", choices=("idle", "acting", "both"), default="both")
    options = parser.parse_args()
    backends = ("sqlite", "postgres") if options.backend == "both" else (options.backend,)
    kinds = (False, True) if options.only == "both" else (options.only == "acting",)
    for backend in backends:
        for acting in kinds:
            print(json.dumps(measure(backend, acting, options.ticks)), flush=True)


if __name__ == "__main__":
    main()
