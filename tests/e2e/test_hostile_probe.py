"""The hostile-file probe (issue 27): a few hundred malformed files through every command that
reads a file, each run in a process of its own with a time limit and a memory cap, counting
tracebacks and hangs. The target is 0 and 0.

The shapes (`tests/hostile_shapes.py`) are put at random key paths of the shipped examples: a
YAML alias inside the node it names, nesting 101 to 100,000 levels deep (JSON and YAML, lists
and mappings), a billion laughs, a value of the wrong type, and bytes flipped, cut or inserted.
It takes minutes, so it is a benchmark-marked test (`make test` leaves it out):

    .venv/bin/python -m pytest -m benchmark tests/e2e/test_hostile_probe.py -s
    .venv/bin/python -m tests.e2e.test_hostile_probe [files per reader] [seed]
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_fuzz_inputs import copy_examples
from tests.hostile_shapes import (
    WRONG_TYPES,
    billion_laughs,
    deep_text,
    object_first_key_path,
    recursive_alias,
    replaced,
    with_text,
)

MEMORY_CAP_BYTES = 3 * 2**30  # address space (RLIMIT_AS), as `ulimit -v`
SECONDS = 60.0
NOWHERE = "http://127.0.0.1:9"  # the discard port: nothing answers


@dataclass(frozen=True)
class Reader:
    """A command and the file it reads: `command(files, bad)` puts the mutated copy in place."""

    base: str  # the key of the file it reads in `files`
    command: Callable[[dict[str, Path], Path], list[str]]
    seconds: float = SECONDS
    serves: bool = False  # a server: "serving on" with a valid file, then stopped
    variants: int | None = None  # files per reader: the probe's count unless said


def _scenario_with(files: dict[str, Path], key: str, bad: Path) -> Path:
    """A copy of a shipped scenario whose `key` (nodegroups or trace) names the mutated file."""
    source = files["trace-scenario" if key == "trace" else "scenario"]
    document = yaml.safe_load(source.read_text())
    document[key] = bad.name
    scenario = bad.with_name(f"{bad.stem}-scenario.yaml")
    scenario.write_text(yaml.safe_dump(document))
    return scenario


READERS: dict[str, Reader] = {
    "validate": Reader("nodegroups", lambda f, bad: ["validate", str(bad)]),
    "plan --nodegroups": Reader("nodegroups", lambda f, bad: [
        "plan", "--nodegroups", str(bad), "--cluster", str(f["cluster"]), "--now", "0"]),
    "plan --cluster": Reader("cluster", lambda f, bad: [
        "plan", "--nodegroups", str(f["nodegroups"]), "--cluster", str(bad), "--now", "0"]),
    "plan --asg": Reader("asgs", lambda f, bad: [
        "plan", "--nodegroups", str(f["nodegroups"]), "--cluster", str(f["cluster"]),
        "--asg", str(bad), "--now", "0"]),
    "pods plan --cluster": Reader("pods", lambda f, bad: [
        "pods", "plan", "--cluster", str(bad), "--metrics", str(f["metrics"]), "--now", "0"]),
    "pods plan --metrics": Reader("metrics", lambda f, bad: [
        "pods", "plan", "--cluster", str(f["pods"]), "--metrics", str(bad), "--now", "0"]),
    "simulate": Reader("scenario", lambda f, bad: ["simulate", str(bad), "--fast"]),
    "simulate (its node groups)": Reader("scenario-nodegroups", lambda f, bad: [
        "simulate", str(_scenario_with(f, "nodegroups", bad)), "--fast"]),
    "simulate (its trace)": Reader("trace", lambda f, bad: [
        "simulate", str(_scenario_with(f, "trace", bad)), "--fast"]),
    "tune --trials 1": Reader("scenario", lambda f, bad: [
        "tune", str(bad), "--trials", "1", "--seeds", "1", "--held-out", "1",
        "--output", str(bad.with_suffix(".tuned.yaml"))], seconds=180.0, variants=12),
    "scenario from-prometheus --nodegroups": Reader("nodegroups", lambda f, bad: [
        "scenario", "from-prometheus", "--url", NOWHERE, "--start", "0", "--end", "3600",
        "--nodegroups", str(bad), "--output", str(bad.with_suffix(".out"))]),
    "scenario from-kubectl --snapshot": Reader("cluster", lambda f, bad: [
        "scenario", "from-kubectl", "--snapshot", str(bad), "--nodegroups",
        str(f["nodegroups"]), "--output", str(bad.with_suffix(".out"))]),
    "load-watcher --state": Reader("state", lambda f, bad: [
        "load-watcher", "--prometheus", NOWHERE, "--port", "0", "--health-address",
        "127.0.0.1:0", "--state", str(bad)],
        seconds=20.0, serves=True),
    "scheduler-extender --kubeconfig": Reader("kubeconfig", lambda f, bad: [
        "scheduler-extender", "--watcher-url", NOWHERE, "--policy", "target-load-packing",
        "--port", "0", "--health-address", "127.0.0.1:0", "--kubeconfig", str(bad)],
        seconds=20.0, serves=True),
}


def base_files(folder: Path) -> dict[str, Path]:
    """The fuzz suite's copies of the examples, a load-watcher state and a kubeconfig."""
    files = copy_examples(folder)
    files["scenario-nodegroups"] = folder / "scenario-nodegroups.yaml"
    files["state"] = folder / "state.json"
    files["state"].write_text(json.dumps({"15m": {
        "timestamp": 1_800_000_000, "window": {"duration": "15m", "start": 0, "end": 900},
        "source": "Prometheus", "data": {"NodeMetricsMap": {"node-1": {
            "metrics": [{"name": "instance:node_cpu:ratio", "type": "CPU", "operator": "AVG",
                         "rollup": "15m", "value": 42.5}],
            "tags": {}, "metadata": {"dataCenter": ""}}}}}}))
    files["kubeconfig"] = folder / "kubeconfig.yaml"
    files["kubeconfig"].write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": NOWHERE}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    return files


