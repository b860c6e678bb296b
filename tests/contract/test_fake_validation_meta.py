"""The fake API refuses the names, labels and annotations a real API server refuses, with its
422 `Invalid` Status, seen through the real `kubernetes` client over HTTP.

The cases are upstream's tables re-expressed: apimachinery's
staging/src/k8s.io/apimachinery/pkg/util/validation/validation_test.go (TestIsDNS1123Label,
TestIsDNS1123Subdomain, TestIsQualifiedName, TestIsValidLabelValue, TestIsValidPortName) and
staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta_test.go
(TestValidateObjectMetaNamespaces, TestValidateAnnotations, TestValidateObjectMetaUpdate...)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.tasks.core import name_formats as names

Obj = dict[str, Any]
NS = "meta"
DNS_LABEL_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a",
                  "1--a--b--2", "a" * 63]
DNS_LABEL_BAD = ["A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_",
                 "_a", "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2", "a b",
                 "a" * 64]
DNS_SUBDOMAIN_GOOD = [*DNS_LABEL_GOOD, "a.a", "ab.a", "a-1.a", "a--1--2--b.a", "a.1", "0.a",
                      "1-a.a", "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5", "a" * 253]
DNS_SUBDOMAIN_BAD = ["A", "aBc", "-", "a-", "-a", "_", "a_b", ".", "a.", ".a", "a..b", "1..2",
                     "a b", "A.a", "aB.a", "ab.A", "a.B.c.d.e", "a@b", "a,b", "a;b", "a:b",
                     "a%b", "a?b", "a$b", "a" * 254]
QUALIFIED_GOOD = ["simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple",
                  "now-with-dashes/simple", "now.with.dots/simple", "1-num.2-num/3-num",
                  "1234/5678", "1.2.3.4/5678", "Uppercase_Is_OK_123",
                  "example.com/Uppercase_Is_OK_123", "requests.storage-foo", "a" * 63,
                  "a" * 253 + "/" + "b" * 63]
QUALIFIED_BAD = ["nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-",
                 "only/one/slash", "Example.com/abc", "example_com/abc", "example.com/",
                 "/simple", "a" * 64, "a" * 254 + "/abc"]
LABEL_VALUE_GOOD = ["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234",
                    "a" * 63, ""]
LABEL_VALUE_BAD = ["nospecialchars%^=@", "Tama-nui-te-rā.is.Māori.sun", "\\backslashes\\are\\bad",
                   "-starts-with-dash", "ends-with-dash-", ".starts.with.dot", "ends.with.dot.",
                   "a" * 64]
PORT_NAME_GOOD = ["telnet", "re-mail-ck", "pop3", "a", "a-1", "1-a", "a-1-b-2-c", "1-a-2-b-3"]
PORT_NAME_BAD = ["longerthan15characters", "", "a" * 16, "12345", "1-2-3-4", "-begin", "end-",
                 "two--hyphens", "whois++"]


def config_map(name: str, **metadata: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, **metadata}, "data": {"k": "v"}}


def refusal(exc: ApiException) -> Obj:
    assert exc.status == 422, exc.body
    body: Obj = json.loads(exc.body)
    assert body["reason"] == "Invalid"
    return body


# The format checks, as upstream's unit tables state them -----------------------------------


@pytest.mark.parametrize(("check", "good", "bad"), [
    pytest.param(names.dns1123_label, DNS_LABEL_GOOD, [*DNS_LABEL_BAD, ""],
                 id="validation_test.go-TestIsDNS1123Label"),
    pytest.param(names.dns1123_subdomain, DNS_SUBDOMAIN_GOOD, [*DNS_SUBDOMAIN_BAD, ""],
                 id="validation_test.go-TestIsDNS1123Subdomain"),
    pytest.param(names.qualified_name, QUALIFIED_GOOD, QUALIFIED_BAD,
                 id="validation_test.go-TestIsQualifiedName"),
    pytest.param(names.label_value, LABEL_VALUE_GOOD, LABEL_VALUE_BAD,
                 id="validation_test.go-TestIsValidLabelValue"),
    pytest.param(names.port_name, PORT_NAME_GOOD, PORT_NAME_BAD,
                 id="validation_test.go-TestIsValidPortName"),
])
def test_upstream_format_tables(check: Any, good: list[str], bad: list[str]) -> None:
    assert [value for value in good if check(value)] == []
    assert [value for value in bad if not check(value)] == []


def test_port_numbers_and_percents_as_upstream() -> None:
    """validation_test.go TestIsValidPortNum and TestIsValidPercent."""
    assert [p for p in (1, 2, 1000, 16384, 32768, 65535) if names.port_number(p)] == []
    assert all(names.port_number(p) for p in (0, -1, 65536, 100000))
    assert [p for p in ("0%", "00000%", "1%", "01%", "99%", "100%", "101%")
            if names.percent(p)] == []
    assert all(names.percent(p) for p in ("", "0", "100", "0.0%", "99.9%", "hundred", " 1%",
                                          "1% ", "-0%", "-1%", "+1%"))


def test_messages_are_the_servers_words() -> None:
    """The exact strings kubectl prints (RegexError, MaxLenError, prefixEach)."""
    assert names.dns1123_label("a.b") == ("must not contain dots",)
    assert names.dns1123_subdomain("A") == (
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",)
    assert names.label_value("a" * 64)[0] == "must be no more than 63 characters"
    assert names.qualified_name("/simple") == ("prefix part must be non-empty",)
    assert names.qualified_name("x/" + "a" * 64) == ("name part must be no more than 63 "
                                                     "characters",)


# Over HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*DNS_SUBDOMAIN_BAD[:12], "a" * 254])
def test_bad_object_names_are_refused_over_http(core: client.CoreV1Api, name: str) -> None:
    """ValidateConfigMapName is NameIsDNSSubdomain (TestIsDNS1123Subdomain's bad values)."""
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, config_map(name))
    body = refusal(err.value)
    assert body["details"]["kind"] == "ConfigMap"
    assert [c["field"] for c in body["details"]["causes"]] == ["metadata.name"] * len(
        names.dns1123_subdomain(name))
    assert body["message"].startswith(f'ConfigMap "{name}" is invalid: metadata.name: '
                                      f'Invalid value: "{name}": ')


