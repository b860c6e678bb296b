"""`elevator pods`: the pod autoscalers on the command line.

`pods plan` answers "what would one cycle do?" from files (a `kubectl get -o json` List and a
metrics snapshot) without touching anything; `pods run` runs the `pod-autoscale` flow against
a cluster and Prometheus.  `register(app)` adds the group to the `elevator` app; flows.cli is
imported inside it, so importing this module never imports the CLI (no cycle).
"""

# No `from __future__ import annotations`: typer reads the commands' annotations at runtime,
# and the option types are local to `register`.

import contextlib
import logging
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from kube_elevator.tasks.adapters.prometheus import DEFAULT_RATE_WINDOW, MetricsSource, StaticMetrics
from kube_elevator.tasks.core.documents import load_file
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.selectors import parse_label_selector
from kube_elevator.tasks.core.workload import SCALABLE_KINDS, TargetScale, unsupported_scale_kind

# The pod autoscalers' pydantic models (pods_files, wpa.crd, memory) load where a `pods` command
# uses them: every other command imports this module to register it (issue 40).
if TYPE_CHECKING:
    from kube_elevator.flows.pod_cycle import PodAutoscalerSource
    from kube_elevator.tasks.pod_autoscalers.wpa.decide import Decision


class ClusterFiles:
    """The objects of `kubectl get wpa,memoryautoscalers,deployments,pods -A -o json` files,
    answering what a cycle reads as the API server would (`PodAutoscalerSource`)."""

    def __init__(self, objects: Iterable[Mapping[str, Any]],
                 places: Sequence[str] | None = None) -> None:
        objects = list(objects)
        # Each object and where it was read (`<file>: items[3]`), for `pods validate`'s lines.
        self.located: list[tuple[str, Mapping[str, Any]]] = list(zip(places or (), objects,
                                                                     strict=False))
        self.custom: dict[str, list[dict[str, Any]]] = defaultdict(list)  # by plural
        self.workloads: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        self.pods: dict[str, list[dict[str, Any]]] = defaultdict(list)
        from kube_elevator.tasks.pod_autoscalers.memory import KIND as MEMORY_KIND
        from kube_elevator.tasks.pod_autoscalers.memory import PLURAL as MEMORY_PLURAL
        from kube_elevator.tasks.pod_autoscalers.wpa.crd import KIND as WPA_KIND
        from kube_elevator.tasks.pod_autoscalers.wpa.crd import MONITOR_PLURAL
        from kube_elevator.tasks.pod_autoscalers.wpa.crd import PLURAL as WPA_PLURAL

        plurals = {WPA_KIND: WPA_PLURAL, MEMORY_KIND: MEMORY_PLURAL,
                   "DatadogMonitor": MONITOR_PLURAL}
        for obj in objects:
            kind = obj.get("kind")
            metadata = obj.get("metadata") or {}
            namespace = str(metadata.get("namespace") or "default")
            if kind in plurals:
                self.custom[plurals[str(kind)]].append(dict(obj))
            elif kind in SCALABLE_KINDS:
                self.workloads[(namespace, str(kind), str(metadata.get("name", "")))] = obj
            elif kind == "Pod":
                self.pods[namespace].append(dict(obj))

    def list_custom_objects(self, group: str, version: str, plural: str,
                            namespace: str | None) -> list[dict[str, Any]]:
        return [obj for obj in self.custom.get(plural, ())
                if namespace is None or _namespace(obj) == namespace]

    def read_custom_object(self, group: str, version: str, plural: str, namespace: str,
                           name: str) -> dict[str, Any] | None:
        return next((obj for obj in self.custom.get(plural, ())
                     if _namespace(obj) == namespace
                     and (obj.get("metadata") or {}).get("name") == name), None)

    def read_scale(self, kind: str, namespace: str, name: str) -> TargetScale | None:
        """The target's `/scale` as the API server derives it from the workload."""
        from kube_elevator.tasks.pod_autoscalers.wpa.crd import LabelSelector

        if kind not in SCALABLE_KINDS:
            raise InputError([unsupported_scale_kind(kind)])
        workload = self.workloads.get((namespace, kind, name))
        if workload is None:
            return None
        spec = workload.get("spec") or {}
        status = workload.get("status") or {}
        selector = LabelSelector.model_validate(spec.get("selector") or {})
        replicas = spec.get("replicas")
        return TargetScale(kind, name, namespace, 1 if replicas is None else int(replicas),
                           int(status.get("replicas") or 0), selector.to_query())

    def list_pod_objects(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        """A namespace's pods that `labelSelector=...` would list."""
        chosen = parse_label_selector(label_selector)
        return [pod for pod in self.pods.get(namespace, ())
                if chosen.matches((pod.get("metadata") or {}).get("labels"))]

    @classmethod
    def load(cls, paths: Sequence[Path]) -> "ClusterFiles":
        from kube_elevator.flows.cli.pods_files import object_problems

        objects: list[Mapping[str, Any]] = []
        places: list[str] = []
        problems = []
        for path in paths:
            try:
                document = load_file(path)  # JSON is YAML: one reader, with its limits
            except InputError as error:
                problems += error.problems
                continue
            list_kind = document.get("kind") if isinstance(document, dict) else None
            # A PodList's items may leave their kind out (the API's own lists do).
            item_kind = list_kind[:-4] if isinstance(list_kind, str) \
                and list_kind.endswith("List") and list_kind != "List" else None
            if isinstance(document, dict) and "items" in document:
                # `"items": null`: a namespace without any, in `kubectl cluster-info dump`
                items = document["items"] if document["items"] is not None else []
                if not isinstance(items, list):
                    problems.append(f"{path}: items: must be a list of objects")
                    continue
            elif isinstance(document, dict) and isinstance(document.get("kind"), str) \
                    and not document["kind"].endswith("List"):
                items = [document]
            else:
                problems.append(f"{path}: expected a Kubernetes List (`kubectl get ... -o json`)")
                continue
            for index, item in enumerate(items):
                where = f"{path}: items[{index}]"
                if isinstance(item, dict) and item_kind and "kind" not in item:
                    item = {**item, "kind": item_kind}
                if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
                    problems.append(f"{where}: not an object with a kind")
                    continue
                found = object_problems(item, f"{where} ({item['kind']})")
                problems += found
                if not found:
                    objects.append(item)
                    places.append(where)
        if problems:
            raise InputError(problems)
        return cls(objects, places)


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


# `pods plan` shows its reasons in the table; the cycle's log lines would repeat them.
_QUIET = logging.getLogger("kube_elevator.pods_plan")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def plan_autoscalers(cluster: ClusterFiles, metrics: MetricsSource, now: float) -> list["Decision"]:
    """What one cycle would decide for every autoscaler in the files: the flow's own cycle,
    reading the files and acting on nothing."""
    from kube_elevator.flows.pod_cycle import cycle
    from kube_elevator.tasks.core.step import run_plain

    return [result.decision for result in cycle(run_plain, cluster, metrics, now, None,
                                                logger=_QUIET)]


def shared_targets(source: "PodAutoscalerSource", namespace: str | None = None) -> list[str]:
    """The warnings for workloads that two autoscalers target (issue 42), from the objects
    `source` lists: a CRD not installed, or a list that fails, is the cycle's to report."""
    from kube_elevator.flows.pod_cycle import list_autoscalers
    from kube_elevator.tasks.core.step import run_plain
    from kube_elevator.tasks.pod_autoscalers import memory
    from kube_elevator.tasks.pod_autoscalers.shared_targets import shared_target_warnings
    from kube_elevator.tasks.pod_autoscalers.wpa import crd

    found: list[dict[str, Any]] = []
    for kind in (crd, memory):
        try:
            listed = run_plain(list_autoscalers, source, kind.GROUP, kind.VERSION,
                               kind.PLURAL, namespace)
        except Exception:  # the cycle itself says why it cannot list
            continue
        found += listed or []
    return shared_target_warnings(found)


def _number(value: int | float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def plans_table(decisions: Sequence["Decision"]) -> Table:
    table = Table(title="What one pod-autoscaler cycle would do", show_lines=True,
                  caption="value: the winning metric in its own unit (cores, bytes, ...); "
                          "MemoryAutoscaler: % of limits")
    for column in ("autoscaler", "target", "current", "ready", "value", "proposal", "desired"):
        table.add_column(column, overflow="fold", no_wrap=column != "autoscaler")
    table.add_column("reason", overflow="fold", ratio=1)
    for decision in decisions:
        conditions = escape(" ".join(
            f"{c.get('type')}={c.get('status')}" + (f"({c.get('reason')})" if c.get("reason")
                                                    else "")
            for c in decision.conditions()))
        desired = _number(decision.desired_replicas)
        if decision.rescale and decision.desired_replicas != decision.current_replicas:
            desired = f"[bold]{desired}[/bold]"
        # Reasons quote Go maps (`cpu{map[app:web]}`): never rich markup.
        reason = escape(decision.reason)
        if not decision.valid:
            reason = f"[red]{reason}[/red]"
        table.add_row(
            escape(f"{decision.kind}\n{decision.namespace}/{decision.name}"),
            escape(f"{decision.target_kind}/{decision.target_name}"),
            _number(decision.current_replicas),
            _number(decision.ready_replicas), _number(decision.value),
            _number(decision.proposal), desired,
            f"{reason}\n[dim]{conditions}[/dim]")
    return table


def failed_autoscalers(results: Sequence[dict[str, Any]]) -> list[str]:
    """A line for each autoscaler whose cycle failed (`pods run --once` then exits 1)."""
    from kube_elevator.flows.cli.common import one_line

    return [f"{result.get('kind')} {result.get('namespace')}/{result.get('name')}: failed: "
            f"{one_line(str(result.get('error') or ''))}"
            for result in results if result.get("error")]


def register(app: typer.Typer) -> typer.Typer:
    """Add the `pods` command group (plan, run) to the `elevator` app; the group, for
    `pods_validate` to add its command."""
    from kube_elevator.flows.cli.common import (
        DeprecatedOutputOption,
        FormatOption,
        OutputFormat,
        chosen_format,
        console,
        errors,
        parse_now,
        print_warning_lines,
        reports_input_errors,
        run_cycle,
        run_until_stopped,
    )
    from kube_elevator.flows.cli.liveness import (
        PODS_HEALTH_ADDRESS,
        Liveness,
        run_ticks_alive,
        with_health_options,
    )

    pods = typer.Typer(help="Pod autoscalers: WatermarkPodAutoscaler and MemoryAutoscaler.",
                       no_args_is_help=True)

    @pods.command("plan")
    @reports_input_errors
    def plan(
        cluster: Annotated[list[Path], typer.Option(
            help="`kubectl get wpa,memoryautoscalers,deployments,pods -A -o json` output: the "
                 "autoscalers, their targets and pods (repeatable).")],
        metrics: Annotated[Path, typer.Option(
            help='JSON: {"external": {"<metricName>{<k>=<v>,...}": value}, '
                 '"pods": {"<namespace>/<pod>": {"cpu": cores, "memory": bytes}}}.')],
        now: Annotated[str | None, typer.Option(
            help="The cycle's time: ISO 8601 or Unix seconds (default: now).")] = None,
        output_format: FormatOption = OutputFormat.table,
        output: DeprecatedOutputOption = None,
    ) -> None:
        """What one cycle of the pod autoscalers would do, and why, touching nothing."""
        output_format = chosen_format(output_format, output)
        moment = parse_now(now)
        files = ClusterFiles.load(cluster)
        print_warning_lines(shared_targets(files))
        source = StaticMetrics.load(metrics)
        decisions = plan_autoscalers(files, source, moment)
        if output_format is OutputFormat.json:
            document = {"autoscalers": [decision.to_json() for decision in decisions]}
            sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
            sys.stdout.flush()
        else:
            console.print(plans_table(decisions))

    @pods.command("run")
    @reports_input_errors
    @with_health_options(PODS_HEALTH_ADDRESS, "cycle")
    def run(
        prometheus: Annotated[str, typer.Option(
            help="Prometheus base URL, e.g. http://prometheus:9090.")],
        kubeconfig: Annotated[Path | None, typer.Option(
            help="kubeconfig file (default: in-cluster config, else ~/.kube/config).")] = None,
        once: Annotated[bool, typer.Option("--once", help="One cycle, then exit.")] = False,
        interval: Annotated[str, typer.Option(help="Time between cycles (Go duration).")] =
            "60s",
        dry_run: Annotated[bool, typer.Option(
            "--dry-run", help="Decide and report; neither scale nor write status.")] = False,
        namespace: Annotated[str | None, typer.Option(
            help="Only the autoscalers of this namespace (default: all).")] = None,
        rate_window: Annotated[str, typer.Option(
            help="PromQL range of the CPU rate.")] = DEFAULT_RATE_WINDOW,
        metrics_port: Annotated[int, typer.Option(
            help="Serve the wpa_controller_* metrics on this port (0: off).")] = 8080,
        metrics_host: Annotated[str, typer.Option(
            help="Address the metrics are served on (0.0.0.0: every interface).")] =
            "127.0.0.1",
        output_format: FormatOption = OutputFormat.table,
        output: DeprecatedOutputOption = None,
        *, liveness: Liveness,
    ) -> None:
        """Run the pod-autoscale flow against a cluster, as Prefect flow runs.

        Without --once, the health endpoint serves /health-check (500 when no cycle finished
        within --max-inactivity or none succeeded within --max-failing-time), /ready (once a
        cycle finished) and /metrics (the wpa_controller_* metrics and the elevator_* ones).
        """
        output_format = chosen_format(output_format, output)
        from kube_elevator.tasks.core.duration import parse_go_duration

        try:
            period = parse_go_duration(interval)
        except ValueError:
            raise InputError([f"--interval: {interval!r} is not a Go duration (like 60s)"]) \
                from None
        problems = []
        if period <= 0:
            problems.append(f"--interval: {interval!r} must be positive")
        if not prometheus.startswith(("http://", "https://")):
            problems.append(f"--prometheus: {prometheus!r} must be an http(s) URL")
        try:
            if parse_go_duration(rate_window) <= 0:
                problems.append(f"--rate-window: {rate_window!r} must be positive")
        except ValueError:
            problems.append(f"--rate-window: {rate_window!r} is not a duration (like 1m)")
        if problems:
            raise InputError(problems)
        if kubeconfig is not None:  # at the edge, as `elevator run` does: exit 2, one line
            from kube_elevator.tasks.adapters.kube import check_kubeconfig

            check_kubeconfig(kubeconfig)
        from kube_elevator.tasks.core.collector import gc_paused

        with gc_paused():  # module loading, Prefect's among them (tasks/core/collector.py)
            from kube_elevator.flows.pod_autoscale import controller_metrics, pod_autoscale
            from kube_elevator.flows.run_state import run_here

        if metrics_port:
            from prometheus_client import start_http_server

            try:
                start_http_server(metrics_port, addr=metrics_host,
                                  registry=controller_metrics().registry)
            except OSError as error:
                raise InputError([f"--metrics-host/--metrics-port: {metrics_host}:"
                                  f"{metrics_port}: {error.strerror or error}"]) from None
        from kube_elevator.tasks.adapters.prefect_server import use_local_server

        # without PREFECT_API_URL: the shared local server for --once, the loop's own else;
        # started (or found) now, or one line why not
        use_local_server("shared" if once else "own")
        from kube_elevator.tasks.adapters.kube import KubeClient

        # at start, once: two autoscalers on one workload would fight over its replicas; a
        # cluster out of reach is the first cycle's error to report
        with contextlib.suppress(Exception):
            print_warning_lines(shared_targets(KubeClient.from_config(kubeconfig), namespace))

        def cycle() -> list[dict[str, Any]]:
            outcome = run_here(lambda: pod_autoscale(
                prometheus_url=prometheus, dry_run=dry_run, namespace=namespace,
                rate_window=rate_window, kubeconfig=str(kubeconfig) if kubeconfig else None,
                return_state=True))
            results = outcome.results()
            for note in outcome.notes:  # what the cycle could not see: never silence
                errors.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False,
                             markup=True, soft_wrap=True)
            return results

        def line(result: dict[str, Any]) -> str:
            return (f"{result['kind']} {result['namespace']}/{result['name']}: "
                    f"{result['current_replicas']} → {result['desired_replicas']} "
                    f"{result['reason']}")

        if once:
            run_until_stopped(cycle, line, output_format, once, period, failed_autoscalers)
        else:
            from prometheus_client import generate_latest

            run_ticks_alive(
                lambda: not run_cycle(cycle, line, output_format, False, failed_autoscalers), period,
                liveness, loop_name="cycle", ready_once_ticked=True, command="pods run",
                metrics=lambda: generate_latest(controller_metrics().registry).decode())

    app.add_typer(pods, name="pods")
    return pods
