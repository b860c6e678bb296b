"""What `elevator tune` sends its task runs: the loaded workload once, not a path read again.

Before issue 29 every evaluation (each trial, on each task run) read and checked the scenario
from its path again, and on Dask each worker needed the file on its own disk. Now the flow
loads it once and the batches carry the loaded scenario: in this process on Prefect's thread
runner, scattered once to every Dask worker otherwise. For the fast mode's day (two groups,
a trace of N pods; `benchmarks.fast_simulation`), this prints:

- the time `load_scenario` takes, which every evaluation paid before;
- the size of the pickled loaded scenario, which Dask sends to each worker once, and the time
  to pickle and unpickle it;
- one evaluation (one seed of the fast simulation), to put both in proportion (not with
  `--no-evaluate`: a day of 100,000 pods takes minutes).

Best of N each (the machine is shared).

    python -m benchmarks.tune_workload [--pods N] [--repeats N] [--no-evaluate]
"""

from __future__ import annotations

import argparse
import pickle
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.fast_simulation import write_day_scenario


def best_seconds(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return min(times)


def measure(pods: int, repeats: int, evaluation: bool = True) -> dict[str, float]:
    from kube_elevator.fakes.scenario import load_scenario
    from kube_elevator.flows.tune import evaluate
    from kube_elevator.tasks.tuning.space import current_knobs

    with tempfile.TemporaryDirectory(prefix="elevator-tune-workload-") as scratch:
        path = write_day_scenario(Path(scratch), pods=pods)
        load_seconds = best_seconds(lambda: load_scenario(path), repeats)
        loaded = load_scenario(path)
    payload = pickle.dumps(loaded, protocol=pickle.HIGHEST_PROTOCOL)
    round_trip_seconds = best_seconds(
        lambda: pickle.loads(pickle.dumps(loaded, protocol=pickle.HIGHEST_PROTOCOL)), repeats)
    figures = {"load_seconds": load_seconds, "pickled_bytes": float(len(payload)),
               "round_trip_seconds": round_trip_seconds}
    if evaluation:
        knobs = {group.name: current_knobs(group) for group in loaded.config.node_groups}
        figures["evaluate_seconds"] = best_seconds(lambda: evaluate(loaded, knobs, [1]),
                                                   repeats)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-evaluate", dest="evaluate", action="store_false")
    options = parser.parse_args()
    figures = measure(options.pods, options.repeats, options.evaluate)
    evaluation = (f"; one evaluation (one seed) {figures['evaluate_seconds']:.2f} s"
                  if "evaluate_seconds" in figures else "")
    print(f"{options.pods:,} pods, best of {options.repeats}: "
          f"load_scenario {figures['load_seconds']:.2f} s (each evaluation before); "
          f"pickled workload {figures['pickled_bytes'] / 2**20:.1f} MiB, pickle + unpickle "
          f"{figures['round_trip_seconds']:.2f} s (once per Dask worker now){evaluation}")


if __name__ == "__main__":
    main()
