"""Scenario files: a bad one is one error line per problem, naming the file, the key path and the
rule; an unusual but meaningful one loads (fakes/scenario.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

import kube_elevator.fakes.scenario as fake_scenarios
from kube_elevator.fakes.scenario import MAX_PODS, LoadedScenario, Scenario, load_scenario
from kube_elevator.tasks.core.errors import InputError
from tests.builders import group_dict

HEADER = "arrival_s,cpu,memory,duration_s,node_group"
ROW = "10,1,512Mi,60,batch"
WAVE = {"name": "burst", "at": "1m", "count": 4, "cpu": "500m", "memory": "256Mi",
        "node_selector": {"customer": "batch"}}


def write_scenario(tmp_path: Path, **overrides: Any) -> Path:
    """A scenario that loads: one group `batch` on `batch-asg`, ticking every minute for 10m."""
    scenario: dict[str, Any] = {
        "tick_interval": "1m", "step": "10s", "duration": "10m",
        "nodegroups": {"node_groups": [group_dict()]},
        "asgs": [{"name": "batch-asg", "min": 1, "max": 10, "desired": 1,
                  "node_labels": {"customer": "batch"}}],
        "workload": [WAVE],
    }
    scenario.update(overrides)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def write_trace(tmp_path: Path, text: str, **overrides: Any) -> tuple[Path, Path]:
    """(scenario, trace) for a trace whose bytes are exactly `text` (no newline translation)."""
    trace = tmp_path / "t.csv"
    trace.write_bytes(text.encode())
    return write_scenario(tmp_path, **{"workload": [], "trace": "t.csv", **overrides}), trace


def problems_of(path: Path) -> list[str]:
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    return caught.value.problems


# --- 1. trace line numbers are physical lines -------------------------------------------------

@pytest.mark.parametrize(("text", "line"), [
    (f"{HEADER}\n\n\n\n{ROW}\n20,1,bad,60,batch\n", 6),
    (f"{HEADER}\r\n{ROW}\r\n\r\n20,1,bad,60,batch\r\n", 4),
    (f'{HEADER}\n10,1,512Mi,60,"ba\ntch"\n20,1,bad,60,batch\n', 4),  # a quoted line break
], ids=["blank-lines", "crlf", "quoted-line-break"])
def test_trace_errors_name_the_physical_line(tmp_path: Path, text: str, line: int) -> None:
    scenario, trace = write_trace(tmp_path, text)
    assert problems_of(scenario)[-1] == f"{trace}: line {line}: memory: malformed quantity 'bad'"


# --- 2. MAX_PODS holds for waves and trace rows together ---------------------------------------

def test_waves_and_trace_rows_share_the_pod_cap(tmp_path: Path) -> None:
    wave = {**WAVE, "count": MAX_PODS}
    scenario, trace = write_trace(tmp_path, f"{HEADER}\n\n{ROW}\n", workload=[wave])
    assert problems_of(scenario) == [
        f"{trace}: line 3: row 1 passes the cap of 1,000,000 pods, the workload's waves "
        "(1,000,000 pods) and the trace's rows together"]
    wave["count"] = MAX_PODS - 1
    scenario, _ = write_trace(tmp_path, f"{HEADER}\n{ROW}\n", workload=[wave])
    assert len(load_scenario(scenario).arrivals) == 2  # the cap itself is allowed


def test_a_large_trace_over_the_cap_is_refused_before_any_row_is_modelled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model per row took 1.4 GB for a 1,000,001-row trace before it was refused."""
    scenario, trace = write_trace(tmp_path, f"{HEADER}\n" + f"{ROW}\n" * (MAX_PODS + 1))
    modelled = []
    real = fake_scenarios.TracePod.model_validate
    monkeypatch.setattr(fake_scenarios.TracePod, "model_validate",
                        lambda *args, **kwargs: modelled.append(1) or real(*args, **kwargs))
    assert problems_of(scenario) == [
        f"{trace}: line 1000002: row 1,000,001 passes the cap of 1,000,000 pods, the workload's "
        "waves (0 pods) and the trace's rows together"]
    assert modelled == []


# --- 3. the clock ------------------------------------------------------------------------------

