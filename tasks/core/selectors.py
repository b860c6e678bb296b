"""Label and field selector parsing: the API server's grammar, for the fake API and for files.

Kept apart because the grammar is fiddly and worth testing on its own; the behaviour mirrors
`k8s.io/apimachinery/pkg/labels` and `.../fields` closely enough that a selector the real API
server accepts (or rejects) is accepted (or rejected) here too: the fake API serves lists with
it, and `elevator pods plan` picks a scale target's pods from files with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube_elevator.tasks.core.field_words import go_quoted, invalid_value, unsupported_value
from kube_elevator.tasks.core.name_formats import label_value, qualified_name

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelRequirement",
    "LabelSelector",
    "SelectorError",
    "format_label_selector",
    "parse_field_selector",
    "parse_label_selector",
    "validate_api_requirement",
]


class SelectorError(ValueError):
    """A selector the real API server would answer with 400 BadRequest."""




def _at(path: str, child: str) -> str:
    """field.Path.Child: `child` under `path` ("" is no path: the child alone)."""
    return f"{path}.{child}" if path else child


def _key_errors(key: str, path: str = "") -> list[str]:
    """labels' validateLabelKey: IsQualifiedName's messages, joined by "; ", under `key`."""
    problems = qualified_name(key)
    return [invalid_value(_at(path, "key"), key, "; ".join(problems))] if problems else []


def _value_errors(key: str, value: str, index: int, path: str = "") -> list[str]:
    """labels' validateLabelValue: `values[<index>][<key>]: Invalid value: ...`."""
    problems = label_value(value)
    return ([invalid_value(f"{_at(path, 'values')}[{index}][{key}]", value, "; ".join(problems))]
            if problems else [])


# labels.Parse's words for a bad key or value (apimachinery pkg/labels/selector.go): parse()
# prefixes a requirement's error with `unable to parse requirement: `; parseKeyAndInferOperator
# validates the key under the parser's path, which Parse without options leaves nil, and a nil
# field.Path prints as `<nil>`; NewRequirement then checks the values (sorted, as a
# sets.String lists them) under `values[<i>][<key>]`.
_UNPARSED = "unable to parse requirement: "


def _check_key(key: str) -> None:
    """Reject label keys the API server rejects, in its words, so tests see the same 400s."""
    if problems := qualified_name(key):
        raise SelectorError(_UNPARSED + invalid_value("<nil>", key, "; ".join(problems)))


def _check_values(key: str, values: Iterable[str]) -> None:
    """Reject label values the API server rejects, in its words."""
    errors = [error for index, value in enumerate(sorted(set(values)))
              for error in _value_errors(key, value, index)]
    if errors:
        raise SelectorError(_UNPARSED + aggregated(errors))


# Label selectors ---------------------------------------------------------------------

_OPERATORS = ("==", "!=", "=", "!", "(", ")", ",", ">", "<")
_SPACE = " \t\r\n"


def _tokenize(text: str) -> list[str]:
    """Split a label selector into identifiers and operator tokens."""
    tokens: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in _SPACE:
            i += 1
            continue
        for op in _OPERATORS:
            if text.startswith(op, i):
                tokens.append(op)
                i += len(op)
                break
        else:
            j = i
            while j < n and text[j] not in _SPACE and text[j] not in "=!(),<>":
                j += 1
            tokens.append(text[i:j])
            i = j
    return tokens


def _is_ident(token: str | None) -> bool:
    return token is not None and token not in _OPERATORS


@dataclass(frozen=True)
class LabelRequirement:
    """One comma-separated term of a label selector.

    Example:
        >>> ke.LabelRequirement("tier", "exists").matches({"tier": "front"})
        True
    """

    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Evaluate the term the way `labels.Requirement.Matches` does."""
        op = self.operator
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        value = labels.get(self.key)
        if op in ("=", "in"):
            return value is not None and value in self.values
        if op in ("!=", "notin"):
            return value is None or value not in self.values
        if value is None or op not in ("gt", "lt") or not self.values:
            return False  # "never": an operator the API does not know selects nothing
        have, want = go_int64(value), go_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "gt" else have < want


_GO_INT = re.compile(r"[+-]?[0-9]+")


def go_int64(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64), which Gt and Lt use: no spaces or underscores (as
    Python's int() allows), and within int64; None when it fails."""
    if not _GO_INT.fullmatch(text):
        return None
    number = int(text)
    return number if -2**63 <= number < 2**63 else None


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector: all requirements must hold (comma means AND).

    Example:
        >>> selector = ke.LabelSelector((ke.LabelRequirement("app", "in", ("web", "api")),))
        >>> selector.matches({"app": "web"}), selector.matches({"app": "db"})
        (True, False)
    """

    requirements: tuple[LabelRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        """An empty selector matches everything, which lets listing skip the check."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object carrying `labels` is selected."""
        if not self.requirements:
            return True
        have: Mapping[str, str] = labels or {}
        return all(req.matches(have) for req in self.requirements)


