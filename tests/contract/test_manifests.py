"""The Kustomize base and overlays of deployments/kubernetes (issue 28, and issue 26's manifests),
as `kubectl kustomize` renders them: the RBAC is exactly what test_least_privilege.py proves,
every Deployment is hardened, budgeted, probed on the contract's paths and pinned, every flag
given to `elevator` is one its --help lists, and checkov fails no check of theirs or of the
Dockerfile (while failing a weakened copy, so the scan is seen to bite)."""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.deadlines import scaled
from kube_elevator.tasks.node_group_file import parse_node_groups
from tests import recording
from tests.contract.test_least_privilege import NODE_RBAC, POD_RBAC
from tests.tools import kubectl_missing

ROOT = recording.ROOT
KUBERNETES = ROOT / "deployments" / "kubernetes"
OVERLAYS = ("serve", "pod-autoscalers", "load-aware", "worker")
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
# The grants each ServiceAccount of the overlays is proven to need, by the file that proves them.
PROVEN = {("kube-system", "kube-elevator"): NODE_RBAC,
          ("kube-system", "kube-elevator-pod-autoscaler"): POD_RBAC}
Document = dict[str, Any]


def kustomize_problem() -> str | None:
    """Why the overlays cannot be rendered here: kubectl (its built-in kustomize) is missing."""
    return kubectl_missing()


def kustomize_is_v2() -> bool:
    """kubectl before 1.21 (Debian bookworm's 1.20, what .ci/run installs on a machine without
    one) carries kustomize v2.0.3, which prints no version line of its own."""
    version = subprocess.run(["kubectl", "version", "--client"], capture_output=True, text=True,
                             timeout=scaled(60), check=False).stdout
    return "Kustomize Version: v" not in version


def spelled_for_kustomize_v2(folder: Path) -> Path:
    """A copy of deployments/kubernetes whose overlays name the base under `bases:`: kustomize
    v2.0.3 loads a directory from there only, v4 on from `resources:` (the shipped spelling,
    `bases:` being deprecated). Nothing else changes; the two render the same objects but the
    ConfigMap name's hash suffix, which each version computes its own way."""
    copied = folder / "kubernetes"
    shutil.copytree(KUBERNETES, copied)
    for overlay in OVERLAYS:
        kustomization = copied / "overlays" / overlay / "kustomization.yaml"
        text = kustomization.read_text()
        spelled = text.replace("resources:\n  - ../../base\n",
                               "bases:\n  - ../../base\nresources:\n", 1)
        assert spelled != text, f"{overlay}: the base is not the first of its resources"
        kustomization.write_text(spelled)
    return copied


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`kubectl kustomize` of the base and of every overlay, each written to a file."""
    problem = kustomize_problem()
    if problem:
        pytest.skip(problem)
    folder = tmp_path_factory.mktemp("rendered")
    tree = spelled_for_kustomize_v2(folder) if kustomize_is_v2() else KUBERNETES
    files = {}
    for name, source in [("base", tree / "base"), *((o, tree / "overlays" / o) for o in OVERLAYS)]:
        done = subprocess.run(["kubectl", "kustomize", str(source)], capture_output=True,
                              text=True, timeout=scaled(120), check=False)
        assert done.returncode == 0, f"{name}: {done.stderr}"
        files[name] = folder / f"{name}.yaml"
        files[name].write_text(done.stdout)
    return files


def documents(path: Path) -> list[Document]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def of_kind(docs: list[Document], kind: str) -> list[Document]:
    return [doc for doc in docs if doc["kind"] == kind]


def deployments(rendered: dict[str, Path]) -> Iterator[tuple[str, Document]]:
    for overlay in OVERLAYS:
        for doc in of_kind(documents(rendered[overlay]), "Deployment"):
            yield overlay, doc


def rules_bound_to(docs: list[Document], account: tuple[str, str], folder: Path
                   ) -> list[recording.Rule]:
    """The rules the bindings among `docs` give one ServiceAccount, read by the same code as the
    least-privilege test's (recording.rbac_rules)."""
    bindings = [doc for doc in docs if doc["kind"] in ("RoleBinding", "ClusterRoleBinding")
                and any((subject.get("namespace", doc["metadata"].get("namespace")),
                         subject["name"]) == account
                        for subject in doc.get("subjects", [])
                        if subject["kind"] == "ServiceAccount")]
    roles = {(binding["roleRef"]["kind"], binding["roleRef"]["name"]) for binding in bindings}
    bound = [doc for doc in docs if (doc["kind"], doc["metadata"]["name"]) in roles]
    path = folder / f"{account[0]}-{account[1]}.yaml"
    path.write_text(yaml.safe_dump_all([*bound, *bindings]))
    return sorted(recording.rbac_rules(path), key=repr) if bound else []


