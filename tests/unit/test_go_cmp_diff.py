"""go-cmp's default reporter as the fake re-expresses it (fakes/kube_api/validation/
go_cmp_diff.py), against outputs of cmp.Diff on Kubernetes' types that real API servers have
printed: two identical records of context, `... // N identical fields` for the rest, keys
aligned in runs of one-line records, a changed leaf as `-`/`+` lines, a pointer shown as `&`."""

from __future__ import annotations

from typing import Any

from kube_elevator.fakes.kube_api.protobuf_wire import SCHEMA
from kube_elevator.fakes.kube_api.validation.go_cmp_diff import go_diff
from kube_elevator.fakes.kube_api.validation.go_values import go_field_name

SPEC: dict[str, Any] = {"containers": [{"name": "c", "image": "i:1"}], "restartPolicy": "Always",
                        "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst"}


def test_equal_specs_have_no_diff() -> None:
    assert go_diff(SPEC, dict(SPEC), "core.PodSpec") == ""


def test_a_changed_leaf_with_its_context() -> None:
    text = go_diff(SPEC, {**SPEC, "terminationGracePeriodSeconds": 31}, "core.PodSpec")
    lines = text.split("\n")
    assert lines[0] == "  core.PodSpec{"
    assert lines[3:7] == ['  \tRestartPolicy:                 "Always",',
                          "- \tTerminationGracePeriodSeconds: &30,",
                          "+ \tTerminationGracePeriodSeconds: &31,",
                          "  \tActiveDeadlineSeconds:         nil,"]
    # 4 fields before the change, 2 after; the internal PodSpec has no serviceAccount
    rest = len(SCHEMA["core.PodSpec"].fields) - 1 - 6
    assert lines[-3:] == [f"  \t... // {rest} identical fields", "  }", ""]


def test_the_first_run_of_equal_fields_has_no_leading_context() -> None:
    """formatDiffList: the first group prints only its last two records; a single record
    left over is printed rather than counted."""
    text = go_diff(SPEC, {**SPEC, "restartPolicy": "Never"}, "core.PodSpec")
    assert text.split("\n")[1:3] == ['  \tVolumes:                       nil,',
                                     '  \tContainers:                    {{Name: "c", Image: '
                                     '"i:1"}},']


def test_go_field_names() -> None:
    assert [go_field_name(n) for n in ("dnsPolicy", "fsType", "hostPID", "nfs", "uid", "tty",
                                       "gcePersistentDisk", "restartPolicy", "cephfs")] == [
        "DNSPolicy", "FSType", "HostPID", "NFS", "UID", "TTY", "GCEPersistentDisk",
        "RestartPolicy", "CephFS"]


def test_long_strings_get_their_own_diff() -> None:
    """report_slices.go: two strings of 32 bytes or more print as strings.Join of their
    common and changed parts (as real servers print a changed command line)."""
    old = {**SPEC, "nodeName": "ip-10-0-1-23.us-west-2.compute.internal"}
    new = {**SPEC, "nodeName": "ip-10-0-1-99.us-west-2.compute.internal"}
    lines = go_diff(old, new, "core.PodSpec").split("\n")
    start = lines.index("  \tNodeName: strings.Join({")
    assert lines[start + 1:start + 6] == ['  \t\t"ip-10-0-1-",', '- \t\t"23",', '+ \t\t"99",',
                                          '  \t\t".us-west-2.compute.internal",', '  \t}, ""),']


def test_a_long_unchanged_run_is_counted_in_bytes() -> None:
    old = {**SPEC, "nodeName": "x" * 200 + "b"}
    new = {**SPEC, "nodeName": "x" * 200 + "a"}
    lines = go_diff(old, new, "core.PodSpec").split("\n")
    start = lines.index("  \tNodeName: strings.Join({")
    assert lines[start + 1] == "  \t\t... // 72 identical bytes"
    assert lines[start + 2:start + 6] == ['  \t\t"' + "x" * 64 + '",'] * 2 + [
        '- \t\t"b",', '+ \t\t"a",']


def test_a_quantity_prints_as_parse_quantity_leaves_it() -> None:
    """apimachinery api/resource/quantity.go ParseQuantity: the int64 fast path keeps the
    input as `s` only when it is already canonical (`500m`, `1Gi`; not `1000`, `128Mi`); a
    changed request is a `-`/`+` pair of its map entry, the map's values without their type."""
    def spec(cpu: str, memory: str) -> dict[str, Any]:
        return {"containers": [{"name": "c", "image": "i", "resources": {
            "requests": {"cpu": cpu, "memory": memory}}}]}
    lines = go_diff(spec("500m", "128Mi"), spec("1000", "128Mi"), "core.PodSpec").split("\n")
    changed = [line.split(":", 1) for line in lines if line.startswith(("-", "+"))]
    assert [(key.strip(), value.strip()) for key, value in changed] == [
        ('- \t\t\t\t\ts"cpu"', '{i: resource.int64Amount{value: 500, scale: -3}, s: "500m", '
                                 'Format: "DecimalSI"},'),
        ('+ \t\t\t\t\ts"cpu"', '{i: resource.int64Amount{value: 1000}, Format: "DecimalSI"},')]
    assert any('s"memory": {i: {...}, Format: "BinarySI"}' in line for line in lines)


def test_a_removed_element_is_one_removed_record() -> None:
    """compareSlice's edit script: the elements around a removed one stay paired."""
    tolerations = [{"key": k, "operator": "Exists"} for k in "abc"]
    old = {**SPEC, "tolerations": tolerations}
    new = {**SPEC, "tolerations": [tolerations[0], tolerations[2]]}
    lines = go_diff(old, new, "core.PodSpec").split("\n")
    start = lines.index("  \tTolerations: []core.Toleration{")
    assert lines[start + 1:start + 5] == ['  \t\t{Key: "a", Operator: "Exists"},',
                                          '- \t\t{Key: "b", Operator: "Exists"},',
                                          '  \t\t{Key: "c", Operator: "Exists"},', "  \t},"]