@pytest.mark.parametrize(("clock", "expected"), [
    ({"step": "20m", "tick_interval": "20m"}, ["duration: must be at least one step (1200s)"]),
    ({"duration": 0}, ["duration: must be at least one step (10s)"]),
    ({"tick_interval": "25s"}, ["tick_interval: must be a multiple of step (10s)"]),
    ({"tick_interval": "5s"}, ["tick_interval: must be a multiple of step (10s)"]),
    ({"tick_interval": "1m", "step": "45s"}, ["tick_interval: must be a multiple of step (45s)"]),
    ({"step": "20m"}, ["tick_interval: must be a multiple of step (1200s)",
                       "duration: must be at least one step (1200s)"]),
], ids=["step-past-duration", "duration-0", "tick-25s-step-10s", "tick-below-step",
        "tick-1m-step-45s", "both"])
def test_a_clock_the_loop_would_round_is_refused(tmp_path: Path, clock: dict[str, Any],
                                                 expected: list[str]) -> None:
    path = write_scenario(tmp_path, workload=[{**WAVE, "at": 0}], **clock)
    assert problems_of(path) == [f"{path}: {line}" for line in expected]
    # The model alone says so too: `scenario from-prometheus` checks a scenario with it.
    with pytest.raises(ValidationError):
        Scenario.model_validate(yaml.safe_load(path.read_text()))


@pytest.mark.parametrize("clock", [
    {"tick_interval": "10s"}, {"duration": "10s"}, {"tick_interval": "0.3s", "step": "0.1s"},
    {"duration": "95s"},
], ids=["tick-equals-step", "duration-one-step", "float-noise-is-whole", "duration-past-a-step"])
def test_an_unusual_but_whole_clock_loads(tmp_path: Path, clock: dict[str, Any]) -> None:
    path = write_scenario(tmp_path, workload=[{**WAVE, "at": 0}], **clock)
    assert load_scenario(path).config.warnings == ()


def test_a_wave_after_the_last_step_is_a_warning_and_kept(tmp_path: Path) -> None:
    """A scenario cut short to look at its start runs; it names the waves it leaves out."""
    path = write_scenario(tmp_path, duration="95s", workload=[
        WAVE, {**WAVE, "at": "90s"}, {**WAVE, "at": "15m"}])
    loaded: LoadedScenario = load_scenario(path)
    assert loaded.config.warnings == (
        f"{path}: workload[1].at: 90s is at or after the simulation's last step (90s), so the "
        "wave never runs",
        f"{path}: workload[2].at: 900s is at or after the simulation's last step (90s), so the "
        "wave never runs")
    assert len(loaded.arrivals) == 3


def test_trace_rows_after_the_last_step_are_one_warning(tmp_path: Path) -> None:
    rows = ["599,1,512Mi,60,batch", "600,1,512Mi,60,batch", "700,1,512Mi,,batch",
            "650,1,512Mi,60,batch"]
    scenario, trace = write_trace(tmp_path, "\n".join([HEADER, *rows]) + "\n")
    loaded = load_scenario(scenario)
    assert loaded.config.warnings == (
        f"{trace}: line 3: arrival_s: 600s is at or after the simulation's last step (600s), "
        "so the pod never runs; nor do 2 later rows",)
    assert len(loaded.arrivals) == 4


# --- 4. an ASG's nodes carry its node group's label --------------------------------------------

@pytest.mark.parametrize(("labels", "rule"), [
    ({}, "lacks customer: batch"),
    ({"customer": "web", "pool": "batch"}, "has customer: web, not customer: batch"),
], ids=["missing", "other-value"])
@pytest.mark.parametrize("where", ["inline", "file"])
def test_an_asg_without_its_groups_label_is_refused(tmp_path: Path, labels: dict[str, str],
                                                    rule: str, where: str) -> None:
    groups: Any = {"node_groups": [group_dict(name="web", label_value="web",
                                              cloud_provider_group_name="web-asg"),
                                   group_dict()]}
    if where == "file":
        (tmp_path / "nodegroups.yaml").write_text(yaml.safe_dump(groups))
        groups = "nodegroups.yaml"
    path = write_scenario(tmp_path, nodegroups=groups, asgs=[
        {"name": "web-asg", "min": 0, "max": 2, "desired": 0, "node_labels": {"customer": "web"}},
        {"name": "batch-asg", "min": 1, "max": 2, "desired": 1, "node_labels": labels}])
    assert problems_of(path) == [
        f"{path}: asgs[1].node_labels: {rule}, the label of node group 'batch', so the group "
        "never has a node"]


# --- 5. smaller rules --------------------------------------------------------------------------

