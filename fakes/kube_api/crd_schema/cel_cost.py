"""Runtime cost of CEL rules, with apiextensions' limits (k8s.io/apiserver pkg/apis/cel/config.go):
a rule's evaluation stops past `PER_CALL_LIMIT`, and one object's rules together stop past
`RUNTIME_BUDGET` (apiextensions pkg/apiserver/schema/cel/validation.go).

How the cost is counted differs from cel-go's tracker (interpreter/runtimecost.go): cel-python
has none, so a `CostedRunner` counts one unit for each operation its evaluator visits (a
name, a field selection, an index, a call, a comparison or other binary operator, a list or
map literal; each again per item a macro visits), and library functions add cel-go's
per-call cost (0.1 per string character, 1 per list item) through `charge`. cel-go counts
literals free and some operators differently, so figures agree in magnitude, not exactly.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

# k8s.io/apiserver pkg/apis/cel/config.go
PER_CALL_LIMIT = 1_000_000
RUNTIME_BUDGET = 10_000_000


@dataclass
class CostLimits:
    """The limits in force (process-wide). cel-python evaluates a few thousand operations a
    second, so the API server's per-call limit is minutes of work here: a test that wants
    to see the limit's answer lowers it (`LIMITS.per_call = 1_000`) and sets it back."""

    per_call: int = PER_CALL_LIMIT
    runtime: int = RUNTIME_BUDGET


LIMITS = CostLimits()
COST_LIMIT_MESSAGE = "operation cancelled: actual cost limit exceeded"

# The lark rules whose visit is an operation (the others pass one child through).
_OPERATIONS = frozenset({
    "ident", "ident_arg", "dot_ident", "dot_ident_arg", "member_dot", "member_dot_arg",
    "member_index", "member_object", "list_lit", "map_lit"})
_BINARY = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition",
                     "multiplication", "unary"})


class CostLimitExceeded(Exception):
    """Raised through cel-python's evaluator (it is not a CELEvalError, which `||` and `&&`
    would swallow) when a rule passes its per-call limit."""


@dataclass
class CostTracker:
    """One rule evaluation's cost so far, and its limit."""

    limit: int
    spent: int = 0

    def add(self, units: int) -> None:
        self.spent += units
        if self.spent > self.limit:
            raise CostLimitExceeded(COST_LIMIT_MESSAGE)


_current: ContextVar[CostTracker | None] = ContextVar("cel_cost", default=None)


def charge(units: int) -> None:
    """Add a library call's cost to the evaluation running now (none outside one)."""
    tracker = _current.get()
    if tracker is not None and units > 0:
        tracker.add(units)


def is_operation(tree: Any) -> bool:
    """Whether visiting this lark node is one operation for the cost count."""
    data = getattr(tree, "data", "")
    if data in _OPERATIONS:
        return True
    return data in _BINARY and len(getattr(tree, "children", ())) > 1


def costed_runner() -> type:
    """cel-python's InterpretedRunner whose evaluators count operations (built on first use:
    cel-python is imported only when a CRD has rules)."""
    global _RUNNER
    if _RUNNER is not None:
        return _RUNNER
    from celpy import InterpretedRunner
    from celpy.evaluation import Evaluator

    class CostedEvaluator(Evaluator):
        def _visit_tree(self, tree: Any) -> Any:  # lark's Interpreter: every node comes here
            if is_operation(tree):
                charge(1)
            return super()._visit_tree(tree)

        def member_dot_arg(self, tree: Any) -> Any:
            # `list.min()` is a cel-python macro; lists.go's answers "min called on empty
            # list": the program's own `min` function (cel_library.list_min) is called instead
            if str(tree.children[1]) == "min" and (len(tree.children) < 3
                                                   or tree.children[2] is None):
                try:
                    own_min = self.activation.resolve_function("min")
                except KeyError:
                    return super().member_dot_arg(tree)
                return own_min(self.visit(tree.children[0]))
            return super().member_dot_arg(tree)

        def sub_evaluator(self, ast: Any) -> Any:  # a macro's body: counted the same
            return CostedEvaluator(ast, activation=self.activation)

    class CostedRunner(InterpretedRunner):
        def evaluate(self, context: Any) -> Any:
            return CostedEvaluator(ast=self.ast, activation=self.new_activation()) \
                .evaluate(context)

    _RUNNER = CostedRunner
    return _RUNNER


def evaluate_costed(program: Any, activation: dict[str, Any],
                    limit: int | None = None) -> tuple[Any, int]:
    """`program`'s value on `activation` and the cost it took; raises CostLimitExceeded past
    `limit` (`LIMITS.per_call` unless given; and cel-python's CELEvalError as before)."""
    tracker = CostTracker(LIMITS.per_call if limit is None else limit)
    token = _current.set(tracker)
    try:
        value = program.evaluate(activation)
    finally:
        _current.reset(token)
    return value, tracker.spent


_RUNNER: type | None = None

__all__ = ["COST_LIMIT_MESSAGE", "LIMITS", "PER_CALL_LIMIT", "RUNTIME_BUDGET", "CostLimitExceeded",
           "CostLimits", "CostTracker", "charge", "costed_runner", "evaluate_costed"]
