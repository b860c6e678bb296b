"""The paging loop: the next page asked for while this one decodes, over the real client and a
real TLS connection; stops, errors and unusual page layouts."""

from __future__ import annotations

import base64
import datetime
import http.server
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import urllib3
import yaml
from kubernetes import client

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.adapters.kube_pages import PagedList, _ClientFetch, _fetch_for, continue_token_ahead
from kube_elevator.tasks.adapters.kube_watch import ListWatch
from tests.builders import api_node, api_pod


def _names(data: bytes) -> tuple[str | None, list[str]]:
    page = json.loads(data)
    return page["metadata"].get("continue"), [item["metadata"]["name"] for item in page["items"]]


def test_the_next_page_is_asked_for_while_this_one_is_decoded() -> None:
    """The server builds page N+1 while the client decodes page N: by the time the decoder
    holds a page, the next page's request has reached the server."""
    with FakeKubeApi() as kube:
        for index in range(7):
            kube.create("pods", api_pod(f"p{index}"), namespace="default")
        core = KubeClient(kube.api_client()).core
        asked = kube.faults.add("delay", count=None, method="GET", path="/api/v1/pods",
                                delay_seconds=0.001)  # counts the page requests
        decoded: list[str] = []

        def decode(data: bytes) -> tuple[str | None, list[str]]:
            token, names = _names(data)
            if token:  # the next page is on its way already
                pages_so_far = len(decoded) // 3 + 1
                assert kube.faults.wait_fired(asked, times=pages_so_far + 1, timeout=scaled(5))
            decoded.extend(names)
            return token, names

        pages = list(PagedList(core.list_pod_for_all_namespaces, decode, page_size=3))
        assert [len(page) for page in pages] == [3, 3, 1]
        assert sorted(decoded) == [f"p{index}" for index in range(7)]
        assert asked.fired == 3  # not one request more than pages


def test_a_stop_while_a_page_hangs_ends_the_list_at_once() -> None:
    """stop() during the first list of a cluster whose API server stopped answering: the
    thread's wait for the page ends now, not after the read timeout (30 s)."""
    with FakeKubeApi() as kube:
        for index in range(7):
            kube.create("pods", api_pod(f"p{index}"), namespace="default")
        core = KubeClient(kube.api_client()).core
        kube.faults.add("delay", method="GET", path="/api/v1/pods", delay_seconds=0.001)
        hung = kube.faults.add("hang", method="GET", path="/api/v1/pods")
        relisted: list[list[Any]] = []
        loop = ListWatch(core.list_pod_for_all_namespaces, "pods",
                         lambda items, version: relisted.append(items), lambda kind, raw: None,
                         page_size=3).start()
        try:
            assert kube.faults.wait_fired(hung, timeout=scaled(10))
            started = time.monotonic()
            loop.stop()
            stopped_in = time.monotonic() - started
            assert loop._thread is not None and not loop._thread.is_alive()
        finally:
            kube.faults.release()
        assert stopped_in < 5  # stop() waits 5 s for the thread at most
        assert relisted == [] and loop.relists == 0  # a part of a list is not the state


def test_a_failed_page_raises_what_the_generated_method_raises(tmp_path: Path) -> None:
    with FakeKubeApi() as kube:
        for index in range(4):
            kube.create("pods", api_pod(f"p{index}"), namespace="default")
        kube_client = KubeClient.from_config(kube.write_kubeconfig(tmp_path / "kubeconfig"))
        kube_client.page_size = 2
        kube.faults.add("delay", method="GET", path="/api/v1/pods", delay_seconds=0.001)
        kube.faults.add("status", method="GET", path="/api/v1/pods", status=503)
        with pytest.raises(client.exceptions.ServiceException) as failed:
            kube_client.list_pods()
        assert failed.value.status == 503
        kube.faults.add("delay", method="GET", path="/api/v1/pods", delay_seconds=0.001)
        kube.faults.add("drop", method="GET", path="/api/v1/pods")
        with pytest.raises(urllib3.exceptions.ProtocolError):
            kube_client.list_pods()
        assert sorted(pod.name for pod in kube_client.list_pods()) == ["p0", "p1", "p2", "p3"]