def test_tolerations_take_the_operators_and_effects_kubernetes_admits(tmp_path: Path) -> None:
    bad = {**WAVE, "tolerations": [{"key": "x", "operator": "Exist", "effect": "Bogus"}]}
    path = write_scenario(tmp_path, workload=[bad])
    assert problems_of(path) == [
        f"{path}: workload[0].tolerations[0].operator: Input should be 'Exists' or 'Equal'",
        f"{path}: workload[0].tolerations[0].effect: Input should be '', 'NoSchedule', "
        "'PreferNoSchedule' or 'NoExecute'"]
    good = {**WAVE, "tolerations": [{"key": "x", "operator": "Exists", "effect": "NoExecute"},
                                    {"key": "y", "value": "1", "effect": "PreferNoSchedule"},
                                    {"operator": "Exists"}]}
    assert len(load_scenario(write_scenario(tmp_path, workload=[good])).arrivals) == 1


@pytest.mark.parametrize(("toleration", "rule"), [
    ({"operator": "Equal", "value": "x"},
     "operator must be Exists when key is empty (it tolerates every taint)"),
    ({"key": "x", "operator": "Exists", "value": "1"},
     "value must be empty when operator is Exists")])
def test_a_toleration_kubernetes_refuses_is_refused(tmp_path: Path, toleration: dict[str, str],
                                                   rule: str) -> None:
    path = write_scenario(tmp_path, workload=[{**WAVE, "tolerations": [toleration]}])
    assert problems_of(path) == [f"{path}: workload[0].tolerations[0]: {rule}"]


@pytest.mark.parametrize("nodegroups", [5, None, ["a.yaml"], {1: "x"}],
                         ids=["number", "null", "list", "mapping-with-a-number-key"])
def test_nodegroups_of_the_wrong_kind_is_one_line(tmp_path: Path, nodegroups: Any) -> None:
    path = write_scenario(tmp_path, nodegroups=nodegroups)
    assert problems_of(path) == [f"{path}: nodegroups: a path or a mapping of node groups"]


@pytest.mark.parametrize("column", ["arrival_s", "duration_s"])
def test_trace_numbers_take_no_underscores(tmp_path: Path, column: str) -> None:
    row = {"arrival_s": "10", "cpu": "1", "memory": "512Mi", "duration_s": "60",
           "node_group": "batch", column: "1_0"}
    scenario, trace = write_trace(tmp_path, f"{HEADER}\n{','.join(row.values())}\n")
    assert problems_of(scenario) == [
        f"{trace}: line 2: {column}: Input should be a valid number, got '1_0': no underscores "
        "in a CSV number"]


# --- the scheduler model's keys: scheduler.profile, asgs[].daemonsets, workload[].priority -----

def test_a_scenario_without_a_scheduler_block_runs_the_default_profile(tmp_path: Path) -> None:
    assert load_scenario(write_scenario(tmp_path)).scenario.scheduler.profile == "default"
    chosen = load_scenario(write_scenario(tmp_path, scheduler={"profile": "most-allocated"}))
    assert chosen.scenario.scheduler.profile == "most-allocated"


def test_scheduler_keys_are_checked_with_their_key_paths(tmp_path: Path) -> None:
    asg = {"name": "batch-asg", "min": 1, "max": 10, "desired": 1,
           "node_labels": {"customer": "batch"},
           "daemonsets": [{"name": "kube-proxy", "cpu": "100m", "memory": "128Mi"},
                          {"name": "kube-proxy", "cpu": "1", "memory": "1Gi"},
                          {"name": "Logs_Agent", "cpu": "bad", "memory": "1Gi"}]}
    problems = problems_of(write_scenario(
        tmp_path, scheduler={"profile": "spread"}, asgs=[asg],
        workload=[{**WAVE, "priority": 2_000_001_001}]))
    text = "\n".join(problems)
    assert "scheduler.profile: Input should be 'default', 'most-allocated' or 'first-fit'" \
        in text
    assert "asgs[0].daemonsets[2].name: String should match pattern" in text
    assert "asgs[0].daemonsets[2].cpu: malformed quantity 'bad'" in text
    assert "workload[0].priority: Input should be less than or equal to 2000001000" in text


