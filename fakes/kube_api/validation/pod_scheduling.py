"""Where a pod may run, as the API server checks it: node affinity and topology spread
constraints (kubernetes pkg/apis/core/validation/validation.go validateAffinity,
validateNodeAffinity, ValidateNodeSelector, ValidateNodeSelectorTerm,
ValidateNodeSelectorRequirement, ValidateNodeFieldSelectorRequirement,
ValidatePreferredSchedulingTerms, validateTopologySpreadConstraints, ValidateMaxSkew,
ValidateTopologyKey, ValidateWhenUnsatisfiable, ValidateSpreadConstraintNotRepeat,
validateMinDomains, validateNodeInclusionPolicy).

Gt and Lt take exactly one value; upstream's validation does not parse it as an integer (the
scheduler does), so neither does the fake.  Pod (anti-)affinity terms: validatePodAffinity,
validatePodAntiAffinity, validatePodAffinityTerm, validateWeightedPodAffinityTerms.  Not
modelled: matchLabelKeys and mismatchLabelKeys (of terms and of spread constraints)."""

from __future__ import annotations

from typing import Any

from kube_elevator.fakes.kube_api.validation.field import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from kube_elevator.fakes.kube_api.validation.meta import label_selector_errors
from kube_elevator.tasks.core.name_formats import (
    dns1123_label,
    dns1123_subdomain,
    qualified_name,
)

NOT_AN_OPERATOR = "not a valid selector operator"
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")  # sets.List order
NODE_INCLUSION_POLICIES = ("Honor", "Ignore")
_NOT_POSITIVE = "must be greater than zero"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _requirement_errors(requirement: dict[str, Any], path: str) -> list[FieldError]:
    """ValidateNodeSelectorRequirement."""
    operator, values = requirement.get("operator") or "", _list(requirement.get("values"))
    errors: list[FieldError] = []
    if operator in ("In", "NotIn"):
        if not values:
            errors.append(required(f"{path}.values",
                                   "must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errors.append(forbidden(f"{path}.values", "may not be specified when `operator` is "
                                    "'Exists' or 'DoesNotExist'"))
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(required(f"{path}.values", "must be specified single value when "
                                   "`operator` is 'Lt' or 'Gt'"))
    else:
        errors.append(invalid(f"{path}.operator", operator, NOT_AN_OPERATOR))
    key = str(requirement.get("key") or "")
    errors.extend(invalid(f"{path}.key", key, msg) for msg in qualified_name(key))
    return errors


def _field_requirement_errors(requirement: dict[str, Any], path: str) -> list[FieldError]:
    """ValidateNodeFieldSelectorRequirement: `metadata.name` In or NotIn one node name."""
    operator, values = requirement.get("operator") or "", _list(requirement.get("values"))
    errors: list[FieldError] = []
    if operator in ("In", "NotIn"):
        if len(values) != 1:
            errors.append(required(f"{path}.values", "must be only one value when `operator` "
                                   "is 'In' or 'NotIn' for node field selector"))
    else:
        errors.append(invalid(f"{path}.operator", operator, NOT_AN_OPERATOR))
    key = requirement.get("key") or ""
    if key != "metadata.name":
        errors.append(invalid(f"{path}.key", key, "not a valid field selector key"))
    else:
        for index, value in enumerate(values):
            errors.extend(invalid(f"{path}.values[{index}]", value, msg)
                          for msg in dns1123_subdomain(str(value)))
    return errors


def _term_errors(term: dict[str, Any], path: str) -> list[FieldError]:
    """ValidateNodeSelectorTerm."""
    errors: list[FieldError] = []
    for index, requirement in enumerate(_list(term.get("matchExpressions"))):
        errors.extend(_requirement_errors(_dict(requirement),
                                          f"{path}.matchExpressions[{index}]"))
    for index, requirement in enumerate(_list(term.get("matchFields"))):
        errors.extend(_field_requirement_errors(_dict(requirement),
                                                f"{path}.matchFields[{index}]"))
    return errors


def node_affinity_errors(affinity: Any, path: str) -> list[FieldError]:
    """validateAffinity's node part."""
    node = _dict(affinity).get("nodeAffinity")
    if not isinstance(node, dict):
        return []
    at = f"{path}.nodeAffinity"
    errors: list[FieldError] = []
    required_terms = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required_terms is not None:
        terms_at = f"{at}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = _list(_dict(required_terms).get("nodeSelectorTerms"))
        if not terms:
            errors.append(required(terms_at, "must have at least one node selector term"))
        for index, term in enumerate(terms):
            errors.extend(_term_errors(_dict(term), f"{terms_at}[{index}]"))
    preferred_at = f"{at}.preferredDuringSchedulingIgnoredDuringExecution"
    for index, term in enumerate(_list(node.get("preferredDuringSchedulingIgnoredDuringExecution"))):
        term = _dict(term)
        errors.extend(_weight_errors(term, f"{preferred_at}[{index}]"))
        errors.extend(_term_errors(_dict(term.get("preference")),
                                   f"{preferred_at}[{index}].preference"))
    return errors


