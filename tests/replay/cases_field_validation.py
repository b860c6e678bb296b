"""Field validation of custom resources: kubernetes test/integration/apiserver/field_validation_test.go
TestFieldValidation's CRD subtests (PostCRD, PutCRD, ApplyCreateCRD, ApplyUpdateCRD and their
Schemaless twins), which tests/contract/test_fake_field_validation.py (the Deployment subtests)
does not have.

Upstream's two CRDs share one schema (`crdSchemaBase`): `spec` with `cronSpec`, `knownField1` and
a `ports` map-list keyed by containerPort and protocol; the "schemaless" one also preserves
unknown fields under `spec` (not under the port items). Its bodies carry unknown and duplicated
fields at known lines: the YAML warnings name those lines, so the bodies below keep upstream's
line layout. A POST body's resourceVersion is `%!s(MISSING)` upstream (its format string has one
more verb than arguments); it is sent as is.

One adaptation: upstream's two CRDs share the plural `noxus` (in two groups); the fake keys
custom resources by plural alone, so the schemaless one is `schemalessnoxus` here, and that
limit is one case of its own in cases_crd_validation.py (a strict xfail), not 24. Each case
starts from its CRD made afresh (crd_fixtures.fresh).
"""

from __future__ import annotations

from typing import Any

from tests.replay.crd_fixtures import fresh
from tests.replay.model import FIELD_VALIDATION, Case, Expect, Request

SOURCE = "test/integration/apiserver/field_validation_test.go"
KIND = "WishIHadChosenNoxu"

_PORT_ITEM = {
    "type": "object",
    "required": ["containerPort", "protocol"],
    "properties": {
        "containerPort": {"type": "integer", "format": "int32"},
        "hostIP": {"type": "string"},
        "hostPort": {"type": "integer", "format": "int32"},
        "name": {"type": "string"},
        "protocol": {"type": "string"},
    },
}


def plural_of(group: str) -> str:
    return "schemalessnoxus" if group.startswith("schemaless.") else "noxus"


def noxu_crd(group: str, preserve_under_spec: bool) -> dict[str, Any]:
    """setupCRD: the cluster-scoped noxu fixture in `group`, with crdSchemaBase."""
    spec: dict[str, Any] = {
        "type": "object",
        "properties": {
            "cronSpec": {"type": "string",
                         "pattern": r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$"},
            "knownField1": {"type": "string"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                      "items": _PORT_ITEM},
        },
    }
    if preserve_under_spec:
        spec["x-kubernetes-preserve-unknown-fields"] = True
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural_of(group)}.{group}"},
        "spec": {
            "group": group, "scope": "Cluster",
            "names": {"plural": plural_of(group), "singular": "nonenglishnoxu", "kind": KIND,
                      "listKind": "NoxuItemList", "shortNames": ["foo", "bar", "abc", "def"]},
            "versions": [{"name": "v1beta1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {
                              "type": "object", "properties": {"spec": spec}}}}],
        },
    }


# crdInvalidBody: unknown fields (one also duplicated), a duplicated known field, and in the one
# port a duplicated hostPort and an unknown nested field.
def invalid_json(api_version: str, name: str, resource_version: str) -> str:
    return (
        "\n{\n"
        f'  "apiVersion": "{api_version}",\n'
        f'  "kind": "{KIND}",\n'
        '  "metadata": {\n'
        f'    "name": "{name}",\n'
        f'    "resourceVersion": "{resource_version}"\n'
        "  },\n"
        '  "spec": {\n'
        '    "unknown1": "val1",\n'
        '    "unknownDupe": "valDupe",\n'
        '    "unknownDupe": "valDupe2",\n'
        '    "knownField1": "val1",\n'
        '    "knownField1": "val2",\n'
        '    "ports": [{"name": "portName", "containerPort": 8080, "protocol": "TCP",\n'
        '               "hostPort": 8081, "hostPort": 8082, "unknownNested": "val"}]\n'
        "  }\n"
        "}")


# crdInvalidBodyYAML: the same, one key a line; the duplicates sit on lines 10, 12 and 18.
def invalid_yaml(api_version: str, name: str, resource_version: str) -> str:
    return (
        "\n"
        f'apiVersion: "{api_version}"\n'
        f'kind: "{KIND}"\n'
        "metadata:\n"
        f'  name: "{name}"\n'
        f'  resourceVersion: "{resource_version}"\n'
        "spec:\n"
        "  unknown1: val1\n"
        "  unknownDupe: valDupe\n"
        "  unknownDupe: valDupe2\n"
        "  knownField1: val1\n"
        "  knownField1: val2\n"
        "  ports:\n"
        "  - name: portName\n"
        "    containerPort: 8080\n"
        "    protocol: TCP\n"
        "    hostPort: 8081\n"
        "    hostPort: 8082\n"
        "    unknownNested: val")


def valid_json(api_version: str, name: str) -> dict[str, Any]:
    """crdValidBody."""
    return {"apiVersion": api_version, "kind": KIND, "metadata": {"name": name},
            "spec": {"knownField1": "val1", "ports": [
                {"name": "portName", "containerPort": 8080, "protocol": "TCP",
                 "hostPort": 8081}]}}


# crdApplyInvalidBody: an apply body (read as YAML) whose duplicates sit on lines 10 and 16.
def apply_invalid(api_version: str, name: str) -> str:
    return (
        "\n{\n"
        f'  "apiVersion": "{api_version}",\n'
        f'  "kind": "{KIND}",\n'
        '  "metadata": {\n'
        f'    "name": "{name}"\n'
        "  },\n"
        '  "spec": {\n'
        '    "knownField1": "val1",\n'
        '    "knownField1": "val2",\n'
        '    "ports": [{\n'
        '      "name": "portName",\n'
        '      "containerPort": 8080,\n'
        '      "protocol": "TCP",\n'
        '      "hostPort": 8081,\n'
        '      "hostPort": 8082\n'
        "    }]\n"
        "  }\n"
        "}")


