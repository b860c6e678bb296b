"""Hostile files and options (issue 14): exit 0 with valid output, or exit 2 with one line per
problem naming the file; never a traceback, never a hang.

First one case per class of input that broke a command before (a table named after the class),
then hypothesis over every file reader (`validate`, `plan --nodegroups/--cluster/--asg`,
`simulate` and its trace, `pods plan --cluster/--metrics`) and the value options, with
mutations of the shipped examples: bytes flipped, truncated, nested deep, YAML aliases, and a
random key path given a value of the wrong type or size. Issue 27's shapes anywhere in a file
are in `test_fuzz_shapes.py`.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from benchmarks.deadlines import scaled
from kube_elevator.flows.cli import app
from kube_elevator.tasks.core.duration import parse_go_duration
from tests.e2e.test_pods_cli import write_files
from tests.hostile_shapes import key_paths, replaced

EXAMPLES = Path(__file__).resolve().parents[2] / "deployments" / "examples"
SECONDS_PER_RUN = 20
BILLION_LAUGHS = "\n".join(
    ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 9)]
    + ["node_groups: *l8"]).encode()


class Hang(Exception):
    pass


def elevator(*args: str) -> tuple[int, str]:
    """The CLI in-process (typer's runner), with a time limit: (exit code, stderr and stdout)."""

    def too_long(*_: Any) -> None:
        raise Hang(" ".join(args))

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(SECONDS_PER_RUN)
    try:
        result = CliRunner().invoke(app, list(args))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback for {args}") from result.exception
    return result.exit_code, result.output


def assert_clean(code: int, output: str, source: str | None = None) -> None:
    """Exit 0, or exit 2 with every line an error or warning line (and naming `source`)."""
    assert "Traceback" not in output
    assert code in (0, 2), (code, output[-2000:])
    if code == 2:
        lines = [line for line in output.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("error:")]
        assert errors, output
        assert all(line.startswith(("error:", "warning:")) for line in lines), output
        if source is not None:
            assert any(source in line for line in errors), (source, output)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return copy_examples(tmp_path_factory.mktemp("examples"))


def copy_examples(folder: Path) -> dict[str, Path]:
    """Copies of the shipped examples (scenarios with their node groups and trace beside) and
    of `pods plan`'s files, by the name of the option that reads them."""
    for example in EXAMPLES.iterdir():
        (folder / example.name).write_bytes(example.read_bytes())
    pods_folder = folder / "pods"
    pods_folder.mkdir()
    cluster, metrics = write_files(pods_folder)
    return {"nodegroups": folder / "nodegroups.yaml", "cluster": folder / "cluster.json",
            "asgs": folder / "asgs.json", "scenario": folder / "scenario.yaml",
            "trace": folder / "trace.csv", "trace-scenario": folder / "scenario-trace.yaml",
            "pods": cluster, "metrics": metrics}


# Each command that reads a file, with that file in the place the mutated copy goes.
Reader = Callable[[dict[str, Path], Path], list[str]]
READERS: dict[str, tuple[str, Reader]] = {
    "validate": ("nodegroups", lambda f, bad: ["validate", str(bad)]),
    "plan --nodegroups": ("nodegroups", lambda f, bad: [
        "plan", "--nodegroups", str(bad), "--cluster", str(f["cluster"]), "--now", "0"]),
    "plan --cluster": ("cluster", lambda f, bad: [
        "plan", "--nodegroups", str(f["nodegroups"]), "--cluster", str(bad), "--now", "0"]),
    "plan --asg": ("asgs", lambda f, bad: [
        "plan", "--nodegroups", str(f["nodegroups"]), "--cluster", str(f["cluster"]),
        "--asg", str(bad), "--now", "0"]),
    "simulate": ("scenario", lambda f, bad: ["simulate", str(bad), "--fast", "--format",
                                             "json"]),
    "pods plan --cluster": ("pods", lambda f, bad: [
        "pods", "plan", "--cluster", str(bad), "--metrics", str(f["metrics"]), "--now", "0"]),
    "pods plan --metrics": ("metrics", lambda f, bad: [
        "pods", "plan", "--cluster", str(f["pods"]), "--metrics", str(bad), "--now", "0"]),
}


def mutated(files: dict[str, Path], which: str, data: bytes, name: str = "bad") -> Path:
    original = files[which]
    path = original.with_name(f"{name}-{original.name}")
    path.write_bytes(data)
    return path


# --- one case per class the issue found ---------------------------------------------------

BYTE_CLASSES: dict[str, Callable[[bytes], bytes]] = {
    "non-utf8": lambda data: data[:40] + b"\xff\xfe\xc3" + data[40:],
    "nul-byte": lambda data: data[:40] + b"\x00" + data[40:],
    "truncated": lambda data: data[: len(data) // 2],
    "deep-json-10000": lambda data: b"[" * 10_000 + b"]" * 10_000,
    "deep-yaml-10000": lambda data: b"".join(b" " * level + b"k:\n" for level in range(10_000)),
    "billion-laughs": lambda data: BILLION_LAUGHS,
    "list-items-not-a-list": lambda data: b'{"kind": "List", "items": "x"}',
    "empty": lambda data: b"",
    # YAML that parses but builds no Python value (the constructors raise ValueError & co).
    "impossible-date": lambda data: b"x: 2001-02-30\n",
    "int-tag-on-text": lambda data: b"x: !!int abc\n",
    "bool-tag-on-text": lambda data: b"x: !!bool maybe\n",
    "timestamp-tag-on-text": lambda data: b"x: !!timestamp abc\n",
    "int-of-5000-digits": lambda data: b"x: " + b"9" * 5000 + b"\n",
    "duplicate-key": lambda data: b"x: 1\nx: 2\n",
    # An alias inside the node its anchor names: a document that contains itself (issue 27).
    "alias-inside-its-anchor": lambda data: b"node_groups: &a [*a]\n",
    "alias-to-the-root": lambda data: b"&a {items: [*a]}\n",
    "alias-through-a-mapping": lambda data: b"a: &a {b: [1, {c: *a}]}\n",
    "deep-json-500": lambda data: b"[" * 500 + b"]" * 500,  # past ours, within the decoders'
}


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("kind", list(BYTE_CLASSES))
def test_malformed_file_is_one_error_line(kind: str, reader: str,
                                          files: dict[str, Path]) -> None:
    which, command = READERS[reader]
    bad = mutated(files, which, BYTE_CLASSES[kind](files[which].read_bytes()))
    code, output = elevator(*command(files, bad))
    assert_clean(code, output, str(bad))
    if kind not in ("empty", "list-items-not-a-list") or reader != "plan --cluster":
        assert code == 2, output


def test_non_utf8_trace_is_one_error_line(files: dict[str, Path]) -> None:
    trace = files["trace"].read_bytes()
    files["trace"].write_bytes(trace[:30] + b"\xff" + trace[30:])
    try:
        code, output = elevator("simulate", str(files["trace-scenario"]), "--fast")
    finally:
        files["trace"].write_bytes(trace)
    assert code == 2 and str(files["trace"]) in output and len(output.splitlines()) == 1


def _edit_json(files: dict[str, Path], which: str, edit: Callable[[Any], None]) -> Path:
    document = json.loads(files[which].read_text())
    edit(document)
    return mutated(files, which, json.dumps(document).encode())


def _first(document: Any, kind: str) -> Any:
    return next(item for item in document["items"] if item["kind"] == kind)


def _set_request(value: Any) -> Callable[[Any], None]:
    def edit(document: Any) -> None:
        _first(document, "Pod")["spec"]["containers"][0]["resources"]["requests"]["cpu"] = value
    return edit


def _set_allocatable(value: Any) -> Callable[[Any], None]:
    def edit(document: Any) -> None:
        _first(document, "Node")["status"]["allocatable"]["memory"] = value
    return edit


def _lease(annotations: dict[str, str]) -> Callable[[Any], None]:
    def edit(document: Any) -> None:
        document["items"].append({"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
                                  "metadata": {"name": "elevator-batch",
                                               "namespace": "kube-system",
                                               "annotations": annotations}})
    return edit


SNAPSHOT_CLASSES: dict[str, Callable[[Any], None]] = {
    "request-beyond-64-bits": _set_request(10**30),
    "request-1e400": _set_request("1e400"),
    "request-negative": _set_request("-1"),
    "allocatable-negative": _set_allocatable("-1"),
    "allocatable-beyond-64-bits": _set_allocatable("99999999999999999999999"),
    "quantity-non-ascii-digits": _set_request("٣"),
    "pod-without-metadata": lambda document: _first(document, "Pod").pop("metadata"),
    "lease-count-beyond-64-bits": _lease({"elevator.io/scale-locked": "true",
                                          "elevator.io/scale-lock-requested-nodes":
                                              "99999999999999999999999"}),
    "lease-capacity-infinite": _lease({"elevator.io/node-capacity":
                                       '{"cpu_milli": 1e400, "memory_bytes": 1}'}),
    "allocatable-of-5000-digits": _set_allocatable("9" * 5000),
    "lease-capacity-nested-10000-deep": _lease({"elevator.io/node-capacity":
                                                "[" * 10_000 + "]" * 10_000}),
}


@pytest.mark.parametrize("kind", list(SNAPSHOT_CLASSES))
def test_snapshot_values_out_of_range_are_one_error_line(kind: str,
                                                         files: dict[str, Path]) -> None:
    bad = _edit_json(files, "cluster", SNAPSHOT_CLASSES[kind])
    code, output = elevator("plan", "--nodegroups", str(files["nodegroups"]), "--cluster",
                            str(bad), "--now", "0", "--format", "json")
    assert code == 2, output
    assert_clean(code, output, str(bad))


def test_asg_desired_capacity_beyond_int32_is_one_error_line(files: dict[str, Path]) -> None:
    def edit(document: Any) -> None:
        document["AutoScalingGroups"][0]["DesiredCapacity"] = 10**30
    bad = _edit_json(files, "asgs", edit)
    code, output = elevator("plan", "--nodegroups", str(files["nodegroups"]), "--cluster",
                            str(files["cluster"]), "--asg", str(bad), "--now", "0")
    assert code == 2 and "DesiredCapacity" in output, output


POD_OBJECT_CLASSES: dict[str, tuple[str, Callable[[Any], None]]] = {
    "replicas-not-a-number": ("Deployment", lambda o: o["spec"].update(replicas="x")),
    "selector-a-string": ("Deployment", lambda o: o["spec"].update(selector="app=web")),
    "labels-a-list": ("Pod", lambda o: o["metadata"].update(labels=["a"])),
    "status-a-string": ("Pod", lambda o: o.update(status="x")),
    "start-time-yesterday": ("Pod", lambda o: o["status"].update(startTime="yesterday")),
    "pod-without-metadata": ("Pod", lambda o: o.pop("metadata")),
    "replicas-beyond-int32": ("Deployment", lambda o: o["spec"].update(replicas=10**30)),
    # The autoscalers themselves (issue 27): the API server and the CRD schema refuse these.
    "wpa-metadata-a-string": ("WatermarkPodAutoscaler", lambda o: o.update(metadata="x")),
    "memory-metadata-a-string": ("MemoryAutoscaler", lambda o: o.update(metadata="x")),
    "wpa-spec-a-list": ("WatermarkPodAutoscaler", lambda o: o.update(spec=[])),
    "memory-annotations-a-list": ("MemoryAutoscaler",
                                  lambda o: o["metadata"].update(annotations=["a"])),
    "wpa-labels-a-string": ("WatermarkPodAutoscaler",
                            lambda o: o["metadata"].update(labels="a=b")),
    "wpa-min-replicas-a-string": ("WatermarkPodAutoscaler",
                                  lambda o: o["spec"].update(minReplicas="5")),
    "memory-conditions-a-number": ("MemoryAutoscaler",
                                   lambda o: o.update(status={"conditions": 5})),
}


@pytest.mark.parametrize("kind", list(POD_OBJECT_CLASSES))
def test_pods_plan_objects_of_the_wrong_type_are_one_error_line(
        kind: str, files: dict[str, Path]) -> None:
    target, edit = POD_OBJECT_CLASSES[kind]
    bad = _edit_json(files, "pods", lambda document: edit(_first(document, target)))
    code, output = elevator("pods", "plan", "--cluster", str(bad), "--metrics",
                            str(files["metrics"]), "--now", "0")
    assert code == 2, output
    assert_clean(code, output, str(bad))
    assert f"({target}): " in output  # the item, then the key path


SCENARIO_CLASSES = {
    "duration-infinite": ("duration", ".inf"), "duration-huge": ("duration", 10**12),
    "step-1ns": ("step", "1ns"), "count-a-billion": ("count", 10**9),
    "memory-negative": ("memory", "-1Gi"), "duration-non-ascii": ("duration", "٣s"),
    "duration-true": ("duration", True), "count-a-string": ("count", "5"),
    "asg-given-twice": ("asgs", None), "nodegroups-with-a-nul-byte": ("nodegroups", "a\0b"),
}


@pytest.mark.parametrize("kind", list(SCENARIO_CLASSES))
def test_scenario_sizes_are_bounded(kind: str, files: dict[str, Path]) -> None:
    key, value = SCENARIO_CLASSES[kind]
    document = yaml.safe_load(files["scenario"].read_text())
    if key in ("count", "memory"):
        document["workload"][0][key] = value
    elif key == "asgs":
        document["asgs"].append(document["asgs"][0])
    else:
        document[key] = value
    text = yaml.safe_dump(document).replace("'.inf'", ".inf")
    bad = mutated(files, "scenario", text.encode())
    code, output = elevator("simulate", str(bad), "--fast")
    assert code == 2, output
    assert_clean(code, output, str(bad))


def test_a_key_given_twice_is_named_not_silently_replaced(files: dict[str, Path]) -> None:
    """PyYAML keeps a repeated key's last value: a second `node_groups: []` emptied the file."""
    text = files["nodegroups"].read_text() + "node_groups: []\n"
    bad = mutated(files, "nodegroups", text.encode(), "twice")
    code, output = elevator("validate", str(bad))
    assert code == 2 and "duplicate key 'node_groups' (first on line" in output, output
    assert_clean(code, output, str(bad))


def test_node_group_integers_are_go_ints_and_huge_values_are_shown_short(
        files: dict[str, Path]) -> None:
    document = yaml.safe_load(files["nodegroups"].read_text())
    document["node_groups"][0]["max_nodes"] = 10**30
    document["node_groups"][0]["min_nodes"] = "x" * 200_000
    bad = mutated(files, "nodegroups", yaml.safe_dump(document).encode(), "huge")
    code, output = elevator("validate", str(bad))
    assert code == 2 and "max_nodes: Input should be less than or equal to " \
        "9223372036854775807" in output, output
    assert "(200,002 characters)" in output and len(output) < 2000
    assert_clean(code, output, str(bad))


TRACE_CLASSES = {
    "repeated-column": (lambda text: text.replace("cpu", "arrival_s", 1),
                        "appears more than once in the header"),
    "row-longer-than-the-header": (lambda text: text + "1,100m,1Gi,60,batch,extra\n",
                                   "fields, but the header names"),
    "many-bad-rows": (lambda text: text + "x,100m,1Gi,60,batch\n" * 500, "bad rows in all"),
}


@pytest.mark.parametrize("kind", list(TRACE_CLASSES))
def test_trace_rows_and_header_are_checked(kind: str, files: dict[str, Path]) -> None:
    edit, expected = TRACE_CLASSES[kind]
    original = files["trace"].read_text()
    files["trace"].write_text(edit(original))
    try:
        code, output = elevator("simulate", str(files["trace-scenario"]), "--fast")
    finally:
        files["trace"].write_text(original)
    assert code == 2 and expected in output, output
    assert len(output.splitlines()) <= 21  # 20 bad rows shown, then a count
    assert_clean(code, output, str(files["trace"]))


def test_a_trace_saved_with_a_byte_order_mark_is_read(files: dict[str, Path]) -> None:
    """Spreadsheets' "CSV UTF-8" starts with a BOM, which made every row miss `arrival_s`."""
    original = files["trace"].read_bytes()
    expected = elevator("simulate", str(files["trace-scenario"]), "--fast", "--format", "json")
    files["trace"].write_bytes(b"\xef\xbb\xbf" + original)
    try:
        assert elevator("simulate", str(files["trace-scenario"]), "--fast", "--format",
                        "json") == expected
    finally:
        files["trace"].write_bytes(original)
    assert expected[0] == 0


@pytest.mark.parametrize(("bom", "codec"), [
    (b"\xff\xfe", "utf-16-le"),  # PowerShell 5: `kubectl get ... -o json > pods.json`
    (b"\xfe\xff", "utf-16-be"),
    (b"\xef\xbb\xbf", "utf-8"),  # `Out-File -Encoding utf8`, editors' "UTF-8 with BOM"
])
def test_files_saved_on_windows_with_a_byte_order_mark_are_read(
        files: dict[str, Path], tmp_path: Path, bom: bytes, codec: str) -> None:
    """kubectl reads a file by its byte order mark; `elevator plan` on the same cluster, node
    groups and ASGs saved that way plans exactly as on the UTF-8 originals."""
    expected = elevator("plan", "--nodegroups", str(files["nodegroups"]), "--cluster",
                        str(files["cluster"]), "--asg", str(files["asgs"]), "--format", "json",
                        "--now", "1800000000")
    assert expected[0] == 0, expected[1]
    saved = {}
    for name in ("nodegroups", "cluster", "asgs"):
        saved[name] = tmp_path / files[name].name
        saved[name].write_bytes(bom + files[name].read_text("utf-8").encode(codec))
    assert elevator("plan", "--nodegroups", str(saved["nodegroups"]), "--cluster",
                    str(saved["cluster"]), "--asg", str(saved["asgs"]), "--format",
                    "json", "--now", "1800000000") == expected


def test_a_snapshot_saved_as_yaml_plans_as_its_json(files: dict[str, Path],
                                                   tmp_path: Path) -> None:
    """`kubectl get ... -o yaml` is as common as `-o json`: the same cluster in YAML, its
    timestamps unquoted as a hand edit leaves them, plans exactly as the JSON."""
    arguments = ("--nodegroups", str(files["nodegroups"]), "--asg", str(files["asgs"]),
                 "--format", "json", "--now", "1800000000")
    expected = elevator("plan", "--cluster", str(files["cluster"]), *arguments)
    assert expected[0] == 0, expected[1]
    text = yaml.safe_dump(json.loads(files["cluster"].read_text()))
    unquoted = re.sub(r"(creationTimestamp): '([^']+)'", r"\1: \2", text)
    assert unquoted != text
    as_yaml = tmp_path / "cluster.yaml"
    as_yaml.write_text(unquoted)
    assert elevator("plan", "--cluster", str(as_yaml), *arguments) == expected
    as_yaml.write_text("items: [\n")
    assert_clean(*elevator("plan", "--cluster", str(as_yaml), *arguments), str(as_yaml))


def test_an_object_listed_twice_is_named_not_counted_twice(files: dict[str, Path],
                                                          tmp_path: Path) -> None:
    """Two overlapping --cluster files (a pods dump beside a dump that holds the pods too)
    would count each pod twice: the plan doubles the usage and scales up for nothing."""
    arguments = ("--nodegroups", str(files["nodegroups"]), "--asg", str(files["asgs"]))
    cluster = json.loads(files["cluster"].read_text())
    pods = tmp_path / "pods.json"
    pods.write_text(json.dumps({"kind": "List", "items": [
        item for item in cluster["items"] if item["kind"] == "Pod"][:25]}))
    code, output = elevator("plan", "--cluster", str(files["cluster"]), "--cluster", str(pods),
                            *arguments)
    assert_clean(code, output, str(files["cluster"]))
    assert code == 2 and f"(in {files['cluster']} and {pods}): give each object once" in output
    lines = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(lines) == 21 and lines[-1] == "error: ... and 5 more objects listed more than once"
    nodes_twice = tmp_path / "twice.json"
    node = next(item for item in cluster["items"] if item["kind"] == "Node")
    nodes_twice.write_text(json.dumps({"kind": "List", "items": [node, node]}))
    code, output = elevator("plan", "--cluster", str(nodes_twice), *arguments)
    assert code == 2 and f"Node {node['metadata']['name']}: listed 2 times (in {nodes_twice})" \
        in " ".join(output.split())


def test_a_byte_order_mark_whose_bytes_break_is_one_error_line(tmp_path: Path) -> None:
    broken = tmp_path / "nodegroups.yaml"
    broken.write_bytes(b"\xff\xfe" + "node_groups: []\n".encode("utf-16-le") + b"\x00")
    code, output = elevator("validate", str(broken))
    assert code == 2
    assert f"{broken}: byte " in output and "not valid UTF-16 after its byte order mark" in output
    assert_clean(code, output, str(broken))


def test_tune_checks_its_output_and_dask_before_searching(files: dict[str, Path],
                                                          tmp_path: Path) -> None:
    """The search may take hours: a folder as --output, or a Dask address that is malformed or
    answers nothing, is one error line at once, not a traceback at the end."""
    pytest.importorskip("optuna")
    pytest.importorskip("distributed")
    scenario = str(files["scenario"])
    code, output = elevator("tune", scenario, "--output", str(tmp_path))
    assert code == 2 and f"--output: {tmp_path} is a directory" in output, output
    code, output = elevator("tune", scenario, "--dask", "not-an-address")
    assert code == 2 and "--dask: 'not-an-address' is not a scheduler address" in output
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    code, output = elevator("tune", scenario, "--dask", f"tcp://127.0.0.1:{port}")
    assert code == 2 and f"--dask: cannot reach tcp://127.0.0.1:{port}" in output, output


@pytest.mark.parametrize("now", ["nan", "inf", "-inf", "1e400", "1e18", "", "yesterday"])
def test_now_must_be_a_real_time(now: str, files: dict[str, Path]) -> None:
    code, output = elevator("plan", "--nodegroups", str(files["nodegroups"]), "--cluster",
                            str(files["cluster"]), "--now", now, "--format", "json")
    assert code == 2 and "--now" in output and len(output.splitlines()) == 1, output


@pytest.mark.parametrize("text", ["٣s", "1e400h", "99999999999999999999h", "nan", "infs"])
def test_go_duration_takes_what_go_takes(text: str) -> None:
    """Go's time.ParseDuration: ASCII digits, and an int64 of nanoseconds at most (its own
    errors: `1e400h` is the unknown unit "e")."""
    with pytest.raises(ValueError, match=r"(invalid|unknown unit '.*' in) duration"):
        parse_go_duration(text)


def test_the_real_exit_codes(files: dict[str, Path], tmp_path: Path) -> None:
    """The same checks through the installed entry point: exit 2, one line, no traceback."""
    bad = mutated(files, "nodegroups", BILLION_LAUGHS, "bomb")
    done = subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", "validate", str(bad)],
                          capture_output=True, text=True, timeout=scaled(60), check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and str(bad) in done.stderr


# --- hypothesis: random mutations of every reader -----------------------------------------

def _documents() -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
        st.sampled_from(["-1", "1e400", "٣", "500m", "1Gi", "\x00", "yesterday", "60s"]))
    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
        max_leaves=8)