def test_daemonsets_that_leave_no_room_or_repeat_a_name_are_refused(tmp_path: Path) -> None:
    """Their pods would never run on an m5.large (1900m CPU, 8 GiB less 512 MiB): refused."""
    asg = {"name": "batch-asg", "min": 1, "max": 10, "desired": 1,
           "node_labels": {"customer": "batch"},
           "daemonsets": [{"name": "a", "cpu": "1500m", "memory": "1Gi"},
                          {"name": "b", "cpu": "500m", "memory": "1Gi"}]}
    [problem] = problems_of(write_scenario(tmp_path, asgs=[asg]))
    assert problem.endswith("asgs[0]: daemonsets request 2000m CPU and 2147483648 bytes of "
                            "memory, more than a m5.large node offers (1900m, 8053063680 "
                            "bytes): their pods would never run")
    asg["daemonsets"] = [{"name": "a", "cpu": "1m", "memory": "1Mi"}] * 2
    [problem] = problems_of(write_scenario(tmp_path, asgs=[asg]))
    assert problem.endswith("asgs[0]: daemonsets: 'a' given more than once")
    asg["daemonsets"] = [{"name": "a", "cpu": "100m", "memory": "128Mi"}]
    loaded = load_scenario(write_scenario(tmp_path, asgs=[asg]))
    assert loaded.asgs[0].daemonset_requests == (100, 128 * 2**20)


@pytest.mark.parametrize("name", ["9" * 5000, "no-such-file.yaml", "."],
                         ids=["longer-than-a-file-name", "missing", "a-folder"])
def test_a_nodegroups_path_that_names_no_file_is_one_error(tmp_path: Path, name: str) -> None:
    """A name the file system refuses (ENAMETOOLONG) is no file either, not an OSError."""
    path = write_scenario(tmp_path, nodegroups=name)
    with pytest.raises(InputError) as raised:
        load_scenario(path)
    assert raised.value.problems == [
        f"{path}: nodegroups: {name!r} names no file (a path from the scenario's folder)"]


# --- issue 37: what real workloads say about placement ------------------------------------------

ANTI_AFFINITY = "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"


@pytest.mark.parametrize(("fields", "path", "rule"), [
    ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}}]}}},
     f"{ANTI_AFFINITY}.topologyKey", "Field required"),
    ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname",
         "labelSelector": {"matchExpresions": []}}]}}},
     f"{ANTI_AFFINITY}.labelSelector.matchExpresions", "Extra inputs are not permitted"),
    ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "host name"}]}}},
     f"{ANTI_AFFINITY}.topologyKey", "'host name' is not a valid label key"),
    ({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}}},
     "affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
     "Input should be greater than or equal to 1"),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In"}]}]}}}},
     "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
     "[0].matchExpressions[0]", "values: must be non-empty when operator is In"),
    ({"topology_spread_constraints": [{"maxSkew": 0, "topologyKey": "zone",
                                       "whenUnsatisfiable": "DoNotSchedule"}]},
     "topology_spread_constraints[0].maxSkew", "Input should be greater than or equal to 1"),
    ({"topology_spread_constraints": [{"maxSkew": 1, "topologyKey": "zone",
                                       "whenUnsatisfiable": "Never"}]},
     "topology_spread_constraints[0].whenUnsatisfiable",
     "Input should be 'DoNotSchedule' or 'ScheduleAnyway'"),
    ({"topology_spread_constraints": [{"maxSkew": 1, "topologyKey": "zone", "minDomains": 2,
                                       "whenUnsatisfiable": "ScheduleAnyway"}]},
     "topology_spread_constraints[0]",
     "minDomains: may be set only when whenUnsatisfiable is DoNotSchedule"),
    ({"ports": [{"containerPort": 80, "hostPort": 70000}]}, "ports[0].hostPort",
     "Input should be less than or equal to 65535"),
    ({"ports": [{"containerPort": 80, "protocol": "tcp"}]}, "ports[0].protocol",
     "Input should be 'TCP', 'UDP' or 'SCTP'"),
    ({"labels": {"tier": "-front"}}, "labels", "'-front' is not a valid label value"),
    ({"labels": {"simulator.kube-elevator.io/wave": "other"}}, "labels",
     "simulator.kube-elevator.io/wave is the simulator's own label"),
    ({"volume_zone": "us-west-2a"}, "volume_zone",
     "'us-west-2a' is the availability_zone of no ASG (us-east-1a): a pod whose volume is "
     "there could never run"),
], ids=["topology-key-missing", "selector-typo", "topology-key-invalid", "weight-zero",
        "in-without-values", "max-skew-zero", "when-unsatisfiable", "min-domains-soft",
        "host-port-range", "protocol-case", "label-value", "app-label", "zone-of-no-asg"])
