"""CEL rules that use Kubernetes' CEL libraries, over HTTP with the official client: custom
objects that pass and that break rules built on quantity, url, ip/cidr, lists, regex and ext
strings (cases from the upstream tables tests/unit/test_crd_cel_library.py cites); the cost
limits, at install (estimated) and at run time; and functions the fake's cel-python lacks,
refused at install naming them."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube_elevator.fakes.kube_api.crd_schema import cel_cost
from kube_elevator.fakes.kube_api.server import FakeKubeApi

pytest.importorskip("celpy")

Obj = dict[str, Any]
GROUP = "cel.example.com"
_PLURALS = (f"celthing{i}s" for i in itertools.count())  # singular: celthing{i}
SCHEMA_PATH = "spec.versions[0].schema.openAPIV3Schema"


@pytest.fixture(scope="module")
def api_client(api: FakeKubeApi) -> Iterator[client.ApiClient]:
    with api.api_client() as c:
        yield c


def install(api_client: client.ApiClient, spec_schema: Obj) -> str:
    plural = next(_PLURALS)
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": plural[:-1], "kind": "CelThing"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "properties": {"spec": spec_schema}}}}]}})
    return plural


def create(api_client: client.ApiClient, plural: str, name: str, spec: Obj) -> Obj:
    created: Obj = client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, "v1", "default", plural,
        {"apiVersion": f"{GROUP}/v1", "kind": "CelThing", "metadata": {"name": name},
         "spec": spec})
    return created


def causes(exc: ApiException) -> list[str]:
    status: Obj = json.loads(exc.body)
    return sorted(f"{c['field']}: {c['message']}" for c in status["details"]["causes"])


def field(kind: str, rule: str, message: str, **extra: Any) -> Obj:
    return {"type": kind, **extra,
            "x-kubernetes-validations": [{"rule": rule, "message": message}]}


# One CRD, one field per library; each (field, good value, bad value) below.
LIBRARY_SCHEMA: Obj = {"type": "object", "properties": {
    "memory": field("string", "quantity(self).isLessThan(quantity('2Gi'))",
                    "memory must be below 2Gi", maxLength=32),
    "size": field("string", "isQuantity(self) && quantity(self).isInteger()",
                  "size must be a whole quantity", maxLength=32),
    "endpoint": field("string", "isURL(self) && url(self).getScheme() == 'https'",
                      "endpoint must be an https URL", maxLength=256),
    "address": field("string", "isIP(self) && ip(self).family() == 4 && "
                     "cidr('10.0.0.0/8').containsIP(self)", "address must be in 10.0.0.0/8",
                     maxLength=64),
    "subnet": field("string", "isCIDR(self) && cidr(self).prefixLength() >= 16",
                    "subnet must be /16 or narrower", maxLength=64),
    "ports": {"type": "array", "maxItems": 16, "items": {"type": "integer"},
              "x-kubernetes-validations": [
                  {"rule": "self.isSorted() && self.sum() < 65536 && self.max() < 10000 && "
                           "self.indexOf(0) == -1", "message": "ports must be sorted, small"}]},
    "version": field("string", "self.find('[0-9]+') == '1' && self.findAll('[0-9]+').size() == 3",
                     "version must be 1.x.y", maxLength=32),
    "owner": field("string", "self.lowerAscii() == self && self.upperAscii() != self && "
                   "self.split('@').size() == 2 && self.trim() == self && "
                   "self.substring(0, self.indexOf('@')).replace('.', '') != '' && "
                   "['a', 'b'].join('-') == 'a-b'",
                   "owner must be a lower-case address", maxLength=128),
}}

LIBRARY_CASES = [
    ("memory", "1Gi", "3Gi"), ("size", "10M", "1.5m"),
    ("endpoint", "https://example.com/x", "http://example.com/x"),
    ("address", "10.1.2.3", "192.168.0.1"), ("subnet", "10.0.0.0/16", "10.0.0.0/8"),
    ("ports", [80, 443, 8080], [443, 80]), ("version", "v1.2.3", "v2.2.3"),
    ("owner", "team.a@example.com", "Team@example.com"),
]


@pytest.fixture(scope="module")
def library_crd(api_client: client.ApiClient) -> str:
    return install(api_client, LIBRARY_SCHEMA)


@pytest.mark.parametrize(("name", "good", "bad"), LIBRARY_CASES,
                         ids=[case[0] for case in LIBRARY_CASES])
def test_rules_using_kubernetes_cel_libraries(api_client: client.ApiClient, library_crd: str,
                                              name: str, good: Any, bad: Any) -> None:
    """Before, each of these rules failed to evaluate (no such function) and every object,
    good or bad, was refused."""
    created = create(api_client, library_crd, f"good-{name}", {name: good})
    assert created["spec"] == {name: good}
    with pytest.raises(ApiException) as raised:
        create(api_client, library_crd, f"bad-{name}", {name: bad})
    assert raised.value.status == 422
    message = LIBRARY_SCHEMA["properties"][name]["x-kubernetes-validations"][0]["message"]
    shown = LIBRARY_SCHEMA["properties"][name]["type"]
    assert causes(raised.value) == [f'spec.{name}: Invalid value: "{shown}": {message}']


def test_a_library_error_is_the_servers_evaluation_error(api_client: client.ApiClient,
                                                         library_crd: str) -> None:
    with pytest.raises(ApiException) as raised:
        create(api_client, library_crd, "not-a-quantity", {"memory": "lots"})
    [cause] = causes(raised.value)
    assert cause.startswith('spec.memory: Invalid value: "string": quantities must match the '
                            "regular expression")
    assert cause.endswith("evaluating rule: quantity(self).isLessThan(quantity('2Gi'))")


def test_a_function_the_fake_lacks_is_refused_at_install(api_client: client.ApiClient) -> None:
    with pytest.raises(ApiException) as raised:
        install(api_client, field("string", "!format.dns1123Label().validate(self).hasValue()",
                                  "a DNS label", maxLength=63))
    assert raised.value.status == 422
    [cause] = causes(raised.value)
    assert cause.startswith(f"{SCHEMA_PATH}.properties[spec].x-kubernetes-validations[0].rule: "
                            "Invalid value: ")
    assert "compilation failed: undeclared reference to 'hasValue', 'validate', " \
        "'dns1123Label': not supported by this fake API server's CEL evaluator" in cause


# Cost limits ---------------------------------------------------------------------------------

_PAIRS = "self.all(x, self.all(y, x == y || x != y))"


def test_an_unbounded_rule_is_refused_at_install_as_too_costly(
        api_client: client.ApiClient) -> None:
    """apiextensions' estimate: a quadratic rule over a list without maxItems (issue 41)."""
    unbounded = {"type": "array", "items": {"type": "integer"},
                 "x-kubernetes-validations": [{"rule": _PAIRS}]}
    with pytest.raises(ApiException) as raised:
        install(api_client, {"type": "object", "properties": {"values": unbounded}})
    hint = ("(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where "
            "arrays, maps, and strings are declared)")
    assert causes(raised.value) == [
        f"{SCHEMA_PATH}.properties[spec].properties[values].x-kubernetes-validations[0].rule: "
        f"Forbidden: estimated rule cost exceeds budget by factor of more than 100x {hint}",
        f"{SCHEMA_PATH}: Forbidden: x-kubernetes-validations estimated rule cost total for "
        f"entire OpenAPIv3 schema exceeds budget by factor of more than 100x {hint}"]
    bounded = {**unbounded, "maxItems": 50}
    plural = install(api_client, {"type": "object", "properties": {"values": bounded}})
    assert create(api_client, plural, "ok", {"values": [1, 2, 3]})["spec"]["values"] == [1, 2, 3]


