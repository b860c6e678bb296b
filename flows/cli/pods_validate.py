"""`elevator pods validate FILE`: a pod-autoscaler file checked without a cluster (issue 42), as
`elevator validate` checks a node-group file.

Refused, each problem a line naming the file, the item, the key path and the rule (exit 2):
what `pods plan` refuses (the types the API server would enforce, `pods_files`), and what the
controller would find invalid (the WPA's defaults and validation, wpa.md §2; the
MemoryAutoscaler's; a target of a kind without `/scale`), which a live cycle only reports in the
autoscaler's status, cycle after cycle. Warned about, in the words `pods plan` and `pods run` use:
two autoscalers on one workload; and a file with no autoscaler in it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from kube_elevator.flows.cli.common import (
    FormatOption,
    OutputFormat,
    console,
    print_warning_lines,
    reports_input_errors,
)
from kube_elevator.flows.cli.pods import ClusterFiles, shared_targets
from kube_elevator.tasks.core.documents import load_file
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.words import counted
from kube_elevator.tasks.core.workload import SCALABLE_KINDS, unsupported_scale_kind


@dataclass(frozen=True)
class CheckedAutoscaler:
    """One valid autoscaler of the file, as the controller would read it (defaults applied)."""

    kind: str
    namespace: str
    name: str
    target_kind: str
    target_name: str
    min_replicas: int
    max_replicas: int
    scales_on: str  # its metrics and watermarks, or its memory target

    def line(self) -> str:
        return (f"{self.kind} {self.namespace}/{self.name} → {self.target_kind} "
                f"{self.target_name}, replicas {self.min_replicas}..{self.max_replicas}, "
                f"{self.scales_on}")

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name,
                "target": {"kind": self.target_kind, "name": self.target_name},
                "min_replicas": self.min_replicas, "max_replicas": self.max_replicas,
                "scales_on": self.scales_on}


def _namespace(obj: Mapping[str, Any]) -> str:
    """As the API server files an object without one (and `shared_targets` names it)."""
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _checked(obj: Mapping[str, Any]) -> tuple[CheckedAutoscaler | None, list[str]]:
    """The autoscaler as the controller reads it, or its problems (key path: rule)."""
    # The pod autoscalers' models load with a pods command only (every command registers this).
    from kube_elevator.tasks.pod_autoscalers.memory import parse_memory_autoscaler
    from kube_elevator.tasks.pod_autoscalers.wpa.crd import KIND as WPA_KIND
    from kube_elevator.tasks.pod_autoscalers.wpa.crd import format_milli
    from kube_elevator.tasks.pod_autoscalers.wpa.validate import parse_watermark

    kind = str(obj.get("kind"))
    if kind == WPA_KIND:
        wpa = parse_watermark(obj)
        if wpa.rules is None:
            return None, list(wpa.problems)
        rules = wpa.rules
        scales_on = ", ".join(f"{metric.display_name} {format_milli(metric.low_milli)}.."
                              f"{format_milli(metric.high_milli)}" for metric in rules.metrics)
        scales_on += f" ({rules.algorithm})"
        minimum, maximum, target = rules.min_replicas, rules.max_replicas, rules.target
        name = wpa.name
    else:
        memory = parse_memory_autoscaler(obj)
        if memory.rules is None:
            return None, list(memory.problems)
        memory_rules = memory.rules
        scales_on = f"memory at {memory_rules.target_utilization_percentage}% of limits"
        minimum, maximum = memory_rules.min_replicas, memory_rules.max_replicas
        target, name = memory_rules.target, memory.name
    if target.kind not in SCALABLE_KINDS:  # what reading its /scale would refuse
        return None, [f"spec.{unsupported_scale_kind(target.kind)}"]
    return CheckedAutoscaler(kind, _namespace(obj), name, target.kind, target.name, minimum,
                             maximum, scales_on), []


def check_autoscaler_file(path: Path) -> tuple[list[CheckedAutoscaler], list[str]]:
    """Every autoscaler of the file and the warnings; InputError with every problem."""
    from kube_elevator.tasks.pod_autoscalers.memory import KIND as MEMORY_KIND
    from kube_elevator.tasks.pod_autoscalers.wpa.crd import KIND as WPA_KIND

    document = load_file(path)
    if isinstance(document, dict) and "node_groups" in document:  # the other `validate`'s file
        raise InputError([f"{path}: this looks like a node-group file (it has `node_groups`), "
                          "not a pod-autoscaler file: check it with `elevator validate`"])
    files = ClusterFiles.load([path])
    checked: list[CheckedAutoscaler] = []
    problems: list[str] = []
    for where, obj in files.located:
        if obj.get("kind") not in (WPA_KIND, MEMORY_KIND):
            continue
        autoscaler, found = _checked(obj)
        problems += [f"{where} ({obj.get('kind')}): {problem}" for problem in found]
        if autoscaler is not None:
            checked.append(autoscaler)
    warnings = shared_targets(files)
    if not checked and not problems:
        warnings.append(f"{path}: no {WPA_KIND} or {MEMORY_KIND} in it: nothing for `pods plan` "
                        "or `pods run` to scale")
    if problems:
        raise InputError(problems, warnings)
    return checked, warnings


def register(pods: typer.Typer) -> None:
    """Add `validate` to the `pods` command group."""

    @pods.command("validate")
    @reports_input_errors
    def validate(
        file: Annotated[Path, typer.Argument(
            help="Pod-autoscaler file: WatermarkPodAutoscalers and MemoryAutoscalers (a "
                 "manifest, or a List as `kubectl get -o yaml` saves it; YAML or JSON).")],
        output_format: FormatOption = OutputFormat.table,
    ) -> None:
        """Check a pod-autoscaler file without a cluster: a line per autoscaler when valid,
        every problem when not."""
        checked, warnings = check_autoscaler_file(file)
        print_warning_lines(warnings)
        if output_format is OutputFormat.json:
            document = {"file": str(file), "valid": True, "warnings": warnings,
                        "autoscalers": [autoscaler.to_json() for autoscaler in checked]}
            sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
            sys.stdout.flush()
            return
        for autoscaler in checked:
            console.print(autoscaler.line(), highlight=False, markup=False, soft_wrap=True)
        console.print(f"{file}: {counted(len(checked), 'autoscaler')}, valid", highlight=False,
                      markup=False, soft_wrap=True)
