"""The fake API refuses the pod specs a real API server (1.32, the version the fake reports)
refuses, with its 422 `Invalid`, field, reason and detail words, and still takes the good
neighbour of each rule, seen through the real `kubernetes` client over HTTP.

The rules are kubernetes pkg/apis/core/validation/validation.go's: ValidateEnv and
validateEnvVarValueFrom, ValidateEnvFrom, ValidateVolumes and validateVolumeSource,
ValidateVolumeMounts, validateProbe and validateHandler, validateInitContainers,
validateNodeAffinity and ValidateNodeSelectorRequirement, validateTopologySpreadConstraints,
validatePodSpecSecurityContext and ValidateSecurityContext, ValidatePodSpec's hostname and
subdomain; the cases re-express rows of validation_test.go (TestValidateEnv,
TestValidateEnvFrom, TestValidateVolumes, TestValidateVolumeMounts, TestValidateProbe,
TestValidateHandler, TestValidateAffinity (via TestValidatePod), TestValidateTopologySpreadConstraints,
TestValidateSecurityContext, TestValidatePodSpec), each id naming the test it comes from."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.contract.test_fake_validation_pods import causes_of, pod, post

Obj = dict[str, Any]
NS = "pods"
C = "spec.containers[0]"
NA = ("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
      "nodeSelectorTerms[0].matchExpressions[0]")
TS = "spec.topologySpreadConstraints[0]"
DNS_LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
             "or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
             "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
ID_RANGE = "must be between 0 and 2147483647, inclusive"


def main(**container: Any) -> list[Obj]:
    return [{"name": "main", "image": "busybox:1", **container}]


def env(*items: Obj) -> list[Obj]:
    return main(env=list(items))


def required_node_affinity(*requirements: Obj) -> Obj:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(requirements)}]}}}


def spread(*constraints: Obj) -> list[Obj]:
    return [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             **constraint} for constraint in constraints]


EMPTY_DIR = {"name": "data", "emptyDir": {}}
FIELD_REF = {"fieldRef": {"fieldPath": "metadata.name"}}

# (containers, extra spec, [(reason, field, message)]) per refused pod.
REFUSED = [
    # 2. env value and valueFrom
    pytest.param(env({"name": "A", "value": "x", "valueFrom": FIELD_REF}), {},
                 [("FieldValueInvalid", f"{C}.env[0].valueFrom",
                   'Invalid value: "": may not be specified when `value` is not empty')],
                 id="TestValidateEnv-value-and-valueFrom"),
    pytest.param(env({"name": "A", "valueFrom": {}}), {},
                 [("FieldValueInvalid", f"{C}.env[0].valueFrom",
                   'Invalid value: "": must specify one of: `fieldRef`, `resourceFieldRef`, '
                   "`configMapKeyRef` or `secretKeyRef`")],
                 id="TestValidateEnv-valueFrom-without-a-source"),
    pytest.param(env({"name": "A", "valueFrom": {**FIELD_REF, "secretKeyRef": {
        "name": "s", "key": "k"}}}), {},
                 [("FieldValueInvalid", f"{C}.env[0].valueFrom",
                   'Invalid value: "": may not have more than one field specified at a time')],
                 id="TestValidateEnv-valueFrom-with-two-sources"),
    pytest.param(env({"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}),
                 {}, [("FieldValueNotSupported", f"{C}.env[0].valueFrom.fieldRef.fieldPath",
                       'Unsupported value: "status.phase": supported values: "metadata.name", '
                       '"metadata.namespace", "metadata.uid", "spec.nodeName", '
                       '"spec.serviceAccountName", "status.hostIP", "status.hostIPs", '
                       '"status.podIP", "status.podIPs"')],
                 id="TestValidateEnv-unsupported-fieldPath"),
    pytest.param(env({"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm"}}}), {},
                 [("FieldValueRequired", f"{C}.env[0].valueFrom.configMapKeyRef.key",
                   "Required value")],
                 id="TestValidateEnv-configMapKeyRef-without-key"),
    pytest.param(main(envFrom=[{"prefix": "P_"}]), {},
                 [("FieldValueInvalid", f"{C}.envFrom",
                   'Invalid value: "": must specify one of: `configMapRef` or `secretRef`')],
                 id="TestValidateEnvFrom-no-source"),
    # 3. volumes
    pytest.param(main(), {"volumes": [{"name": "v", "emptyDir": {}, "hostPath": {
        "path": "/x"}}]},
                 [("FieldValueForbidden", "spec.volumes[0].hostPath",
                   "Forbidden: may not specify more than 1 volume type")],
                 id="TestValidateVolumes-two-sources"),
    pytest.param(main(), {"volumes": [{"name": "v", "downwardAPI": {}, "emptyDir": {}}]},
                 [("FieldValueForbidden", "spec.volumes[0].downwarAPI",
                   "Forbidden: may not specify more than 1 volume type")],
                 id="TestValidateVolumes-two-sources-upstream-spelling"),
    pytest.param(main(), {"volumes": [EMPTY_DIR, EMPTY_DIR]},
                 [("FieldValueDuplicate", "spec.volumes[1].name", 'Duplicate value: "data"')],
                 id="TestValidateVolumes-duplicate-name"),
    pytest.param(main(), {"volumes": [{"name": "Data_1", "emptyDir": {}}]},
                 [("FieldValueInvalid", "spec.volumes[0].name",
                   f'Invalid value: "Data_1": {DNS_LABEL}')],
                 id="TestValidateVolumes-name-not-a-DNS-label"),
    pytest.param(main(), {"volumes": [{"name": "s", "secret": {}}]},
                 [("FieldValueRequired", "spec.volumes[0].secret.secretName", "Required value")],
                 id="TestValidateVolumes-secret-without-secretName"),
    pytest.param(main(), {"volumes": [{"name": "n", "nfs": {"server": "h", "path": "x"}}]},
                 [("FieldValueInvalid", "spec.volumes[0].nfs.path",
                   'Invalid value: "x": must be an absolute path')],
                 id="TestValidateVolumes-nfs-relative-path"),
    # 4. volume mounts
    pytest.param(main(volumeMounts=[{"name": "nope", "mountPath": "/x"}]),
                 {"volumes": [EMPTY_DIR]},
                 [("FieldValueNotFound", f"{C}.volumeMounts[0].name", 'Not found: "nope"')],
                 id="TestValidateVolumeMounts-unknown-volume"),
    pytest.param(main(volumeMounts=[{"name": "data", "mountPath": "/data"},
                                    {"name": "data", "mountPath": "/data"}]),
                 {"volumes": [EMPTY_DIR]},
                 [("FieldValueInvalid", f"{C}.volumeMounts[1].mountPath",
                   'Invalid value: "/data": must be unique')],
                 id="TestValidateVolumeMounts-duplicate-mountPath"),
    pytest.param(main(volumeMounts=[{"name": "data", "mountPath": "/d", "subPath": "../x"}]),
                 {"volumes": [EMPTY_DIR]},
                 [("FieldValueInvalid", f"{C}.volumeMounts.subPath",
                   "Invalid value: \"../x\": must not contain '..'")],
                 id="TestValidateVolumeMounts-subpath-backsteps"),
    pytest.param(main(volumeMounts=[{"name": "v", "mountPath": "/v"}]),
                 {"volumes": [{"name": "v", "emptyDir": {}, "nfs": {"server": "h",
                                                                     "path": "/p"}}]},
                 [("FieldValueForbidden", "spec.volumes[0].nfs",
                   "Forbidden: may not specify more than 1 volume type"),
                  ("FieldValueNotFound", f"{C}.volumeMounts[0].name", 'Not found: "v"')],
                 id="TestValidateVolumeMounts-a-refused-volume-cannot-be-mounted"),
    # 5. probes
    pytest.param(main(livenessProbe={}), {},
                 [("FieldValueRequired", f"{C}.livenessProbe",
                   "Required value: must specify a handler type")],
                 id="TestValidateProbe-no-handler"),
    pytest.param(main(readinessProbe={"exec": {"command": ["true"]}, "tcpSocket": {
        "port": 80}}), {},
                 [("FieldValueForbidden", f"{C}.readinessProbe.tcpSocket",
                   "Forbidden: may not specify more than 1 handler type")],
                 id="TestValidateHandler-two-handlers"),
    pytest.param(main(startupProbe={"exec": {}}), {},
                 [("FieldValueRequired", f"{C}.startupProbe.exec.command", "Required value")],
                 id="TestValidateHandler-exec-without-command"),
    pytest.param(main(livenessProbe={"tcpSocket": {"port": 80}, "successThreshold": 2}), {},
                 [("FieldValueInvalid", f"{C}.livenessProbe.successThreshold",
                   "Invalid value: 2: must be 1")],
                 id="TestValidateProbe-liveness-successThreshold-not-1"),
    pytest.param(main(readinessProbe={"tcpSocket": {"port": 80}, "periodSeconds": -1}), {},
                 [("FieldValueInvalid", f"{C}.readinessProbe.periodSeconds",
                   "Invalid value: -1: must be greater than or equal to 0")],
                 id="TestValidateProbe-negative-period"),
    pytest.param(main(lifecycle={"preStop": {}}), {},
                 [("FieldValueRequired", f"{C}.lifecycle.preStop",
                   "Required value: must specify a handler type")],
                 id="TestValidateLifecycle-no-handler"),
    pytest.param(main(), {"initContainers": [{"name": "init", "image": "busybox:1",
                                              "readinessProbe": {"exec": {"command": ["a"]}}}]},
                 [("FieldValueForbidden", "spec.initContainers[0].readinessProbe",
                   "Forbidden: may not be set for init containers without "
                   "restartPolicy=Always")],
                 id="TestValidateInitContainers-probe-without-restartPolicy-Always"),
    # 7. node affinity
    pytest.param(None, {"affinity": required_node_affinity({"key": "zone", "operator": "Equals",
                                                            "values": ["a"]})},
                 [("FieldValueInvalid", f"{NA}.operator",
                   'Invalid value: "Equals": not a valid selector operator')],
                 id="TestValidatePod-node-affinity-unknown-operator"),
    pytest.param(None, {"affinity": required_node_affinity({"key": "zone", "operator": "In"})},
                 [("FieldValueRequired", f"{NA}.values", "Required value: must be specified "
                   "when `operator` is 'In' or 'NotIn'")],
                 id="TestValidatePod-node-affinity-In-without-values"),
    pytest.param(None, {"affinity": required_node_affinity({"key": "zone", "operator": "Exists",
                                                            "values": ["a"]})},
                 [("FieldValueForbidden", f"{NA}.values", "Forbidden: may not be specified "
                   "when `operator` is 'Exists' or 'DoesNotExist'")],
                 id="TestValidatePod-node-affinity-Exists-with-values"),
    pytest.param(None, {"affinity": required_node_affinity({"key": "cores", "operator": "Gt",
                                                            "values": ["1", "2"]})},
                 [("FieldValueRequired", f"{NA}.values", "Required value: must be specified "
                   "single value when `operator` is 'Lt' or 'Gt'")],
                 id="TestValidatePod-node-affinity-Gt-with-two-values"),
    pytest.param(None, {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}},
                 [("FieldValueRequired", "spec.affinity.nodeAffinity."
                   "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
                   "Required value: must have at least one node selector term")],
                 id="TestValidatePod-node-affinity-no-terms"),
    pytest.param(None, {"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {
            "matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}},
                 [("FieldValueInvalid", "spec.affinity.nodeAffinity."
                   "preferredDuringSchedulingIgnoredDuringExecution[0].weight",
                   "Invalid value: 0: must be in the range 1-100")],
                 id="TestValidatePod-node-affinity-preferred-weight-0"),
    pytest.param(None, {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {
            "matchLabels": {"app": "web"}}}],
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101, "podAffinityTerm": {
            "topologyKey": "zone"}}]}}},
                 [("FieldValueRequired", "spec.affinity.podAntiAffinity."
                   "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
                   "Required value: can not be empty"),
                  ("FieldValueInvalid", "spec.affinity.podAntiAffinity."
                   "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
                   'Invalid value: "": name part must be non-empty'),
                  ("FieldValueInvalid", "spec.affinity.podAntiAffinity."
                   "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
                   'Invalid value: "": name part must consist of alphanumeric characters, '
                   "'-', '_' or '.', and must start and end with an alphanumeric character "
                   "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
                   "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
                  ("FieldValueInvalid", "spec.affinity.podAntiAffinity."
                   "preferredDuringSchedulingIgnoredDuringExecution[0].weight",
                   "Invalid value: 101: must be in the range 1-100")],
                 id="TestValidateAffinity-pod-anti-affinity-no-topologyKey-and-weight-101"),
    # 8. topology spread
    pytest.param(None, {"topologySpreadConstraints": spread({"maxSkew": 0})},
                 [("FieldValueInvalid", f"{TS}.maxSkew",
                   "Invalid value: 0: must be greater than zero")],
                 id="TestValidateTopologySpreadConstraints-maxSkew-0"),
    pytest.param(None, {"topologySpreadConstraints": spread({"topologyKey": ""})},
                 [("FieldValueRequired", f"{TS}.topologyKey", "Required value: can not be empty")],
                 id="TestValidateTopologySpreadConstraints-empty-topologyKey"),
    pytest.param(None, {"topologySpreadConstraints": spread({"whenUnsatisfiable": "Maybe"})},
                 [("FieldValueNotSupported", f"{TS}.whenUnsatisfiable", 'Unsupported value: '
                   '"Maybe": supported values: "DoNotSchedule", "ScheduleAnyway"')],
                 id="TestValidateTopologySpreadConstraints-unknown-whenUnsatisfiable"),
    pytest.param(None, {"topologySpreadConstraints": spread({}, {"maxSkew": 2})},
                 [("FieldValueDuplicate", f"{TS}.{{topologyKey, whenUnsatisfiable}}",
                   'Duplicate value: "{zone, DoNotSchedule}"')],
                 id="TestValidateTopologySpreadConstraints-repeated-pair"),
    pytest.param(None, {"topologySpreadConstraints": spread({"minDomains": 0})},
                 [("FieldValueInvalid", f"{TS}.minDomains",
                   "Invalid value: 0: must be greater than zero")],
                 id="TestValidateTopologySpreadConstraints-minDomains-0"),
    pytest.param(None, {"topologySpreadConstraints": spread({
        "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 1, "nodeAffinityPolicy": "Always"})},
                 [("FieldValueInvalid", f"{TS}.minDomains", "Invalid value: 1: can only use "
                   "minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"),
                  ("FieldValueNotSupported", f"{TS}.nodeAffinityPolicy", 'Unsupported value: '
                   '"Always": supported values: "Honor", "Ignore"')],
                 id="TestValidateTopologySpreadConstraints-minDomains-with-ScheduleAnyway"),
    # 9. security contexts
    pytest.param(None, {"securityContext": {"runAsUser": -1}},
                 [("FieldValueInvalid", "spec.securityContext.runAsUser",
                   f"Invalid value: -1: {ID_RANGE}")],
                 id="TestValidatePodSpec-pod-runAsUser-negative"),
    pytest.param(None, {"securityContext": {"runAsGroup": -1}},
                 [("FieldValueInvalid", "spec.securityContext.runAsGroup",
                   f"Invalid value: -1: {ID_RANGE}")],
                 id="TestValidatePodSpec-pod-runAsGroup-negative"),
    pytest.param(main(securityContext={"runAsUser": -1, "runAsGroup": -2}), {},
                 [("FieldValueInvalid", f"{C}.securityContext.runAsUser",
                   f"Invalid value: -1: {ID_RANGE}"),
                  ("FieldValueInvalid", f"{C}.securityContext.runAsGroup",
                   f"Invalid value: -2: {ID_RANGE}")],
                 id="TestValidateSecurityContext-container-ids-negative"),
    # 1. env var names (relaxed in 1.32: printable ASCII but '=')
    pytest.param(env({"name": "A=B", "value": "x"}), {},
                 [("FieldValueInvalid", f"{C}.env[0].name",
                   'Invalid value: "A=B": a valid environment variable name must consist only '
                   "of printable ASCII characters other than '='")],
                 id="TestValidateEnv-relaxed-name-with-equals"),
    pytest.param(env({"name": "caf\u00e9", "value": "x"}), {},
                 [("FieldValueInvalid", f"{C}.env[0].name",
                   'Invalid value: "caf\u00e9": a valid environment variable name must consist '
                   "only of printable ASCII characters other than '='")],
                 id="TestValidateEnv-relaxed-name-not-ASCII"),
    # 6. hostname and subdomain
    pytest.param(None, {"hostname": "Web_1"},
                 [("FieldValueInvalid", "spec.hostname", f'Invalid value: "Web_1": {DNS_LABEL}')],
                 id="TestValidatePodSpec-bad-hostname"),
    # 10. the priority class: its name's format (ValidatePodSpec, ValidatePriorityClassName)
    pytest.param(None, {"priorityClassName": "High_Priority"},
                 [("FieldValueInvalid", "spec.priorityClassName",
                   'Invalid value: "High_Priority": a lowercase RFC 1123 subdomain must '
                   "consist of lower case alphanumeric characters, '-' or '.', and must start "
                   "and end with an alphanumeric character (e.g. 'example.com', regex used for "
                   "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
                   "[a-z0-9])?)*')")],
                 id="TestValidatePodSpec-bad-priorityClassName"),
    pytest.param(None, {"preemptionPolicy": "Sometimes"},
                 [("FieldValueNotSupported", "spec.preemptionPolicy", 'Unsupported value: '
                   '"Sometimes": supported values: "PreemptLowerPriority", "Never"')],
                 id="TestValidatePodSpec-bad-preemptionPolicy"),
    pytest.param(None, {"subdomain": "a.b"},
                 [("FieldValueInvalid", "spec.subdomain",
                   'Invalid value: "a.b": must not contain dots')],
                 id="TestValidatePodSpec-subdomain-is-a-label"),
]


@pytest.mark.parametrize(("containers", "spec", "expected"), REFUSED)
def test_refused(core: client.CoreV1Api, containers: list[Obj] | None, spec: Obj,
                 expected: list[tuple[str, str, str]]) -> None:
    body = pod("refused", containers, **spec)
    assert causes_of(core, body) == expected
    _, status = post(core, f"/api/v1/namespaces/{NS}/pods", body)
    assert status["message"] == 'Pod "refused" is invalid: ' + (
        f"{expected[0][1]}: {expected[0][2]}" if len(expected) == 1 else
        "[" + ", ".join(f"{f}: {m}" for _, f, m in expected) + "]")


# The good neighbour of each rule: taken, and read back as the server keeps it.
ACCEPTED = [
    pytest.param(env({"name": "POD", "valueFrom": FIELD_REF}), {}, id="env-one-source"),
    pytest.param(env({"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                     {"name": "E", "value": ""}), {}, id="env-key-ref-and-empty-value"),
    pytest.param(main(envFrom=[{"configMapRef": {"name": "cm"}, "prefix": "CM_"}]), {},
                 id="envFrom-one-source"),
    pytest.param(env({"name": "1-my.VAR name", "value": "x"}), {},
                 id="env-relaxed-name"),
    pytest.param(main(volumeMounts=[{"name": "data", "mountPath": "/a"},
                                    {"name": "data", "mountPath": "/b", "subPath": "s/t"}]),
                 {"volumes": [EMPTY_DIR, {"name": "cfg", "configMap": {"name": "c"}}]},
                 id="volumes-and-mounts"),
    pytest.param(main(livenessProbe={"httpGet": {"port": 8080}, "successThreshold": 0},
                      readinessProbe={"tcpSocket": {"port": "http"}, "successThreshold": 3},
                      lifecycle={"preStop": {"exec": {"command": ["sleep", "1"]}}}),
                 {"initContainers": [{"name": "sidecar", "image": "busybox:1",
                                      "restartPolicy": "Always",
                                      "startupProbe": {"exec": {"command": ["true"]}}}]},
                 id="probes-one-handler-each"),
    pytest.param(None, {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                 {"key": "gpu", "operator": "DoesNotExist"},
                                 {"key": "cores", "operator": "Gt", "values": ["many"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In",
                             "values": ["node-1"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {
            "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}]}}]}}},
                 id="node-affinity-valid-operators"),
    pytest.param(None, {"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone",
            "namespaces": ["data"]}],
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname"}}]}}}, id="pod-affinity-valid"),
    pytest.param(None, {"topologySpreadConstraints": spread(
        {"minDomains": 2, "labelSelector": {"matchLabels": {"app": "web"}}},
        {"whenUnsatisfiable": "ScheduleAnyway", "nodeTaintsPolicy": "Honor"})},
                 id="topology-spread-valid"),
    pytest.param(main(securityContext={"runAsUser": 0, "runAsGroup": 2147483647}),
                 {"securityContext": {"runAsUser": 1000, "runAsGroup": 0, "fsGroup": 2000}},
                 id="security-context-ids-in-range"),
    pytest.param(None, {"hostname": "web-0", "subdomain": "svc"}, id="hostname-and-subdomain"),
    pytest.param(None, {"priorityClassName": "system-cluster-critical",
                        "preemptionPolicy": "Never"}, id="priority-class-and-policy"),
]


@pytest.mark.parametrize(("containers", "spec"), ACCEPTED)
def test_accepted(core: client.CoreV1Api, containers: list[Obj] | None, spec: Obj,
                  request: pytest.FixtureRequest) -> None:
    name = request.node.callspec.id.lower()
    made = core.create_namespaced_pod(NS, pod(name, containers, **spec))
    assert made.metadata.name == name
    read = core.api_client.sanitize_for_serialization(core.read_namespaced_pod(name, NS))
    for key, value in spec.items():
        if key != "initContainers":
            assert _subset(value, read["spec"][key]), key


def _subset(sent: Any, kept: Any) -> bool:
    """Every field sent comes back (defaults may add more)."""
    if isinstance(sent, dict):
        return isinstance(kept, dict) and all(_subset(v, kept.get(k)) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(kept, list) and len(sent) == len(kept) and all(
            _subset(a, b) for a, b in zip(sent, kept, strict=True))
    return bool(sent == kept)


def test_defaults_come_before_the_rules(core: client.CoreV1Api) -> None:
    """A bare volume is an emptyDir (SetDefaults_Volume), a probe's zero successThreshold is 1
    and an httpGet's path `/` (SetDefaults_Probe, SetDefaults_HTTPGetAction), so none of them
    is refused."""
    core.create_namespaced_pod(NS, pod("defaulted", main(
        volumeMounts=[{"name": "scratch", "mountPath": "/s"}],
        livenessProbe={"httpGet": {"port": 80, "path": ""}, "successThreshold": 0}),
        volumes=[{"name": "scratch"}]))
    spec = core.read_namespaced_pod("defaulted", NS).spec
    assert spec.volumes[0].empty_dir is not None
    probe = spec.containers[0].liveness_probe
    assert (probe.success_threshold, probe.http_get.path, probe.http_get.scheme) == (
        1, "/", "HTTP")


def test_pod_templates_follow_the_same_rules(api: FakeKubeApi) -> None:
    """A Deployment's template is a PodSpec validated by the same functions (ValidatePodTemplateSpec
    -> ValidatePodSpec), its paths under `spec.template.spec`."""
    with api.api_client() as api_client:
        code, status = post(client.CoreV1Api(api_client),
                             f"/apis/apps/v1/namespaces/{NS}/deployments", {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "tpl"},
            "spec": {"selector": {"matchLabels": {"app": "tpl"}}, "template": {
                "metadata": {"labels": {"app": "tpl"}},
                "spec": {"containers": main(volumeMounts=[{"name": "nope", "mountPath": "/x"}],
                                            livenessProbe={}),
                         "topologySpreadConstraints": spread({"maxSkew": 0})}}}})
    assert code == 422, status
    assert status["details"]["kind"] == "Deployment"
    assert [(c["reason"], c["field"]) for c in status["details"]["causes"]] == [
        ("FieldValueNotFound", "spec.template.spec.containers[0].volumeMounts[0].name"),
        ("FieldValueRequired", "spec.template.spec.containers[0].livenessProbe"),
        ("FieldValueInvalid", "spec.template.spec.topologySpreadConstraints[0].maxSkew"),
    ]
    assert json.dumps(status).count("must specify a handler type") == 2  # cause and message


def test_a_stateful_set_mounts_its_claim_templates(api: FakeKubeApi) -> None:
    """A StatefulSet's template is not a PodSpec upstream validates (apps validation.go
    ValidatePodTemplateSpecForStatefulSet leaves it out: its containers mount the
    volumeClaimTemplates, which are not in `volumes`), so the mount of `data` is taken;
    restartPolicy and activeDeadlineSeconds are still ValidateStatefulSetSpec's."""
    def stateful_set(name: str, **pod_spec: Any) -> Obj:
        return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
                "spec": {"serviceName": name, "selector": {"matchLabels": {"app": name}},
                         "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                             "accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "1Gi"}}}}],
                         "template": {"metadata": {"labels": {"app": name}}, "spec": {
                             "containers": main(volumeMounts=[{"name": "data",
                                                               "mountPath": "/data"}]),
                             **pod_spec}}}}
    with api.api_client() as api_client:
        apps = client.AppsV1Api(api_client)
        made = apps.create_namespaced_stateful_set(NS, stateful_set("db"))
        assert made.spec.template.spec.containers[0].volume_mounts[0].name == "data"
        code, status = post(client.CoreV1Api(api_client),
                            f"/apis/apps/v1/namespaces/{NS}/statefulsets",
                            stateful_set("late", activeDeadlineSeconds=5))
    assert code == 422, status
    assert status["message"] == ('StatefulSet.apps "late" is invalid: spec.template.spec.'
                                 "activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in "
                                 "StatefulSet is not Supported")
