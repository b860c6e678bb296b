"""Scenario files for the simulator: the node groups, their ASGs, the clock, and the workload.

Validated at the edge like configs: every problem names the file, the key path and the rule.
"""

from __future__ import annotations

import csv
import io
import math
import random
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from kube_elevator.fakes.scenario_constraints import Affinity, PodShape
from kube_elevator.tasks.core.documents import as_text, load_file, names_a_file, read_bytes
from kube_elevator.tasks.core.duration import parse_go_duration
from kube_elevator.tasks.core.errors import InputError, join_location
from kube_elevator.tasks.core.instance_types import INSTANCE_TYPES
from kube_elevator.tasks.core.quantity import cpu_milli, memory_bytes
from kube_elevator.tasks.node_group_file import LoadedConfig, load_node_groups, parse_node_groups
from kube_elevator.tasks.scheduler.profiles import DEFAULT_PROFILE, ProfileName

# What the kubelet and system daemons keep for themselves (allocatable = capacity - reserve).
RESERVED_CPU_MILLI = 100
RESERVED_MEMORY_BYTES = 512 * 2**20


def _seconds(value: Any) -> Any:
    """Durations as Go strings (`90s`, `1h`) or plain seconds (a YAML number, not true)."""
    if isinstance(value, bool):
        raise ValueError(f"{str(value).lower()} is not a duration (like 90s, or seconds)")
    if isinstance(value, str):
        return parse_go_duration(value)
    return value


# Sizes a simulation may take (issue 14: `duration: .inf` or `step: 1ns` must not hang it).
MAX_SECONDS = 366 * 24 * 3600.0  # any duration: a year
MIN_STEP_SECONDS = 0.001
MAX_STEPS = 2_000_000  # duration / step
MAX_PODS = 1_000_000  # every wave's count and every trace row, together
MAX_NODES_PER_ASG = 10_000

Seconds = Annotated[float, BeforeValidator(_seconds), Field(ge=0, le=MAX_SECONDS)]


def _quantity_check(value: Any, parse: Any) -> Any:
    text = str(value)
    parse(text)  # raises ValueError: malformed quantity
    return text


CpuQuantity = Annotated[str, BeforeValidator(lambda v: _quantity_check(v, cpu_milli))]
MemoryQuantity = Annotated[str, BeforeValidator(lambda v: _quantity_check(v, memory_bytes))]


def _csv_number(value: Any) -> Any:
    """A trace's number as a spreadsheet writes it: Python's `float("1_0")` is 10, a CSV's not."""
    if isinstance(value, str) and "_" in value:
        raise ValueError(f"Input should be a valid number, got {value!r}: no underscores in a "
                         "CSV number")
    return value


CsvSeconds = Annotated[float, BeforeValidator(_csv_number), Field(ge=0, le=MAX_SECONDS)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class DaemonSetSpec(_Strict):
    """A DaemonSet whose pod runs on every node of the ASG from the moment it joins: its
    requests take room the workload cannot use (Escalator counts no DaemonSet pod, §5.3).

    Example:
        >>> ke.DaemonSetSpec(name="kube-proxy", cpu="100m", memory="128Mi").cpu
        '100m'
    """

    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL)
    cpu: CpuQuantity
    memory: MemoryQuantity