def test_names_per_kind_subdomain_or_label(core: client.CoreV1Api) -> None:
    """A dotted name is a DNS subdomain (a Pod's or a Node's may have dots), not a DNS label
    (ValidateNamespaceName is NameIsDNSLabel)."""
    core.create_namespaced_config_map(NS, config_map("dotted.name"))
    core.create_node({"metadata": {"name": "ip-10-0-0-1.ec2.internal"}})
    with pytest.raises(ApiException) as err:
        core.create_namespace({"metadata": {"name": "dotted.ns"}})
    body = refusal(err.value)
    assert body["message"] == ('Namespace "dotted.ns" is invalid: metadata.name: Invalid value: '
                               '"dotted.ns": must not contain dots')
    assert body["details"] == {"name": "dotted.ns", "kind": "Namespace", "causes": [
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "dotted.ns": must not '
         "contain dots", "field": "metadata.name"}]}


def test_generate_name_is_checked_as_a_prefix(core: client.CoreV1Api) -> None:
    """objectmeta_test.go TestValidateObjectMetaTrimsTrailingSlash-like: a generateName may end
    in '-' (maskTrailingDash), but not hold what a name may not; a long one is cut to 58."""
    made = core.create_namespaced_config_map(NS, config_map("", generateName="job-"))
    assert made.metadata.name.startswith("job-") and len(made.metadata.name) == 9
    long = core.create_namespaced_config_map(NS, config_map("", generateName="g" * 80))
    assert len(long.metadata.name) == 63
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, config_map("", generateName="Job_"))
    causes = refusal(err.value)["details"]["causes"]
    assert [c["field"] for c in causes] == ["metadata.generateName", "metadata.name"]


@pytest.mark.parametrize(("labels", "bad"), [
    pytest.param({"only/one/slash": "v"}, "only/one/slash", id="TestIsQualifiedName-two-slashes"),
    pytest.param({"Example.com/abc": "v"}, "Example.com/abc", id="TestIsQualifiedName-uppercase"),
    pytest.param({"k": "ends-with-dash-"}, "ends-with-dash-", id="TestIsValidLabelValue-dash"),
    pytest.param({"k": "a" * 64}, "a" * 64, id="TestIsValidLabelValue-over-the-limit"),
])
def test_bad_labels_are_refused(core: client.CoreV1Api, labels: dict[str, str],
                                bad: str) -> None:
    """ValidateLabels reports the map's field, `metadata.labels`, with the bad key or value."""
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, config_map("labelled", labels=labels))
    causes = refusal(err.value)["details"]["causes"]
    assert {c["field"] for c in causes} == {"metadata.labels"}
    assert all(c["message"].startswith(f'Invalid value: "{bad}": ') for c in causes)


def test_annotations_keys_and_total_size(core: client.CoreV1Api) -> None:
    """objectmeta_test.go TestValidateAnnotations: keys are qualified names compared
    lowercased (so uppercase is fine), the total at most 256 KiB (TotalAnnotationSizeLimitB)."""
    core.create_namespaced_config_map(NS, config_map("annotated", annotations={
        "Example.COM/Key": "anything at all", "a": "x" * (256 * 1024 - 100)}))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, config_map("too-big", annotations={
            "a": "x" * (256 * 1024)}))
    body = refusal(err.value)
    assert body["details"]["causes"] == [{"reason": "FieldValueTooLong",
                                          "message": "Too long: may not be more than 262144 bytes",
                                          "field": "metadata.annotations"}]
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, config_map("bad-key", annotations={
            "a/b/c": "v"}))
    assert refusal(err.value)["details"]["causes"][0]["field"] == "metadata.annotations"


def test_several_causes_are_joined_as_the_server_joins_them(core: client.CoreV1Api) -> None:
    """NewInvalid: `<Kind> "<name>" is invalid: [a, b]`, every cause listed once."""
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, config_map("two-faults", labels={
            "-bad": "ok", "ok": "-bad"}))
    body = refusal(err.value)
    texts = [f'{c["field"]}: {c["message"]}' for c in body["details"]["causes"]]
    assert len(texts) == 2
    assert body["message"] == f'ConfigMap "two-faults" is invalid: [{texts[0]}, {texts[1]}]'


def test_a_namespaced_object_in_a_namespace_named_badly(core: client.CoreV1Api) -> None:
    """objectmeta_test.go TestValidateObjectMetaNamespaces: the namespace is a DNS label."""
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("Bad_NS", config_map("x"))
    causes = refusal(err.value)["details"]["causes"]
    assert [c["field"] for c in causes] == ["metadata.namespace"]


def test_validation_off_stores_what_a_server_refuses() -> None:
    """The switch: `FakeKubeApi(validation=False)` keeps only the store's own name check."""
    with FakeKubeApi(validation=False) as bare, bare.api_client() as api_client:
        core = client.CoreV1Api(api_client)
        core.create_namespaced_config_map(NS, config_map("x", labels={"-bad": "-bad"}))
        assert core.read_namespaced_config_map("x", NS).metadata.labels == {"-bad": "-bad"}