def _bytes_mutation(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    at = rng.randrange(max(len(data), 1))
    how = rng.choice(["flip", "cut", "insert"])
    if how == "flip":
        return how, data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]
    if how == "cut":
        return how, data[:at]
    return how, data[:at] + rng.randbytes(rng.randint(1, 8)) + data[at:]


def _csv_variant(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """A trace: a cell of the wrong type or size, a row too long, or bytes changed."""
    lines = data.decode().splitlines()
    row = rng.randrange(len(lines))
    cells = lines[row].split(",")
    how = rng.choice(["cell", "cell", "row", "bytes"])
    if how == "bytes":
        return _bytes_mutation(data, rng)
    if how == "row":
        cells += ["x"] * rng.choice([1, 1000])
    else:
        cells[rng.randrange(len(cells))] = rng.choice(
            ["x", "-1", "1e400", "nan", "٣", "9" * 5000, '"', "", "[" * 10_000])
    lines[row] = ",".join(cells)
    return f"{how} (line {row + 1})", ("\n".join(lines) + "\n").encode()


def variant(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One hostile copy of a structured file: (what was done, its bytes)."""
    document = yaml.safe_load(data)
    path = object_first_key_path(document, rng.choice)
    how = rng.choice(["alias", "alias", "deep", "deep", "deep", "laughs", "wrong", "wrong",
                      "wrong", "bytes"])
    if how == "alias":
        up = rng.randint(0, len(path))
        return f"alias up {up} at {path}", recursive_alias(document, path, up)
    if how == "deep":
        levels = rng.choice([101, 999, 1025, 5000, 100_000])
        mapping, as_yaml = rng.random() < 0.5, rng.random() < 0.5
        text = deep_text(levels, mapping)
        return (f"{levels} deep {'mapping' if mapping else 'list'} as "
                f"{'YAML' if as_yaml else 'JSON'} at {path}"), with_text(document, path, text,
                                                                         as_yaml)
    if how == "laughs":
        return f"billion laughs at {path}", yaml.safe_dump(
            replaced(document, path, billion_laughs())).encode()
    if how == "wrong":
        value = rng.choice(WRONG_TYPES)
        changed = replaced(document, path, value)
        shown = repr(value) if len(repr(value)) < 20 else f"{type(value).__name__} (long)"
        return f"{shown} at {path}", json.dumps(changed).encode()
    return _bytes_mutation(data, rng)


@dataclass(frozen=True)
class Outcome:
    reader: str
    what: str
    code: int | None  # None: killed at the time limit
    seconds: float
    max_rss_bytes: int
    output: str

    @property
    def traceback(self) -> bool:
        """A traceback printed, or an exit other than 0 and 2 (a signal, MemoryError's 1)."""
        return "Traceback" in self.output or (self.code is not None and self.code not in (0, 2))

    def hang(self, serves: bool) -> bool:
        return self.code is None and not (serves and "serving on" in self.output)


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))
    os.setsid()  # its own process group: stopped as a whole, children too


def run_one(command: Sequence[str], seconds: float, scratch: Path) -> tuple[int | None, float,
                                                                            int, str]:
    """Run `elevator <command>` capped; (exit code or None at the time limit, seconds, peak RSS
    in bytes, stdout and stderr)."""
    with tempfile.TemporaryFile(dir=scratch) as output:
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "kube_elevator.flows.cli", *command], stdout=output,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_cap_memory,
            cwd=scratch)
        deadline = start + seconds
        code: int | None = None
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.perf_counter() > deadline:
                os.killpg(process.pid, signal.SIGKILL)
                _, _, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.05)
        process.returncode = code if code is not None else -9  # reaped by wait4 above
        elapsed = time.perf_counter() - start
        output.seek(0)
        text = output.read().decode("utf-8", "replace")
    return code, elapsed, usage.ru_maxrss * 1024, text


