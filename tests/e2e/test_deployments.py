"""`deployments/prefect.yaml` and `deployments/kubernetes/overlays/worker/worker.yaml` (issue "Run it the way
Prefect users run things", items 1 and 6): their structure, and the real thing: `prefect deploy
--all` against a `prefect server start`, a process worker, and a `plan` run with custom
parameters against the fake cluster."""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prefect.flows import load_flow_from_entrypoint

from benchmarks.deadlines import scaled
from benchmarks.event_latency import ROOT, BurstCluster, Child, PrefectServer
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import autoscale
from kube_elevator.flows.cli.serve import pending_pods_trigger, set_project_directory, tick_concurrency
from kube_elevator.tasks.node_group_file import parse_node_groups

PREFECT_YAML = ROOT / "deployments" / "prefect.yaml"
WORKER_YAML = ROOT / "deployments" / "kubernetes" / "overlays" / "worker" / "worker.yaml"
RBAC_YAML = ROOT / "deployments" / "kubernetes" / "base" / "rbac.yaml"
SERVICE_ACCOUNT = ("kube-system", "kube-elevator")


def prefect_yaml() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(PREFECT_YAML.read_text())
    return document


def deployment(name: str) -> dict[str, Any]:
    (found,) = [d for d in prefect_yaml()["deployments"] if d["name"] == name]
    return found


def manifests() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(WORKER_YAML.read_text()) if doc}


API_VERSIONS = {"ConfigMap": "v1", "Deployment": "apps/v1", "PodDisruptionBudget": "policy/v1",
                "NetworkPolicy": "networking.k8s.io/v1"}


# --- prefect.yaml -------------------------------------------------------------------------------


def test_both_deployments_run_the_autoscale_flow_with_its_own_parameters() -> None:
    flow_parameters = set(inspect.signature(autoscale.fn).parameters)
    for name in ("autoscale", "plan"):
        spec = deployment(name)
        assert load_flow_from_entrypoint(spec["entrypoint"]) is autoscale
        assert set(spec["parameters"]) <= flow_parameters
        assert set(spec["parameters"]) == {"nodegroups", "dry_run", "lease_namespace"}
    assert deployment("autoscale")["parameters"]["dry_run"] is False
    assert deployment("plan")["parameters"]["dry_run"] is True


def test_the_tune_deployment_runs_the_tune_flow_by_hand() -> None:
    from kube_elevator.flows.tune import tune_flow

    spec = deployment("tune")
    assert load_flow_from_entrypoint(spec["entrypoint"]) is tune_flow
    assert set(spec["parameters"]) <= set(inspect.signature(tune_flow.fn).parameters)
    assert spec["schedules"] == [] and "triggers" not in spec


def test_autoscale_ticks_every_minute_one_at_a_time_and_on_pending_pods() -> None:
    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    spec = deployment("autoscale")
    assert spec["schedules"] == [{"interval": 60, "active": True}]
    assert ConcurrencyLimitConfig(**spec["concurrency_limit"]) == tick_concurrency()
    # `elevator serve` registers the same trigger from code.
    (trigger,) = spec["triggers"]
    assert DeploymentEventTrigger(**trigger).model_dump() == pending_pods_trigger().model_dump()
    plan = deployment("plan")
    assert plan["schedules"] == [] and "triggers" not in plan and "concurrency_limit" not in plan


def test_the_pull_step_works_from_wherever_the_project_is_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert prefect_yaml()["pull"] == [{"kube_elevator.flows.cli.serve.set_project_directory": {}}]
    monkeypatch.chdir(tmp_path)
    output = set_project_directory()
    assert Path.cwd() == Path(output["directory"]) == tmp_path
    # Module-path entrypoints: they load from any directory, no checkout needed.
    assert load_flow_from_entrypoint(deployment("autoscale")["entrypoint"]) is autoscale


# --- the worker manifests -----------------------------------------------------------------------