class AsgSpec(_Strict):
    """A simulated Auto Scaling Group and the Nodes its instances become.

    Example:
        >>> asg = ke.AsgSpec(name="batch-asg", min=1, max=16, desired=2,
        ...                  node_labels={"customer": "batch"}, boot_delay="90s")
        >>> asg.boot_delay
        90.0
    """

    name: str = Field(min_length=1)
    min: StrictInt = Field(ge=0, le=MAX_NODES_PER_ASG)
    max: StrictInt = Field(ge=0, le=MAX_NODES_PER_ASG)
    desired: StrictInt = Field(ge=0, le=MAX_NODES_PER_ASG)
    instance_type: str = "m5.large"
    node_labels: dict[str, str] = {}
    boot_delay: Seconds = 60.0
    availability_zone: str = "us-east-1a"
    daemonsets: list[DaemonSetSpec] = []

    @field_validator("instance_type")
    @classmethod
    def known_instance_type(cls, value: str) -> str:
        if value not in INSTANCE_TYPES:
            raise ValueError(f"unknown instance type {value!r}; known: "
                             f"{', '.join(sorted(INSTANCE_TYPES))}")
        return value

    @model_validator(mode="after")
    def desired_within_bounds(self) -> AsgSpec:
        if not self.min <= self.desired <= self.max:
            raise ValueError(f"desired {self.desired} must be within min {self.min} and "
                             f"max {self.max}")
        return self

    @model_validator(mode="after")
    def daemonsets_fit_a_node(self) -> AsgSpec:
        names = Counter(daemonset.name for daemonset in self.daemonsets)
        repeated = sorted(name for name, count in names.items() if count > 1)
        if repeated:
            raise ValueError(f"daemonsets: {', '.join(map(repr, repeated))} given more than "
                             "once")
        cpu, memory = self.daemonset_requests
        cpu_room, memory_room = self.allocatable
        if cpu > cpu_room or memory > memory_room:
            raise ValueError(f"daemonsets request {cpu}m CPU and {memory} bytes of memory, "
                             f"more than a {self.instance_type} node offers ({cpu_room}m, "
                             f"{memory_room} bytes): their pods would never run")
        return self

    @property
    def allocatable(self) -> tuple[int, int]:
        """(milli-CPU, bytes) a node of this group offers to pods."""
        vcpu, gib = INSTANCE_TYPES[self.instance_type]
        return vcpu * 1000 - RESERVED_CPU_MILLI, gib * 2**30 - RESERVED_MEMORY_BYTES

    @property
    def daemonset_requests(self) -> tuple[int, int]:
        """(milli-CPU, bytes) the DaemonSet pods take on each node of this group."""
        return (sum(cpu_milli(d.cpu) for d in self.daemonsets),
                sum(memory_bytes(d.memory) for d in self.daemonsets))


class Wave(PodShape):
    """`count` pods arriving at `at`; without `duration` they run until the end (a service).

    Example:
        >>> wave = ke.Wave(name="burst", at="2m", count=40, cpu="500m", memory="256Mi", duration="8m")
        >>> wave.at, wave.duration
        (120.0, 480.0)
    """

    at: Seconds
    count: StrictInt = Field(ge=1, le=MAX_PODS)
    cpu: CpuQuantity
    memory: MemoryQuantity
    duration: Seconds | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    name: str = ""
    # Requests besides cpu and memory, e.g. {"nvidia.com/gpu": "1"}.
    extended: dict[str, MemoryQuantity] = Field(default_factory=dict)


class TracePod(_Strict):
    """One pod of a trace: when it arrives, what it requests, how long it runs.

    Example:
        >>> pod = ke.TracePod(arrival_s=30, cpu="250m", memory="512Mi", duration_s=600,
        ...                   node_group="batch")
        >>> pod.duration_s
        600.0
    """

    arrival_s: CsvSeconds
    cpu: CpuQuantity
    memory: MemoryQuantity
    duration_s: CsvSeconds | None = None
    node_group: str
    # One of the scenario's `shapes`: the pod's labels, affinity, spreading, host ports, ...
    # (a trace without the column is one of plain pods).
    shape: str | None = Field(default=None, min_length=1)


def _path_or_mapping(value: Any) -> Any:
    """One rule for `nodegroups`, not one line per member of the union (`nodegroups.str: ...`)."""
    if isinstance(value, str) or (isinstance(value, dict)
                                  and all(isinstance(key, str) for key in value)):
        return value
    raise ValueError("a path or a mapping of node groups")


class SchedulerSpec(_Strict):
    """How the simulated kube-scheduler places pods (tasks/scheduler): `default` is
    kube-scheduler v1.35's default profile (spreading, LeastAllocated), `most-allocated` the same
    packing nodes (MostAllocated), `first-fit` the oldest node that fits (earlier simulations).

    Example:
        >>> ke.SchedulerSpec(profile="most-allocated").profile
        'most-allocated'
    """

    profile: ProfileName = DEFAULT_PROFILE