# A `matchExpressions` operator (metav1.LabelSelector, and node affinity's Gt and Lt) as the
# parsed selector's; any other operator becomes "never" and selects nothing.
_API_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!",
                  "Gt": "gt", "Lt": "lt"}
Expression = tuple[str, str, Sequence[str] | None]  # (key, operator, values)


def api_requirement(key: str, operator: str, values: Sequence[str] | None) -> LabelRequirement:
    """One `matchExpressions` entry: label selectors and node affinity share them."""
    return LabelRequirement(key, _API_OPERATORS.get(operator, "never"), tuple(values or ()))


def aggregated(errors: Sequence[str]) -> str:
    """utilerrors.NewAggregate(errors).Error(): one error alone, several (repeats dropped) as
    `[a, b]`."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]"


def _go_strings(values: Sequence[str]) -> str:
    """A []string as field.Invalid prints it (`%#v`): `[]string{"a", "b"}`, `[]string{}`."""
    return "[]string{" + ", ".join(go_quoted(value) for value in values) + "}"


def requirement_errors(key: str, operator: str, values: Sequence[str] | None,
                       operators: Collection[str] = ("In", "NotIn", "Exists", "DoesNotExist"),
                       path: str = "") -> list[str]:
    """What the scheduler's parsing of one `matchExpressions` entry refuses, in its words:
    metav1.LabelSelectorAsSelector (apimachinery pkg/apis/meta/v1/helpers.go: an operator
    other than In, NotIn, Exists, DoesNotExist is `"X" is not a valid label selector
    operator`), or with Gt and Lt among `operators` and a `path`, node affinity's
    nodeSelectorRequirementsAsSelector (component-helpers nodeaffinity: field.NotSupported
    under `<path>.operator`); then labels.NewRequirement (pkg/labels/selector.go) with
    field.WithPath(path): the key a qualified name, the values as the operator wants them,
    each a valid label value (pkg/util/validation's messages)."""
    if operator not in operators:
        return [unsupported_value(_at(path, "operator"), operator, ()) if path
                else f"{go_quoted(operator)} is not a valid label selector operator"]
    errors = _key_errors(key, path)
    given = list(values or ())
    values_path = _at(path, "values")
    if operator in ("In", "NotIn") and not given:
        errors.append(f"{values_path}: Invalid value: {_go_strings(given)}: for 'in', 'notin' "
                      "operators, values set can't be empty")
    if operator in ("Exists", "DoesNotExist") and given:
        errors.append(f"{values_path}: Invalid value: {_go_strings(given)}: values set must be "
                      "empty for exists and does not exist")
    if operator in ("Gt", "Lt"):
        if len(given) != 1:
            errors.append(f"{values_path}: Invalid value: {_go_strings(given)}: for 'Gt', 'Lt' "
                          "operators, exactly one value is required")
        errors += [invalid_value(f"{values_path}[{index}]", value,
                                 "for 'Gt', 'Lt' operators, the value must be an integer")
                   for index, value in enumerate(given) if go_int64(value) is None]
    for index, value in enumerate(given):
        errors += _value_errors(key, value, index, path)
    return errors


def validate_api_requirement(key: str, operator: str, values: Sequence[str] | None,
                             operators: Collection[str] = ("In", "NotIn", "Exists",
                                                           "DoesNotExist"),
                             path: str = "") -> None:
    """`requirement_errors`, raised as one SelectorError (utilerrors' aggregate)."""
    if errors := requirement_errors(key, operator, values, operators, path):
        raise SelectorError(aggregated(errors))


def label_selector(match_labels: Mapping[str, str] | None,
                   match_expressions: Iterable[Expression] = ()) -> LabelSelector:
    """A `metav1.LabelSelector` from its parts: every matchLabels pair and matchExpression must
    hold; an empty selector selects everything. The one matcher the pod disruption budgets, the
    WPA's metric selectors, node affinity and the fake API server share."""
    requirements = [LabelRequirement(key, "=", (value,))
                    for key, value in sorted((match_labels or {}).items())]
    requirements += [api_requirement(key, operator, values)
                     for key, operator, values in match_expressions]
    return LabelSelector(tuple(requirements))


def selector_from_api(obj: Any) -> LabelSelector | None:
    """A selector object as the API serves it; None when absent (or not an object)."""
    if not isinstance(obj, Mapping):
        return None
    return label_selector(obj.get("matchLabels"), [
        (str(e.get("key", "")), str(e.get("operator", "")), e.get("values"))
        for e in obj.get("matchExpressions") or () if isinstance(e, Mapping)])


def parse_label_selector(text: str) -> LabelSelector:
    """Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h,i>1` into a `LabelSelector`."""
    tokens = _tokenize(text)
    requirements: list[LabelRequirement] = []
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str | None:
        nonlocal pos
        token = peek()
        pos += 1
        return token

    def fail(why: str) -> SelectorError:
        return SelectorError(f"unable to parse requirement: {why} in {text!r}")

    while pos < len(tokens):
        token = take()
        if token == "!":
            key = take()
            if not _is_ident(key):
                raise fail("expected a key after '!'")
            assert key is not None
            _check_key(key)
            requirements.append(LabelRequirement(key, "!"))
        elif _is_ident(token):
            assert token is not None
            key = token
            _check_key(key)
            op = peek()
            if op is None or op == ",":
                requirements.append(LabelRequirement(key, "exists"))
            elif op in ("=", "==", "!="):
                take()
                value = peek()
                if _is_ident(value):
                    take()
                else:
                    value = ""  # `a=` selects an empty value, as upstream allows
                assert value is not None
                _check_values(key, [value])
                requirements.append(LabelRequirement(key, "!=" if op == "!=" else "=", (value,)))
            elif op in (">", "<"):
                take()
                value = take()
                if not _is_ident(value):
                    raise fail(f"expected an integer after {op!r}")
                assert value is not None
                try:
                    int(value)
                except ValueError:
                    raise fail(f"for 'Gt', 'Lt' operators, the value must be an integer, "
                               f"got {value!r}") from None
                requirements.append(LabelRequirement(key, "gt" if op == ">" else "lt", (value,)))
            elif op in ("in", "notin"):
                take()
                if take() != "(":
                    raise fail(f"expected '(' after {op!r}")
                values: list[str] = []
                while True:
                    item = take()
                    if item == ")" and not values:
                        break
                    if not _is_ident(item):
                        raise fail("expected a value in the set")
                    assert item is not None
                    values.append(item)
                    sep = take()
                    if sep == ")":
                        break
                    if sep != ",":
                        raise fail("expected ',' or ')' in the set")
                if not values:
                    raise fail(f"for {op!r} operator, values set can't be empty")
                _check_values(key, values)
                requirements.append(LabelRequirement(key, op, tuple(values)))
            else:
                raise fail(f"found {op!r}, expected an operator")
        else:
            raise fail(f"found {token!r}, expected a key")
        sep = take()
        if sep not in (None, ","):
            raise fail(f"found {sep!r}, expected ','")
        if sep == "," and peek() is None:
            raise fail("found trailing ','")
    return LabelSelector(tuple(requirements))


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """Render a `LabelSelector` object as its string form (as `Scale.status.selector` is)."""
    if not selector:
        return ""
    parts: list[str] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        parts.append(f"{key}={value}")
    for expr in selector.get("matchExpressions") or []:
        key = expr.get("key", "")
        op = expr.get("operator", "")
        values = ",".join(sorted(expr.get("values") or []))
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


# Field selectors ---------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRequirement:
    """One `field=value` / `field!=value` term."""

    field: str
    negate: bool
    value: str


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector: all terms must hold."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        """An empty selector matches everything."""
        return not self.requirements

    def matches(self, field_value: Callable[[str], str]) -> bool:
        """Whether an object, seen through `field_value(field) -> str`, is selected."""
        return all((field_value(req.field) == req.value) != req.negate
                   for req in self.requirements)


def _split_unescaped(text: str, sep: str) -> list[str]:
    """Split on `sep` except where it is escaped with a backslash."""
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    """Undo `fields.EscapeValue` (`\\\\`, `\\,`, `\\=`); any other escape is an error."""
    out: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=":
                raise SelectorError(f"invalid field selector value escape in {value!r}")
            out.append(value[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise SelectorError(f"invalid field selector value: unescaped {ch!r} in {value!r}")
        out.append(ch)
        i += 1
    return "".join(out)


def parse_field_selector(text: str, supported: Collection[str]) -> FieldSelector:
    """Parse `f1=v1,f2!=v2`; a field outside `supported` is an error, as upstream."""
    requirements: list[FieldRequirement] = []
    if not text.strip():
        return FieldSelector()
    for term in _split_unescaped(text, ","):
        if not term:
            continue
        match = re.match(r"^([^=!\\]*)(!=|==|=)(.*)$", term, re.DOTALL)
        if match is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        field, op, raw = match.group(1).strip(), match.group(2), match.group(3)
        if field not in supported:
            raise SelectorError(f"field label not supported: {field}")
        requirements.append(FieldRequirement(field, op == "!=", _unescape(raw)))
    return FieldSelector(tuple(requirements))
