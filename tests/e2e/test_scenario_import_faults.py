"""`elevator scenario from-prometheus` on bad input and bad answers (audit: scenario import).

A fake Prometheus answers the command's kube-state-metrics queries over HTTP; each fault is one
option or one answer. Every run that fails exits 2 with one error line naming the option, or
the query and the series, and leaves the output directory as it was: no new file, no
temporary, a previous good output byte for byte.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from benchmarks.deadlines import scaled
from kube_elevator.fakes.scenario import load_scenario
from kube_elevator.flows.cli.services import ServiceThread
from tests.builders import GiB, group_dict

START = 1_700_000_000
END = START + 3600


@dataclass
class Pod:
    """A pod as kube-state-metrics reports it; values are the strings Prometheus sends."""

    name: str
    created: float = START
    completed: float | None = None
    cpu_cores: str = "0.5"
    memory_bytes: str = str(2**28)
    node: str = "n1"


@dataclass
class FakePrometheus:
    """Answers `/api/v1/query` for the series the command reads; `bodies` replaces the whole
    answer to the queries naming a series."""

    pods: list[Pod]
    nodes: dict[str, str] = field(default_factory=lambda: {"n1": "batch"})
    bodies: dict[str, Any] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)

    def samples(self, promql: str) -> list[tuple[dict[str, str], str]]:
        def each(value: Any) -> list[tuple[dict[str, str], str]]:
            return [({"namespace": "jobs", "pod": pod.name}, str(value(pod)))
                    for pod in self.pods if value(pod) is not None]

        if "init_container" in promql or "overhead" in promql or "allocatable" in promql:
            return []  # no init container, no overhead; node sizes: the --instance-type
        if "kube_pod_created" in promql:
            return each(lambda pod: pod.created)
        if "kube_pod_completion_time" in promql:
            return each(lambda pod: pod.completed)
        if "kube_pod_status_phase" in promql:
            return each(lambda pod: 0)
        if 'resource="cpu"' in promql:
            return each(lambda pod: pod.cpu_cores)
        if 'resource="memory"' in promql:
            return each(lambda pod: pod.memory_bytes)
        if "kube_pod_info" in promql:
            return [({"namespace": "jobs", "pod": pod.name, "node": pod.node}, "1")
                    for pod in self.pods]
        if "kube_node_labels" in promql:
            return [({"node": node, "label_customer": group}, "1")
                    for node, group in self.nodes.items()]
        return []

    async def _query(self, request: Request) -> Response:
        promql = request.query_params["query"]
        self.queries.append(promql)
        for series, body in self.bodies.items():
            if series in promql:
                return JSONResponse(body)
        at = float(request.query_params["time"])
        result = [{"metric": labels, "value": [at, value]}
                  for labels, value in self.samples(promql)]
        return JSONResponse({"status": "success",
                             "data": {"resultType": "vector", "result": result}})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/api/v1/query", self._query, methods=["GET", "POST"])])


@pytest.fixture
def prometheus() -> Iterator[tuple[FakePrometheus, str]]:
    fake = FakePrometheus(pods=[Pod("web-1"), Pod("job-1", created=START + 600,
                                                  completed=START + 1200)])
    with ServiceThread(fake.app(), name="fake-prometheus", bind_option=None) as service:
        yield fake, service.url


@pytest.fixture
def nodegroups(tmp_path: Path) -> Path:
    path = tmp_path / "nodegroups.yaml"
    path.write_text(yaml.safe_dump({"node_groups": [group_dict(min_nodes=1, max_nodes=10)]}))
    return path


def elevator(*args: str | Path, file_size_limit: int | None = None
             ) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it; `file_size_limit` is `ulimit -f` in bytes."""
    def limited() -> None:
        if file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=scaled(300), check=False,
                          preexec_fn=limited)