class Scenario(_Strict):
    """A whole simulation; `nodegroups` is a path (relative to the scenario) or inline.

    Example:
        >>> loaded = ke.load_scenario("deployments/examples/scenario.yaml")
        >>> loaded.scenario.tick_interval, loaded.scenario.duration
        (60.0, 1800.0)
    """

    nodegroups: Annotated[str | dict[str, Any], BeforeValidator(_path_or_mapping)]
    asgs: list[AsgSpec] = Field(min_length=1)
    step: Seconds = 10.0  # before the two checked against it
    tick_interval: Seconds = 60.0
    duration: Seconds
    start: float = Field(default=1_800_000_000.0, ge=0, le=253_402_300_799 - MAX_SECONDS)
    seed: StrictInt = Field(default=1, ge=0, le=2**63 - 1)
    workload: list[Wave] = []
    trace: str | None = None
    # What the trace's rows name in their `shape` column (`from-prometheus --shapes`).
    shapes: dict[Annotated[str, Field(max_length=50, pattern=DNS_LABEL)], PodShape] = {}
    # Load-aware placement (Trimaran): "first-fit" is a plain scheduler; the other two bind each
    # pod to the feasible node the scheduler extender scores highest (ties: the oldest).
    placement: Literal["first-fit", "target-load-packing", "load-variation-risk-balancing"] = \
        "first-fit"
    target_utilization: StrictInt = Field(default=40, gt=0, le=100)
    # The scheduler's profile; its random tie-break is seeded from `seed`.
    scheduler: SchedulerSpec = SchedulerSpec()
    # Pods use a share of their requests: drawn per pod in [mean - spread, mean + spread].
    usage_mean: float = Field(default=0.6, ge=0, le=100)
    usage_spread: float = Field(default=0.3, ge=0, le=100)

    @field_validator("tick_interval", "step")
    @classmethod
    def positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be positive")
        return value

    # The loop in flows/simulation.py runs whole steps and ticks every `round(tick / step)`
    # steps: `step: 20m` with `duration: 10m` ran no step, `tick_interval: 25s` with 10s steps
    # ticked every 20s. Field validators, so `Scenario.model_validate` alone (the importer's
    # check) finds them too.
    @field_validator("tick_interval")
    @classmethod
    def whole_steps_per_tick(cls, value: float, info: ValidationInfo) -> float:
        step = info.data.get("step")
        if step is None:  # step has its own error
            return value
        steps = value / step
        # Float noise is not a remainder: 0.3s / 0.1s is 2.9999999999999996.
        if not math.isclose(steps, max(1, round(steps)), rel_tol=1e-9):
            raise ValueError(f"must be a multiple of step ({_shown_seconds(step)})")
        return value

    @field_validator("duration")
    @classmethod
    def at_least_one_step(cls, value: float, info: ValidationInfo) -> float:
        step = info.data.get("step")
        if step is not None and value < step:
            raise ValueError(f"must be at least one step ({_shown_seconds(step)})")
        return value

    @model_validator(mode="after")
    def bounded_size(self) -> Scenario:
        if self.step < MIN_STEP_SECONDS:
            raise ValueError(f"step must be at least {MIN_STEP_SECONDS:g}s")
        if self.duration / self.step > MAX_STEPS:
            raise ValueError(f"duration / step is {self.duration / self.step:,.0f} steps; at "
                             f"most {MAX_STEPS:,}: lengthen the step or shorten the duration")
        pods = sum(wave.count for wave in self.workload)
        if pods > MAX_PODS:
            raise ValueError(f"the workload has {pods:,} pods; at most {MAX_PODS:,}")
        return self

    @property
    def last_step_seconds(self) -> float:
        """The offset of the last step `flows/simulation.py` runs (whole steps only)."""
        return math.floor(self.duration / self.step + 1e-9) * self.step

    def late_waves(self) -> list[tuple[str, str]]:
        """(key path, note) for waves whose pods would never run: a scenario cut short to look
        at its start is fine, but it should say what it leaves out."""
        end = self.last_step_seconds
        return [(f"workload[{index}].at",
                 f"{_shown_seconds(wave.at)} is at or after the simulation's last step "
                 f"({_shown_seconds(end)}), so the wave never runs")
                for index, wave in enumerate(self.workload) if wave.at >= end]


def _shown_seconds(seconds: float) -> str:
    return f"{seconds:.15g}s"


