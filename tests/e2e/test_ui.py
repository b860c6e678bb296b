"""The Prefect UI, in a real browser (issue "Run it the way Prefect users run things"): open the
`plan` deployment of a real `prefect server start`, start a custom run through its parameter
form, and see it complete on a process worker against the fake cluster.

Debian's Chromium, headless, driven by Playwright's Python package (never `playwright install`).
The form, filled in with neutral paths (/etc/elevator/...), is saved as docs/run-form.png when
that file is missing or when ELEVATOR_UPDATE_SCREENSHOTS=1, so a test run does not rewrite a
committed image each time; the run is then sent with the test's own paths.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.deadlines import scaled
from benchmarks.event_latency import (
    API_POLL_SECONDS,
    ROOT,
    BurstCluster,
    Child,
    PrefectServer,
    wait_until,
)
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.e2e.test_deployments import api, deployed, worker  # noqa: F401  (module fixtures)
from tests.tools import CHROMIUM, chromium_missing

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SCREENSHOT = ROOT / "docs" / "run-form.png"
# What the form shows in the picture: a deployment's paths (the run itself gets the test's).
SHOWN_NODEGROUPS = "/etc/elevator/nodegroups.yaml"
SHOWN_KUBECONFIG = "/etc/elevator/kubeconfig"

pytestmark = [
    pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or ""),
]
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="Playwright's Python package is not installed "
                                      "(pip install playwright)")


@pytest.fixture(scope="module")
def server() -> Iterator[PrefectServer]:
    """This module's server serves the UI (the other modules' do not)."""
    with PrefectServer(ui=True) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
                                              headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def parameter(page: Any, label: str) -> Any:
    """The form block of one flow parameter, found by its label."""
    return page.locator(".schema-form-property",
                        has=page.get_by_text(label, exact=True)).first


def runs_named(server: PrefectServer, name: str) -> list[Any]:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    with api(server) as client:
        return list(client.read_flow_runs(flow_run_filter=FlowRunFilter(
            name=FlowRunFilterName(any_=[name]))))


def run_named(server: PrefectServer, name: str) -> Any:
    runs = runs_named(server, name)
    return runs[0] if runs else None


def submit(page: Any, server: PrefectServer, name: str, attempts: int = 5) -> Any:
    """Submit the form and return the run the server made of it.

    The form checks its parameters with the server before it sends the run; on a loaded
    machine that check can fail, and the form then stays open with an error toast. Submit
    again then, but only while the server has no run of that name, so a run is never made
    twice; a form that never submits fails with what the page says and with the API calls
    that failed meanwhile (s62's clone: three attempts all ended in "Something went wrong")."""
    said: list[str] = []
    failed: list[str] = []

    def answered(response: Any) -> None:
        if "/api/" in response.url and response.status >= 400:
            failed.append(f"{response.request.method} {response.url} -> {response.status}")

    def lost(request: Any) -> None:
        if "/api/" in request.url:
            failed.append(f"{request.method} {request.url} -> {request.failure}")

    page.on("response", answered)
    page.on("requestfailed", lost)
    try:
        for _ in range(attempts):
            page.get_by_role("button", name="Submit").click()
            try:
                # A submitted form leaves for the deployment's page.
                page.wait_for_url(re.compile(r"/deployments/deployment/[^/?]+(\?.*)?$"),
                                  timeout=scaled(45_000))
            except sync_api.TimeoutError:
                said.append(page.locator("body").inner_text()[-1500:])
                run = run_named(server, name)
            else:
                return wait_until(lambda: run_named(server, name), 90,
                                  "the run submitted from the form", API_POLL_SECONDS)
            if run is not None:
                return run
    finally:
        page.remove_listener("response", answered)
        page.remove_listener("requestfailed", lost)
    raise AssertionError(f"the form never made a run named {name!r}; the API calls that failed: "
                         f"{failed or 'none'}; the page said:\n" + "\n---\n".join(said))


def test_a_custom_run_of_plan_from_the_ui_form_completes(
        server: PrefectServer, worker: Child, browser: Any,  # noqa: F811
        fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    directory = tmp_path_factory.mktemp("kube-elevator")
    cluster = BurstCluster(fake_kube, fake_aws, directory)
    cluster.burst(10)
    with api(server) as client:
        plan = client.read_deployment_by_name("autoscale/plan")
    page = browser.new_page(viewport={"width": 1280, "height": 1480})
    try:
        page.goto(f"{server.url}/deployments/deployment/{plan.id}", wait_until="networkidle")
        page.get_by_role("button", name="Run", exact=True).click()
        page.get_by_role("button", name="Custom run").click()
        page.wait_for_url(re.compile(r"/run(\?|$)"))
        run_name = page.locator("input[type=text]").first
        # The form gives the run a generated name once it is mounted; type over that one.
        sync_api.expect(run_name).not_to_have_value("", timeout=scaled(60_000))
        run_name.fill("plan-from-the-form")
        sync_api.expect(run_name).to_have_value("plan-from-the-form")
        nodegroups = parameter(page, "nodegroups").locator("textarea")
        kubeconfig = parameter(page, "kubeconfig (Optional)")
        kubeconfig.get_by_role("button", name="str", exact=True).click()
        # The picture shows the paths a deployment would use, not this run's temporary folder.
        for field, path in ((nodegroups, SHOWN_NODEGROUPS),
                            (kubeconfig.locator("textarea"), SHOWN_KUBECONFIG)):
            field.fill(path)
            sync_api.expect(field).to_have_value(path)
        shot = directory / "run-form.png"
        page.screenshot(path=str(shot), full_page=True)
        nodegroups.fill(str(cluster.nodegroups))
        kubeconfig.locator("textarea").fill(str(cluster.kubeconfig))
        # The form holds what was typed before it is sent (a busy machine renders slowly).
        sync_api.expect(nodegroups).to_have_value(str(cluster.nodegroups))
        sync_api.expect(kubeconfig.locator("textarea")).to_have_value(str(cluster.kubeconfig))
        run_id = submit(page, server, "plan-from-the-form").id
        page.goto(f"{server.url}/runs/flow-run/{run_id}", wait_until="networkidle")
        # The run page follows the run's state: it reaches Completed without a reload.
        sync_api.expect(page.get_by_text("Completed").first).to_be_visible(timeout=scaled(180_000))
    finally:
        page.close()
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if not SCREENSHOT.exists() or os.environ.get("ELEVATOR_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)

    def finished() -> Any:
        with api(server) as client:
            run = client.read_flow_run(run_id)
        return run if run.state is not None and run.state.is_final() else None

    run = wait_until(finished, 60, "the flow run's final state", interval=0.2)
    assert run.state.is_completed(), worker.output()[-3000:]
    assert run.name == "plan-from-the-form"
    assert len(runs_named(server, "plan-from-the-form")) == 1, "the form made the run twice"
    assert run.parameters["nodegroups"] == str(cluster.nodegroups)
    assert run.parameters["kubeconfig"] == str(cluster.kubeconfig)
    assert run.parameters["dry_run"] is True
    assert any(r.resource == "pods" and r.verb == "list" for r in fake_kube.requests)
    # What the run did, as the run list shows it (issue 27): its tags, and its state's message.
    assert "dry-run" in run.tags
    # A scale-up says what it asks the cloud for (issue 42): the ASG's increase, from -> to.
    assert re.match(r"batch would ASG \+\d+ \(\d+ -> \d+\): usage", run.state.message or ""), \
        run.state.message
    page = browser.new_page(viewport={"width": 1280, "height": 1200})
    try:
        page.goto(f"{server.url}/runs", wait_until="networkidle")
        row = page.locator("div", has=page.get_by_text("plan-from-the-form", exact=True)).filter(
            has=page.get_by_text("dry-run", exact=True)).last
        sync_api.expect(row).to_be_visible(timeout=scaled(60_000))
    finally:
        page.close()


def test_the_tune_runs_pareto_picture_shows_in_the_ui(server: PrefectServer,
                                                      browser: Any) -> None:
    """Issue 17: the `tune` flow run's Pareto plot is an artifact the UI draws (a Markdown
    artifact holding the PNG inline), not only a file on the worker."""
    import subprocess
    import sys

    scenario = ROOT / "deployments" / "examples" / "scenario.yaml"
    code = ("from kube_elevator.flows.tune import tune_flow; "
            f"tune_flow(scenario={str(scenario)!r}, trials=2, batch=2, parallel=1, seeds=1, "
            "held_out_seeds=1)")
    done = subprocess.run([sys.executable, "-c", code], env=server.env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=scaled(600), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    with api(server) as client:
        from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
        from prefect.client.schemas.sorting import ArtifactSort

        pictures = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["tune-pareto-plot"])), sort=ArtifactSort.CREATED_DESC)
    # One plot, maybe twice: Prefect's client sends a request again after a read timeout
    # (prefect/client/base.py `send`), so a server that stalls past it keeps the one artifact
    # twice, as two versions of its key (3.9.0 on SQLite at load 14 held two); the UI draws
    # the latest.
    assert pictures, "the tune run published no tune-pareto-plot artifact"
    assert len({picture.data for picture in pictures}) == 1, "two different plots"
    picture = pictures[0]
    page = browser.new_page(viewport={"width": 1280, "height": 1200})
    try:
        page.goto(f"{server.url}/artifacts/artifact/{picture.id}", wait_until="networkidle")
        image = page.locator("img[alt='elevator tune: the Pareto front']")
        sync_api.expect(image).to_be_visible(timeout=scaled(60_000))
        # Drawn, not a broken image: the browser decoded the PNG to its full width.
        width = image.evaluate("img => img.complete ? img.naturalWidth : 0")
    finally:
        page.close()
    assert width > 500


APPROVAL_SCREENSHOT = ROOT / "docs" / "approval-form.png"

# Prefect's server answers 503 while its SQLite database is locked by another writer, an answer
# its clients retry (prefect/server/api/server.py `is_client_retryable_exception`); its UI does
# not retry the form's resume, the form stays open, and a person submits again (3.8.6 and
# 3.9.1 on a loaded machine: "Service Unavailable" once each).
SUBMIT_TRIES = 3
APPROVE_IN_A_PROCESS = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("approval_flow", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
state = module.approved_autoscale(nodegroups=sys.argv[2], kubeconfig=sys.argv[3],
                                  approve_above_nodes=3, poll_seconds=1, return_state=True)
print(state.type.value, state.message)
"""


def test_the_approval_flow_asks_in_the_ui_and_a_person_approves_there(
        server: PrefectServer, browser: Any, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    """Issue 35 item 4: the paused approval flow's form on its run page, answered in the UI;
    the picture of the form is docs/approval-form.png."""
    import subprocess
    import sys

    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    cluster.burst(10)
    before = cluster.desired()
    child = subprocess.Popen(
        [sys.executable, "-c", APPROVE_IN_A_PROCESS,
         str(ROOT / "deployments" / "examples" / "approval_flow.py"), str(cluster.nodegroups),
         str(cluster.kubeconfig)], env={**server.env(), **fake_aws.env()}, cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def paused() -> Any:
            if child.poll() is not None:
                raise AssertionError(f"the flow ended without pausing: {child.communicate()}")
            with api(server) as client:
                runs = client.read_flow_runs(
                    flow_filter=FlowFilter(name=FlowFilterName(any_=["approved-autoscale"])),
                    flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
                        type=FlowRunFilterStateType(any_=[StateType.PAUSED]))))
            return runs[0] if runs else None

        run = wait_until(paused, 180, "the approval flow's pause", interval=0.5)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.goto(f"{server.url}/runs/flow-run/{run.id}", wait_until="networkidle")
            page.get_by_role("button", name="Resume").first.click()
            dialog = page.get_by_role("dialog")
            sync_api.expect(dialog.get_by_text("Scale up above 3 nodes?")).to_be_visible(
                timeout=scaled(60_000))
            reason = dialog.locator("textarea, input[type=text]").last
            reason.fill("expected burst: month-end batch")
            dialog.get_by_role("switch").first.click()  # approve
            sync_api.expect(dialog.get_by_role("switch").first).to_be_checked()
            shot = tmp_path / "approval-form.png"
            page.screenshot(path=str(shot))
            # The page stays open until the server has the answer: closed at once after the
            # click, a busy browser may not have sent it yet, and the run stays paused.
            for _ in range(SUBMIT_TRIES):
                with page.expect_response(
                        lambda response: response.request.method == "POST"
                        and response.url.endswith(f"/flow_runs/{run.id}/resume"),
                        timeout=scaled(60_000)) as resumed:
                    dialog.get_by_role("button", name="Submit").click()
                if resumed.value.status != 503:
                    break
            assert resumed.value.ok, resumed.value.text()
            assert resumed.value.json()["status"] == "ACCEPT", resumed.value.text()
        finally:
            page.close()
        out, err = child.communicate(timeout=scaled(180))
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err[-3000:]
    assert out.startswith("COMPLETED approved: batch: acted"), out + err[-2000:]
    assert cluster.desired() > before
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if not APPROVAL_SCREENSHOT.exists() or os.environ.get("ELEVATOR_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(shot, APPROVAL_SCREENSHOT)