def test_placement_keys_are_checked_as_kubernetes_checks_them(
        tmp_path: Path, fields: dict[str, Any], path: str, rule: str) -> None:
    """Issue 37: a wave's affinity, spreading, ports, labels and volume zone are Kubernetes'
    own shapes (camelCase, as copied from a pod template); a typo or a value the API server
    refuses is one line naming the file, the key path and the rule."""
    scenario = write_scenario(tmp_path, workload=[{**WAVE, **fields}])
    problems = problems_of(scenario)
    assert len(problems) == 1
    assert problems[0].startswith(f"{scenario}: workload[0].{path}: {rule}"), problems


def test_a_wave_with_placement_constraints_loads_in_kubernetes_shapes(tmp_path: Path) -> None:
    """The bundled example's waves carry every kind of constraint; they load as the pod
    template says them and go into the pod as the API holds them."""
    from kube_elevator.fakes.cluster import pod_body

    examples = Path(__file__).resolve().parents[2] / "deployments" / "examples"
    loaded = load_scenario(examples / "scenario-constraints.yaml")
    web = next(wave for wave in loaded.scenario.workload if wave.name == "web")
    assert web.constrained
    body = pod_body("web-0000", web, {}, 0.0)
    assert body["metadata"]["labels"] == {"tier": "frontend", "app": "web",
                                          "simulator.kube-elevator.io/wave": "web"}
    assert body["spec"]["affinity"]["podAntiAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "web"}},
            "topologyKey": "kubernetes.io/hostname"}]}
    assert body["spec"]["topologySpreadConstraints"] == [{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]
    ingress = next(wave for wave in loaded.scenario.workload if wave.name == "ingress")
    assert pod_body("ingress-0000", ingress, {}, 0.0)["spec"]["containers"][0]["ports"] == [
        {"containerPort": 8443, "hostPort": 8443}]
    db = next(wave for wave in loaded.scenario.workload if wave.name == "db-b")
    assert pod_body("db-b-0000", db, {}, 0.0)["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-b-0000"}}]


SHAPE = {"priority": 10, "labels": {"tier": "front"}, "affinity": {"podAntiAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "kubernetes.io/hostname"}]}}}


def test_trace_rows_take_the_shape_they_name(tmp_path: Path) -> None:
    """A trace's `shape` column names one of the scenario's `shapes`: its row arrives as a pod
    of that shape (a wave of one, named after the shape, on the row's node group); a row
    without a shape, and a trace without the column, are plain pods as before."""
    scenario, _ = write_trace(
        tmp_path, f"{HEADER},shape\n10,1,512Mi,60,batch,web\n20,1,512Mi,,batch,\n",
        shapes={"web": SHAPE})
    loaded = load_scenario(scenario)
    shaped, plain = loaded.arrivals
    assert isinstance(shaped, fake_scenarios.Wave) and isinstance(plain, fake_scenarios.TracePod)
    assert (shaped.name, shaped.count, shaped.at, shaped.duration, shaped.node_selector) == (
        "web", 1, 10.0, 60.0, {"customer": "batch"})
    assert shaped.priority == 10 and shaped.labels == {"tier": "front"}
    assert shaped.constrains_placement


@pytest.mark.parametrize(("shapes", "text", "problem"), [
    ({}, f"{HEADER},shape\n10,1,512Mi,60,batch,web\n",
     "{trace}: line 2: shape 'web' is not among the scenario's shapes (none)"),
    ({"web": SHAPE}, f"{HEADER},shape\n10,1,512Mi,60,batch,api\n",
     "{trace}: line 2: shape 'api' is not among the scenario's shapes (web)"),
    ({"web": {**SHAPE, "volume_zone": "eu-west-1a"}}, f"{HEADER}\n{ROW}\n",
     "{scenario}: shapes.web.volume_zone: 'eu-west-1a' is the availability_zone of no ASG "
     "(us-east-1a): a pod whose volume is there could never run"),
    ({"web": {**SHAPE, "priorty": 1}}, f"{HEADER}\n{ROW}\n",
     "{scenario}: shapes.web.priorty: Extra inputs are not permitted"),
], ids=["no-shapes", "unknown-shape", "zone-of-no-asg", "typo"])
def test_a_shape_that_is_missing_or_wrong_is_named(tmp_path: Path, shapes: dict[str, Any],
                                                   text: str, problem: str) -> None:
    scenario, trace = write_trace(tmp_path, text, shapes=shapes)
    assert problems_of(scenario) == [problem.format(trace=trace, scenario=scenario)]
