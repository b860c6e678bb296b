"""kubectl's Secret commands against the fake API: `create secret generic/tls/docker-registry`,
`get secrets` (the server's Type and Data columns, printers.go printSecret), a field selector on
`type`, and the refusal of an immutable Secret's new data as a real server words it.
The rules themselves are in test_fake_secrets.py (ValidateSecret, the stringData merge)."""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.tools import needs_kubectl

pytestmark = needs_kubectl

Obj = dict[str, Any]
NS = "kubectl-secrets"
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def kubectl(api: FakeKubeApi, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    tmp = tmp_path_factory.mktemp("kubectl-secrets")
    kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp / "cache"),
             "-n", NS, *args], capture_output=True, text=True, timeout=scaled(60),
            check=False, input=stdin)

    return run


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate and its key as PEM files: kubectl checks that the pair matches."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake.example.com")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                   .public_key(key.public_key()).serial_number(1)
                   .not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp / "tls.crt", tmp / "tls.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_kubectl_creates_each_kind_of_secret_and_lists_them(kubectl: Kubectl,
                                                            tmp_path: Path) -> None:
    ok(kubectl("create", "secret", "generic", "plain", "--from-literal=user=admin",
               "--from-literal=password=s3cret"))
    cert, key = self_signed(tmp_path)
    ok(kubectl("create", "secret", "tls", "cert", f"--cert={cert}", f"--key={key}"))
    ok(kubectl("create", "secret", "docker-registry", "registry",
               "--docker-server=registry.example.com", "--docker-username=u",
               "--docker-password=p"))
    plain = json.loads(ok(kubectl("get", "secret", "plain", "-o", "json")))
    assert (plain["type"], {k: base64.b64decode(v).decode() for k, v in plain["data"].items()}) \
        == ("Opaque", {"user": "admin", "password": "s3cret"})
    tls = json.loads(ok(kubectl("get", "secret", "cert", "-o", "json")))
    assert (tls["type"], sorted(tls["data"])) == ("kubernetes.io/tls", ["tls.crt", "tls.key"])
    assert base64.b64decode(tls["data"]["tls.crt"]) == cert.read_bytes()
    registry = json.loads(ok(kubectl("get", "secret", "registry", "-o", "json")))
    config = json.loads(base64.b64decode(registry["data"][".dockerconfigjson"]))
    assert (registry["type"], list(config["auths"])) == \
        ("kubernetes.io/dockerconfigjson", ["registry.example.com"])

    table = ok(kubectl("get", "secrets")).splitlines()
    assert table[0].split() == ["NAME", "TYPE", "DATA", "AGE"]
    rows = {line.split()[0]: line.split()[1:3] for line in table[1:]}
    assert rows == {"cert": ["kubernetes.io/tls", "2"], "plain": ["Opaque", "2"],
                    "registry": ["kubernetes.io/dockerconfigjson", "1"]}
    assert ok(kubectl("get", "secrets", "--field-selector", "type=kubernetes.io/tls",
                      "-o", "name")) == "secret/cert\n"


def test_kubectl_sees_the_servers_refusals(kubectl: Kubectl) -> None:
    manifest = {"apiVersion": "v1", "kind": "Secret", "immutable": True,
                "metadata": {"name": "frozen", "namespace": NS}, "stringData": {"a": "1"}}
    ok(kubectl("apply", "-f", "-", stdin=json.dumps(manifest)))
    changed = kubectl("apply", "-f", "-",
                      stdin=json.dumps({**manifest, "stringData": {"a": "2"}}))
    assert changed.returncode == 1
    assert 'Secret "frozen" is invalid: data: Forbidden: field is immutable when `immutable` ' \
        "is set" in changed.stderr
    typo = kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "typo", "namespace": NS},
        "data": {"key": "not base64!"}}))
    assert typo.returncode == 1
    assert 'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at ' \
        "input byte 3" in typo.stderr
