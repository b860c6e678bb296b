"""`elevator scenario from-prometheus` against a real Prometheus holding recorded
kube-state-metrics series (backfilled with promtool), then the scenario it writes replayed.

The series are laid out as kube-state-metrics v2 emits them (its docs/metrics/workload/
pod-metrics.md and cluster/node-metrics.md, internal/store/pod_test.go and node_test.go): pods
keyed by namespace, pod and uid; requests in cores and bytes with `resource`/`unit` labels and
the node a pod is bound to; `kube_pod_info` with its owner's kind; `kube_node_labels` only for
the label keys the cluster's `--metric-labels-allowlist` allows. One Prometheus holds three
windows of the same small cluster, each scraped by a kube-state-metrics run with another
allowlist."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from benchmarks.deadlines import scaled
from kube_elevator.fakes.scenario import DaemonSetSpec, load_scenario
from tests.builders import GiB, MiB, group_dict
from tests.tools import prometheus_missing

HOUR = 3600
START = (int(time.time()) // HOUR - 9) * HOUR  # nine hours ago, on the hour
END = START + HOUR
STEP = 30
# The same hour of the cluster again, each scraped by kube-state-metrics with another allowlist.
ALLOWLISTED = START  # --metric-labels-allowlist=nodes=[customer,node.kubernetes.io/instance-type]
NO_ALLOWLIST = START + 3 * HOUR  # no node label exported: kube_node_labels has no series
OTHER_KEYS = START + 6 * HOUR  # --metric-labels-allowlist=nodes=[topology.kubernetes.io/zone]


@dataclass
class Node:
    name: str
    labels: dict[str, str]
    cpu_cores: float
    memory_bytes: int


@dataclass
class Pod:
    """A pod as its spec says it; times are seconds from the window's start."""

    name: str
    node: str
    created: int
    containers: dict[str, tuple[float, int]]  # name: (cores, bytes)
    completed: int | None = None
    phase: str = "Running"
    namespace: str = "jobs"
    owner: tuple[str, str] = ("ReplicaSet", "app-5d8f")  # created_by_kind, created_by_name
    init_containers: dict[str, tuple[float, int]] = field(default_factory=dict)
    sidecars: tuple[str, ...] = ()  # init containers with restartPolicy: Always
    overhead: tuple[float, int] | None = None
    bound_after: int = 0  # seconds pending (no node) before it was bound

    @property
    def uid(self) -> str:
        return f"uid-{self.namespace}-{self.name}"


NODES = [
    Node("n1", {"customer": "batch", "node.kubernetes.io/instance-type": "m5.xlarge",
                "topology.kubernetes.io/zone": "us-east-1a"}, 3.92, 15_634_268_160),
    Node("n2", {"customer": "batch", "node.kubernetes.io/instance-type": "m5.xlarge",
                "topology.kubernetes.io/zone": "us-east-1b"}, 3.92, 15_634_268_160),
    # a type the simulator does not know: its size comes from its allocatable
    Node("w1", {"customer": "web", "node.kubernetes.io/instance-type": "m6i.large",
                "topology.kubernetes.io/zone": "us-east-1a"}, 1.93, 7_291_584_512),
    Node("x1", {"customer": "other", "topology.kubernetes.io/zone": "us-east-1a"},
         1.93, 7_291_584_512),
]

PER_NODE = [Pod(f"node-exporter-{node.name}", node.name, -900, {"exporter": (0.1, 64 * MiB)},
                namespace="monitoring", owner=("DaemonSet", "node-exporter"))
            for node in NODES]
PER_NODE += [Pod(f"kube-proxy-{node.name}", node.name, -900, {"kube-proxy": (0.1, 0)},
                 namespace="kube-system", owner=("Node", node.name))  # a static pod's mirror
             for node in NODES]
