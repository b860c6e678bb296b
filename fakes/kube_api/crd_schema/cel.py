"""`x-kubernetes-validations`: CEL rules of a CRD's schema, evaluated with cel-python
(PyPI `cel-python`, imported only when a CRD has rules: it costs about a second).

As apiextensions does it (k8s.io/apiextensions-apiserver pkg/apiserver/schema/cel/
validation.go): each rule runs with `self` the value at its node (and `oldSelf` the old one on
an update; a rule naming `oldSelf` is a transition rule, skipped on create); a rule that is
false answers `Invalid value: "<type>": <message>` (or `failed rule: <rule>`) at the node's path
(plus the rule's `fieldPath`), with the rule's `reason` if it names one. Without cel-python, a
CRD with rules is refused at install, saying so.

Kubernetes' CEL libraries are cel-python functions (cel_library.py: ext strings, lists, regex;
cel_types.py: quantity, url, ip, cidr); a rule calling a function cel-python does not have
(format.*, semver, authorizer, optionals, ...) is refused at install, naming it. Costs
(cel_cost.py, cel_estimate.py): a rule whose estimated cost passes the per-expression limit,
or a CRD whose rules pass the per-CRD one, is refused at install; an evaluation past the
per-call limit, or one object's rules past the runtime budget, stop with the API server's
messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kube_elevator.fakes.kube_api.crd_schema.cel_cost import (
    COST_LIMIT_MESSAGE,
    LIMITS,
    CostLimitExceeded,
    costed_runner,
    evaluate_costed,
)
from kube_elevator.fakes.kube_api.crd_schema.cel_estimate import cost_errors
from kube_elevator.fakes.kube_api.crd_schema.field_errors import OMIT, FieldError
from kube_elevator.fakes.kube_api.crd_schema.validate import child

Schema = dict[str, Any]
NOT_SUPPORTED = ("CEL validation rules (x-kubernetes-validations) are not supported by this fake "
                 "API server without the cel-python package (pip install "
                 "'kube-elevator[cel]')")
_MISSING = object()


def cel_available() -> bool:
    try:
        import celpy  # noqa: F401
    except ImportError:
        return False
    return True


@lru_cache(maxsize=512)
def _program(rule: str) -> Any:
    import celpy

    from kube_elevator.fakes.kube_api.crd_schema.cel_functions import functions, unsupported

    env = celpy.Environment(runner_class=costed_runner())
    ast = env.compile(rule)
    missing = unsupported(ast)
    if missing:
        raise UnsupportedFunction(missing)
    return env.program(ast, functions=functions())


class UnsupportedFunction(Exception):
    """A rule calls functions this fake's cel-python evaluator does not provide."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(
            f"undeclared reference to {', '.join(repr(n) for n in names)}: not supported by "
            "this fake API server's CEL evaluator (cel-python with Kubernetes' quantity, url, "
            "ip, cidr, lists, regex and ext strings libraries; see docs/harness.md)")


def rule_errors(schema: Any, path: str) -> list[FieldError]:
    """Why the rules in `schema` (at CRD path `path`) cannot be installed: cel-python missing,
    or a rule that does not compile."""
    errs: list[FieldError] = []
    for rule_path, rule, message_expression in _rules(schema, path):
        if not cel_available():
            return [FieldError(rule_path, "FieldValueForbidden", OMIT, NOT_SUPPORTED)]
        try:
            _program(rule)
        except Exception as exc:  # celpy's parse errors share no base beyond Exception
            errs.append(FieldError(f"{rule_path}.rule", "FieldValueInvalid", rule,
                                   f"compilation failed: {str(exc).strip()}"))
        else:
            if rule_path.startswith(f"{path}.x-kubernetes-validations["):
                errs += _root_metadata_errors(rule_path, rule)
        if message_expression is None:
            continue
        try:
            _program(message_expression)
        except Exception as exc:
            errs.append(FieldError(f"{rule_path}.messageExpression", "FieldValueInvalid",
                                   message_expression,
                                   f"messageExpression compilation failed: {str(exc).strip()}"))
    errs += _uncorrelatable_errors(schema, path)
    if not errs:  # every rule compiles: what they would cost (cel_estimate.py)
        errs += cost_errors(schema, path, lambda text: _program(text).ast)
    return errs


