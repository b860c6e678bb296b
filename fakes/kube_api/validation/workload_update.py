"""What an update may change in an apps/v1 workload, as the API server decides it: a Deployment's
and a ReplicaSet's `spec.selector` is fixed (pkg/registry/apps/deployment/strategy.go and
replicaset/strategy.go `ValidateUpdate`: `ValidateImmutableField` of the selector for every
group version but the old beta ones), and of a StatefulSet's spec only the replicas, ordinals,
template, update strategy, revision history limit, PVC retention policy and minReadySeconds may
change (pkg/apis/apps/validation/validation.go `ValidateStatefulSetUpdate`). Equality is
apimachinery's semantic one: an empty list or map equals an absent one.
"""

from __future__ import annotations

import json
from typing import Any

from kube_elevator.fakes.kube_api.resources import Obj
from kube_elevator.fakes.kube_api.validation.field import FieldError, GoValue, forbidden, invalid
from kube_elevator.fakes.kube_api.validation.meta_update import IMMUTABLE

# ValidateStatefulSetUpdate's words and the fields it lets change.
STATEFULSET_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy",
                       "revisionHistoryLimit", "persistentVolumeClaimRetentionPolicy",
                       "minReadySeconds")
STATEFULSET_FORBIDDEN = ("updates to statefulset spec for fields other than 'replicas', "
                         "'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
                         "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
                         "forbidden")


def _semantic(value: Any) -> Any:
    """`value` with empty lists, maps and nulls dropped (Semantic.DeepEqual's nil == empty)."""
    if isinstance(value, dict):
        kept = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_semantic(item) for item in value]
    return value


def _spec(obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _go_strings(values: Any) -> str:
    if values is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(json.dumps(str(v)) for v in values) + "}"


def go_label_selector(selector: Any) -> GoValue:
    """A *metav1.LabelSelector as field.ErrorBody prints it: the struct, `%#v` (map keys
    sorted, as fmt sorts them; nil slices and maps spelt `(nil)`)."""
    selector = selector if isinstance(selector, dict) else {}
    labels = selector.get("matchLabels")
    if isinstance(labels, dict):
        inner = ", ".join(f"{json.dumps(str(k))}:{json.dumps(str(labels[k]))}"
                          for k in sorted(labels))
        match_labels = f"map[string]string{{{inner}}}"
    else:
        match_labels = "map[string]string(nil)"
    expressions = selector.get("matchExpressions")
    if isinstance(expressions, list):
        items = ", ".join(
            "v1.LabelSelectorRequirement{"
            f"Key:{json.dumps(str(e.get('key') or ''))}, "
            f"Operator:{json.dumps(str(e.get('operator') or ''))}, "
            f"Values:{_go_strings(e.get('values'))}}}"
            for e in expressions if isinstance(e, dict))
        match_expressions = f"[]v1.LabelSelectorRequirement{{{items}}}"
    else:
        match_expressions = "[]v1.LabelSelectorRequirement(nil)"
    return GoValue(f"v1.LabelSelector{{MatchLabels:{match_labels}, "
                   f"MatchExpressions:{match_expressions}}}")


def selector_update_errors(old: Obj, new: Obj) -> list[FieldError]:
    """A Deployment's or ReplicaSet's selector may not change."""
    before, after = _spec(old).get("selector"), _spec(new).get("selector")
    if _semantic(before) == _semantic(after):
        return []
    return [invalid("spec.selector", go_label_selector(after), IMMUTABLE)]


def statefulset_update_errors(old: Obj, new: Obj) -> list[FieldError]:
    """Only STATEFULSET_MUTABLE of a StatefulSet's spec may change."""
    before = {k: v for k, v in _spec(old).items() if k not in STATEFULSET_MUTABLE}
    after = {k: v for k, v in _spec(new).items() if k not in STATEFULSET_MUTABLE}
    if _semantic(before) == _semantic(after):
        return []
    return [forbidden("spec", STATEFULSET_FORBIDDEN)]


__all__ = ["go_label_selector", "selector_update_errors", "statefulset_update_errors"]