def from_prometheus(url: str, nodegroups: Path, output: Path, *options: str | Path,
                    file_size_limit: int | None = None) -> subprocess.CompletedProcess[str]:
    """The command on the test window; `options` are further or overriding (--end) pairs."""
    given = {"--start": str(START), "--end": str(END)}
    given.update(zip(map(str, options[::2]), map(str, options[1::2]), strict=True))
    return elevator("scenario", "from-prometheus", "--url", url, "--nodegroups", nodegroups,
                    "--output", output, *(part for pair in given.items() for part in pair),
                    file_size_limit=file_size_limit)


def contents(directory: Path) -> dict[str, bytes]:
    """Every file under `directory`, hidden ones too (a temporary left behind shows)."""
    if not directory.exists():
        return {}
    return {str(path.relative_to(directory)): path.read_bytes()
            for path in sorted(directory.rglob("*")) if path.is_file()}


def failed_with(done: subprocess.CompletedProcess[str], start: str) -> str:
    """The one error line of a run that exited 2."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {start}"), done.stderr
    return lines[0]


@pytest.fixture
def good_output(prometheus: tuple[FakePrometheus, str], nodegroups: Path,
                tmp_path: Path) -> Path:
    """A directory holding a previous run's good output."""
    fake, url = prometheus
    output = tmp_path / "last-week"
    done = from_prometheus(url, nodegroups, output)
    assert done.returncode == 0, done.stderr
    assert sorted(contents(output)) == ["scenario.yaml", "trace.csv"]
    fake.queries.clear()
    return output


def test_an_unknown_instance_type_is_refused_before_prometheus_is_asked(
        prometheus: tuple[FakePrometheus, str], nodegroups: Path, good_output: Path) -> None:
    fake, url = prometheus
    before = contents(good_output)
    done = from_prometheus(url, nodegroups, good_output, "--instance-type", "z9.huge")
    failed_with(done, "--instance-type: unknown instance type 'z9.huge'; known: ")
    assert fake.queries == []
    assert contents(good_output) == before


def test_a_window_of_231_days_gets_a_step_within_the_simulators_limit(
        prometheus: tuple[FakePrometheus, str], nodegroups: Path, tmp_path: Path) -> None:
    _, url = prometheus
    output = tmp_path / "long"
    done = from_prometheus(url, nodegroups, output, "--end", str(START + 30_000_000))
    assert done.returncode == 0, done.stderr
    loaded = load_scenario(output / "scenario.yaml")  # 10 s steps would be 3,000,000 of them
    assert (loaded.scenario.duration, loaded.scenario.step) == (30_000_000, 15)
    assert loaded.scenario.tick_interval % loaded.scenario.step == 0


def test_a_window_longer_than_a_scenario_is_refused_before_prometheus_is_asked(
        prometheus: tuple[FakePrometheus, str], nodegroups: Path, tmp_path: Path) -> None:
    fake, url = prometheus
    output = tmp_path / "too-long"
    done = from_prometheus(url, nodegroups, output, "--end", str(START + 400 * 86_400))
    line = failed_with(done, "--end: the window from --start ")
    assert "is 400.0 days; a scenario lasts at most 366 days" in line
    assert fake.queries == [] and not output.exists()


CPU_QUERY = ('max by (namespace, pod, uid, container) (max_over_time('
             'kube_pod_container_resource_requests{resource="cpu"}[3600s]))')
CREATED_QUERY = "max_over_time(kube_pod_created[3600s])"
SERIES = '{namespace="jobs",pod="web-1"}'


@pytest.mark.parametrize(("cpu_cores", "problem"), [
    ("-1", "request -1 is negative"),
    ("1e30", "request 1e+30 is too large"),
    ("+Inf", "value +Inf is not finite"),
    ("abc", "value 'abc' is not a number"),
], ids=["negative", "too-large", "infinite", "not-a-number"])
def test_a_bad_request_sample_names_the_query_and_the_series(
        prometheus: tuple[FakePrometheus, str], nodegroups: Path, good_output: Path,
        cpu_cores: str, problem: str) -> None:
    fake, url = prometheus
    fake.pods[0].cpu_cores = cpu_cores
    before = contents(good_output)
    line = failed_with(from_prometheus(url, nodegroups, good_output), "--url: ")
    assert line.startswith(f"error: --url: {CPU_QUERY}: series {SERIES}: {problem}"), line
    assert contents(good_output) == before