# A root rule sees `self.metadata` with name and generateName only (apiextensions
# pkg/apiserver/schema/cel/model: WithTypeAndObjectMeta); any other field fails the type check.
_ROOT_METADATA = frozenset({"name", "generateName"})
_METADATA_FIELD = re.compile(r"\bself\.metadata\.([A-Za-z_][A-Za-z0-9_]*)")


def _root_metadata_errors(rule_path: str, rule: str) -> list[FieldError]:
    for match in _METADATA_FIELD.finditer(rule):
        if match.group(1) not in _ROOT_METADATA:
            column = match.start(1)
            return [FieldError(f"{rule_path}.rule", "FieldValueInvalid", rule,
                               f"compilation failed: ERROR: <input>:1:{column}: undefined "
                               f"field '{match.group(1)}'\n | {rule}\n | "
                               f"{'.' * column}^")]
    return []


def _uncorrelatable_errors(schema: Any, path: str, correlatable: bool = True,
                          ) -> list[FieldError]:
    """A transition rule (one naming oldSelf) where an old value cannot be matched to the new:
    under the items of a list that is not a map-list (apiextensions validation.go
    validateCELTransitionRules / hasUncorrelatableOldSelf)."""
    if not isinstance(schema, dict):
        return []
    errs: list[FieldError] = []
    if not correlatable:
        for i, rule in enumerate(schema.get("x-kubernetes-validations") or ()):
            if isinstance(rule, dict) and "oldSelf" in str(rule.get("rule", "")):
                errs.append(FieldError(
                    f"{path}.x-kubernetes-validations[{i}].rule", "FieldValueInvalid",
                    rule["rule"], f"oldSelf cannot be used on the uncorrelatable portion of "
                    f"the schema within {path}"))
    for name, prop in (schema.get("properties") or {}).items():
        errs += _uncorrelatable_errors(prop, f"{path}.properties[{name}]", correlatable)
    errs += _uncorrelatable_errors(schema.get("additionalProperties"),
                                   f"{path}.additionalProperties", correlatable)
    map_list = schema.get("x-kubernetes-list-type") == "map"
    errs += _uncorrelatable_errors(schema.get("items"), f"{path}.items",
                                   correlatable and map_list)
    return errs


def _rules(schema: Any, path: str) -> list[tuple[str, str, str | None]]:
    """Each rule under `schema`: (its CRD path, the rule, its messageExpression if any)."""
    found: list[tuple[str, str, str | None]] = []
    if not isinstance(schema, dict):
        return found
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or ()):
        if isinstance(rule, dict) and isinstance(rule.get("rule"), str):
            expression = rule.get("messageExpression")
            found.append((f"{path}.x-kubernetes-validations[{i}]", rule["rule"],
                          expression if isinstance(expression, str) and expression else None))
    for name, prop in (schema.get("properties") or {}).items():
        found += _rules(prop, f"{path}.properties[{name}]")
    for key in ("items", "additionalProperties"):
        found += _rules(schema.get(key), f"{path}.{key}")
    return found


def has_rules(schema: Any) -> bool:
    return bool(_rules(schema, ""))


@dataclass
class _Budget:
    """What is left of one object's runtime cost budget (cel/validation.go's remainingBudget);
    `stopped` once a rule ran out of it or past its per-call limit: no rule runs after."""

    remaining: int = field(default_factory=lambda: LIMITS.runtime)
    stopped: bool = False


