"""The estimated cost of a CRD's CEL rules at install, with apiextensions' limits and words
(apiextensions-apiserver pkg/apis/apiextensions/validation/validation.go: a rule whose cost,
times how many times it can run in one object, passes StaticEstimatedCostLimit is Forbidden;
all rules together past StaticEstimatedCRDCostLimit, the schema is).

How this differs from Kubernetes' estimator (cel-go checker/cost.go with the library costs of
k8s.io/apiserver pkg/cel/library/cost.go): it walks cel-python's parse tree rather than a
type-checked AST. One unit per operation, as cel_cost counts at run time; a macro
(all/exists/exists_one/map/filter) costs its body times the receiver's maximum size; string
functions 0.1 per character of the receiver's maxLength, list functions and `in` one per
item. Sizes come from the schema the expression walks (`self.a.b`, `self.items[0]`, a macro's
variable); where a size is not declared it is, as upstream, what fits in a request
(3 MiB over the smallest serialised item). Equality and concatenation of lists and strings
are counted as one unit (cel-go counts their size); anything the walk cannot place on the
schema costs as a scalar. So the figures are of the same magnitude as the API server's, and a
rule over nested unbounded lists is refused as it would be there, but a rule near the limit may
be taken here and refused there, or the reverse.
"""

from __future__ import annotations

import math
from typing import Any

from kube_elevator.fakes.kube_api.crd_schema.field_errors import OMIT, FieldError

Schema = dict[str, Any]

# k8s.io/apiextensions-apiserver pkg/apis/apiextensions/validation and apiserver cel config
PER_EXPRESSION_LIMIT = 10_000_000  # StaticEstimatedCostLimit
PER_CRD_LIMIT = 100_000_000  # StaticEstimatedCRDCostLimit
MAX_REQUEST_BYTES = 3 * 1024 * 1024  # apiserver's MaxRequestBodyBytes
_HINT = ("(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where "
         "arrays, maps, and strings are declared)")
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_STRING_FUNCTIONS = frozenset({
    "contains", "startsWith", "endsWith", "matches", "find", "findAll", "lowerAscii",
    "upperAscii", "replace", "split", "substring", "trim", "charAt", "url", "isURL",
    "quantity", "isQuantity", "ip", "isIP", "cidr", "isCIDR"})
_LIST_FUNCTIONS = frozenset({"isSorted", "sum", "min", "max", "join"})


def cost_message(name: str, cost: float, limit: int) -> str:
    """getCostErrorMessage (apiextensions validation.go)."""
    factor = cost / limit
    if factor > 100:
        shown = "more than 100x"
    elif factor < 1.5:
        shown = f"{factor:f}x"
    else:
        shown = f"{factor:.1f}x"
    return f"{name} exceeds budget by factor of {shown} {_HINT}"


def _min_size(schema: Any) -> int:
    """The fewest bytes a value of `schema` takes serialised, with its comma."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    return {"string": 3, "object": 3, "array": 3}.get(kind or "", 2)


def max_size(schema: Any) -> int:
    """The most items (array), entries (map) or characters (string) a value can have."""
    if not isinstance(schema, dict):
        return 1
    kind = schema.get("type")
    if kind == "array":
        declared = schema.get("maxItems")
        return int(declared) if declared is not None else \
            MAX_REQUEST_BYTES // _min_size(schema.get("items"))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        declared = schema.get("maxProperties")
        return int(declared) if declared is not None else \
            MAX_REQUEST_BYTES // (3 + _min_size(schema["additionalProperties"]))
    if kind == "object" and schema.get("properties"):
        return len(schema["properties"])
    if kind == "string":
        declared = schema.get("maxLength")
        return int(declared) if declared is not None else MAX_REQUEST_BYTES - 2
    return 1


def _element(schema: Any) -> Any:
    """What a macro's variable ranges over: a list's items, a map's keys."""
    if not isinstance(schema, dict):
        return None
    if schema.get("type") == "array":
        return schema.get("items")
    if schema.get("type") == "object":
        return {"type": "string"}
    return None


def _child(schema: Any, name: str) -> Any:
    if not isinstance(schema, dict):
        return None
    props = schema.get("properties") or {}
    return props.get(name) if name in props else schema.get("additionalProperties")