@pytest.mark.parametrize(("page", "expected"), [
    (b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"abc"'
     b',"remainingItemCount":4},"items":[{"metadata":{"name":"a"}}]}', "abc"),
    (b'{"kind":"PodList","metadata":{"resourceVersion":"9"},"items":[]}', None),
    (b'{"kind":"PodList","metadata":{"continue":""},"items":[]}', None),
    (b'{"kind":"PodList","metadata":{"continue":"a\\u002bb"},"items":[]}', "a+b"),
])
def test_the_continue_token_is_read_from_the_page_head(page: bytes, expected: str | None
                                                        ) -> None:
    assert continue_token_ahead(page) == expected


@pytest.mark.parametrize("page", [
    b'{"items":[],"metadata":{"continue":"abc"}}',  # the metadata after the items
    b'{"kind":"PodList","metadata":{"continue":"abc"}}',  # no items at all
    b'{"kind":"PodList","metadata":{"continue":"abc","items":[]}}',  # "items" inside it
    b'not json "items": at all',
])
def test_a_page_laid_out_otherwise_has_no_token_ahead(page: bytes) -> None:
    assert continue_token_ahead(page) not in ("abc", None)


def test_pages_laid_out_otherwise_are_asked_for_once_decoded() -> None:
    """A server that writes the items before the metadata: each next page is asked for after
    this one is decoded, and the list is whole."""
    pages = {None: {"items": [{"n": 1}], "metadata": {"continue": "t1"}},
             "t1": {"items": [{"n": 2}], "metadata": {"continue": "t2"}},
             "t2": {"items": [{"n": 3}], "metadata": {}}}
    asked: list[str | None] = []

    def list_call(*, limit: int, _continue: str | None, **_: Any) -> Any:
        asked.append(_continue)
        return SimpleNamespace(data=json.dumps(pages[_continue]).encode())

    def decode(data: bytes) -> tuple[str | None, list[int]]:
        page = json.loads(data)
        return page["metadata"].get("continue"), [item["n"] for item in page["items"]]

    listed = [n for page in PagedList(list_call, decode, page_size=1) for n in page]
    assert listed == [1, 2, 3] and asked == [None, "t1", "t2"]


def test_a_head_that_disagrees_with_the_page_is_an_error() -> None:
    def list_call(**_: Any) -> Any:
        return SimpleNamespace(data=b'{"metadata":{"continue":"a"},"items":[]}')

    with pytest.raises(RuntimeError, match="continue token"):
        list(PagedList(list_call, lambda data: ("b", []), page_size=1))


def test_a_client_behind_a_proxy_lists_through_the_generated_method(tmp_path: Path) -> None:
    configuration = client.Configuration()
    configuration.host = "http://127.0.0.1:1"
    configuration.proxy = "http://127.0.0.1:2"
    core = client.CoreV1Api(client.ApiClient(configuration))
    assert isinstance(_fetch_for(core.list_pod_for_all_namespaces, (), 500, {}), _ClientFetch)


# --- a real TLS API server ---------------------------------------------------------------------


def _certificate(subject: str, issuer: Any, issuer_key: Any, serial: int, *,
                 ip: str | None = None, ca: bool = False) -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer if issuer is not None else name)
               .public_key(key.public_key()).serial_number(serial)
               .not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=1)))
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None),
                                        critical=True)
    if ip is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(ip))]), critical=False)
    return builder.sign(issuer_key if issuer_key is not None else key, hashes.SHA256()), key


