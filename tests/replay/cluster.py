"""`elevator fake-cluster` as a user starts it, and the replay's requests sent to it with the
official client (its kubeconfig loading, its urllib3 pool) and kubectl."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from kubernetes import client, config

from tests.replay.model import Answer, Case, Request, differences, parse_body, with_resource_version
from tests.tools import kubectl_missing

_WARNING = re.compile(r'^\d{3} \S+ "(?P<text>(?:[^"\\]|\\.)*)"')


def _elevator() -> list[str]:
    """The `elevator` script beside this Python (as installed), else the module."""
    script = Path(sys.executable).parent / "elevator"
    return [str(script)] if script.exists() else [sys.executable, "-m", "kube_elevator.flows.cli"]


@dataclass
class RunningCluster:
    kubeconfig: Path
    api: client.ApiClient

    def send(self, request: Request, resource_version: str = "") -> Answer:
        if request.kubectl:
            return self._kubectl(request)
        body = with_resource_version(request.body, resource_version)
        raw = body if isinstance(body, str) else None if body is None else json.dumps(body)
        url = self.api.configuration.host + request.path
        if request.query:
            url += "?" + urlencode(dict(request.query))
        headers = {"Accept": "application/json"}
        self.api.update_params_for_auth(headers, [], ["BearerToken"], request.path,
                                       request.method, None)
        if raw is not None:
            headers["Content-Type"] = request.content_type
        # The client's own pool (its TLS and auth from the kubeconfig); raw bytes, as upstream
        # sends them through client-go's REST client, so duplicate keys and YAML get through.
        response = self.api.rest_client.pool_manager.request(
            request.method, url, body=raw.encode() if raw is not None else None,
            headers=headers, preload_content=True, timeout=30)
        warnings = [match.group("text").replace('\\"', '"')
                    for value in response.headers.getlist("Warning")
                    for match in [_WARNING.match(value)] if match]
        return Answer(status=response.status, body=parse_body(response.data), warnings=warnings)

    def _kubectl(self, request: Request) -> Answer:
        kubectl = shutil.which("kubectl")
        assert kubectl is not None, kubectl_missing()  # the case skips where it is missing
        done = subprocess.run([kubectl, *request.kubectl], input=request.stdin, text=True,
                              capture_output=True, timeout=60, check=False,
                              env={**os.environ, "KUBECONFIG": str(self.kubeconfig)})
        body = parse_body(done.stdout.encode()) if done.stdout.startswith("{") else done.stdout
        return Answer(status=done.returncode, body=body, warnings=[],
                      output=done.stdout + done.stderr)

    def replay(self, case: Case) -> tuple[Answer, list[str]]:
        """Send the case's steps; every step but the last must succeed (or get a tolerated
        code); the last one's answer is compared with upstream's."""
        resource_version = ""
        for step in case.steps[:-1]:
            answer = self.send(step, resource_version)
            ok = (answer.status == 0) if step.kubectl else (200 <= answer.status < 300)
            if not ok and answer.status not in step.tolerate:
                return answer, [f"set-up step {step.method} {step.path}{step.kubectl} answered "
                                f"{answer.status}: {answer.body!r}"[:600]]
            resource_version = answer.resource_version or resource_version
        answer = self.send(case.steps[-1], resource_version)
        return answer, differences(case.expect, answer, resource_version)


@contextmanager
def fake_cluster_process(folder: Path) -> Iterator[RunningCluster]:
    """`elevator fake-cluster` (its kubeconfig in FOLDER) until the block ends."""
    kubeconfig = folder / "kubeconfig.yaml"
    # As upstream's integration servers run (test/integration/framework
    # DefaultTestServerFlags: --disable-admission-plugins=ServiceAccount).
    process = subprocess.Popen([*_elevator(), "fake-cluster", "--kubeconfig-out", str(kubeconfig),
                                "--disable-admission-plugins", "ServiceAccount"],
                               cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(7)]  # blocks until it prints them
        assert any(line.startswith("export KUBECONFIG=") for line in lines), (
            lines, process.stderr.read() if process.poll() is not None and process.stderr else "")
        api = config.new_client_from_config(str(kubeconfig))
        yield RunningCluster(kubeconfig=kubeconfig, api=api)
        api.close()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
