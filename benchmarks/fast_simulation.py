"""The simulator's fast mode: 24 simulated hours of a two-group cluster, 10,000 pods.

The scenario is generated (seeded, so every run is the same day): a batch group whose jobs
arrive on a daily curve (few at night, most around midday) and run 2 to 30 minutes, and a
services group whose pods run for hours. Tick every minute, world step every 10 s, as the
bundled scenarios: 1,440 ticks and 8,640 steps. Pods are placed by the scheduler model's
`default` profile (kube-scheduler v1.35's default), the scenario naming none; `--scheduler`
times another. The figure is the wall time of `simulate(..., mode="memory")`, best of N (the
machine is shared; the best run is the one the others did not slow down), with the process's
CPU time beside it.

    python -m benchmarks.fast_simulation [--repeats N] [--scheduler NAME] [--profile]
                                         [--write DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import math
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

DAY_SECONDS = 24 * 3600
PODS = 10_000
SERVICE_SHARE = 0.1


def _group(name: str, min_nodes: int, max_nodes: int, **overrides: Any) -> dict[str, Any]:
    return {"name": name, "label_key": "customer", "label_value": name,
            "cloud_provider_group_name": f"{name}-asg", "min_nodes": min_nodes,
            "max_nodes": max_nodes, "taint_upper_capacity_threshold_percent": 40,
            "taint_lower_capacity_threshold_percent": 10, "scale_up_threshold_percent": 70,
            "slow_node_removal_rate": 1, "fast_node_removal_rate": 2,
            "soft_delete_grace_period": "1m", "hard_delete_grace_period": "10m",
            "scale_up_cool_down_period": "2m", **overrides}


def write_day_scenario(directory: Path, pods: int = PODS, seed: int = 17) -> Path:
    """The scenario YAML and its trace CSV in `directory`; returns the YAML's path."""
    rng = random.Random(seed)
    rows = []
    services = int(pods * SERVICE_SHARE)
    for _ in range(pods - services):
        # A daily curve: arrival density 1 - cos(2π t / day), peaking at midday.
        while True:
            at = rng.uniform(0, DAY_SECONDS)
            if rng.random() < (1 - math.cos(2 * math.pi * at / DAY_SECONDS)) / 2:
                break
        rows.append((round(at), f"{rng.choice((100, 250, 500, 750, 1000))}m",
                     f"{rng.choice((128, 256, 512, 1024))}Mi", rng.randint(120, 1800), "batch"))
    for _ in range(services):
        rows.append((rng.randint(0, DAY_SECONDS - 3600), f"{rng.choice((250, 500, 1000))}m",
                     f"{rng.choice((512, 1024, 2048))}Mi", rng.randint(3600, 8 * 3600),
                     "services"))
    rows.sort()
    with (directory / "day-trace.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(("arrival_s", "cpu", "memory", "duration_s", "node_group"))
        writer.writerows(rows)
    scenario = {
        "seed": seed, "tick_interval": "1m", "step": "10s", "duration": "24h",
        "nodegroups": {"node_groups": [
            _group("batch", 1, 80),
            _group("services", 2, 40, slow_node_removal_rate=1, fast_node_removal_rate=1,
                   soft_delete_grace_period="2m", hard_delete_grace_period="30m",
                   scale_up_threshold_percent=75, scale_up_cool_down_period="3m"),
        ]},
        "asgs": [
            {"name": "batch-asg", "min": 1, "max": 80, "desired": 1,
             "instance_type": "m5.large", "node_labels": {"customer": "batch"},
             "boot_delay": "90s"},
            {"name": "services-asg", "min": 2, "max": 40, "desired": 2,
             "instance_type": "m5.xlarge", "node_labels": {"customer": "services"},
             "boot_delay": "2m"},
        ],
        "trace": "day-trace.csv",
    }
    path = directory / "day-10k.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


def measure(repeats: int = 3, profile: bool = False,
            scheduler: str | None = None) -> dict[str, Any]:
    """Best wall seconds of the fast mode over `repeats` runs (and the CPU seconds of that
    run), and the run's summary; `scheduler` overrides the scheduler profile."""
    from kube_elevator.fakes.scenario import load_scenario, with_profile
    from kube_elevator.flows.simulation import simulate

    with tempfile.TemporaryDirectory(prefix="elevator-day-") as scratch:
        loaded = with_profile(load_scenario(write_day_scenario(Path(scratch))), scheduler)
    times: list[tuple[float, float]] = []
    summary: dict[str, Any] = {}
    ticks = 0
    for _ in range(repeats):
        profiler = cProfile.Profile() if profile else None
        began, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        result = simulate(loaded, mode="memory")
        if profiler is not None:
            profiler.disable()
        times.append((time.perf_counter() - began, time.process_time() - cpu))
        summary, ticks = result.summary, len(result.ticks)
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
    best = min(times)
    return {"seconds": best[0], "cpu_seconds": best[1], "runs": [wall for wall, _ in times],
            "ticks": ticks, "summary": summary, "pods": len(loaded.arrivals)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each run")
    parser.add_argument("--scheduler", choices=("default", "most-allocated", "first-fit"),
                        help="the scheduler profile (default: the scenario's, `default`)")
    parser.add_argument("--write", type=Path, help="only write the scenario to this directory")
    args = parser.parse_args(argv)
    if args.write is not None:
        args.write.mkdir(parents=True, exist_ok=True)
        print(write_day_scenario(args.write))
        return 0
    measured = measure(args.repeats, args.profile, args.scheduler)
    runs = ", ".join(f"{t:.2f}" for t in measured["runs"])
    print(f"fast simulation, 24 h, {measured['pods']} pods, {measured['ticks']} ticks, "
          f"scheduler profile {measured['summary']['scheduler_profile']}: "
          f"best {measured['seconds']:.2f} s of [{runs}] ({measured['cpu_seconds']:.2f} s CPU)")
    print(measured["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