PER_NODE += [Pod(f"agent-{namespace}-{node}", node, -900, {"agent": (0.05, 32 * MiB)},
                 namespace=namespace, owner=("DaemonSet", "agent"))  # one name, two namespaces
             for namespace in ("monitoring", "security") for node in ("n1", "n2")]

PODS = [
    # running at the start; its init container needs more CPU than its container
    Pod("early", "n1", -900, {"c": (0.5, GiB)}, completed=600, phase="Succeeded",
        init_containers={"setup": (0.75, 512 * MiB)}),
    # two containers, pending a minute before it was bound
    Pod("job", "n2", 1200, {"a": (1.0, 512 * MiB), "b": (0.25, 256 * MiB)}, completed=2400,
        phase="Succeeded", bound_after=60),
    # a native sidecar and a RuntimeClass overhead
    Pod("long", "n1", 1800, {"c": (0.25, 256 * MiB)}, init_containers={"proxy": (0.1, 64 * MiB)},
        sidecars=("proxy",), overhead=(0.05, MiB)),
    Pod("broken", "n2", 300, {"c": (1.0, 256 * MiB)}, phase="Failed"),
    Pod("web-1", "w1", 100, {"c": (1.0, GiB)}),
    Pod("stray", "x1", 100, {"c": (1.0, GiB)}),  # on a node of no group of the file
    *PER_NODE,
]


def series(name: str, labels: dict[str, str], value: float, since: float, until: float) -> list[str]:
    # Prometheus stores no empty label: KSM's node="" of a pending pod's requests is no label.
    text = ",".join(f'{key}="{val}"' for key, val in labels.items() if val != "")
    return [f"{name}{{{text}}} {value} {at}" for at in range(int(since), int(until) + 1, STEP)]


def label_name(key: str) -> str:
    return "label_" + "".join(ch if ch.isalnum() else "_" for ch in key)


def cluster(start: int, allowlist: tuple[str, ...]) -> dict[str, list[str]]:
    """One hour of the cluster from `start`, as kube-state-metrics with this node label
    allowlist exports it (an empty allowlist: no kube_node_labels series, as KSM v2)."""
    end = start + HOUR
    families: dict[str, list[str]] = {}

    def add(name: str, labels: dict[str, str], value: float, since: float,
            until: float) -> None:
        families.setdefault(name, []).extend(series(name, labels, value, since, until))

    for node in NODES:
        if allowlist:
            add("kube_node_labels", {"node": node.name} | {
                label_name(key): value for key, value in node.labels.items()
                if key in allowlist}, 1, start - 900, end)
        for resource, unit, value in (("cpu", "core", node.cpu_cores),
                                      ("ephemeral_storage", "byte", 95_491_281_146),
                                      ("memory", "byte", node.memory_bytes),
                                      ("pods", "integer", 58)):
            add("kube_node_status_allocatable",
                {"node": node.name, "resource": resource, "unit": unit}, value, start - 900, end)
    for pod in PODS:
        alive = (max(start + pod.created, start - 900),
                 start + pod.completed + 300 if pod.completed is not None else end)
        bound = max(start + pod.created + pod.bound_after, alive[0])
        key = {"namespace": pod.namespace, "pod": pod.name, "uid": pod.uid}
        add("kube_pod_created", key, start + pod.created, *alive)
        kind, owner = pod.owner
        info = {"created_by_kind": kind, "created_by_name": owner, "host_ip": "10.0.0.1",
                "namespace": pod.namespace, "pod": pod.name, "pod_ip": "10.1.0.1",
                "uid": pod.uid, "priority_class": "", "host_network": "false"}
        for node, since, until in (("", alive[0], bound - STEP), (pod.node, bound, alive[1])):
            if since > until:
                continue
            add("kube_pod_info", {**info, "node": node}, 1, since, until)
            for metric, containers in (
                    ("kube_pod_container_resource_requests", pod.containers),
                    ("kube_pod_init_container_resource_requests", pod.init_containers)):
                for container, (cores, memory) in containers.items():
                    for resource, unit, value in (("cpu", "core", cores),
                                                  ("memory", "byte", memory)):
                        if value:
                            add(metric, {"container": container, "namespace": pod.namespace,
                                         "node": node, "pod": pod.name, "resource": resource,
                                         "unit": unit, "uid": pod.uid}, value, since, until)
        for container in pod.init_containers:
            add("kube_pod_init_container_info", {
                "container": container, "image": "proxy:1", "image_id": "", "image_spec":
                "proxy:1", "container_id": "", **key, "restart_policy":
                "Always" if container in pod.sidecars else ""}, 1, *alive)
        if pod.overhead is not None:
            add("kube_pod_overhead_cpu_cores", key, pod.overhead[0], *alive)
            add("kube_pod_overhead_memory_bytes", key, pod.overhead[1], *alive)
        if pod.completed is not None:
            add("kube_pod_completion_time", key, start + pod.completed, start + pod.completed,
                alive[1])
        for phase in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            add("kube_pod_status_phase", {"namespace": pod.namespace, "phase": phase,
                                          "pod": pod.name, "uid": pod.uid},
                1 if phase == pod.phase else 0, *alive)
    return families


