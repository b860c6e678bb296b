"""Secrets served with the API server's rules, seen through the official `kubernetes` client (and
kubectl in test_fake_secrets_kubectl.py): `data` is base64 on the wire, `stringData` is merged
into it on every write and never read back, keys are config keys, 1 MiB in all, `type` defaults
to Opaque and never changes, `immutable: true` freezes the data, each built-in type requires its
keys, and `type` is a field label. No Secret value appears in an answer or a log line.

Sources, re-expressed case by case: kubernetes pkg/apis/core/validation/validation.go
(`ValidateSecret`, `ValidateSecretUpdate`) and its validation_test.go tables
(TestValidateSecret, TestValidateDockerConfigSecret, TestValidateBasicAuthSecret,
TestValidateSSHAuth, TestValidateTLSSecret and the immutable cases of TestValidateSecretUpdate);
pkg/apis/core/v1/conversion.go `Convert_v1_Secret_To_core_Secret` (stringData overwrites data);
pkg/apis/core/v1/defaults.go `SetDefaults_Secret`; pkg/registry/core/secret/strategy.go
(`SelectableFields`: metadata.name, metadata.namespace, type); encoding/json's decoding of a
`[]byte` (base64, its error wrapped by transformDecodeError).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.server import FakeKubeApi

Obj = dict[str, Any]
NS = "secrets"
# A value no answer and no log line may carry (the tests below look for it).
SECRET_VALUE = "hunter2-do-not-print"


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def secret(name: str, data: dict[str, str] | None = None, kind: str | None = None,
           **extra: Any) -> Obj:
    body: Obj = {"metadata": {"name": name}, **extra}
    if data is not None:
        body["data"] = {k: b64(v) for k, v in data.items()}
    if kind is not None:
        body["type"] = kind
    return body


def read(core: client.CoreV1Api, name: str) -> Obj:
    """The stored Secret as JSON, not as the client's model (which has a `string_data` slot)."""
    answer = core.read_namespaced_secret(name, NS, _preload_content=False)
    stored: Obj = json.loads(answer.data)
    return stored


def invalid(call: Callable[[], Any]) -> Obj:
    """The 422 Status of a refused write."""
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 422, err.value.body
    status: Obj = json.loads(err.value.body)
    assert status["reason"] == "Invalid"
    assert SECRET_VALUE not in err.value.body
    return status


def causes(status: Obj) -> list[tuple[str, str]]:
    return sorted((c["reason"], c["field"]) for c in status["details"]["causes"])


# --- the wire: base64 data, stringData merged, type defaulted ---------------------------------


