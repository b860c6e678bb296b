"""The functions a CRD's CEL rules may call here: cel-python's standard ones, and Kubernetes'
libraries (cel_library.py, cel_types.py); and which names a rule calls that none provides, so
the CRD is refused at install naming them (apiextensions refuses a rule whose functions do
not compile, `undeclared reference to '<name>'`)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kube_elevator.fakes.kube_api.crd_schema.cel_library import FUNCTIONS, CELFunction
from kube_elevator.fakes.kube_api.crd_schema.cel_types import (
    IP_FUNCTIONS,
    QUANTITY_FUNCTIONS,
    URL_FUNCTIONS,
)

# cel-python's macros and specials, handled by its evaluator rather than as functions
_MACROS = frozenset({"has", "dyn", "map", "filter", "all", "exists", "exists_one", "reduce",
                     "min"})


@lru_cache(maxsize=1)
def functions() -> dict[str, CELFunction]:
    return {**FUNCTIONS, **QUANTITY_FUNCTIONS, **URL_FUNCTIONS, **IP_FUNCTIONS}


def called(ast: Any) -> list[str]:
    """The names a rule calls, as functions (`f(x)`) or methods (`x.f()`), in order."""
    names: list[str] = []
    for node in ast.iter_subtrees_topdown():
        if node.data in ("ident_arg", "dot_ident_arg") and node.children:
            names.append(str(node.children[0]))
        elif node.data == "member_dot_arg" and len(node.children) > 1:
            names.append(str(node.children[1]))
    return names


def unsupported(ast: Any) -> list[str]:
    """The names a rule calls that neither cel-python nor our libraries provide."""
    from celpy.evaluation import base_functions

    known = set(base_functions) | _MACROS | set(functions())
    found: list[str] = []
    for name in called(ast):
        if name not in known and name not in found:
            found.append(name)
    return found


__all__ = ["called", "functions", "unsupported"]
