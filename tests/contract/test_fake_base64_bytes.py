"""A `[]byte` field (ConfigMap `binaryData`) is base64 in JSON: the fake refuses a value that is
not, in the decoder's words, and stores a valid one as a real server does, over HTTP with the
`kubernetes` client. (A Secret's `data` is decoded by the same rule: test_fake_secrets.py.)

Sources, re-expressed: encoding/json decode.go literalStore (a []byte is decoded with
base64.StdEncoding and its error saved as the decode's error), wrapped by k8s.io/apiserver's
transformDecodeError (`... cannot be handled as a Secret: illegal base64 data at input byte
4`, as real servers answer `kubectl create` of a Secret with `data.x: hello`; a ConfigMap's
`binaryData` is the same []byte map); encoding/base64 decodeQuantum and base64_test.go's
bad-input table (offsets of a stray byte, a cut-short quantum, bad padding, trailing garbage);
for a strategic merge patch runtime/converter.go sliceFromUnstructured (`error decoding from
json: ...`)."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

NS = "bytes"
CONFIGMAP = 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '


def refused(call: Any) -> str:
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 400, err.value.body
    status = json.loads(err.value.body)
    assert status["reason"] == "BadRequest"
    message: str = status["message"]
    return message


@pytest.mark.parametrize(("value", "offset"), [
    pytest.param("hello", 4, id="cut-short-quantum"),  # "hell" decodes, "o" starts a quantum
    pytest.param("aGVsbG8", 4, id="missing-padding"),
    pytest.param("a!bc", 1, id="stray-byte"),
    pytest.param("Y===", 1, id="padding-too-early"),
    pytest.param("YWJjZA=", 7, id="one-of-two-pads"),
    pytest.param("YWJjZA==x", 8, id="trailing-garbage"),
    pytest.param("YW Jj", 2, id="space"),
])
def test_binary_data_that_is_not_base64_is_refused(core: client.CoreV1Api, value: str,
                                                   offset: int) -> None:
    name = f"bad-{offset}-{len(value)}"
    message = refused(lambda: core.create_namespaced_config_map(NS, {
        "metadata": {"name": name}, "data": {"text": "plain, not decoded"},
        "binaryData": {"blob": value}}))
    assert message == CONFIGMAP + f"illegal base64 data at input byte {offset}"


def test_the_first_error_in_the_body_is_the_one_answered(http: httpx.Client) -> None:
    """The decoder saves only the first error it meets, in the body's order."""
    path = f"/api/v1/namespaces/{NS}/configmaps"
    for body, message in (
            ({"binaryData": {"a": "!!!!"}, "immutable": "yes"},
             "illegal base64 data at input byte 0"),
            ({"immutable": "yes", "binaryData": {"a": "!!!!"}},
             "json: cannot unmarshal string into Go struct field ConfigMap.immutable of type "
             "bool")):
        answer = http.post(path, content=json.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "two-errors"},
             **body}), headers={"Content-Type": "application/json"})
        assert answer.status_code == 400, answer.text
        assert answer.json()["message"] == CONFIGMAP + message


def test_valid_values_round_trip(core: client.CoreV1Api) -> None:
    payload = bytes(range(256))
    encoded = base64.b64encode(payload).decode()
    core.create_namespaced_config_map(NS, {"metadata": {"name": "good"},
                                           "binaryData": {"blob": encoded, "empty": ""}})
    read = core.read_namespaced_config_map("good", NS)
    assert read.binary_data == {"blob": encoded, "empty": ""}
    assert base64.b64decode(read.binary_data["blob"]) == payload


def test_a_value_is_stored_in_canonical_base64(core: client.CoreV1Api) -> None:
    """Newlines are skipped and the bits after the last byte dropped (StdEncoding is not
    strict); what is read back is json.Marshal of the decoded bytes."""
    core.create_namespaced_config_map(NS, {"metadata": {"name": "canonical"}, "binaryData": {
        "lines": "YWJj\nZGVm", "bits": "YR=="}})
    assert core.read_namespaced_config_map("canonical", NS).binary_data == {
        "lines": "YWJjZGVm", "bits": "YQ=="}


def test_patches_decode_the_bytes_too(core: client.CoreV1Api, http: httpx.Client) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "patched"},
                                           "binaryData": {"a": "YQ=="}})
    path = f"/api/v1/namespaces/{NS}/configmaps/patched"
    merge = http.patch(path, content=json.dumps({"binaryData": {"a": "hello"}}),
                       headers={"Content-Type": "application/merge-patch+json"})
    assert merge.status_code == 422, merge.text
    assert merge.json()["message"].endswith('": illegal base64 data at input byte 4')
    smp = http.patch(path, content=json.dumps({"binaryData": {"a": "hello"}}),
                     headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert smp.status_code == 422, smp.text
    assert smp.json()["message"] == (
        ' "" is invalid: patch: Invalid value: "map[binaryData:map[a:hello]]": error '
        "decoding from json: illegal base64 data at input byte 4")
    assert core.read_namespaced_config_map("patched", NS).binary_data == {"a": "YQ=="}