def _weight_errors(term: dict[str, Any], path: str) -> list[FieldError]:
    """A preferred (weighted) term's weight: 1-100, node and pod affinity alike."""
    weight = term.get("weight") or 0
    if isinstance(weight, int) and not 1 <= weight <= 100:
        return [invalid(f"{path}.weight", weight, "must be in the range 1-100")]
    return []


def _pod_term_errors(term: dict[str, Any], path: str) -> list[FieldError]:
    """validatePodAffinityTerm (a bad namespace is reported on `namespace`, unindexed, as
    upstream does)."""
    errors: list[FieldError] = []
    for selector in ("labelSelector", "namespaceSelector"):
        if term.get(selector) is not None:
            errors.extend(label_selector_errors(term[selector], f"{path}.{selector}"))
    for namespace in _list(term.get("namespaces")):
        errors.extend(invalid(f"{path}.namespace", namespace, msg)
                      for msg in dns1123_label(str(namespace)))
    key = str(term.get("topologyKey") or "")
    if not key:
        errors.append(required(f"{path}.topologyKey", "can not be empty"))
    errors.extend(invalid(f"{path}.topologyKey", key, msg) for msg in qualified_name(key))
    return errors


def _pod_affinity_errors(affinity: dict[str, Any], path: str) -> list[FieldError]:
    """validatePodAffinity / validatePodAntiAffinity: required terms, weighted terms."""
    errors: list[FieldError] = []
    required_at = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    for index, term in enumerate(_list(affinity.get(
            "requiredDuringSchedulingIgnoredDuringExecution"))):
        errors.extend(_pod_term_errors(_dict(term), f"{required_at}[{index}]"))
    preferred_at = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    for index, weighted in enumerate(_list(affinity.get(
            "preferredDuringSchedulingIgnoredDuringExecution"))):
        weighted = _dict(weighted)
        errors.extend(_weight_errors(weighted, f"{preferred_at}[{index}]"))
        errors.extend(_pod_term_errors(_dict(weighted.get("podAffinityTerm")),
                                       f"{preferred_at}[{index}].podAffinityTerm"))
    return errors


def affinity_errors(affinity: Any, path: str) -> list[FieldError]:
    """validateAffinity: node affinity, then pod affinity and anti-affinity."""
    errors = node_affinity_errors(affinity, path)
    for kind in ("podAffinity", "podAntiAffinity"):
        part = _dict(affinity).get(kind)
        if isinstance(part, dict):
            errors.extend(_pod_affinity_errors(part, f"{path}.{kind}"))
    return errors


def topology_spread_errors(constraints: Any, path: str) -> list[FieldError]:
    """validateTopologySpreadConstraints."""
    constraints = _list(constraints)
    errors: list[FieldError] = []
    for index, constraint in enumerate(constraints):
        at, constraint = f"{path}[{index}]", _dict(constraint)
        skew = constraint.get("maxSkew") or 0
        if isinstance(skew, int) and skew <= 0:
            errors.append(invalid(f"{at}.maxSkew", skew, _NOT_POSITIVE))
        key = constraint.get("topologyKey") or ""
        if not key:
            errors.append(required(f"{at}.topologyKey", "can not be empty"))
        action = constraint.get("whenUnsatisfiable") or ""
        if action not in WHEN_UNSATISFIABLE:
            errors.append(not_supported(f"{at}.whenUnsatisfiable", action, WHEN_UNSATISFIABLE))
        if any((_dict(later).get("topologyKey") or "") == key
               and (_dict(later).get("whenUnsatisfiable") or "") == action
               for later in constraints[index + 1:]):
            errors.append(duplicate(f"{at}.{{topologyKey, whenUnsatisfiable}}",
                                    f"{{{key}, {action}}}"))
        domains = constraint.get("minDomains")
        if isinstance(domains, int):
            if domains <= 0:
                errors.append(invalid(f"{at}.minDomains", domains, _NOT_POSITIVE))
            if action != "DoNotSchedule":
                errors.append(invalid(f"{at}.minDomains", domains, "can only use minDomains if "
                                      f"whenUnsatisfiable=DoNotSchedule, not {action}"))
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            value = constraint.get(policy)
            if value is not None and value not in NODE_INCLUSION_POLICIES:
                errors.append(not_supported(f"{at}.{policy}", value, NODE_INCLUSION_POLICIES))
        if constraint.get("labelSelector") is not None:
            errors.extend(label_selector_errors(constraint["labelSelector"],
                                                f"{at}.labelSelector"))
    return errors


__all__ = ["NODE_INCLUSION_POLICIES", "NOT_AN_OPERATOR", "WHEN_UNSATISFIABLE",
           "affinity_errors", "node_affinity_errors", "topology_spread_errors"]