def test_worker_manifests_are_well_formed() -> None:
    found = manifests()
    assert set(found) == set(API_VERSIONS)
    for kind, doc in found.items():
        assert doc["apiVersion"] == API_VERSIONS[kind]
        assert doc["metadata"]["name"] and doc["metadata"]["namespace"] == "kube-system"
    spec = found["Deployment"]["spec"]
    template = spec["template"]
    assert spec["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    pod = template["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert pod["securityContext"]["runAsNonRoot"] is True
    for container in pod["containers"]:
        assert container["name"] and container["image"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
        assert {mount["name"] for mount in container["volumeMounts"]} <= set(volumes)
        assert "PREFECT_API_URL" in {variable["name"] for variable in container["env"]}


def test_the_worker_polls_the_deployments_pool_as_a_process_worker() -> None:
    pod = manifests()["Deployment"]["spec"]["template"]["spec"]
    worker = next(c for c in pod["containers"] if c["name"] == "worker")
    command = [*worker["command"], *worker["args"]]
    assert command[:3] == ["prefect", "worker", "start"]
    assert command[command.index("--type") + 1] == "process"
    pools = {deployment(name)["work_pool"]["name"] for name in ("autoscale", "plan")}
    assert pools == {command[command.index("--pool") + 1]}


def test_the_node_group_file_is_mounted_where_the_deployments_read_it() -> None:
    found = manifests()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "configMap" in v]
    assert volume["configMap"]["name"] == found["ConfigMap"]["metadata"]["name"]
    (item,) = [i for i in volume["configMap"]["items"] if i["key"] == "nodegroups.yaml"]
    for container in pod["containers"]:
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
        mounted = str(Path(mount["mountPath"]) / item["path"])
        assert mounted == deployment("autoscale")["parameters"]["nodegroups"]
        assert mounted == deployment("plan")["parameters"]["nodegroups"]
    watch = next(c for c in pod["containers"] if c["name"] == "watch")
    assert watch["args"][watch["args"].index("--nodegroups") + 1] == mounted
    # beside a worker that runs the ticks, the watch only sends events (no ticks of its own)
    assert watch["args"][watch["args"].index("--ticks") + 1] == "events"
    config = yaml.safe_load(found["ConfigMap"]["data"][item["key"]])
    assert parse_node_groups(config, "worker.yaml").node_groups  # a valid Escalator file


def test_the_worker_runs_as_the_rbac_service_account() -> None:
    deployment_doc = manifests()["Deployment"]
    pod = deployment_doc["spec"]["template"]["spec"]
    assert (deployment_doc["metadata"]["namespace"], pod["serviceAccountName"]) == SERVICE_ACCOUNT
    assert RBAC_YAML.is_file(), "the worker's RBAC (deployments/kubernetes/base/rbac.yaml) is gone"
    accounts = {(doc["metadata"]["namespace"], doc["metadata"]["name"])
                for doc in yaml.safe_load_all(RBAC_YAML.read_text())
                if doc and doc["kind"] == "ServiceAccount"}
    assert SERVICE_ACCOUNT in accounts


def test_the_tune_scenario_is_mounted_where_the_tune_deployment_reads_it(
        tmp_path: Path) -> None:
    from kube_elevator.fakes.scenario import load_scenario

    found = manifests()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "configMap" in v]
    worker = next(c for c in pod["containers"] if c["name"] == "worker")
    (mount,) = [m for m in worker["volumeMounts"] if m["name"] == volume["name"]]
    mounted = {str(Path(mount["mountPath"]) / item["path"]): item["key"]
               for item in volume["configMap"]["items"]}
    scenario_key = mounted[deployment("tune")["parameters"]["scenario"]]
    # The scenario loads as the worker sees it: beside the ConfigMap's node-group file.
    for path, key in mounted.items():
        (tmp_path / Path(path).name).write_text(found["ConfigMap"]["data"][key])
    loaded = load_scenario(tmp_path / Path(deployment("tune")["parameters"]["scenario"]).name)
    nodegroups_key = mounted[deployment("autoscale")["parameters"]["nodegroups"]]
    assert scenario_key != nodegroups_key
    assert loaded.config.node_groups == parse_node_groups(
        yaml.safe_load(found["ConfigMap"]["data"][nodegroups_key]), "worker.yaml").node_groups