@st.composite
def mutations(draw: st.DrawFn, data: bytes, parsed: Any) -> bytes:
    """Bytes changed at random, or a random key path given a random value."""
    how = draw(st.sampled_from(["flip", "cut", "insert", "value"]))
    if how == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    if how == "cut":
        return data[: draw(st.integers(0, len(data)))]
    if how == "insert":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    paths = list(key_paths(parsed))
    path = draw(st.sampled_from(paths))
    value = draw(_documents())
    changed = replaced(parsed, path, value)
    try:
        return json.dumps(changed).encode()
    except ValueError:  # NaN and infinities are not JSON: YAML spells them
        return yaml.safe_dump(changed).encode()


@pytest.mark.parametrize("reader", list(READERS))
def test_random_mutations_of_every_reader(reader: str, files: dict[str, Path]) -> None:
    which, command = READERS[reader]
    data = files[which].read_bytes()
    parsed = yaml.safe_load(data) if which != "cluster" else json.loads(data)
    if which == "cluster":  # a few items keep the mutations near the interesting parts
        parsed = {**parsed, "items": [parsed["items"][0], _first(parsed, "Pod")]}
        data = json.dumps(parsed).encode()

    @settings(max_examples=40, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(mutations(data, parsed))
    def check(mutation: bytes) -> None:
        bad = mutated(files, which, mutation, "fuzz")
        code, output = elevator(*command(files, bad))
        assert_clean(code, output)

    check()


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.one_of(st.text(max_size=16), st.sampled_from(
    ["nan", "inf", "1e400", "-0", "٣", "9" * 30, "2026-02-30T00:00:00Z", "\x00"])))
def test_random_now_values(now: str) -> None:
    code, output = elevator("plan", "--nodegroups", str(EXAMPLES / "nodegroups.yaml"),
                            "--cluster", str(EXAMPLES / "cluster.json"), "--now", now,
                            "--format", "json")
    assert_clean(code, output)
    if code == 0:
        assert json.loads(output)["now"] is not None


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from(["run", "watch"]),
       st.one_of(st.text(max_size=10), st.sampled_from(["nan", "-1s", "٣s", "1e400h", "0"])))
def test_random_duration_options(command: str, value: str) -> None:
    """`run --interval` and `watch --debounce` with any text: a clean error, never a traceback
    (the kubeconfig is missing, so no tick ever starts)."""
    option = "--interval" if command == "run" else "--debounce"
    code, output = elevator(command, "--nodegroups", str(EXAMPLES / "nodegroups.yaml"),
                            "--kubeconfig", "/nonexistent/kubeconfig", option, value)
    assert code == 2, output
    assert "Traceback" not in output