class LoadedScenario:
    """A validated scenario with its node-group config and every pod arrival expanded.

    Example:
        >>> loaded = ke.load_scenario("deployments/examples/scenario.yaml")
        >>> [group.name for group in loaded.config.node_groups], len(loaded.arrivals)
        (['batch', 'services'], 3)
    """

    def __init__(self, scenario: Scenario, config: LoadedConfig, source: str,
                 pods: list[TracePod | Wave]) -> None:
        self.scenario = scenario
        self.config = config
        self.source = source
        self.arrivals = pods

    @property
    def asgs(self) -> list[AsgSpec]:
        return self.scenario.asgs


def scenario_problems(error: ValidationError, source: str, prefix: str = "") -> list[str]:
    """One `<source>: <key path>: <rule>` line per pydantic error, as `load_scenario` says them
    (the importer checks its files before writing them with the same words)."""
    problems = []
    for detail in error.errors():
        path = prefix + "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                                for p in detail["loc"]).lstrip(".")
        message = detail["msg"].removeprefix("Value error, ")
        problems.append(join_location(source, path, message))
    return problems


MAX_TRACE_PROBLEMS = 20  # the first bad rows say what is wrong; the rest are counted


def _refuse_past_the_cap(text: str, path: Path, wave_pods: int) -> None:
    """Count the rows before a model is built for any: a row's `TracePod` takes over a
    kilobyte, so a trace past `MAX_PODS` took 1.4 GB before it was refused."""
    room = MAX_PODS - wave_pods
    if text.count("\n") + text.count("\r") <= room:  # fewer lines than room: no exact count
        return
    reader = csv.reader(io.StringIO(text, newline=""))
    next(reader, None)  # the header
    rows = 0
    for row in reader:
        if row:  # DictReader skips blank lines; so does the count
            rows += 1
            if rows > room:
                raise InputError([f"{path}: line {reader.line_num}: row {rows:,} passes the cap "
                                  f"of {MAX_PODS:,} pods, the workload's waves ({wave_pods:,} "
                                  "pods) and the trace's rows together"])


def _read_trace(path: Path, source: str, config: LoadedConfig,
                scenario: Scenario) -> tuple[list[TracePod], list[str]]:
    """The trace's pods, and a warning for rows that arrive too late to run."""
    groups = {group.name for group in config.node_groups}
    end = scenario.last_step_seconds
    pods, problems, bad_rows = [], [], 0
    late: list[tuple[int, float]] = []  # (line, arrival_s)
    # A spreadsheet's "CSV UTF-8" starts with a byte order mark, which `read_bytes` drops.
    text = as_text(read_bytes(path, f"{source}: trace {path}"), str(path))
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        _refuse_past_the_cap(text, path, sum(wave.count for wave in scenario.workload))
        header = reader.fieldnames or []
        repeated = sorted(name for name, count in Counter(header).items() if count > 1)
        if repeated:
            raise InputError([f"{path}: line 1: column {', '.join(map(repr, repeated))} "
                              "appears more than once in the header"])
        for row in reader:
            # The physical line where the row ended: blank lines and quoted line breaks count.
            line = reader.line_num
            where = f"{path}: line {line}"
            if None in row:  # DictReader puts fields past the header under None
                problems.append(f"{where}: {len(header) + len(row[None])} fields, but the "
                                f"header names {len(header)}")
                bad_rows += 1
                continue
            try:
                pod = TracePod.model_validate({k: v for k, v in row.items()
                                               if v not in ("", None)})
            except ValidationError as error:
                problems += scenario_problems(error, where)
                bad_rows += 1
                continue
            if pod.node_group not in groups:
                problems.append(f"{where}: node_group {pod.node_group!r} is not in the "
                                "node-group config")
                bad_rows += 1
            if pod.shape is not None and pod.shape not in scenario.shapes:
                problems.append(f"{where}: shape {pod.shape!r} is not among the scenario's "
                                f"shapes ({', '.join(sorted(scenario.shapes)) or 'none'})")
                bad_rows += 1
            if pod.arrival_s >= end:
                late.append((line, pod.arrival_s))
            pods.append(pod)
    except csv.Error as error:
        raise InputError([f"{path}: not a CSV trace: {error}"]) from None
    if problems:
        shown = problems[:MAX_TRACE_PROBLEMS]
        if len(problems) > len(shown):
            shown.append(f"{path}: {bad_rows:,} bad rows in all; the first are above")
        raise InputError(shown)
    warnings = []
    if late:
        line, arrival = late[0]
        more = f"; nor do {len(late) - 1:,} later rows" if len(late) > 1 else ""
        warnings.append(f"{path}: line {line}: arrival_s: {_shown_seconds(arrival)} is at or "
                        f"after the simulation's last step ({_shown_seconds(end)}), so the "
                        f"pod never runs{more}")
    return pods, warnings