@pytest.fixture
def low_limits() -> Iterator[cel_cost.CostLimits]:
    """The API server's limits are minutes of cel-python work: scaled down for the test."""
    saved = (cel_cost.LIMITS.per_call, cel_cost.LIMITS.runtime)
    yield cel_cost.LIMITS
    cel_cost.LIMITS.per_call, cel_cost.LIMITS.runtime = saved


def test_an_evaluation_past_the_per_call_limit_stops(api_client: client.ApiClient,
                                                    low_limits: cel_cost.CostLimits) -> None:
    plural = install(api_client, {"type": "object", "properties": {"values": {
        "type": "array", "maxItems": 50, "items": {"type": "integer"},
        "x-kubernetes-validations": [{"rule": _PAIRS}]}}})
    low_limits.per_call = 200
    create(api_client, plural, "few", {"values": [1, 2]})
    with pytest.raises(ApiException) as raised:
        create(api_client, plural, "many", {"values": list(range(20))})
    assert causes(raised.value) == [
        "spec.values: Invalid value: \"array\": 'operation cancelled: actual cost limit "
        "exceeded': no further validation rules will be run due to call cost exceeds limit "
        f"for rule: {_PAIRS}"]


def test_an_object_past_the_runtime_budget_stops(api_client: client.ApiClient,
                                                low_limits: cel_cost.CostLimits) -> None:
    item = {"type": "array", "maxItems": 50, "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.all(x, x >= 0)"}]}
    plural = install(api_client, {"type": "object", "properties": {"a": item, "b": item}})
    low_limits.runtime = 30  # each rule costs about one unit per item here
    create(api_client, plural, "small", {"a": [1], "b": [2]})
    with pytest.raises(ApiException) as raised:  # `a` spends most of it, `b` runs out
        create(api_client, plural, "large", {"a": list(range(20)), "b": list(range(20))})
    assert causes(raised.value) == [
        'spec.b: Invalid value: "array": validation failed due to running out of cost budget, '
        "no further validation rules will be run"]


def test_message_expression_words_the_refusal(api_client: client.ApiClient) -> None:
    """apiextensions evaluates a failed rule's messageExpression (cel/validation.go
    evalMessageExpression); one that does not compile is refused at install."""
    plural = install(api_client, {"type": "object", "properties": {"replicas": {
        "type": "integer", "x-kubernetes-validations": [{
            "rule": "self <= 10", "message": "too many",
            "messageExpression": "'replicas ' + string(self) + ' is over 10'"}]}}})
    with pytest.raises(ApiException) as raised:
        create(api_client, plural, "eleven", {"replicas": 11})
    assert causes(raised.value) == [
        'spec.replicas: Invalid value: "integer": replicas 11 is over 10']
    with pytest.raises(ApiException) as raised:
        install(api_client, {"type": "object", "properties": {"replicas": {
            "type": "integer", "x-kubernetes-validations": [{
                "rule": "self <= 10", "messageExpression": "'unclosed"}]}}})
    [cause] = causes(raised.value)
    assert cause.startswith(f"{SCHEMA_PATH}.properties[spec].properties[replicas]."
                            "x-kubernetes-validations[0].messageExpression: Invalid value: "
                            "\"'unclosed\": messageExpression compilation failed: ")