def estimate(tree: Any, schema: Schema, names: dict[str, Any] | None = None
             ) -> tuple[float, Any]:
    """(the most one evaluation of `tree` costs, the schema of its value if known)."""
    names = names if names is not None else {"self": schema, "oldSelf": schema}
    data = getattr(tree, "data", None)
    if data is None:  # a token
        return 0.0, None
    kids = [k for k in tree.children if k is not None]
    if data == "ident":
        return 1.0, names.get(str(kids[0]))
    if data == "member_dot":
        cost, sub = estimate(kids[0], schema, names)
        return cost + 1, _child(sub, str(kids[1]))
    if data == "member_index":
        cost, sub = estimate(kids[0], schema, names)
        index = estimate(kids[1], schema, names)[0]
        items = sub.get("items") if isinstance(sub, dict) and sub.get("type") == "array" \
            else _child(sub, "")
        return cost + index + 1, items
    if data == "member_dot_arg":
        return _call(kids, schema, names)
    if data in ("ident_arg", "dot_ident_arg"):
        args = kids[1].children if len(kids) > 1 else []
        costs = [estimate(a, schema, names) for a in args]
        total = sum(c for c, _ in costs) + 1
        if str(kids[0]) in _STRING_FUNCTIONS and costs:
            total += math.ceil(0.1 * max_size(costs[0][1]))
        return total, None
    if data == "relation" and len(kids) == 2 and \
            getattr(kids[0], "data", "") == "relation_in":
        left = estimate(kids[0], schema, names)[0]
        right, container = estimate(kids[1], schema, names)
        return left + right + max_size(container), None
    costs = [estimate(k, schema, names) for k in kids]
    total = sum(c for c, _ in costs)
    if len(kids) == 1:
        return total, costs[0][1]
    return total + 1, None


def _call(kids: list[Any], schema: Schema, names: dict[str, Any]) -> tuple[float, Any]:
    receiver_cost, receiver = estimate(kids[0], schema, names)
    method = str(kids[1])
    args = kids[2].children if len(kids) > 2 else []
    if method in _MACROS and len(args) >= 2:
        variable = str(next(args[0].find_data("ident")).children[0])
        inner = {**names, variable: _element(receiver)}
        body = sum(estimate(a, schema, inner)[0] for a in args[1:])
        return receiver_cost + max_size(receiver) * (body + 1), None
    total = receiver_cost + 1 + sum(estimate(a, schema, names)[0] for a in args)
    if method in _STRING_FUNCTIONS:
        total += math.ceil(0.1 * max_size(receiver))
    elif method in _LIST_FUNCTIONS or (method in ("indexOf", "lastIndexOf") and \
            isinstance(receiver, dict) and receiver.get("type") == "array"):
        total += max_size(receiver)
    return total, None


def cost_errors(schema: Any, path: str, compile_rule: Any) -> list[FieldError]:
    """The Forbidden errors for rules under `schema` (at CRD path `path`) that cost too much;
    `compile_rule(text)` gives a rule's parse tree."""
    found: list[tuple[str, float]] = []
    _walk(schema, path, 1, compile_rule, found)
    errs = [FieldError(f"{rule_path}.rule", "FieldValueForbidden", OMIT,
                       cost_message("estimated rule cost", cost, PER_EXPRESSION_LIMIT))
            for rule_path, cost in found if cost > PER_EXPRESSION_LIMIT]
    total = sum(cost for _, cost in found)
    if total > PER_CRD_LIMIT:
        errs.append(FieldError(path, "FieldValueForbidden", OMIT, cost_message(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
            total, PER_CRD_LIMIT)))
    return errs


def _walk(schema: Any, path: str, cardinality: int, compile_rule: Any,
          found: list[tuple[str, float]]) -> None:
    if not isinstance(schema, dict):
        return
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or ()):
        if isinstance(rule, dict) and isinstance(rule.get("rule"), str):
            cost = estimate(compile_rule(rule["rule"]), schema)[0]
            found.append((f"{path}.x-kubernetes-validations[{i}]", cost * cardinality))
    for name, prop in (schema.get("properties") or {}).items():
        _walk(prop, f"{path}.properties[{name}]", cardinality, compile_rule, found)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            _walk(schema[key], f"{path}.{key}", cardinality * max_size(schema),
                  compile_rule, found)


__all__ = ["PER_CRD_LIMIT", "PER_EXPRESSION_LIMIT", "cost_errors", "cost_message", "estimate",
           "max_size"]