def test_data_that_is_not_base64_is_refused_in_the_decoders_words(core: client.CoreV1Api,
                                                                 caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_secret(NS, {"metadata": {"name": "not-base64"},
                                           "data": {"password": SECRET_VALUE}})
    status = json.loads(err.value.body)
    assert (err.value.status, status["reason"]) == (400, "BadRequest")
    # "hunt" decodes, "er2-" does not: '-' (byte 7) is not in the standard alphabet
    assert status["message"] == ('Secret in version "v1" cannot be handled as a Secret: '
                                 "illegal base64 data at input byte 7")
    assert SECRET_VALUE not in err.value.body and SECRET_VALUE not in caplog.text


def test_string_data_is_merged_into_data_and_never_read_back(core: client.CoreV1Api,
                                                              caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    created = core.create_namespaced_secret(NS, secret(
        "merged", {"kept": "1", "replaced": "old"},
        stringData={"replaced": SECRET_VALUE, "added": "new"}))
    assert created.string_data is None
    stored = read(core, "merged")
    assert "stringData" not in stored
    assert stored["data"] == {"kept": b64("1"), "replaced": b64(SECRET_VALUE),
                              "added": b64("new")}
    assert stored["type"] == "Opaque"  # SetDefaults_Secret
    # on update and on a patch too: stringData wins over data for the same key
    body = read(core, "merged")
    body["stringData"] = {"kept": "2"}
    core.replace_namespaced_secret("merged", NS, body)
    core.patch_namespaced_secret("merged", NS, {"stringData": {"added": "newer"}})
    assert read(core, "merged")["data"] == {"kept": b64("2"), "replaced": b64(SECRET_VALUE),
                                            "added": b64("newer")}
    assert SECRET_VALUE not in caplog.text


def test_in_process_writes_merge_string_data_too(api: FakeKubeApi) -> None:
    created = api.create("secrets", {"metadata": {"name": "in-process"},
                                     "stringData": {"token": "t"}}, NS)
    assert (created["data"], created["type"], "stringData" in created) == \
        ({"token": b64("t")}, "Opaque", False)


def test_an_unknown_field_is_refused_under_strict_field_validation(http: httpx.Client) -> None:
    answer = http.post(f"/api/v1/namespaces/{NS}/secrets", params={"fieldValidation": "Strict"},
                       json={"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "strict"}, "stringdata": {"a": "b"}})
    assert answer.status_code == 400
    assert answer.json()["message"] == ('Secret in version "v1" cannot be handled as a Secret: '
                                       'strict decoding error: unknown field "stringdata"')


# --- ValidateSecret ---------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "body", "expected"), [
    # TestValidateSecret
    ("valid", secret("valid", {"data-1": "bar"}), []),
    ("invalid-key", secret("invalid-key", {"a*b": "whoops"}),
     [("FieldValueInvalid", "data[a*b]")]),
    ("leading-dot-key", secret("leading-dot-key", {".key": "bar"}), []),
    ("dot-key", secret("dot-key", {".": "bar"}), [("FieldValueInvalid", "data[.]")]),
    ("double-dot-key", secret("double-dot-key", {"..": "bar"}),
     [("FieldValueInvalid", "data[..]")]),
    ("sa-token", secret("sa-token", {"data-1": "bar"}, "kubernetes.io/service-account-token",
                        metadata={"name": "sa-token", "annotations": {
                            "kubernetes.io/service-account.name": "foo"}}), []),
    ("sa-token-empty-annotation", secret(
        "sa-token-empty-annotation", {}, "kubernetes.io/service-account-token",
        metadata={"name": "sa-token-empty-annotation",
                  "annotations": {"kubernetes.io/service-account.name": ""}}),
     [("FieldValueRequired", "metadata.annotations[kubernetes.io/service-account.name]")]),
    ("sa-token-no-annotations", secret("sa-token-no-annotations", {},
                                       "kubernetes.io/service-account-token"),
     [("FieldValueRequired", "metadata.annotations[kubernetes.io/service-account.name]")]),
    # TestValidateDockerConfigSecret
    ("docker-json", secret("docker-json", {".dockerconfigjson": '{"auths": {}}'},
                           "kubernetes.io/dockerconfigjson"), []),
    ("docker-json-missing", secret("docker-json-missing", {"other": "x"},
                                   "kubernetes.io/dockerconfigjson"),
     [("FieldValueRequired", "data[.dockerconfigjson]")]),
    ("dockercfg-missing", secret("dockercfg-missing", {}, "kubernetes.io/dockercfg"),
     [("FieldValueRequired", "data[.dockercfg]")]),
    # TestValidateBasicAuthSecret: either key will do, even empty
    ("basic-username", secret("basic-username", {"username": ""},
                              "kubernetes.io/basic-auth"), []),
    ("basic-neither", secret("basic-neither", {"token": "x"}, "kubernetes.io/basic-auth"),
     [("FieldValueRequired", "data[password]"), ("FieldValueRequired", "data[username]")]),
    # TestValidateSSHAuth: the key must be there and not empty
    ("ssh", secret("ssh", {"ssh-privatekey": "key"}, "kubernetes.io/ssh-auth"), []),
    ("ssh-empty", secret("ssh-empty", {"ssh-privatekey": ""}, "kubernetes.io/ssh-auth"),
     [("FieldValueRequired", "data[ssh-privatekey]")]),
    # TestValidateTLSSecret: both keys, content unchecked (upstream's TODO)
    ("tls", secret("tls", {"tls.crt": "c", "tls.key": "k"}, "kubernetes.io/tls"), []),
    ("tls-neither", secret("tls-neither", {}, "kubernetes.io/tls"),
     [("FieldValueRequired", "data[tls.crt]"), ("FieldValueRequired", "data[tls.key]")]),
    # a type of one's own is not checked (ValidateSecret's default case)
    ("own-type", secret("own-type", {}, "example.com/token"), []),
])
def test_secrets_are_validated_as_validate_secret_does(
        core: client.CoreV1Api, name: str, body: Obj, expected: list[tuple[str, str]]) -> None:
    if not expected:
        core.create_namespaced_secret(NS, body)
        return
    assert causes(invalid(lambda: core.create_namespaced_secret(NS, body))) == expected


def test_the_messages_are_the_servers(core: client.CoreV1Api) -> None:
    status = invalid(lambda: core.create_namespaced_secret(NS, secret("bad-key", {"a*b": "x"})))
    assert status["message"] == (
        'Secret "bad-key" is invalid: data[a*b]: Invalid value: "a*b": a valid config key '
        "must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
        "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
    status = invalid(lambda: core.create_namespaced_secret(NS, secret(
        "bad-json", {".dockerconfigjson": SECRET_VALUE}, "kubernetes.io/dockerconfigjson")))
    assert status["message"] == (
        'Secret "bad-json" is invalid: data[.dockerconfigjson]: Invalid value: '
        "\"<secret contents redacted>\": invalid character 'h' looking for beginning of value")
    status = invalid(lambda: core.create_namespaced_secret(NS, secret(
        "json-list", {".dockerconfigjson": "[]"}, "kubernetes.io/dockerconfigjson")))
    assert status["details"]["causes"][0]["message"] == (
        'Invalid value: "<secret contents redacted>": json: cannot unmarshal array into Go '
        "value of type map[string]interface {}")


def test_at_most_one_mebibyte_of_data_in_all(core: client.CoreV1Api) -> None:
    mebibyte = 1024 * 1024
    core.create_namespaced_secret(NS, {"metadata": {"name": "full"}, "data": {
        "a": b64(b"\0" * (mebibyte // 2)), "b": b64(b"\0" * (mebibyte // 2))}})
    status = invalid(lambda: core.create_namespaced_secret(NS, {
        "metadata": {"name": "over"}, "data": {"a": b64(b"\0" * (mebibyte // 2)),
                                               "b": b64(b"\0" * (mebibyte // 2 + 1))}}))
    assert status["message"] == ('Secret "over" is invalid: data: Too long: may not be more '
                                 "than 1048576 bytes")  # field.TooLong's words in 1.32
    assert causes(status) == [("FieldValueTooLong", "data")]


# --- ValidateSecretUpdate ---------------------------------------------------------------------


def test_type_never_changes(core: client.CoreV1Api) -> None:
    core.create_namespaced_secret(NS, secret("typed", {"tls.crt": "c", "tls.key": "k"},
                                             "kubernetes.io/tls"))
    body = read(core, "typed")
    body["type"] = "Opaque"
    status = invalid(lambda: core.replace_namespaced_secret("typed", NS, body))
    assert status["message"] == ('Secret "typed" is invalid: type: Invalid value: "Opaque": '
                                 "field is immutable")
    # A body without `type` is defaulted to Opaque first, so it changes the type too.
    del body["type"]
    assert causes(invalid(lambda: core.replace_namespaced_secret("typed", NS, body))) == \
        [("FieldValueInvalid", "type")]


def test_immutable_freezes_the_data(core: client.CoreV1Api) -> None:
    core.create_namespaced_secret(NS, secret("frozen", {"a": "1"}, immutable=True))
    core.patch_namespaced_secret("frozen", NS, {"metadata": {"labels": {"may": "change"}}})
    status = invalid(lambda: core.patch_namespaced_secret("frozen", NS,
                                                          {"stringData": {"a": "2"}}))
    assert status["message"] == ('Secret "frozen" is invalid: data: Forbidden: field is '
                                 "immutable when `immutable` is set")
    assert causes(invalid(lambda: core.patch_namespaced_secret(
        "frozen", NS, {"immutable": False}))) == [("FieldValueForbidden", "immutable")]
    assert read(core, "frozen")["data"] == {"a": b64("1")}


# --- list, watch, field selectors ---------------------------------------------------------------


def test_type_is_a_field_label(core: client.CoreV1Api) -> None:
    core.create_namespaced_secret("selectors", secret("plain", {"a": "1"}))
    core.create_namespaced_secret("selectors", secret("cert", {"tls.crt": "c", "tls.key": "k"},
                                                      "kubernetes.io/tls"))

    def listed(selector: str) -> list[str]:
        return [s.metadata.name for s in
                core.list_namespaced_secret("selectors", field_selector=selector).items]

    assert listed("type=kubernetes.io/tls") == ["cert"]
    assert listed("type!=kubernetes.io/tls") == ["plain"]
    assert listed("metadata.name=plain,type=Opaque") == ["plain"]
    with pytest.raises(ApiException) as refused:
        listed("data.a=1")
    assert refused.value.status == 400


def test_a_watch_filters_on_type(api: FakeKubeApi, core: client.CoreV1Api) -> None:
    start = core.list_namespaced_secret("watched").metadata.resource_version
    seen: list[tuple[str, str]] = []

    def follow() -> None:
        for event in watch.Watch().stream(core.list_namespaced_secret, "watched",
                                          field_selector="type=kubernetes.io/basic-auth",
                                          resource_version=start,
                                          timeout_seconds=int(scaled(10))):
            seen.append((event["type"], event["object"].metadata.name))
            return

    watcher = threading.Thread(target=follow)
    watcher.start()
    assert api.wait_for_watchers("secrets", 1, timeout=scaled(10))
    core.create_namespaced_secret("watched", secret("opaque", {"a": "1"}))
    core.create_namespaced_secret("watched", secret("login", {"username": "u"},
                                                    "kubernetes.io/basic-auth"))
    watcher.join(timeout=scaled(10))
    assert seen == [("ADDED", "login")]