def load_scenario(path: str | Path) -> LoadedScenario:
    """Read and validate a scenario file (YAML), its node-group config and its trace.

    Example:
        >>> loaded = ke.load_scenario("deployments/examples/scenario.yaml")
        >>> [asg.name for asg in loaded.scenario.asgs]
        ['batch-asg', 'services-asg']
    """
    source = str(path)
    document = load_file(path, "YAML")
    if not isinstance(document, dict):
        raise InputError([join_location(source, "", "a scenario must be a mapping")])
    try:
        scenario = Scenario.model_validate(document)
    except ValidationError as error:
        raise InputError(scenario_problems(error, source)) from None
    base = Path(path).parent
    if isinstance(scenario.nodegroups, str):
        config_path = base / scenario.nodegroups
        if not scenario.nodegroups.strip() or not names_a_file(config_path):
            raise InputError([join_location(source, "nodegroups", (
                f"{scenario.nodegroups!r} names no file (a path from the scenario's folder)"))])
        config = load_node_groups(config_path)
    else:
        config = parse_node_groups(scenario.nodegroups, f"{source}: nodegroups")
    given = Counter(asg.name for asg in scenario.asgs)
    if len(given) < len(scenario.asgs):
        raise InputError([join_location(source, "asgs", f"ASG {name!r} is given more than once")
                          for name, count in sorted(given.items()) if count > 1])
    missing = [group.cloud_provider_group_name for group in config.node_groups
               if group.cloud_provider_group_name not in given]
    if missing:
        raise InputError([join_location(source, "asgs", f"no ASG named {name!r}, which the "
                                                        "node-group config uses")
                          for name in missing])
    unlabelled = _unlabelled_asgs(scenario, config) + _zones_of_no_asg(scenario)
    if unlabelled:
        raise InputError([join_location(source, key, rule) for key, rule in unlabelled])
    arrivals: list[TracePod | Wave] = list(scenario.workload)
    # Arrivals too late to run are kept (a scenario cut short to look at its start is fine),
    # and named among the config's warnings, as unknown keys are.
    warnings = [join_location(source, key, note) for key, note in scenario.late_waves()]
    if scenario.trace:
        trace_pods, trace_warnings = _read_trace(base / scenario.trace, source, config, scenario)
        arrivals += _shaped(trace_pods, scenario, config)
        warnings += trace_warnings
    if not arrivals:
        raise InputError([join_location(source, "workload", "no workload: give waves or a "
                                                            "trace")])
    if warnings:
        config = replace(config, warnings=config.warnings + tuple(warnings))
    return LoadedScenario(scenario, config, source, arrivals)


def _shaped(pods: list[TracePod], scenario: Scenario, config: LoadedConfig
            ) -> list[TracePod | Wave]:
    """Trace rows, a row that names a shape as a wave of one pod of that shape (named after
    it, on its row's node group), so both worlds create it as they create a wave's."""
    if not scenario.shapes:
        return list(pods)
    groups = {group.name: group for group in config.node_groups}
    arrivals: list[TracePod | Wave] = []
    for pod in pods:
        if pod.shape is None:
            arrivals.append(pod)
            continue
        group = groups[pod.node_group]
        # validated already, row and shape: constructed, not validated again per row
        arrivals.append(Wave.model_construct(
            **dict(scenario.shapes[pod.shape]), at=pod.arrival_s, count=1, cpu=pod.cpu,
            memory=pod.memory, duration=pod.duration_s, name=pod.shape,
            node_selector={group.label_key: group.label_value}, extended={}))
    return arrivals