def recorded() -> str:
    families: dict[str, list[str]] = {}
    for start, allowlist in (
            (ALLOWLISTED, ("customer", "node.kubernetes.io/instance-type")),
            (NO_ALLOWLIST, ()), (OTHER_KEYS, ("topology.kubernetes.io/zone",))):
        for name, samples in cluster(start, allowlist).items():
            families.setdefault(name, []).extend(samples)
    lines = []
    for name, samples in families.items():
        lines.append(f"# TYPE {name} gauge")
        lines += sorted(samples, key=lambda line: (line.rsplit(" ", 2)[0], int(line.split()[-1])))
    return "\n".join(lines) + "\n# EOF\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    problem = prometheus_missing(("prometheus", "promtool"))
    if problem is not None:
        pytest.skip(problem)
    binary, promtool = shutil.which("prometheus"), shutil.which("promtool")
    assert binary is not None and promtool is not None
    home = tmp_path_factory.mktemp("prometheus-ksm")
    (home / "series.om").write_text(recorded())
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics",
                    str(home / "series.om"), str(home / "data")], check=True,
                   capture_output=True, timeout=scaled(120))
    (home / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\n")
    port = free_port()
    process = subprocess.Popen(
        [binary, f"--config.file={home / 'prometheus.yml'}",
         f"--storage.tsdb.path={home / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
         "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + scaled(60)
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=scaled(1)):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("prometheus did not start") from None
                time.sleep(0.2)  # starting: poll with a deadline
        yield url
    finally:
        process.terminate()
        process.wait(timeout=scaled(10))


def elevator(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=scaled(300), check=False)


@pytest.fixture
def nodegroups(tmp_path: Path) -> Path:
    path = tmp_path / "nodegroups.yaml"
    path.write_text(yaml.safe_dump({"node_groups": [
        group_dict(min_nodes=1, max_nodes=10),
        group_dict(name="web", label_value="web", cloud_provider_group_name="web-asg",
                   min_nodes=1, max_nodes=4)]}))
    return path


def import_window(url: str, start: int, nodegroups: Path, output: Path
                  ) -> subprocess.CompletedProcess[str]:
    return elevator("scenario", "from-prometheus", "--url", url, "--start", str(start),
                    "--end", str(start + HOUR), "--nodegroups", nodegroups, "--output", output)


def test_a_trace_scenario_from_kube_state_metrics(prometheus: str, nodegroups: Path,
                                                  tmp_path: Path) -> None:
    out = tmp_path / "scenario"
    done = import_window(prometheus, ALLOWLISTED, nodegroups, out)
    assert done.returncode == 0, done.stderr
    assert f"{out / 'scenario.yaml'}: 4 pods over 3600s" in done.stdout
    rows = (out / "trace.csv").read_text().splitlines()
    assert rows == [
        "arrival_s,cpu,memory,duration_s,node_group",
        # running at the start: arrives at 0, for what was left; the init container's CPU
        f"0,750m,{GiB},600,batch",
        f"100,1000m,{GiB},,web",
        f"1200,1250m,{768 * MiB},1200,batch",  # two containers, counted once though rebound
        f"1800,400m,{320 * MiB + MiB},,batch",  # + the native sidecar + the overhead
    ]  # the failed pod, the pod of a node of no group and the per-node pods are no rows
    loaded = load_scenario(out / "scenario.yaml")
    assert loaded.scenario.duration == HOUR
    batch, web = loaded.scenario.asgs
    assert (batch.name, batch.desired, batch.node_labels, batch.instance_type) == (
        "batch-asg", 2, {"customer": "batch"}, "m5.xlarge")
    assert batch.daemonsets == [
        DaemonSetSpec(name="agent-monitoring", cpu="50m", memory="32Mi"),
        DaemonSetSpec(name="agent-security", cpu="50m", memory="32Mi"),
        DaemonSetSpec(name="kube-proxy", cpu="100m", memory="0"),
        DaemonSetSpec(name="node-exporter", cpu="100m", memory="64Mi")]
    assert (web.name, web.desired, web.instance_type) == ("web-asg", 1, "m5.large")
    assert [d.name for d in web.daemonsets] == ["kube-proxy", "node-exporter"]
    assert ("  batch: 2 nodes at the start; m5.xlarge from node.kubernetes.io/instance-type; "
            "allocatable 3920m CPU, 14.6 GiB; on each node 4 DaemonSet pods (agent-monitoring, "
            "agent-security, kube-proxy, node-exporter): 300m CPU, 128 MiB") in done.stdout
    assert ("  web: 1 node at the start; m5.large nearest to the nodes' "
            "kube_node_status_allocatable; allocatable 1930m CPU, 6.8 GiB (simulated: 1900m CPU, "
            "7.5 GiB); node.kubernetes.io/instance-type 'm6i.large' is not a type the simulator "
            "knows") in done.stdout
    simulated = elevator("simulate", "--fast", out / "scenario.yaml", "--format", "json")
    assert simulated.returncode == 0, simulated.stderr


def test_a_cluster_whose_kube_state_metrics_exports_no_node_label_is_told_the_flag(
        prometheus: str, nodegroups: Path, tmp_path: Path) -> None:
    out = tmp_path / "scenario"
    done = import_window(prometheus, NO_ALLOWLIST, nodegroups, out)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [
        f"error: --url: kube_node_labels has no label_customer between {NO_ALLOWLIST} and "
        f"{NO_ALLOWLIST + HOUR}: it exported no node label (kube-state-metrics exports none by "
        "default), so no node is known to belong to a node group. The node groups select their "
        "nodes by the label key 'customer': run kube-state-metrics with "
        "--metric-labels-allowlist=nodes=[customer,node.kubernetes.io/instance-type] (or add "
        "the keys to the list it has), then import a window it has scraped since"]
    assert not out.exists()


def test_node_labels_of_other_keys_say_which_labels_there_are(
        prometheus: str, nodegroups: Path, tmp_path: Path) -> None:
    done = import_window(prometheus, OTHER_KEYS, nodegroups, tmp_path / "scenario")
    assert done.returncode == 2, done.stderr
    assert ("kube_node_labels has no label_customer between "
            f"{OTHER_KEYS} and {OTHER_KEYS + HOUR}: its series carry "
            "label_topology_kubernetes_io_zone only") in done.stderr
    assert "--metric-labels-allowlist=nodes=[customer,node.kubernetes.io/instance-type]" \
        in done.stderr


def test_an_empty_window_says_so(prometheus: str, tmp_path: Path) -> None:
    nodegroups = tmp_path / "nodegroups.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": [group_dict()]}))
    done = elevator("scenario", "from-prometheus", "--url", prometheus,
                    "--start", str(START - 30 * 86400), "--end", str(START - 29 * 86400),
                    "--nodegroups", nodegroups)
    assert done.returncode == 2
    assert "no pod of the node groups" in done.stderr and "Traceback" not in done.stderr