def cel_errors(schema: Schema, value: Any, old: Any = _MISSING, path: str = "",
               budget: _Budget | None = None) -> list[FieldError]:
    """The rules `value` breaks (`old`: the stored object on an update)."""
    budget = budget if budget is not None else _Budget()
    errs: list[FieldError] = []
    if value is None or budget.stopped:
        return errs
    for rule in schema.get("x-kubernetes-validations") or ():
        if isinstance(rule, dict) and isinstance(rule.get("rule"), str):
            errs += _evaluate(rule, schema, value, old, path, budget)
            if budget.stopped:
                return errs
    props: Schema = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    if isinstance(value, dict):
        for name, item in value.items():
            sub = props.get(name) if name in props else extra
            if isinstance(sub, dict):
                before = old.get(name, _MISSING) if isinstance(old, dict) else _MISSING
                errs += cel_errors(sub, item, before, child(path, name), budget)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = schema.get("x-kubernetes-list-map-keys") or ()
        correlated = schema.get("x-kubernetes-list-type") == "map" and keys and \
            isinstance(old, list)
        for i, item in enumerate(value):
            # oldSelf of a list item: the old item with the same keys, in a map list only
            # (cel/validation.go correlates no other list's items)
            prior: Any = _MISSING
            if correlated and isinstance(item, dict):
                prior = next((o for o in old if isinstance(o, dict) and
                               all(o.get(k) == item.get(k) for k in keys)), _MISSING)
            errs += cel_errors(schema["items"], item, prior, f"{path}[{i}]", budget)
    return errs


def _evaluate(rule: dict[str, Any], schema: Schema, value: Any, old: Any,
              path: str, budget: _Budget) -> list[FieldError]:
    from celpy.adapter import json_to_cel

    text: str = rule["rule"]
    if "oldSelf" in text and old is _MISSING:
        return []  # a transition rule: only on an update that had the field
    activation = {"self": json_to_cel(value)}
    if old is not _MISSING:
        activation["oldSelf"] = json_to_cel(old)
    node_path = path.lstrip(".") or "<nil>"
    field_path = path + (rule.get("fieldPath") or "") if rule.get("fieldPath") else path
    field_path = field_path.lstrip(".") or "<nil>"
    shown = schema.get("type") or ("object" if isinstance(value, dict) else "")
    reason = rule.get("reason") or "FieldValueInvalid"
    # ruleErrorString: the rule's message if it has one, else the rule
    named = (rule.get("message") or "").strip() or text.strip()
    try:
        ok, spent = evaluate_costed(_program(text), activation)
    except CostLimitExceeded:
        budget.stopped = True
        return [FieldError(node_path, "FieldValueInvalid", shown,
                           f"'{COST_LIMIT_MESSAGE}': no further validation rules will be run "
                           f"due to call cost exceeds limit for rule: {named}")]
    except Exception as exc:  # celpy raises its CELEvalError for no such key, bad types, ...
        return [FieldError(field_path, "FieldValueInvalid", shown,
                           f"{_eval_message(exc)} evaluating rule: {text}")]
    budget.remaining -= spent
    if budget.remaining < 0:
        budget.stopped = True
        return [FieldError(node_path, "FieldValueInvalid", shown,
                           "validation failed due to running out of cost budget, no further "
                           "validation rules will be run")]
    if bool(ok):
        return []
    message = _message_expression(rule, activation, budget) or rule.get("message") \
        or f"failed rule: {text}"
    return [FieldError(field_path, reason, shown, message)]


def _message_expression(rule: dict[str, Any], activation: dict[str, Any],
                        budget: _Budget) -> str | None:
    """A failed rule's messageExpression, evaluated (cel/validation.go evalMessageExpression);
    None, so the message or the default is used, when it has none or it does not give a
    non-empty one-line string."""
    expression = rule.get("messageExpression")
    if not isinstance(expression, str) or not expression:
        return None
    try:
        value, spent = evaluate_costed(_program(expression), activation)
    except Exception:  # the API server logs it and falls back, as here
        return None
    budget.remaining -= spent
    text = str(value).strip() if isinstance(value, str) else ""
    return text if text and "\n" not in text and "\r" not in text else None


def _eval_message(exc: Exception) -> str:
    args = getattr(exc, "args", ())
    return str(args[0]) if args else str(exc)


__all__ = ["NOT_SUPPORTED", "cel_available", "cel_errors", "has_rules", "rule_errors"]