@pytest.mark.parametrize(("body", "problem"), [
    ({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"namespace": "jobs", "pod": "web-1"}}]}},
     f"{CREATED_QUERY}: series {SERIES}: no value [time, number]"),
    ({"status": "success", "data": {"resultType": "vector", "result": ["web-1"]}},
     f"{CREATED_QUERY}: 'web-1' is not a sample (metric and value)"),
    ({"status": "success"}, f"Prometheus answered {CREATED_QUERY} without data.result"),
], ids=["sample-without-value", "not-a-sample", "answer-without-data"])
def test_a_malformed_answer_names_the_query(
        prometheus: tuple[FakePrometheus, str], nodegroups: Path, tmp_path: Path,
        body: dict[str, Any], problem: str) -> None:
    fake, url = prometheus
    fake.bodies["kube_pod_created"] = body
    output = tmp_path / "new"
    line = failed_with(from_prometheus(url, nodegroups, output), "--url: ")
    assert line == f"error: --url: {problem}", line
    assert not output.exists()


def test_output_naming_a_file_says_it_must_be_a_directory(
        prometheus: tuple[FakePrometheus, str], nodegroups: Path, tmp_path: Path) -> None:
    fake, url = prometheus
    taken = tmp_path / "scenario.yaml"
    taken.write_text("mine\n")
    line = failed_with(from_prometheus(url, nodegroups, taken), "--output: ")
    assert line == (f"error: --output: {taken} is not a directory; --output names the "
                    "directory for scenario.yaml and trace.csv")
    assert fake.queries == [] and taken.read_text() == "mine\n"
    line = failed_with(from_prometheus(url, nodegroups, taken / "below"), "--output: ")
    assert f"({taken} is not)" in line


def test_pods_done_before_the_window_are_left_out(
        prometheus: tuple[FakePrometheus, str], nodegroups: Path, tmp_path: Path) -> None:
    fake, url = prometheus
    fake.pods = [Pod("gone", created=START - 7200, completed=START - 3600),
                 Pod("done-at-start", created=START - 600, completed=START),
                 Pod("running", created=START - 600, completed=START + 60)]
    output = tmp_path / "window"
    done = from_prometheus(url, nodegroups, output)
    assert done.returncode == 0, done.stderr
    assert (output / "trace.csv").read_text().splitlines() == [
        "arrival_s,cpu,memory,duration_s,node_group",
        f"0,500m,{2**28},60,batch"]


def test_arrivals_keep_every_digit_in_a_long_window(
        prometheus: tuple[FakePrometheus, str], nodegroups: Path, tmp_path: Path) -> None:
    fake, url = prometheus
    fake.pods = [Pod("late", created=START + 1_234_567.5, memory_bytes=str(GiB))]
    output = tmp_path / "weeks"
    done = from_prometheus(url, nodegroups, output, "--end", str(START + 2_000_000))
    assert done.returncode == 0, done.stderr
    assert (output / "trace.csv").read_text().splitlines()[1] == f"1234567.5,500m,{GiB},,batch"


@pytest.mark.parametrize("previous", ["good-output", "no-directory"])
def test_a_write_past_the_file_size_limit_leaves_the_directory_as_it_was(
        prometheus: tuple[FakePrometheus, str], nodegroups: Path, good_output: Path,
        tmp_path: Path, previous: str) -> None:
    fake, url = prometheus
    fake.pods = [Pod(f"pod-{index}", created=START + index) for index in range(3000)]
    output = good_output if previous == "good-output" else tmp_path / "new" / "deeper"
    before = contents(output)
    done = from_prometheus(url, nodegroups, output, file_size_limit=50 * 1024)  # ulimit -f 50
    line = failed_with(done, "--output: ")
    assert line == (f"error: --output: cannot write scenario.yaml and trace.csv in {output}: "
                    "File too large")
    assert contents(output) == before
    assert not (tmp_path / "new").exists()
    done = from_prometheus(url, nodegroups, output)  # without the limit: the same run works
    assert done.returncode == 0, done.stderr
    assert len(load_scenario(output / "scenario.yaml").arrivals) == 3000
    assert sorted(contents(output)) == ["scenario.yaml", "trace.csv"]


