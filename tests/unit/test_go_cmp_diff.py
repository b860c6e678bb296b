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
    rest = len(SCHEMA["core.PodSpec"].fields) - 6  # 4 fields before the change, 2 after
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
