"""The name and value formats apimachinery checks, with its exact messages
(staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go, v1.32: IsDNS1123Subdomain,
IsDNS1123Label, IsQualifiedName, IsValidLabelValue, IsValidPortName, IsValidPortNum,
IsValidPercent, and their MaxLenError/RegexError wording). In tasks/core, not the fake API's
validation, so the scheduler's label-selector messages (tasks/core/selectors.py) say what
kube-scheduler says with the same words the fake API server answers with."""

from __future__ import annotations

import re
from functools import lru_cache

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_LABEL = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric "
                      "characters or '-', and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case "
                          "alphanumeric characters, '-' or '.', and must start and end with an "
                          "alphanumeric character")
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME = re.compile(_QUALIFIED_NAME_FMT)
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must "
                       "start and end with an alphanumeric character")
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character")
_PERCENT_FMT = "[0-9]+%"
_PERCENT = re.compile(_PERCENT_FMT)
_PORT_NAME_CHARSET = re.compile("[-a-z0-9]+")
_ONE_LETTER = re.compile("[a-z]")
_ASCII_ONLY = re.compile(r"[\x00-\x7f]*")

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    # RegexError appends `'<example>', ` per example, joined by ` or `: two spaces before `or`
    # ("(e.g. 'my-name',  or '123-abc', regex used ...)"), as the API server prints it.
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def inclusive_range_error(low: int, high: int) -> str:
    return f"must be between {low} and {high}, inclusive"


def _full(pattern: re.Pattern[str], value: str) -> bool:
    # Go's regexp works on bytes of UTF-8; a non-ASCII character never matches these classes.
    return bool(_ASCII_ONLY.fullmatch(value)) and pattern.fullmatch(value) is not None


def _length(value: str) -> int:
    return len(value.encode())  # Go's len() counts bytes


@lru_cache(maxsize=8192)
def dns1123_label(value: str) -> tuple[str, ...]:
    errors: list[str] = []
    if _length(value) > DNS1123_LABEL_MAX:
        errors.append(max_len_error(DNS1123_LABEL_MAX))
    if not _full(_DNS1123_LABEL, value):
        if _full(_DNS1123_SUBDOMAIN, value):
            errors.append("must not contain dots")
        else:
            errors.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name",
                                      "123-abc"))
    return tuple(errors)


@lru_cache(maxsize=8192)
def dns1123_subdomain(value: str) -> tuple[str, ...]:
    errors: list[str] = []
    if _length(value) > DNS1123_SUBDOMAIN_MAX:
        errors.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _full(_DNS1123_SUBDOMAIN, value):
        errors.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return tuple(errors)


@lru_cache(maxsize=8192)
def qualified_name(value: str) -> tuple[str, ...]:
    """IsQualifiedName: `name` or `prefix/name`, the prefix a DNS subdomain (label keys,
    annotation keys, taint and toleration keys, finalizers)."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend("prefix part " + msg for msg in dns1123_subdomain(prefix))
    else:
        return ("a qualified name " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT,
                                                  "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",)
    if not name:
        errors.append("name part must be non-empty")
    elif _length(name) > QUALIFIED_NAME_MAX:
        errors.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _full(_QUALIFIED_NAME, name):
        errors.append("name part " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT,
                                                 "MyName", "my.name", "123-abc"))
    return tuple(errors)


@lru_cache(maxsize=8192)
def label_value(value: str) -> tuple[str, ...]:
    errors: list[str] = []
    if _length(value) > LABEL_VALUE_MAX:
        errors.append(max_len_error(LABEL_VALUE_MAX))
    if not _full(_LABEL_VALUE, value):
        errors.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value",
                                  "12345"))
    return tuple(errors)


@lru_cache(maxsize=8192)
def port_name(value: str) -> tuple[str, ...]:
    """IsValidPortName (an IANA_SVC_NAME: at most 15, [-a-z0-9], one letter, no `--`)."""
    errors: list[str] = []
    if _length(value) > 15:
        errors.append(max_len_error(15))
    if not _full(_PORT_NAME_CHARSET, value):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _ONE_LETTER.search(value):
        errors.append("must contain at least one letter (a-z)")
    if "--" in value:
        errors.append("must not contain consecutive hyphens")
    if value and (value[0] == "-" or value[-1] == "-"):
        errors.append("must not begin or end with a hyphen")
    return tuple(errors)


def port_number(value: int) -> list[str]:
    return [] if 1 <= value <= 65535 else [inclusive_range_error(1, 65535)]


def percent(value: str) -> list[str]:
    if _full(_PERCENT, value):
        return []
    return [regex_error("a valid percent string must be a numeric string followed by an "
                        "ending '%'", _PERCENT_FMT, "1%", "93%")]


def name_is_dns_subdomain(name: str, prefix: bool) -> tuple[str, ...]:
    """NameIsDNSSubdomain (apimachinery/pkg/api/validation/generic.go): a generateName
    prefix may end in '-' (maskTrailingDash)."""
    if prefix:
        name = _mask_trailing_dash(name)
    return dns1123_subdomain(name)


def name_is_dns_label(name: str, prefix: bool) -> tuple[str, ...]:
    if prefix:
        name = _mask_trailing_dash(name)
    return dns1123_label(name)


def _mask_trailing_dash(name: str) -> str:
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


__all__ = ["dns1123_label", "dns1123_subdomain", "inclusive_range_error", "label_value",
           "max_len_error", "name_is_dns_label", "name_is_dns_subdomain", "percent",
           "port_name", "port_number", "qualified_name", "regex_error"]
