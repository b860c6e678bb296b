"""`make bench`: every figure with its target and the floor it is compared with, in one table.

Writes the same table to benchmarks/RESULTS.md with the machine, the command and the date.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.plan_scale import make_snapshot, orjson_floor_seconds, plan_in_process_seconds, run_plan

RESULTS = Path(__file__).parent / "RESULTS.md"


@dataclass(frozen=True)
class Figure:
    name: str
    value: str
    target: str
    floor: str
    met: bool | None


def plan_figures() -> list[Figure]:
    snapshot = make_snapshot(150_000, 5_000)
    floor = orjson_floor_seconds(snapshot.cluster)
    runs = [run_plan(snapshot) for _ in range(3)]
    seconds = statistics.median(run[0] for run in runs)
    rss_mb = max(run[1] for run in runs)
    ratio = seconds / floor
    size_mb = snapshot.size_bytes / 2**20
    return [
        Figure(f"elevator plan, 150k pods / 5k nodes / 10 groups ({size_mb:.0f} MB), median of 3",
               f"{seconds:.2f} s ({ratio:.2f}x)", "≤ 1.5x floor",
               f"orjson.loads, GC off: {floor:.2f} s", ratio <= 1.5),
        Figure("elevator plan peak RSS", f"{rss_mb:.0f} MB", "< 600 MB", "", rss_mb < 600),
    ]


def scaling_figures() -> list[Figure]:
    sizes = [1_000, 10_000, 50_000, 150_000]
    times = []
    for pods in sizes:
        snapshot = make_snapshot(pods, max(pods // 30, 10))
        times.append(min(plan_in_process_seconds(snapshot) for _ in range(2)))
    per_pod_us = [t / n * 1e6 for t, n in zip(times, sizes, strict=True)]
    # Linear growth: the cost per pod at 150k stays within 1.5x of that at 10k.
    linear = per_pod_us[-1] <= 1.5 * per_pod_us[1]
    points = ", ".join(f"{n // 1000}k: {t:.2f} s" for n, t in zip(sizes, times, strict=True))
    return [Figure("plan scaling (in-process) " + points,
                   f"{per_pod_us[-1]:.1f} µs/pod at 150k", "linear (≤ 1.5x µs/pod of 10k)",
                   f"{per_pod_us[1]:.1f} µs/pod at 10k", linear)]


def collection_figures() -> list[Figure]:
    from benchmarks.collection import measure

    measured = measure()
    ratio = measured["seconds"] / measured["floor_seconds"]
    return [Figure(f"live collection over HTTP, 150k pods, pages of {measured['page_size']:.0f}",
                   f"{measured['seconds']:.2f} s ({ratio:.2f}x)", "≤ 2x floor",
                   f"server serving the pages, bytes only: {measured['floor_seconds']:.2f} s",
                   ratio <= 2.0)]


def protobuf_listing_figures() -> list[Figure]:
    from benchmarks.fake_api_protobuf_listing import measure

    measured = measure(pods=1_000, runs=15)
    ratio = measured["protobuf_seconds"] / measured["json_seconds"]
    return [Figure("fake API: a 1,000-pod list in protobuf (client-go's Accept), median of 15 "
                   "(python -m benchmarks.fake_api_protobuf_listing)",
                   f"{measured['protobuf_seconds'] * 1e3:.1f} ms ({ratio:.2f}x); the first, "
                   f"encoding every pod: {measured['cold_seconds'] * 1e3:.0f} ms",
                   "≤ 1.5x the JSON list", f"the JSON list: {measured['json_seconds'] * 1e3:.1f} ms",
                   ratio <= 1.5)]


def prefect_figures() -> list[Figure]:
    from benchmarks.prefect_overhead import measure

    measured = measure()
    default, tuned = measured["default"], measured["tuned"]
    overhead = tuned["flow"] - tuned["plain"]
    default_overhead = default["flow"] - default["plain"]
    recorded = (f"{tuned['task_runs']:.0f}/{tuned['expected_task_runs']:.0f} task runs "
                "recorded")
    return [Figure("Prefect overhead of one tick (Postgres server recording task runs in batches, "
                   "heartbeat fix), median of 15; "
                   + recorded, f"{overhead:.3f} s", "< 0.25 s",
                   f"Prefect's default (SQLite, engine as shipped): {default_overhead:.3f} s",
                   overhead < 0.25 and tuned["task_runs"] >= tuned["expected_task_runs"])]


def quality_figures() -> list[Figure]:
    from kube_elevator.fakes.scenario import load_scenario
    from kube_elevator.flows.simulation import simulate

    figures = []
    examples = Path(__file__).parent.parent / "deployments" / "examples"
    for name in ("scenario.yaml", "scenario-trace.yaml"):
        summary = simulate(load_scenario(examples / name)).summary
        ratio = summary["node_seconds"] / summary["lower_bound_node_seconds"]
        figures.append(Figure(
            f"simulated quality, {name} (default config, {summary['scheduler_profile']} "
            "scheduler profile): node-seconds / lower bound",
            f"{ratio:.2f} ({summary['node_seconds']:.0f} / "
            f"{summary['lower_bound_node_seconds']:.0f}); pending pod-seconds "
            f"{summary['pending_pod_seconds']:.0f}",
            "reported", "fewest nodes covering the requests present, each tick", None))
    return figures


def placement_figures() -> list[Figure]:
    from benchmarks.placement import compare

    figures = []
    for name in ("scenario.yaml", "scenario-trace.yaml"):
        compared = compare(name)
        default, aware = compared["default"], compared["load-aware"]
        figures.append(Figure(
            f"load-aware placement + least-loaded scale-down vs defaults, {name}",
            f"node-s {aware['node_seconds']:.0f}, pending pod-s "
            f"{aware['pending_pod_seconds']:.0f}", "reported",
            f"defaults: node-s {default['node_seconds']:.0f}, pending pod-s "
            f"{default['pending_pod_seconds']:.0f}", None))
    return figures


def fast_simulation_figures() -> list[Figure]:
    from benchmarks.fast_simulation import measure

    measured = measure(repeats=3)
    return [Figure(
        f"elevator simulate --fast: 24 simulated hours, two groups, {measured['pods']:,} pods, "
        f"{measured['ticks']} ticks, {measured['summary']['scheduler_profile']} scheduler "
        "profile (python -m benchmarks.fast_simulation), best of 3",
        f"{measured['seconds']:.2f} s", "≤ 5 s", "", measured["seconds"] <= 5.0)]


def watch_cache_figures() -> list[Figure]:
    from benchmarks.watch_cache import measure

    rows = measure()
    biggest = rows[-1]
    ticks = ", ".join(f"{row['pods'] // 1000}k: {row['flow']:.2f} s" for row in rows)
    plain = ", ".join(f"{row['pods'] // 1000}k: {row['plain']:.2f} s" for row in rows)
    ratio = biggest["cold"] / biggest["floor"]
    return [
        Figure(f"steady tick from the watch cache, 10 groups, dry run, flow run with every task "
               f"run recorded (Postgres server recording them in batches), median of 10: {ticks}",
               f"{biggest['flow']:.2f} s at {biggest['pods'] // 1000}k", "≤ 0.5 s",
               f"the same tick without Prefect: {plain}", biggest["flow"] <= 0.5),
        Figure(f"watch cache cold start (list + sync: pods, nodes, budgets), "
               f"{biggest['pods'] // 1000}k pods",
               f"{biggest['cold']:.2f} s ({ratio:.2f}x)", "≤ 2x floor",
               f"server serving the pod pages, bytes only: {biggest['floor']:.2f} s",
               ratio <= 2.0),
        Figure(f"RSS of the watching process, cache synced, {biggest['pods'] // 1000}k pods",
               f"{biggest['rss']:.0f} MB (peak after ticks {biggest['rss_peak']:.0f} MB)",
               "≤ 600 MB", f"before the cache: {biggest['rss_before']:.0f} MB",
               biggest["rss_peak"] <= 600),
    ]


def in_process_latency_figures() -> list[Figure]:
    import statistics

    from benchmarks.event_latency import measure

    figures = []
    for rig, who in (("watch", "elevator watch running the ticks in-process"),
                     ("serve", "elevator serve running the autoscale deployment's runs "
                               "in-process")):
        latencies = sorted(measure(bursts=20, pods=10, rig_name=rig))
        median = statistics.median(latencies)
        p95 = latencies[max(0, round(0.95 * len(latencies)) - 1)]
        figures.append(Figure(f"pod created → SetDesiredCapacity, {who} (settle 0.25 s), "
                              f"20 bursts of 10 pods (python -m benchmarks.event_latency "
                              f"--rig {rig} --bursts 20)",
                              f"median {median:.2f} s, p95 {p95:.2f} s",
                              "median ≤ 1.5 s, p95 ≤ 3 s", "", median <= 1.5 and p95 <= 3.0))
    return figures


def prefect_database_figures() -> list[Figure]:
    from benchmarks.prefect_database import measure

    figures = []
    for backend in ("sqlite", "postgres"):
        for acting in (False, True):
            measured = measure(backend, acting, ticks=30)
            kind = "acting (3 groups scale up)" if acting else "idle (3 groups, nothing to do)"
            figures.append(Figure(
                f"Prefect database growth, {backend}, a tick from the watch cache, {kind}, "
                "30 ticks (python -m benchmarks.prefect_database)",
                f"{measured['bytes_per_tick'] / 1000:.0f} kB a tick, "
                f"{measured['bytes_per_day'] / 1e9:.2f} GB a day at a tick a minute",
                "reported; bounded by the 7-day retention",
                f"{measured['rows_per_tick']['task_run']:.0f} task runs, "
                f"{measured['rows_per_tick']['events']:.0f} events a tick", None))
    return figures


def soak_figures() -> list[Figure]:
    from benchmarks.soak import measure

    measured = measure(ticks=2000)
    rows, met = measured["rows"], measured["targets"]
    table = "; ".join(f"ticks {row['ticks']}: RSS {row['rss_mb']:.0f} MB, p50 "
                      f"{row['p50_seconds']:.2f} s, p99 {row['p99_seconds']:.2f} s, database "
                      f"{row['database_mb']:.1f} MB" for row in rows)
    name = (f"soak: {measured['ticks']} in-process ticks (elevator watch, interval 0.5 s), 3 "
            f"groups, {measured['pods_created']} pods, {measured['bursts']} bursts, "
            f"{measured['interruptions']} spot interruptions, retention 300 s "
            f"(python -m benchmarks.soak): {table}")
    return [Figure(name, f"RSS {met.get('rss_change', float('nan')):+.1%}, p50 "
                         f"{met.get('p50_change', float('nan')):+.1%}, database "
                         f"{met.get('database_change', float('nan')):+.1%}",
                   "RSS ±5 %, p50 ≤ +20 % (ticks 1,501-2,000 against 251-500); database "
                   "±10 % (tick 2,000 against 1,500)", "",
                   bool(met) and met["rss_met"] and met["p50_met"] and met["database_met"])]


def silent_watch_figures() -> list[Figure]:
    from benchmarks.silent_watch import measure

    measured = measure(healthy_bursts=10, frozen_bursts=3)
    healthy, frozen = measured["healthy"], measured["frozen"]
    median = statistics.median(healthy)
    return [
        Figure("pending pods 1 s after every watch connection of elevator watch froze → "
               "SetDesiredCapacity, default settings (silence limit 45 s), 3 freezes each "
               "right after a pod event (python -m benchmarks.silent_watch)",
               f"max {max(frozen):.1f} s ({', '.join(f'{v:.1f}' for v in frozen)})",
               "≤ 90 s (goal 60 s)", "before: 326 s (the watch's 300 + 30 s read timeout)",
               max(frozen) <= 90.0),
        Figure("the same elevator watch behind the same proxy, healthy: pod created → "
               "SetDesiredCapacity, median of 10 bursts",
               f"median {median:.2f} s (max {max(healthy):.2f} s)", "median ≤ 1.5 s", "",
               median <= 1.5),
    ]


def harness_figures() -> list[Figure]:
    from benchmarks.harness_start import READY_TARGET_SECONDS, measure

    measured = measure(clusters=20, tests=50)
    ready = measured["ready"]
    assert isinstance(ready, list)
    median = statistics.median(ready)
    tests = int(str(measured["tests"]))
    later = measured["later_tests"]
    assert isinstance(later, list)
    per_test = statistics.median(later)
    return [
        Figure("harness: a fresh fake_cluster() (fake API, in-process moto, simulated cluster) "
               "to the first answers of the official client and boto3, warm process, median of "
               "20 (python -m benchmarks.harness_start)",
               f"{median:.3f} s (max {max(ready):.3f} s)", f"< {READY_TARGET_SECONDS} s",
               f"fresh process, imports included: {float(str(measured['cold'])):.2f} s",
               median < READY_TARGET_SECONDS),
        Figure(f"harness: pytest session of {tests} small tests, the plugin's fake_cluster "
               "fixture in each (a node group, a pod bound, read back)",
               f"{float(str(measured['session_seconds'])):.1f} s wall; a test after the first: "
               f"median {per_test:.2f} s", "a cluster per test affordable (≤ 0.5 s)",
               f"the first test, imports included: {float(str(measured['first_test'])):.1f} s",
               per_test <= 0.5),
    ]


def command_start_figures() -> list[Figure]:
    from benchmarks.command_start import FIRST_TARGET_SECONDS, LATER_TARGET_SECONDS, measure

    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    return [Figure(f"{name} without PREFECT_API_URL, wall: the first on a new PREFECT_HOME, then "
                   f"the median of 5 (python -m benchmarks.command_start; load {load})",
                   f"{figures['first']:.1f} s, then {figures['median']:.1f} s (CPU: "
                   f"{figures['first_cpu']:.1f} s, then {figures['median_cpu']:.1f} s)",
                   f"≤ {FIRST_TARGET_SECONDS:g} s, then ≤ {LATER_TARGET_SECONDS:g} s", "",
                   figures["first"] <= FIRST_TARGET_SECONDS
                   and figures["median"] <= LATER_TARGET_SECONDS)
            for name, figures in measure(5).items()]


def render(figures: list[Figure]) -> Table:
    table = Table(title="kube-elevator benchmarks")
    for column in ("figure", "value", "target", "floor", "met"):
        table.add_column(column, overflow="fold")
    for figure in figures:
        met = "n/a" if figure.met is None else ("yes" if figure.met else "NO")
        table.add_row(figure.name, figure.value, figure.target, figure.floor, met)
    return table


NOTES = "## Notes"


def write_results(figures: list[Figure]) -> None:
    lines = [
        "# Benchmark results",
        "",
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}",
        "- command: `make bench` (runs `python -m benchmarks`)",
        "",
        "| figure | value | target | floor | met |",
        "|---|---|---|---|---|",
    ]
    for figure in figures:
        met = "n/a" if figure.met is None else ("yes" if figure.met else "**no**")
        lines.append(f"| {figure.name} | {figure.value} | {figure.target} | {figure.floor} | "
                     f"{met} |")
    # The notes written by hand under the table (how a figure was measured, what it means)
    # stay: a new run replaces the table only.
    notes = ""
    if RESULTS.exists():
        before = RESULTS.read_text()
        if NOTES in before:
            notes = before[before.index(NOTES):]
    RESULTS.write_text("\n".join(lines) + "\n" + ("\n" + notes if notes else ""))


def preflight(postgresql_root: Path | None = None) -> str | None:
    """What `make bench` needs that this machine lacks, said before any figure is measured
    (the Postgres-backed figures come minutes in): None when nothing is missing."""
    from benchmarks.prefect_overhead import NO_POSTGRESQL, POSTGRESQL_ROOT, postgresql_bin

    if postgresql_bin(postgresql_root or POSTGRESQL_ROOT) is None:
        return f"error: make bench measures a PostgreSQL-backed Prefect server: {NO_POSTGRESQL}"
    return None


def main() -> int:
    console = Console(width=160)
    problem = preflight()
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    figures = (plan_figures() + scaling_figures() + collection_figures()
               + protobuf_listing_figures() + prefect_figures()
               + quality_figures() + placement_figures() + fast_simulation_figures()
               + watch_cache_figures() + in_process_latency_figures()
               + silent_watch_figures() + prefect_database_figures() + soak_figures()
               + harness_figures() + command_start_figures())
    console.print(render(figures))
    write_results(figures)
    console.print(f"written to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