def test_the_worker_s_runs_send_heartbeats_for_crash_detection() -> None:
    from kube_elevator.flows.crash_detection import HEARTBEAT_SECONDS

    pod = manifests()["Deployment"]["spec"]["template"]["spec"]
    worker = next(c for c in pod["containers"] if c["name"] == "worker")
    env = {variable["name"]: variable.get("value") for variable in worker["env"]}
    assert env["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] == str(HEARTBEAT_SECONDS)


def test_the_deployment_guide_starts_from_the_image_recipe_then_the_kustomize_base() -> None:
    """docs/deploying.md: the Dockerfile (with the tune extra, for the `tune` deployment), then
    an overlay of deployments/kubernetes, in the first commands it shows."""
    import re

    docs = (ROOT / "docs" / "deploying.md").read_text()
    first = re.search(r"```sh\n(.*?)```", docs, re.S)
    assert first is not None
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    build = next(i for i, c in enumerate(commands) if c.startswith("docker build"))
    apply = next(i for i, c in enumerate(commands) if c.startswith("kubectl apply -k"))
    assert build < apply
    overlay = commands[apply].split()[-1]
    assert (ROOT / overlay / "kustomization.yaml").is_file()
    recipe = (ROOT / "Dockerfile").read_text()
    assert re.search(r"install\.sh \S+ requirements/image\.txt tune,blocks", recipe)


# --- deployed on a real Prefect server, run by a real worker ------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[PrefectServer]:
    with PrefectServer() as running:
        yield running


@pytest.fixture(scope="module")
def deployed(server: PrefectServer) -> str:
    pool = deployment("autoscale")["work_pool"]["name"]
    server.prefect("work-pool", "create", pool, "--type", "process")
    before = PREFECT_YAML.read_bytes()
    output = server.prefect("--no-prompt", "deploy", "--all", "--prefect-file",
                            str(PREFECT_YAML))
    assert "autoscale/plan" in output
    assert PREFECT_YAML.read_bytes() == before  # deploying never rewrites the file
    return pool


@pytest.fixture(scope="module")
def worker(server: PrefectServer, deployed: str, fake_aws: FakeAws,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    """A process worker that reaches moto through FakeAws.env(), as a real one reaches AWS."""
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    child = Child([*python_m("prefect"), "worker", "start", "--pool", deployed, "--type",
                   "process"], server.env(**fake_aws.env(), PREFECT_WORKER_QUERY_SECONDS="1"),
                  log)
    try:
        child.wait_for("started", 120)
        yield child
    finally:
        child.stop()


def python_m(module: str) -> list[str]:
    import sys

    return [sys.executable, "-m", module]


def api(server: PrefectServer) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    class Session:
        def __enter__(self) -> Any:
            self._settings = temporary_settings({PREFECT_API_URL: server.api_url})
            self._settings.__enter__()
            self._client = get_client(sync_client=True)
            return self._client.__enter__()

        def __exit__(self, *exc: Any) -> None:
            self._client.__exit__(*exc)
            self._settings.__exit__(*exc)

    return Session()


def test_prefect_deploy_registers_schedule_concurrency_trigger_and_form(
        server: PrefectServer, deployed: str) -> None:
    with api(server) as client:
        autoscale_deployment = client.read_deployment_by_name("autoscale/autoscale")
        plan = client.read_deployment_by_name("autoscale/plan")
        automations = client.read_automations()
    assert autoscale_deployment.work_pool_name == plan.work_pool_name == deployed
    (schedule,) = autoscale_deployment.schedules
    assert schedule.active and schedule.schedule.interval.total_seconds() == 60
    assert autoscale_deployment.global_concurrency_limit.limit == 1
    assert autoscale_deployment.concurrency_options.collision_strategy.value == "CANCEL_NEW"
    assert plan.schedules == [] and plan.global_concurrency_limit is None
    assert plan.parameters["dry_run"] is True
    (automation,) = [a for a in automations if a.name == "autoscale on pending pods"]
    assert automation.trigger.expect == {"elevator.node-group.pods-pending"}
    assert [action.deployment_id for action in automation.actions] == [autoscale_deployment.id]
    # The UI's run form: a field per flow parameter, described by the flow's docstring.
    properties = plan.parameter_openapi_schema["properties"]
    assert set(properties) == set(inspect.signature(autoscale.fn).parameters)
    assert "node-group file" in properties["nodegroups"]["description"]


def test_a_plan_run_through_the_api_runs_on_the_worker_with_its_parameters(
        server: PrefectServer, worker: Child, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    cluster.burst(10)  # 10 pods of 500m on 2 nodes of 1000m: 250%
    parameters = {"nodegroups": str(cluster.nodegroups), "kubeconfig": str(cluster.kubeconfig),
                  "now": "2027-01-15T12:00:00+00:00"}
    with temporary_settings({PREFECT_API_URL: server.api_url}):
        run = run_deployment("autoscale/plan", parameters=parameters, timeout=scaled(180))
    assert run.state is not None and run.state.is_completed(), worker.output()[-3000:]
    assert run.parameters == {**parameters, "dry_run": True, "lease_namespace": "kube-system"}
    wanted = "batch: dry run (delta +6): usage 250.0% is above scale_up_threshold 70%"
    # The flow-run process ships its logs in the background: they may reach the server a
    # moment after the run is Completed, so poll them (bounded).
    deadline = time.monotonic() + scaled(60)
    with api(server) as client:
        while True:
            logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(
                any_=[run.id])))
            messages = "\n".join(log.message for log in logs)
            if wanted in messages or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # polling the server's log store, with a deadline
    assert wanted in messages
    assert cluster.desired() == 2  # a dry run changes nothing
    assert any(r.resource == "pods" and r.verb == "list" for r in fake_kube.requests)