def _snapshot(tmp_path: Path) -> Path:
    """The cluster's nodes and, in the snapshot's words, the Deployment whose ReplicaSet
    `app-5d8f` kube-state-metrics names: one replica a node, spread over the zones."""
    from tests.builders import api_node, api_pod

    items: list[dict[str, object]] = [
        api_node(node.name, labels={**node.labels, "kubernetes.io/hostname": node.name})
        for node in NODES]
    for index, node in enumerate(("n1", "")):
        pod = api_pod(f"app-5d8f-{index}", "jobs", cpu="250m", node=node,
                      labels={"app": "api", "pod-template-hash": "5d8f"})
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "app-5d8f", "uid": "u",
                                              "controller": True}]
        pod["spec"]["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "api"}},
                "topologyKey": "kubernetes.io/hostname"}]}}
        pod["spec"]["priority"] = 100
        items.append(pod)
    path = tmp_path / "cluster.json"
    path.write_text(yaml.safe_dump({"kind": "List", "items": items}))
    return path


def test_a_snapshot_gives_the_trace_pods_their_owners_shapes(prometheus: str, nodegroups: Path,
                                                             tmp_path: Path) -> None:
    """Issue 37: `--shapes` reads a kubectl snapshot for what the series do not say (labels,
    affinity, spreading, priority, ...): each trace row of an owner the snapshot has names its
    owner's shape in a `shape` column, the scenario holds the shapes, and the pods simulated
    from those rows carry them; the ASGs take the zones of the snapshot's nodes."""
    out = tmp_path / "scenario"
    done = elevator("scenario", "from-prometheus", "--url", prometheus, "--start",
                    str(ALLOWLISTED), "--end", str(ALLOWLISTED + HOUR), "--nodegroups",
                    nodegroups, "--output", out, "--shapes", _snapshot(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "  shapes: 4 of 4 pods take their owner's shape (1 shapes from " in done.stdout
    rows = (out / "trace.csv").read_text().splitlines()
    assert rows[0] == "arrival_s,cpu,memory,duration_s,node_group,shape"
    assert rows[1:] == [f"0,750m,{GiB},600,batch,api", f"100,1000m,{GiB},,web,api",
                        f"1200,1250m,{768 * MiB},1200,batch,api",
                        f"1800,400m,{320 * MiB + MiB},,batch,api"]
    loaded = load_scenario(out / "scenario.yaml")
    shape = loaded.scenario.shapes["api"]
    assert shape.priority == 100 and shape.labels == {"pod-template-hash": "5d8f"}
    assert shape.affinity is not None and shape.affinity.pod_anti_affinity is not None
    assert [asg.availability_zone for asg in loaded.scenario.asgs] == ["us-east-1a",
                                                                      "us-east-1a"]
    from kube_elevator.fakes.cluster import pod_body
    from kube_elevator.fakes.scenario import Wave
    from kube_elevator.flows.simulation import simulate

    waves = [arrival for arrival in loaded.arrivals if isinstance(arrival, Wave)]
    assert [(wave.name, wave.count, wave.node_selector) for wave in waves] == [
        ("api", 1, {"customer": "batch"}), ("api", 1, {"customer": "web"}),
        ("api", 1, {"customer": "batch"}), ("api", 1, {"customer": "batch"})]
    body = pod_body("api-0000", waves[0], waves[0].node_selector, 0.0)
    assert body["spec"]["affinity"]["podAntiAffinity"] and body["spec"]["priority"] == 100
    summary = simulate(loaded, mode="memory").summary
    assert summary["pods_total"] == 4