def _pem(certificate: Any, key: Any) -> tuple[bytes, bytes]:
    from cryptography.hazmat.primitives import serialization

    return (certificate.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def _certificates() -> dict[str, bytes]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate ("elevator") that it
    signed, as PEM: ca, server, server-key, client, client-key."""
    ca, ca_key = _certificate("test-ca", None, None, 1, ca=True)
    server = _certificate("apiserver", ca.subject, ca_key, 2, ip="127.0.0.1")
    user = _certificate("elevator", ca.subject, ca_key, 3)
    (server_pem, server_key), (client_pem, client_key) = _pem(*server), _pem(*user)
    return {"ca": _pem(ca, ca_key)[0], "server": server_pem, "server-key": server_key,
            "client": client_pem, "client-key": client_key}


@pytest.fixture
def tls_api(tmp_path: Path) -> Iterator[tuple[Path, list[tuple[str, str | None, str]]]]:
    """An HTTPS server answering the node list in two pages; yields a kubeconfig that trusts
    its CA and carries a token and a client certificate, and for each request its path, its
    Authorization header and the common name of the client certificate it presented."""
    pems = _certificates()
    (tmp_path / "server.crt").write_bytes(pems["server"])
    (tmp_path / "server.key").write_bytes(pems["server-key"])
    seen: list[tuple[str, str | None, str]] = []
    pages = {"": {"continue": "page-2", "items": [api_node("n1")]},
             "continue=page-2": {"continue": None, "items": [api_node("n2")]}}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as an API server

        def do_GET(self) -> None:
            peer = self.connection.getpeercert() or {}  # type: ignore[attr-defined]
            names = [value for rdn in peer.get("subject", ()) for key, value in rdn
                     if key == "commonName"]
            seen.append((self.path, self.headers.get("Authorization"), ",".join(names)))
            query = self.path.partition("?")[2]
            token = "continue=page-2" if "continue=page-2" in query else ""
            page = pages[token]
            metadata = {"resourceVersion": "7"}
            if page["continue"]:
                metadata["continue"] = str(page["continue"])
            body = json.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": metadata,
                               "items": page["items"]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    context.verify_mode = ssl.CERT_OPTIONAL  # a client certificate, if given, must be the CA's
    context.load_verify_locations(cadata=pems["ca"].decode())
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "tls",
        "clusters": [{"name": "tls", "cluster": {
            "server": f"https://127.0.0.1:{server.server_address[1]}",
            "certificate-authority-data": base64.b64encode(pems["ca"]).decode()}}],
        "users": [{"name": "tls", "user": {
            "token": "s3cret-token",
            "client-certificate-data": base64.b64encode(pems["client"]).decode(),
            "client-key-data": base64.b64encode(pems["client-key"]).decode()}}],
        "contexts": [{"name": "tls", "context": {"cluster": "tls", "user": "tls"}}]}))
    try:
        yield kubeconfig, seen
    finally:
        server.shutdown()
        server.server_close()


def test_pages_go_over_the_clients_tls_with_its_credentials(
        tls_api: tuple[Path, list[tuple[str, str | None, str]]]) -> None:
    """The pages asked on the client's own connection keep what the generated methods do on a
    real cluster: the CA the kubeconfig trusts, its client certificate (kind, kubeadm) and its
    bearer token (EKS, in-cluster) on every request."""
    kubeconfig, seen = tls_api
    nodes = KubeClient.from_config(kubeconfig).list_nodes()
    assert [node.name for node in nodes] == ["n1", "n2"]
    assert [path.partition("?")[0] for path, _, _ in seen] == ["/api/v1/nodes"] * 2
    assert "continue=page-2" in seen[1][0]
    assert [authorization for _, authorization, _ in seen] == ["Bearer s3cret-token"] * 2
    assert [certificate for _, _, certificate in seen] == ["elevator"] * 2


def test_a_server_whose_certificate_the_kubeconfig_does_not_trust_is_refused(
        tls_api: tuple[Path, list[tuple[str, str | None, str]]], tmp_path: Path) -> None:
    kubeconfig, seen = tls_api
    config = yaml.safe_load(kubeconfig.read_text())
    other_ca = _certificates()["ca"]
    config["clusters"][0]["cluster"]["certificate-authority-data"] = \
        base64.b64encode(other_ca).decode()
    untrusting = tmp_path / "untrusting"
    untrusting.write_text(yaml.safe_dump(config))
    with pytest.raises(urllib3.exceptions.SSLError):
        KubeClient.from_config(untrusting).list_nodes()
    assert seen == []  # no request went out over the untrusted connection