def apply_valid(api_version: str, name: str) -> dict[str, Any]:
    """crdApplyValidBody."""
    return {"apiVersion": api_version, "kind": KIND, "metadata": {"name": name},
            "spec": {"knownField1": "val1", "ports": [
                {"name": "portName", "containerPort": 8080, "protocol": "TCP",
                 "hostPort": 8082}]}}


_DUPES_JSON = ('duplicate field "unknownDupe"', 'duplicate field "knownField1"',
               'duplicate field "hostPort"')
_DUPES_YAML = ('line 10: key "unknownDupe" already set in map',
               'line 12: key "knownField1" already set in map',
               'line 18: key "hostPort" already set in map')
_NESTED = ('unknown field "spec.ports[0].unknownNested"',)
_UNKNOWN = ('unknown field "spec.unknown1"', 'unknown field "spec.unknownDupe"')
_APPLY_DUPES = ('line 10: key "knownField1" already set in map',
                'line 16: key "hostPort" already set in map')


def _write_cases(verb: str, schemaless: bool) -> list[Case]:
    """testFieldValidation{Post,Put}CRD[Schemaless]: four directives by two encodings."""
    group = "schemaless.example.com" if schemaless else "schema.example.com"
    crd = noxu_crd(group, preserve_under_spec=schemaless)
    api_version = f"{group}/v1beta1"
    collection = f"/apis/{group}/v1beta1/{plural_of(group)}"
    unknown = _NESTED if schemaless else _NESTED + _UNKNOWN
    prefix = ("schemaless-" if schemaless else "") + f"crd-{verb.lower()}"
    test = f"TestFieldValidation/{verb}CRD{'Schemaless' if schemaless else ''}"
    cases: list[Case] = []
    for encoding in ("json", "yaml"):
        found = (_DUPES_JSON if encoding == "json" else _DUPES_YAML) + unknown
        for directive in ("Strict", "Warn", "Ignore", ""):
            word = directive.lower() or "no"
            name = f"{prefix}-{word}-validation" + ("-yaml" if encoding == "yaml" else "")
            make = invalid_json if encoding == "json" else invalid_yaml
            content_type = "application/json" if encoding == "json" else "application/yaml"
            query = {"fieldValidation": directive} if directive else {}
            if verb == "Post":
                steps = (*fresh(crd, None), Request("POST", collection,
                                                    make(api_version, name, "%!s(MISSING)"),
                                                    content_type, query))
            else:
                steps = (*fresh(crd, None),
                         Request("POST", collection, valid_json(api_version, name)),
                         Request("PUT", f"{collection}/{name}", make(api_version, name, "{rv}"),
                                 content_type, query))
            if directive == "Strict":
                expect = Expect(status=400, message_contains=found)
            elif directive == "Ignore":
                expect = Expect(status=201 if verb == "Post" else 200, warnings=())
            else:
                expect = Expect(status=201 if verb == "Post" else 200, warnings=found)
            cases.append(Case(f"{test}/{name}", FIELD_VALIDATION, SOURCE, f"{test}/{name}",
                              steps, expect))
    return cases


def _apply_cases(update: bool, schemaless: bool) -> list[Case]:
    """testFieldValidationApply{Create,Update}CRD[Schemaless]: duplicates in an apply body."""
    group = "schemaless.example.com" if schemaless else "schema.example.com"
    crd = noxu_crd(group, preserve_under_spec=schemaless)
    api_version = f"{group}/v1beta1"
    collection = f"/apis/{group}/v1beta1/{plural_of(group)}"
    test = (f"TestFieldValidation/Apply{'Update' if update else 'Create'}CRD"
            f"{'Schemaless' if schemaless else ''}")
    cases: list[Case] = []
    for directive in ("Strict", "Warn", "Ignore", ""):
        word = ("schemaless-" if schemaless else "") + f"{directive.lower() or 'no'}-validation"
        name = (f"apply-{'update' if update else 'create'}-crd"
                f"{'-schemaless' if schemaless else ''}-{word}")
        query = {"fieldManager": "mgr", **({"fieldValidation": directive} if directive else {})}
        apply = Request("PATCH", f"{collection}/{name}", apply_invalid(api_version, name),
                        "application/apply-patch+yaml", query)
        steps: tuple[Request, ...] = (*fresh(crd, None), apply)
        if update:
            steps = (*fresh(crd, None), Request("PATCH", f"{collection}/{name}",
                                      apply_valid(api_version, name),
                                      "application/apply-patch+yaml", query), apply)
        ok = 200 if update else 201
        if directive == "Strict":
            expect = Expect(status=400, message_contains=(
                'key "knownField1" already set in map', 'key "hostPort" already set in map'))
        elif directive == "Ignore":
            expect = Expect(status=ok, warnings=())
        else:
            expect = Expect(status=ok, warnings=_APPLY_DUPES)
        cases.append(Case(f"{test}/{word}", FIELD_VALIDATION, SOURCE, f"{test}/{word}", steps,
                          expect))
    return cases


CASES: list[Case] = [
    *_write_cases("Post", schemaless=False), *_write_cases("Post", schemaless=True),
    *_write_cases("Put", schemaless=False), *_write_cases("Put", schemaless=True),
    *_apply_cases(update=False, schemaless=False), *_apply_cases(update=False, schemaless=True),
    *_apply_cases(update=True, schemaless=False), *_apply_cases(update=True, schemaless=True),
]
