"""The layers a write to a built-in kind passes before it is stored, in the API server's order:
its defaults (`defaulting.py`), the default admission plugins' (`admission.py`),
then value validation (`validation/`).  Each is a switch on `FakeKubeApi` (docs/harness.md,
Validation and defaulting)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kube_elevator.fakes.kube_api.admission import admitted
from kube_elevator.fakes.kube_api.defaulting import api_defaulted, pod_qos_class
from kube_elevator.fakes.kube_api.go_base64 import with_canonical_bytes
from kube_elevator.fakes.kube_api.resources import Obj, ResourceType
from kube_elevator.fakes.kube_api.secret_data import with_string_data_merged
from kube_elevator.fakes.kube_api.validation import validate


@dataclass
class WriteLayers:
    """Which layers run: `defaulting` (the API server's defaults), `admission_defaults` (the
    admission plugins' additions to a created Pod), `validation` (422 for what a server
    refuses).  With defaulting off the object is stored bare, but validated as defaulted, so
    a field the server would default is not reported missing."""

    defaulting: bool = True
    admission_defaults: bool = True
    validation: bool = True
    # Admission plugins turned off by name (admission.PLUGINS), as kube-apiserver's
    # --disable-admission-plugins; upstream's integration servers disable ServiceAccount.
    disabled_admission_plugins: frozenset[str] = field(default_factory=frozenset)

    def apply(self, rt: ResourceType, old: Obj | None, new: Obj, *, in_process: bool,
              subresource: str | None = None) -> Obj:
        """`new` as it is stored (raises the API error when it is refused)."""
        if rt.custom or rt.plural == "customresourcedefinitions":
            return new
        if rt.plural == "secrets":  # the v1 conversion, whichever layers are on
            new = with_string_data_merged(new)
        # The server decodes into Go structs: a JSON null is the zero value, which defaulting
        # then fills (`terminationMessagePolicy: null` is stored as "File"), and is not written
        # back (omitempty); a []byte is written back in canonical base64.
        decoded = with_canonical_bytes(rt.plural, _without_nulls(new))
        stored = api_defaulted(rt.plural, decoded) if self.defaulting else new
        if self.admission_defaults:  # on create, and (some plugins) on update
            stored = admitted(rt.plural, stored, old, self.disabled_admission_plugins)
        if old is None and self.defaulting and rt.plural == "pods":
            stored = _with_qos(stored)
        if self.validation:
            checked = stored if self.defaulting else api_defaulted(rt.plural, decoded)
            before = None if old is None else (old if self.defaulting
                                               else api_defaulted(rt.plural, old))
            validate(rt, checked, before, pod_update_rule=not in_process,
                     subresource=subresource)
        return stored


def _without_nulls(value: Obj) -> Obj:
    """`value` without the keys whose value is null, at every depth (a copy only where one
    is dropped, so the common object without nulls costs one walk)."""
    changed = False
    result: Obj = {}
    for key, item in value.items():
        if item is None:
            changed = True
            continue
        if isinstance(item, dict):
            cleaned = _without_nulls(item)
            changed = changed or cleaned is not item
            item = cleaned
        elif isinstance(item, list):
            cleaned_list = [_without_nulls(element) if isinstance(element, dict) else element
                            for element in item]
            if any(a is not b for a, b in zip(cleaned_list, item, strict=True)):
                changed = True
                item = cleaned_list
        result[key] = item
    return result if changed else value


def _with_qos(pod: Obj) -> Obj:
    """The pod's `status.qosClass`, which the pod strategy sets on create (PrepareForCreate)."""
    status = pod.get("status")
    status = dict(status) if isinstance(status, dict) else {}
    status.setdefault("qosClass", pod_qos_class(pod.get("spec")))
    return {**pod, "status": status}


__all__ = ["WriteLayers"]
