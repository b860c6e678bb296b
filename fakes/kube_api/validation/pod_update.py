"""What a Pod update may change: container and init container images, activeDeadlineSeconds
(set, or lowered), tolerations (additions only), terminationGracePeriodSeconds (to 1 from a
negative value); anything else is refused with the API server's words, the specs' cmp.Diff after them
(pkg/apis/core/validation/validation.go ValidatePodUpdate, v1.32)."""

from __future__ import annotations

import copy
from typing import Any

from kube_elevator.fakes.kube_api.resources import Obj
from kube_elevator.fakes.kube_api.validation.field import FieldError, forbidden, invalid
from kube_elevator.fakes.kube_api.validation.go_cmp_diff import go_diff

POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)")


def _tolerations_only_added(old: list[Any], new: list[Any]) -> bool:
    """ValidateTolerationsUpdate: every existing toleration is kept (its tolerationSeconds may
    change)."""
    def bare(toleration: Any) -> Any:
        if not isinstance(toleration, dict):
            return toleration
        return {k: v for k, v in toleration.items() if k != "tolerationSeconds"}
    remaining = [bare(t) for t in new]
    for toleration in old:
        if bare(toleration) not in remaining:
            return False
        remaining.remove(bare(toleration))
    return True


def pod_update_errors(old: Obj, new: Obj) -> list[FieldError]:
    old_spec, new_spec = old.get("spec"), new.get("spec")
    if not isinstance(old_spec, dict) or not isinstance(new_spec, dict):
        return []
    errors: list[FieldError] = []
    munged = copy.deepcopy(new_spec)
    for list_name in ("containers", "initContainers"):
        olds, news = old_spec.get(list_name), munged.get(list_name)
        if isinstance(olds, list) and isinstance(news, list) and len(olds) == len(news):
            for was, now in zip(olds, news, strict=True):
                if isinstance(was, dict) and isinstance(now, dict):
                    if "image" in was:
                        now["image"] = was["image"]
                    else:
                        now.pop("image", None)
    old_deadline, new_deadline = (old_spec.get("activeDeadlineSeconds"),
                                  new_spec.get("activeDeadlineSeconds"))
    if new_deadline is None and old_deadline is not None:
        errors.append(invalid("spec.activeDeadlineSeconds", None,
                              "must not update activeDeadlineSeconds to nil"))
    elif isinstance(old_deadline, int) and isinstance(new_deadline, int) and \
            new_deadline > old_deadline:
        errors.append(invalid("spec.activeDeadlineSeconds", new_deadline,
                              "must be less than or equal to previous value"))
    _restore(munged, old_spec, "activeDeadlineSeconds")
    old_tolerations = old_spec.get("tolerations") or []
    new_tolerations = munged.get("tolerations") or []
    if isinstance(old_tolerations, list) and isinstance(new_tolerations, list) and \
            _tolerations_only_added(old_tolerations, new_tolerations):
        _restore(munged, old_spec, "tolerations")
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and \
            munged.get("terminationGracePeriodSeconds") == 1:
        _restore(munged, old_spec, "terminationGracePeriodSeconds")
    if munged != old_spec:
        errors.append(forbidden("spec", POD_UPDATE_FORBIDDEN + "\n"
                                + go_diff(old_spec, munged, "core.PodSpec")))
    return errors


def _restore(spec: dict[str, Any], old: dict[str, Any], key: str) -> None:
    if key in old:
        spec[key] = copy.deepcopy(old[key])
    else:
        spec.pop(key, None)


__all__ = ["POD_UPDATE_FORBIDDEN", "pod_update_errors"]
