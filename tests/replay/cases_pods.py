"""Pods as a real API server takes them: kubernetes test/integration/pods/pods_test.go
(TestPodUpdateActiveDeadlineSeconds, TestPodReadOnlyFilesystem, TestPodCreateEphemeralContainers,
TestPodUpdateEphemeralContainers, TestPodPatchEphemeralContainers) and
test/integration/defaulttolerationseconds/defaulttolerationseconds_test.go (TestAdmission).

Upstream's update cases PUT the prototype pod as first written (no resourceVersion, none of the
defaults the server added: a pod allows an unconditional update, and the server defaults the
body again before it compares it with the stored pod).
"""

from __future__ import annotations

from typing import Any

from tests.replay.model import DEFAULTING, PRESENT, VALUE_VALIDATION, Case, Expect, Request

PODS = "test/integration/pods/pods_test.go"
TOLERATIONS = "test/integration/defaulttolerationseconds/defaulttolerationseconds_test.go"


def _namespace(name: str) -> Request:
    return Request("POST", "/api/v1/namespaces", {"metadata": {"name": name}}, tolerate=(409,))


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    """The prototype: one container `fake-name` running `fakeimage`."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "fake-name", "image": "fakeimage"}], **spec}}


def _deadline(value: int | None) -> dict[str, Any]:
    return {} if value is None else {"activeDeadlineSeconds": value}


# (name, original, update, valid): a deadline may be set or shortened, never lengthened, unset,
# zero or negative (ValidatePodUpdate's activeDeadlineSeconds rule).
_DEADLINE_CASES = (
    ("no change, nil", None, None, True),
    ("no change, set", 30, 30, True),
    ("change to positive from nil", None, 60, True),
    ("change to smaller positive", 60, 30, True),
    ("change to larger positive", 30, 60, False),
    ("change to negative from positive", 30, -1, False),
    ("change to negative from nil", None, -1, False),
    ("change to zero from positive", 30, 0, False),
    ("change to nil from positive", 30, None, False),
)


def _deadline_cases() -> list[Case]:
    namespace = "pod-activedeadline-update"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    cases = []
    for i, (title, original, update, valid) in enumerate(_DEADLINE_CASES):
        name = f"activedeadlineseconds-test-{i}"
        steps = (_namespace(namespace),
                 Request("POST", pods, _pod(name, **_deadline(original))),
                 Request("PUT", f"{pods}/{name}", _pod(name, **_deadline(update))))
        expect = Expect(status=200) if valid else Expect(status=422, reason="Invalid")
        test = f"TestPodUpdateActiveDeadlineSeconds/{title}"
        cases.append(Case(test, VALUE_VALIDATION, PODS, test, steps, expect))
    return cases


_DEBUGGER = {"name": "debugger", "image": "debugimage", "imagePullPolicy": "Always",
             "terminationMessagePolicy": "File"}


def _debugger(name: str) -> dict[str, Any]:
    return {**_DEBUGGER, "name": name}


def _ephemeral_update_cases() -> list[Case]:
    """TestPodUpdateEphemeralContainers: PUT to /ephemeralcontainers may add, never remove."""
    namespace = "pod-update-ephemeral-containers"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    table: tuple[tuple[str, list[dict[str, Any]] | None, list[dict[str, Any]] | None, bool],
                 ...] = (
        ("no change, nil", None, None, True),
        ("no change, set", [_DEBUGGER], [_DEBUGGER], True),
        ("add single container", None, [_DEBUGGER], True),
        ("remove all containers, nil", [_DEBUGGER], None, False),
        ("remove all containers, empty", [_DEBUGGER], [], False),
        ("increase number of containers", [_debugger("debugger1")],
         [_debugger("debugger1"), _debugger("debugger2")], True),
        ("decrease number of containers", [_debugger("debugger1"), _debugger("debugger2")],
         [_debugger("debugger1")], False),
    )
    cases = []
    for i, (title, original, update, valid) in enumerate(table):
        name = f"ephemeral-container-test-{i}"
        sub = f"{pods}/{name}/ephemeralcontainers"
        steps: list[Request] = [_namespace(namespace), Request("POST", pods, _pod(name))]
        if original:
            steps.append(Request("PUT", sub, _pod(name, ephemeralContainers=original)))
        spec = {} if update is None else {"ephemeralContainers": update}
        steps.append(Request("PUT", sub, _pod(name, **spec)))
        expect = Expect(status=200) if valid else Expect(status=422, reason="Invalid")
        test = f"TestPodUpdateEphemeralContainers/{title}"
        cases.append(Case(test, VALUE_VALIDATION, PODS, test, tuple(steps), expect))
    return cases


def _ephemeral_patch_cases() -> list[Case]:
    """TestPodPatchEphemeralContainers: patches of /ephemeralcontainers, by patch type."""
    namespace = "pod-patch-ephemeral-containers"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    one = [_debugger("debugger1")]
    smp, merge, jsonp = ("application/strategic-merge-patch+json",
                         "application/merge-patch+json", "application/json-patch+json")
    table: tuple[tuple[str, list[dict[str, Any]] | None, str, Any, bool], ...] = (
        ("create single container (strategic)", None, smp,
         {"spec": {"ephemeralContainers": one}}, True),
        ("create single container (merge)", None, merge,
         {"spec": {"ephemeralContainers": one}}, True),
        ("create single container (JSON)", None, jsonp,
         [{"op": "add", "path": "/spec/ephemeralContainers", "value": one}], True),
        ("add single container (strategic)", one, smp,
         {"spec": {"ephemeralContainers": [_debugger("debugger2")]}}, True),
        ("add single container (merge)", one, merge,
         {"spec": {"ephemeralContainers": [*one, _debugger("debugger2")]}}, True),
        ("add single container (JSON)", one, jsonp,
         [{"op": "add", "path": "/spec/ephemeralContainers/-", "value": _debugger("debugger2")}],
         True),
        ("remove all containers (merge)", one, merge, {"spec": {"ephemeralContainers": []}},
         False),
        ("remove the single container (JSON)", one, jsonp,
         [{"op": "remove", "path": "/spec/ephemeralContainers/0"}], False),
        ("remove all containers (JSON)", one, jsonp,
         [{"op": "remove", "path": "/spec/ephemeralContainers"}], False),
    )
    cases = []
    for i, (title, original, content_type, patch, valid) in enumerate(table):
        name = f"ephemeral-container-test-{i}"
        sub = f"{pods}/{name}/ephemeralcontainers"
        pod = _pod(name)
        pod["spec"]["containers"][0].update(imagePullPolicy="Always",
                                            terminationMessagePolicy="File")
        steps: list[Request] = [_namespace(namespace), Request("POST", pods, pod)]
        if original:
            steps.append(Request("PUT", sub, {**pod, "spec": {**pod["spec"],
                                                              "ephemeralContainers": original}}))
        steps.append(Request("PATCH", sub, patch, content_type))
        expect = Expect(status=200) if valid else Expect(status=422, reason="Invalid")
        test = f"TestPodPatchEphemeralContainers/{title}"
        cases.append(Case(test, VALUE_VALIDATION, PODS, test, tuple(steps), expect))
    return cases


def _single_cases() -> list[Case]:
    readonly = "/api/v1/namespaces/pod-readonly-root/pods"
    ephemeral = "/api/v1/namespaces/pod-create-ephemeral-containers/pods"
    pod = _pod("xxx")
    pod["spec"]["containers"][0]["securityContext"] = {"readOnlyRootFilesystem": True}
    with_debugger = _pod("xxx", ephemeralContainers=[_DEBUGGER])
    with_debugger["spec"]["containers"][0].update(imagePullPolicy="Always",
                                                  terminationMessagePolicy="File")
    tolerated = "/api/v1/namespaces/default-toleration-seconds/pods"
    return [
        Case("TestPodReadOnlyFilesystem", VALUE_VALIDATION, PODS, "TestPodReadOnlyFilesystem",
             (_namespace("pod-readonly-root"), Request("POST", readonly, pod)),
             Expect(status=201, fields={"spec.containers.0.securityContext"
                                        ".readOnlyRootFilesystem": True})),
        Case("TestPodCreateEphemeralContainers", VALUE_VALIDATION, PODS,
             "TestPodCreateEphemeralContainers",
             (_namespace("pod-create-ephemeral-containers"),
              Request("POST", ephemeral, with_debugger)),
             Expect(status=422, reason="Invalid", message_contains=(
                 "spec.ephemeralContainers: Forbidden: cannot be set on create",))),
        # The DefaultTolerationSeconds plugin: the not-ready and unreachable NoExecute
        # tolerations of 300 s on a pod that has none.
        Case("TestAdmission", DEFAULTING, TOLERATIONS, "TestAdmission",
             (_namespace("default-toleration-seconds"),
              Request("POST", tolerated, {"metadata": {"name": "foo"}, "spec": {
                  "containers": [{"name": "test", "image": "an-image"}]}})),
             Expect(status=201, fields={
                 "spec.tolerations": [
                     {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                      "effect": "NoExecute", "tolerationSeconds": 300},
                     {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                      "effect": "NoExecute", "tolerationSeconds": 300}],
                 "metadata.uid": PRESENT})),
    ]


CASES: list[Case] = [*_deadline_cases(), *_ephemeral_update_cases(), *_ephemeral_patch_cases(),
                     *_single_cases()]