def probe(per_reader: int = 25, seed: int = 27, parallel: int = 2,
          readers: Sequence[str] | None = None) -> list[Outcome]:
    """Write the hostile files and run every reader on its own; the outcomes, one per file."""
    with tempfile.TemporaryDirectory(prefix="elevator-hostile-") as scratch:
        return _probe(Path(scratch), per_reader, seed, parallel, readers)


def _probe(folder: Path, per_reader: int, seed: int, parallel: int,
           readers: Sequence[str] | None) -> list[Outcome]:
    rng = random.Random(seed)
    files = base_files(folder)
    jobs: list[tuple[str, str, list[str], float]] = []
    for name in readers or READERS:
        reader = READERS[name]
        data = files[reader.base].read_bytes()
        original = files[reader.base]
        for index in range(reader.variants or per_reader):
            what, bad_bytes = (_csv_variant(data, rng) if original.suffix == ".csv"
                               else variant(data, rng))
            bad = original.with_name(f"{name.split()[0]}-{len(jobs)}-{index}{original.suffix}")
            bad.write_bytes(bad_bytes)
            jobs.append((name, what, reader.command(files, bad), reader.seconds))

    def one(job: tuple[str, str, list[str], float]) -> Outcome:
        name, what, command, seconds = job
        code, elapsed, rss, output = run_one(command, seconds, folder)
        return Outcome(name, what, code, elapsed, rss, output)

    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(one, jobs))


def summary(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    tracebacks = [o for o in outcomes if o.traceback]
    hangs = [o for o in outcomes if o.hang(READERS[o.reader].serves)]
    return {
        "files": len(outcomes), "commands": len({o.reader for o in outcomes}),
        "tracebacks": len(tracebacks), "hangs": len(hangs),
        "max_rss_mb": round(max(o.max_rss_bytes for o in outcomes) / 2**20),
        "slowest_s": round(max(o.seconds for o in outcomes), 1),
        "exit_codes": dict(Counter("timeout" if o.code is None else o.code for o in outcomes)),
        "failures": [f"{o.reader}: {o.what}: {'hang' if o in hangs else o.output[-600:]}"
                     for o in [*tracebacks, *hangs]],
    }


@pytest.mark.benchmark
def test_no_hostile_file_ends_in_a_traceback_or_a_hang() -> None:
    result = summary(probe())
    print(json.dumps({key: value for key, value in result.items() if key != "failures"}))
    assert (result["tracebacks"], result["hangs"]) == (0, 0), result["failures"]


if __name__ == "__main__":
    found = summary(probe(*(int(argument) for argument in sys.argv[1:3])))
    print(json.dumps(found, indent=1))