def test_every_overlay_renders_the_base_and_its_workloads(rendered: dict[str, Path]) -> None:
    base = {(doc["kind"], doc["metadata"]["name"]) for doc in documents(rendered["base"])}
    assert {kind for kind, _ in base} == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                          "Role", "RoleBinding", "CustomResourceDefinition"}
    for overlay in OVERLAYS:
        docs = documents(rendered[overlay])
        assert base <= {(doc["kind"], doc["metadata"]["name"]) for doc in docs}, overlay
        assert of_kind(docs, "Deployment"), overlay
        for doc in docs:
            if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding",
                                   "CustomResourceDefinition"):
                assert doc["metadata"]["namespace"] == "kube-system", (overlay, doc["kind"])


def test_the_rendered_rbac_is_what_the_least_privilege_test_proves(
        rendered: dict[str, Path]) -> None:
    proven = sorted(recording.rbac_rules(NODE_RBAC) + recording.rbac_rules(POD_RBAC), key=repr)
    assert sorted(recording.rbac_rules(rendered["base"]), key=repr) == proven
    for overlay in OVERLAYS:  # an overlay adds no grant of its own
        assert sorted(recording.rbac_rules(rendered[overlay]), key=repr) == proven, overlay


def test_each_deployment_runs_as_an_account_bound_to_exactly_its_proven_grants(
        rendered: dict[str, Path], tmp_path: Path) -> None:
    accounts = set()
    for overlay, deployment in deployments(rendered):
        pod = deployment["spec"]["template"]["spec"]
        account = (deployment["metadata"]["namespace"], pod["serviceAccountName"])
        accounts.add(account)
        bound = rules_bound_to(documents(rendered[overlay]), account, tmp_path)
        if account in PROVEN:
            assert bound == sorted(recording.rbac_rules(PROVEN[account]), key=repr), account
            assert pod["automountServiceAccountToken"] is True
        else:  # the load-aware services never call the API server: no grant, no token
            assert bound == [], account
            assert pod["automountServiceAccountToken"] is False, account
            (service_account,) = [doc for doc in of_kind(documents(rendered[overlay]),
                                                         "ServiceAccount")
                                  if doc["metadata"]["name"] == account[1]]
            assert service_account["automountServiceAccountToken"] is False
    assert set(PROVEN) <= accounts


def selects(selector: Document, labels: dict[str, str]) -> bool:
    return bool(selector["matchLabels"]) and selector["matchLabels"].items() <= labels.items()


def test_every_deployment_is_hardened_limited_budgeted_fenced_and_pinned(
        rendered: dict[str, Path]) -> None:
    images = set()
    for overlay, deployment in deployments(rendered):
        docs = documents(rendered[overlay])
        name = deployment["metadata"]["name"]
        template = deployment["spec"]["template"]
        labels, pod = template["metadata"]["labels"], template["spec"]
        assert selects(deployment["spec"]["selector"], labels), name
        assert any(selects(budget["spec"]["selector"], labels)
                   for budget in of_kind(docs, "PodDisruptionBudget")), f"{name}: no budget"
        assert any(selects(policy["spec"]["podSelector"], labels)
                   for policy in of_kind(docs, "NetworkPolicy")), f"{name}: no NetworkPolicy"
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] >= 10000
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        volumes = {volume["name"]: volume for volume in pod.get("volumes", [])}
        for container in pod["containers"]:
            where = f"{name}/{container['name']}"
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["capabilities"] == {"drop": ["ALL"]}, where
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
            for bound in ("requests", "limits"):
                assert set(container["resources"][bound]) == {"cpu", "memory"}, (where, bound)
            # What the process writes goes to an emptyDir; the rest of the filesystem is read-only.
            writable = {mount["mountPath"] for mount in container.get("volumeMounts", [])
                        if not mount.get("readOnly")
                        and "emptyDir" in volumes[mount["name"]]}
            environment = {v["name"]: v.get("value") for v in container.get("env", [])}
            for variable in ("HOME", "PREFECT_HOME"):
                if variable in environment:
                    assert any(environment[variable].startswith(path) for path in writable), (
                        where, variable)
            images.add(container["image"])
    (image,) = images  # every overlay runs the same pinned build
    assert re.fullmatch(r"[\w./-]+(:[\w.-]+|@sha256:[0-9a-f]{64})", image)
    assert not image.endswith(":latest")


def probe_port(container: Document, probe: Document) -> int:
    port = (probe.get("httpGet") or probe["tcpSocket"])["port"]
    if isinstance(port, int):
        return port
    (number,) = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    return int(number)


