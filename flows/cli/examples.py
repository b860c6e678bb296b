"""An example at the foot of every command's `--help`: what a newcomer types first.

One table, command path to lines, so the examples read together and a test
(`tests/e2e/test_cli_help.py`) walks the command tree for a command without one. The shipped
files in deployments/examples/ make the file-based examples run as written from a checkout.
"""

from __future__ import annotations

from collections.abc import Sequence

import typer
from typer.models import DefaultPlaceholder

EXAMPLES_FOLDER = "deployments/examples"

EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (f"elevator validate {EXAMPLES_FOLDER}/nodegroups.yaml",
         f"elevator simulate {EXAMPLES_FOLDER}/scenario.yaml --fast"),
    "validate": (f"elevator validate {EXAMPLES_FOLDER}/nodegroups.yaml",),
    "plan": (f"elevator plan --nodegroups {EXAMPLES_FOLDER}/nodegroups.yaml --cluster "
             f"{EXAMPLES_FOLDER}/cluster.json --asg {EXAMPLES_FOLDER}/asgs.json",),
    "run": ("elevator run --nodegroups nodegroups.yaml --kubeconfig ~/.kube/config --dry-run "
            "--once",),
    "fake-cluster": ("elevator fake-cluster --kubeconfig-out fake-kubeconfig.yaml",
                     f"elevator fake-cluster --scenario {EXAMPLES_FOLDER}/scenario.yaml"),
    "simulate": (f"elevator simulate {EXAMPLES_FOLDER}/scenario.yaml --plot run.svg",
                 f"elevator simulate {EXAMPLES_FOLDER}/scenario-trace.yaml --fast --profile "
                 "most-allocated --format json"),
    "tune": (f"elevator tune {EXAMPLES_FOLDER}/scenario.yaml --trials 20 --output "
             "tuned-nodegroups.yaml --plot front.png",),
    "serve": ("elevator serve --nodegroups nodegroups.yaml --kubeconfig ~/.kube/config "
              "--interval 60s",),
    "watch": ("elevator watch --nodegroups nodegroups.yaml --kubeconfig ~/.kube/config",),
    "load-watcher": ("elevator load-watcher --prometheus http://prometheus:9090 --interval 1m",),
    "scheduler-extender": ("elevator scheduler-extender --watcher-url http://load-watcher:2020 "
                           "--policy target-load-packing",),
    "scenario": ("elevator scenario from-prometheus --url http://prometheus:9090 --start "
                 "2026-11-20T00:00:00Z --end 2026-11-27T00:00:00Z --nodegroups "
                 f"{EXAMPLES_FOLDER}/nodegroups.yaml --output last-week",),
    "scenario from-prometheus": (
        "elevator scenario from-prometheus --url http://prometheus:9090 --start "
        "2026-11-20T00:00:00Z --end 2026-11-27T00:00:00Z --nodegroups "
        f"{EXAMPLES_FOLDER}/nodegroups.yaml --output last-week",),
    "scenario from-kubectl": (
        f"elevator scenario from-kubectl --snapshot {EXAMPLES_FOLDER}/cluster.json "
        f"--nodegroups {EXAMPLES_FOLDER}/nodegroups.yaml --output today",),
    "pods": (f"elevator pods plan --cluster {EXAMPLES_FOLDER}/pod-autoscalers.yaml --metrics "
             f"{EXAMPLES_FOLDER}/pod-metrics.json",),
    "pods plan": (f"elevator pods plan --cluster {EXAMPLES_FOLDER}/pod-autoscalers.yaml "
                  f"--metrics {EXAMPLES_FOLDER}/pod-metrics.json",),
    "pods validate": (f"elevator pods validate {EXAMPLES_FOLDER}/pod-autoscalers.yaml",),
    "pods run": ("elevator pods run --prometheus http://prometheus:9090 --kubeconfig "
                 "~/.kube/config --dry-run --once",),
    "prefect-server": ("elevator prefect-server status", "elevator prefect-server stop"),
    "prefect-server status": ("elevator prefect-server status",),
    "prefect-server stop": ("elevator prefect-server stop",),
}


def epilog(lines: Sequence[str]) -> str:
    """`--help`'s foot: `Example:` and the command lines, a paragraph each (rich's help
    joins the lines of one paragraph)."""
    heading = "Example:" if len(lines) == 1 else "Examples:"
    return "\n\n".join([heading, *(f"  {line}" for line in lines)])


def _unset(epilog: object) -> bool:
    """No epilog given: None, or typer's placeholder for an argument left out."""
    return epilog is None or isinstance(epilog, DefaultPlaceholder)


def add_examples(app: typer.Typer, path: str = "") -> None:
    """Put each command's example under its `--help` (commands and groups, all the way down)
    unless it has an epilog of its own."""
    if path in EXAMPLES and _unset(app.info.epilog):
        app.info.epilog = epilog(EXAMPLES[path])
    for command in app.registered_commands:
        name = command.name or (command.callback.__name__.replace("_", "-")
                                if command.callback else "")
        full = f"{path} {name}".strip()
        if full in EXAMPLES and _unset(command.epilog):
            command.epilog = epilog(EXAMPLES[full])
    for group in app.registered_groups:
        if group.typer_instance is not None:
            name = group.name or group.typer_instance.info.name or ""
            full = f"{path} {name}".strip()
            if full in EXAMPLES and _unset(group.epilog):
                group.epilog = epilog(EXAMPLES[full])
            add_examples(group.typer_instance, full)