def _unlabelled_asgs(scenario: Scenario, config: LoadedConfig) -> list[tuple[str, str]]:
    """(key path, rule) for each ASG whose nodes lack its node group's label: the group selects
    its nodes by `label_key: label_value`, so without it the group never has a node."""
    index_of = {asg.name: index for index, asg in enumerate(scenario.asgs)}
    problems = []
    for group in config.node_groups:
        index = index_of[group.cloud_provider_group_name]
        labels = scenario.asgs[index].node_labels
        wanted = f"{group.label_key}: {group.label_value}"
        if group.label_key not in labels:
            found = "lacks"
        elif labels[group.label_key] != group.label_value:
            found = f"has {group.label_key}: {labels[group.label_key]}, not"
        else:
            continue
        problems.append((f"asgs[{index}].node_labels",
                         f"{found} {wanted}, the label of node group {group.name!r}, so the "
                         "group never has a node"))
    return problems


def _zones_of_no_asg(scenario: Scenario) -> list[tuple[str, str]]:
    """(key path, rule) for each wave whose volume is in a zone no ASG launches nodes in:
    VolumeZone keeps its pods off every node, so they would never run."""
    zones = sorted({asg.availability_zone for asg in scenario.asgs})
    shapes: list[tuple[str, PodShape]] = [(f"workload[{index}]", wave)
                                          for index, wave in enumerate(scenario.workload)]
    shapes += [(f"shapes.{name}", shape) for name, shape in scenario.shapes.items()]
    return [(f"{path}.volume_zone",
             f"{shape.volume_zone!r} is the availability_zone of no ASG ({', '.join(zones)}): "
             "a pod whose volume is there could never run")
            for path, shape in shapes
            if shape.volume_zone is not None and shape.volume_zone not in zones]


def with_profile(loaded: LoadedScenario, profile: str | None) -> LoadedScenario:
    """The same scenario under another scheduler profile (None: as it says)."""
    if profile is None or profile == loaded.scenario.scheduler.profile:
        return loaded
    scenario = loaded.scenario.model_copy(update={
        "scheduler": SchedulerSpec.model_validate({"profile": profile})})
    return LoadedScenario(scenario, loaded.config, loaded.source, loaded.arrivals)


def without_placement_constraints(loaded: LoadedScenario) -> LoadedScenario | None:
    """The same scenario with what its waves say about other pods, ports and volumes left out
    (pod affinity and anti-affinity, spreading, host ports, volume zones), to tell what the
    constraints cost; node affinity stays, as it says which groups the pods are in. None when
    no wave says any of it."""
    if not any(isinstance(a, Wave) and a.constrains_placement for a in loaded.arrivals):
        return None
    arrivals: list[TracePod | Wave] = [
        a.model_copy(update={
            "affinity": None if a.affinity is None or a.affinity.node_affinity is None
            else Affinity.model_validate({"nodeAffinity": a.affinity.node_affinity}),
            "topology_spread_constraints": [], "ports": [], "volume_zone": None})
        if isinstance(a, Wave) and a.constrains_placement else a for a in loaded.arrivals]
    return LoadedScenario(loaded.scenario, loaded.config, loaded.source, arrivals)


def perturbed(loaded: LoadedScenario, seed: int, jitter: float = 0.2) -> LoadedScenario:
    """The same scenario with its workload redrawn around the original (`seed` 0: unchanged).

    Each wave's arrival moves by up to one tick, its pod count and duration by up to ±`jitter`;
    each trace pod's arrival by up to a tick and its duration by ±`jitter`. Tuning searches on
    some seeds and is judged on others, so a setting is not fitted to one draw of the workload.
    """
    if seed == 0:
        return loaded
    rng = random.Random(seed)
    tick = loaded.scenario.tick_interval
    arrivals: list[TracePod | Wave] = []
    for arrival in loaded.arrivals:
        scale = 1 + rng.uniform(-jitter, jitter)
        if isinstance(arrival, Wave):
            arrivals.append(arrival.model_copy(update={
                "at": max(0.0, arrival.at + rng.uniform(-tick, tick)),
                "count": max(1, round(arrival.count * (1 + rng.uniform(-jitter, jitter)))),
                "duration": None if arrival.duration is None else arrival.duration * scale}))
        else:
            arrivals.append(arrival.model_copy(update={
                "arrival_s": max(0.0, arrival.arrival_s + rng.uniform(-tick, tick)),
                "duration_s": None if arrival.duration_s is None
                else arrival.duration_s * scale}))
    return LoadedScenario(loaded.scenario, loaded.config, loaded.source, arrivals)