def test_escalator_s_role_runs_two_leader_elected_replicas_probed_on_the_contract_paths(
        rendered: dict[str, Path]) -> None:
    """docs/contracts: liveness GET /health-check :8085, readiness GET /ready :8085, two
    replicas with --leader-elect, a budget, and Prometheus scraping 8085."""
    docs = documents(rendered["serve"])
    (deployment,) = of_kind(docs, "Deployment")
    template = deployment["spec"]["template"]
    (container,) = template["spec"]["containers"]
    arguments = container["args"]
    assert arguments[0] == "serve" and "--leader-elect" in arguments
    assert arguments[arguments.index("--health-address") + 1] == "0.0.0.0:8085"
    assert deployment["spec"]["replicas"] == 2
    liveness, readiness = container["livenessProbe"], container["readinessProbe"]
    assert (liveness["httpGet"]["path"], probe_port(container, liveness)) == ("/health-check",
                                                                              8085)
    assert (readiness["httpGet"]["path"], probe_port(container, readiness)) == ("/ready", 8085)
    assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert template["metadata"]["annotations"]["prometheus.io/port"] == "8085"
    (budget,) = of_kind(docs, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    # The node-group file it reads is a valid Escalator file, mounted where --nodegroups says.
    mounted = arguments[arguments.index("--nodegroups") + 1]
    (mount,) = [m for m in container["volumeMounts"] if mounted.startswith(m["mountPath"] + "/")]
    (volume,) = [v for v in template["spec"]["volumes"] if v["name"] == mount["name"]]
    (config,) = [doc for doc in of_kind(docs, "ConfigMap")
                 if doc["metadata"]["name"] == volume["configMap"]["name"]]
    content = yaml.safe_load(config["data"][Path(mounted).name])
    assert parse_node_groups(content, "nodegroups.yaml").node_groups


def test_every_long_lived_command_is_probed_on_its_own_health_address(
        rendered: dict[str, Path]) -> None:
    """Every `elevator` container serves /health-check and /ready on --health-address (issue 34
    gave the endpoint to `pods run`, the load watcher and the extender): each passes it on the
    pod IP, at a port that is none of the pod's other ports, and its liveness and readiness
    probes ask those paths there."""
    probed = {}
    for _, deployment in deployments(rendered):
        containers = deployment["spec"]["template"]["spec"]["containers"]
        for container in containers:
            if container.get("command", ["elevator"])[0] != "elevator":
                continue
            arguments = container["args"]
            host, _, port = arguments[arguments.index("--health-address") + 1].rpartition(":")
            assert host == "0.0.0.0", arguments
            others = [p["containerPort"] for c in containers for p in c.get("ports", [])
                      if c is not container or p["containerPort"] != int(port)]
            assert int(port) not in others, (container["name"], others)
            liveness, readiness = container["livenessProbe"], container["readinessProbe"]
            assert (liveness["httpGet"]["path"], probe_port(container, liveness)) == (
                "/health-check", int(port)), container["name"]
            assert (readiness["httpGet"]["path"], probe_port(container, readiness)) == (
                "/ready", int(port)), container["name"]
            command = " ".join(itertools.takewhile(lambda a: not a.startswith("-"), arguments))
            probed[command] = int(port)
    assert probed == {"serve": 8085, "watch": 8085, "pods run": 8086, "load-watcher": 8087,
                      "scheduler-extender": 8088}


def test_the_autoscalers_are_system_cluster_critical_and_single_writers_are_never_doubled(
        rendered: dict[str, Path]) -> None:
    """Escalator and the Cluster Autoscaler run at system-cluster-critical: the process that
    makes room must not be evicted for room. A process without leader election runs one
    replica, replaced rather than surged."""
    for overlay, deployment in deployments(rendered):
        pod = deployment["spec"]["template"]["spec"]
        if overlay in ("serve", "worker"):
            assert pod["priorityClassName"] == "system-cluster-critical", overlay
        arguments = [a for c in pod["containers"] for a in c.get("args", [])]
        if overlay in ("worker", "pod-autoscalers"):
            assert deployment["spec"]["replicas"] == 1, overlay
            assert deployment["spec"]["strategy"]["type"] == "Recreate", overlay
            assert "--leader-elect" not in arguments


def test_kube_scheduler_s_configuration_calls_the_extender_s_service(
        rendered: dict[str, Path]) -> None:
    docs = documents(rendered["load-aware"])
    services = {f"{s['metadata']['name']}.{s['metadata']['namespace']}.svc":
                {p["port"] for p in s["spec"]["ports"]} for s in of_kind(docs, "Service")}
    scheduler = yaml.safe_load((KUBERNETES / "scheduler-extender.yaml").read_text())
    (extender,) = scheduler["extenders"]
    host, port = re.fullmatch(r"http://([^:/]+):(\d+)", extender["urlPrefix"]).groups()  # type: ignore[union-attr]
    assert int(port) in services[host]
    (extender_deployment,) = [d for d in of_kind(docs, "Deployment")
                              if d["spec"]["template"]["spec"]["containers"][0]["args"][0]
                              == "scheduler-extender"]
    arguments = extender_deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    watcher = re.fullmatch(r"http://([^:/]+):(\d+)",
                           arguments[arguments.index("--watcher-url") + 1])
    assert watcher is not None and int(watcher.group(2)) in services[watcher.group(1)]


# --- the flags the manifests pass ---------------------------------------------------------------


def command_lines(rendered: dict[str, Path]) -> list[tuple[str, list[str]]]:
    """(program, argv) of every container: the image's entrypoint is `elevator`."""
    found = []
    for _, deployment in deployments(rendered):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            command = container.get("command", ["elevator"])
            found.append((command[0], [*command[1:], *container.get("args", [])]))
    return found


def help_text(program: str, words: list[str]) -> str:
    done = subprocess.run([str(Path(sys.executable).parent / program), *words, "--help"],
                          capture_output=True, text=True, timeout=scaled(120), check=False,
                          env={**os.environ, "COLUMNS": "250", "TERMINAL_WIDTH": "250",
                               "NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.e2e  # a process per command's --help (about 10 s)
def test_every_flag_the_manifests_pass_is_in_the_command_s_help(
        rendered: dict[str, Path]) -> None:
    """Until issue 26's `--health-address` and `--leader-elect` reach `elevator serve`, this
    fails on them: the manifests are written to the contract, not to the code of the day."""
    missing = []
    lines = command_lines(rendered)
    assert {program for program, _ in lines} == {"elevator", "prefect"}
    for program, argv in lines:
        words = list(itertools.takewhile(lambda a: not a.startswith("-"), argv))
        flags = {a.split("=")[0] for a in argv if a.startswith("--")}
        listed = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", help_text(program, words)))
        missing += [f"{program} {' '.join(words)} {flag}" for flag in sorted(flags - listed)]
    assert missing == []


# --- checkov ------------------------------------------------------------------------------------


def weakened(deployment: Document) -> Document:
    """The serve Deployment with its checkov skips dropped and its hardening undone."""
    changed = copy.deepcopy(deployment)
    changed["metadata"]["name"] = "canary"
    changed["metadata"]["annotations"] = {}
    container = changed["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"]["readOnlyRootFilesystem"] = False
    del container["resources"]["limits"]
    return changed


def checkov_results(folder: Path) -> list[Document]:
    done = subprocess.run([str(CHECKOV), "--directory", str(folder), "--framework", "kubernetes",
                           "dockerfile", "--output", "json", "--skip-download"],
                          capture_output=True, text=True, timeout=scaled(600), check=False, cwd=folder)
    assert done.stdout.strip(), done.stderr[-3000:]
    reports = json.loads(done.stdout)
    return reports if isinstance(reports, list) else [reports]


@pytest.mark.e2e  # checkov's run (about 15 s)
def test_checkov_fails_no_check_of_the_manifests_and_the_dockerfile(
        rendered: dict[str, Path], tmp_path: Path) -> None:
    if not CHECKOV.exists():
        pytest.skip("checkov's venv is missing: make .venv-checkov/.installed (make test does)")
    for overlay in OVERLAYS:
        shutil.copy(rendered[overlay], tmp_path / f"{overlay}.yaml")
    shutil.copy(ROOT / "Dockerfile", tmp_path / "Dockerfile")
    canary = tmp_path / "canary"
    canary.mkdir()
    (serve,) = of_kind(documents(rendered["serve"]), "Deployment")
    (canary / "canary.yaml").write_text(yaml.safe_dump(weakened(serve)))
    (canary / "Dockerfile").write_text('FROM python:3.11-slim-bookworm\nENTRYPOINT ["elevator"]\n')

    results = {report["check_type"]: report["results"] for report in checkov_results(tmp_path)}
    assert set(results) == {"kubernetes", "dockerfile"}
    failed = sorted((check["file_path"].lstrip("/"), check["check_id"])
                    for report in results.values() for check in report["failed_checks"])
    # The scan bites: the weakened copies fail, and nothing else does.
    assert {("canary/canary.yaml", "CKV_K8S_22"), ("canary/canary.yaml", "CKV_K8S_11"),
            ("canary/Dockerfile", "CKV_DOCKER_3")} <= set(failed)
    assert [f for f in failed if not f[0].startswith("canary/")] == []
    # Every shipped resource was scanned, and every skip says why next to the resource.
    passed = {check["resource"] for report in results.values()
              for check in report["passed_checks"]}
    for overlay, deployment in deployments(rendered):
        assert f"Deployment.kube-system.{deployment['metadata']['name']}" in passed, overlay
    for report in results.values():
        for check in report["skipped_checks"]:
            reason = check["check_result"].get("suppress_comment", "")
            assert len(reason) > 20 and "No comment" not in reason, check["check_id"]
