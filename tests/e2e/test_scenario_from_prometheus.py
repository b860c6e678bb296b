"""`elevator scenario from-prometheus` against a real Prometheus holding recorded
kube-state-metrics series (backfilled with promtool), then the scenario it writes replayed."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fakes.scenario import load_scenario
from tests.builders import group_dict

HOUR = 3600
START = (int(time.time()) // HOUR - 3) * HOUR  # three hours ago, on the hour
END = START + HOUR
STEP = 30


def series(name: str, labels: dict[str, str], value: float, since: float, until: float) -> list[str]:
    text = ",".join(f'{key}="{val}"' for key, val in labels.items())
    return [f"{name}{{{text}}} {value} {at}" for at in range(int(since), int(until) + 1, STEP)]


def recorded() -> str:
    """One hour of a small cluster: two batch nodes and a web node; four pods."""
    families: dict[str, list[str]] = {name: [] for name in (
        "kube_node_labels", "kube_pod_created", "kube_pod_info",
        "kube_pod_container_resource_requests", "kube_pod_completion_time",
        "kube_pod_status_phase")}
    for node, group in (("n1", "batch"), ("n2", "batch"), ("w1", "web")):
        families["kube_node_labels"] += series(
            "kube_node_labels", {"node": node, "label_customer": group}, 1, START - 600, END)
    pods = [  # (name, node, created, completed, failed, cpu cores, memory bytes)
        ("early", "n1", START - 900, START + 600, False, 0.5, 2**30),
        ("job", "n2", START + 1200, START + 2400, False, 1.0, 2**29),
        ("long", "n1", START + 1800, None, False, 0.25, 2**28),
        ("broken", "n2", START + 300, None, True, 1.0, 2**28),
        ("other", "w1", START + 100, None, False, 2.0, 2**30),
    ]
    for name, node, created, completed, failed, cpu, memory in pods:
        pod = {"namespace": "jobs", "pod": name}
        alive_until = completed or END
        families["kube_pod_created"] += series("kube_pod_created", pod, created,
                                               max(created, START - 900), alive_until)
        families["kube_pod_info"] += series("kube_pod_info", {**pod, "node": node}, 1,
                                            max(created, START - 900), alive_until)
        for resource, amount in (("cpu", cpu), ("memory", memory)):
            families["kube_pod_container_resource_requests"] += series(
                "kube_pod_container_resource_requests",
                {**pod, "container": "c", "resource": resource}, amount,
                max(created, START - 900), alive_until)
        if completed:
            families["kube_pod_completion_time"] += series(
                "kube_pod_completion_time", {**pod, "container": "c"}, completed, completed,
                completed + 300)
        families["kube_pod_status_phase"] += series(
            "kube_pod_status_phase", {**pod, "phase": "Failed"}, 1 if failed else 0,
            max(created, START - 900), alive_until)
    lines = []
    for name, samples in families.items():
        lines.append(f"# TYPE {name} gauge")
        lines += samples
    return "\n".join(lines) + "\n# EOF\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if binary is None or promtool is None:
        pytest.skip("prometheus and promtool are not on PATH (Debian: apt-get install prometheus)")
    home = tmp_path_factory.mktemp("prometheus-ksm")
    (home / "series.om").write_text(recorded())
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics",
                    str(home / "series.om"), str(home / "data")], check=True,
                   capture_output=True, timeout=120)
    (home / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\n")
    port = free_port()
    process = subprocess.Popen(
        [binary, f"--config.file={home / 'prometheus.yml'}",
         f"--storage.tsdb.path={home / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
         "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("prometheus did not start") from None
                time.sleep(0.2)  # starting: poll with a deadline
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def elevator(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flows.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300, check=False)


def test_a_trace_scenario_from_kube_state_metrics(prometheus: str, tmp_path: Path) -> None:
    nodegroups = tmp_path / "nodegroups.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": [
        group_dict(min_nodes=1, max_nodes=10)]}))
    out = tmp_path / "scenario"
    done = elevator("scenario", "from-prometheus", "--url", prometheus, "--start", str(START),
                    "--end", str(END), "--nodegroups", nodegroups, "--output", out)
    assert done.returncode == 0, done.stderr
    assert "3 pods over 3600s (batch: 2 nodes at the start)" in done.stdout
    rows = (out / "trace.csv").read_text().splitlines()
    assert rows == [
        "arrival_s,cpu,memory,duration_s,node_group",
        f"0,500m,{2**30},600,batch",  # running at the start: arrives at 0, for what was left
        f"1200,1000m,{2**29},1200,batch",
        f"1800,250m,{2**28},,batch",  # still running at the end
    ]  # the failed pod and the pod of an unknown group are left out
    loaded = load_scenario(out / "scenario.yaml")
    assert loaded.scenario.duration == HOUR
    (asg,) = loaded.scenario.asgs
    assert (asg.name, asg.desired, asg.node_labels) == ("batch-asg", 2, {"customer": "batch"})
    simulated = elevator("simulate", "--fast", out / "scenario.yaml", "--output", "json")
    assert simulated.returncode == 0, simulated.stderr


def test_an_empty_window_says_so(prometheus: str, tmp_path: Path) -> None:
    nodegroups = tmp_path / "nodegroups.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": [group_dict()]}))
    done = elevator("scenario", "from-prometheus", "--url", prometheus,
                    "--start", str(START - 30 * 86400), "--end", str(START - 29 * 86400),
                    "--nodegroups", nodegroups)
    assert done.returncode == 2
    assert "no pod of the node groups" in done.stderr and "Traceback" not in done.stderr