def test_node_groups_sharing_an_asg_are_refused_before_anything_is_written(
        prometheus: tuple[FakePrometheus, str], tmp_path: Path) -> None:
    _, url = prometheus
    nodegroups = tmp_path / "shared.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": [
        group_dict(cloud_provider_group_name="shared-asg"),
        group_dict(name="web", label_value="web", cloud_provider_group_name="shared-asg")]}))
    output = tmp_path / "shared"
    line = failed_with(from_prometheus(url, nodegroups, output), f"{nodegroups}: ")
    assert line == (f"error: {nodegroups}: cloud_provider_group_name 'shared-asg' is used by 2 "
                    "node groups; a scenario has one ASG per group")  # load_scenario refuses it
    assert not output.exists()


def test_node_labels_without_the_groups_key_name_the_allowlist_flag(
        prometheus: tuple[FakePrometheus, str], nodegroups: Path, good_output: Path) -> None:
    """kube-state-metrics before v2.0's allowlist exported kube_node_labels with no label_*
    unless told otherwise; the import said "no pod of the node groups ... ran"."""
    fake, url = prometheus
    fake.bodies["kube_node_labels"] = {"status": "success", "data": {
        "resultType": "vector", "result": [
            {"metric": {"__name__": "kube_node_labels", "node": "n1"}, "value": [END, "1"]}]}}
    before = contents(good_output)
    line = failed_with(from_prometheus(url, nodegroups, good_output), "--url: ")
    assert line.startswith(f"error: --url: kube_node_labels has no label_customer between "
                           f"{START} and {END}: it exported no node label"), line
    assert "--metric-labels-allowlist=nodes=[customer,node.kubernetes.io/instance-type]" in line
    assert contents(good_output) == before


def test_without_an_allocatable_or_a_label_the_option_gives_the_instance_type(
        prometheus: tuple[FakePrometheus, str], nodegroups: Path, tmp_path: Path) -> None:
    _, url = prometheus
    output = tmp_path / "typed"
    done = from_prometheus(url, nodegroups, output, "--instance-type", "c5.large")
    assert done.returncode == 0, done.stderr
    assert "  batch: 1 node at the start; c5.large from --instance-type: no node of the group " \
           "in kube_node_status_allocatable" in done.stdout
    (asg,) = load_scenario(output / "scenario.yaml").scenario.asgs
    assert asg.instance_type == "c5.large" and asg.daemonsets == []


def test_a_groups_key_no_node_carried_is_said_beside_the_groups_that_had_nodes(
        prometheus: tuple[FakePrometheus, str], tmp_path: Path) -> None:
    """Another group's key on its own is no error (the group may have had no node in the
    window), but the output says it is missing and the flag that would export it."""
    _, url = prometheus
    nodegroups = tmp_path / "two-keys.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": [
        group_dict(min_nodes=1, max_nodes=10),
        group_dict(name="gpu", label_key="nodeGroup", label_value="gpu",
                   cloud_provider_group_name="gpu-asg", min_nodes=0, max_nodes=4)]}))
    output = tmp_path / "two"
    done = from_prometheus(url, nodegroups, output)
    assert done.returncode == 0, done.stderr
    assert "  batch: 1 node at the start; m5.large" in done.stdout
    assert ("  gpu: 0 nodes at the start; no node carried label_node_group (if "
            "kube-state-metrics does not export it: "
            "--metric-labels-allowlist=nodes=[nodeGroup]); m5.large") in done.stdout
    assert [asg.desired for asg in load_scenario(output / "scenario.yaml").scenario.asgs] == \
        [1, 0]
