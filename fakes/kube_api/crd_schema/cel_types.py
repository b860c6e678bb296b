"""Kubernetes' CEL value types for `x-kubernetes-validations`, as cel-python functions:
quantity (k8s.io/apiserver pkg/cel/library/quantity.go, parsed as apimachinery's
resource.ParseQuantity), url (urls.go), ip (ip.go) and cidr (cidr.go).

Values are small Python classes; their methods are functions taking the value first, as
cel-python calls `x.f(a)`. Parse errors carry the API server's wording; where it quotes Go's
parser (netip), the reason after it is Python's.
"""

from __future__ import annotations

import ipaddress
import re
from fractions import Fraction
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from celpy import celtypes
from celpy.evaluation import CELEvalError

from kube_elevator.fakes.kube_api.crd_schema.cel_library import CELFunction

# apimachinery pkg/api/resource/quantity.go splitREString and its suffixes
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
QUANTITY_FORMAT = ("quantities must match the regular expression "
                   "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


class Quantity:
    """A resource quantity, held exactly (apimachinery keeps an inf.Dec)."""

    def __init__(self, value: Fraction) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({self.value})"


def parse_quantity(text: str) -> Quantity | str:
    """The quantity, or resource.ParseQuantity's error message."""
    match = _QUANTITY.match(text.strip()) if text else None
    if not match or not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)", match.group(1)):
        return QUANTITY_FORMAT
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return Quantity(number * 2 ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return Quantity(number * Fraction(10) ** _DECIMAL[suffix])
    exponent = re.fullmatch(r"[eE]([-+]?\d+)", suffix)
    if exponent:
        return Quantity(number * Fraction(10) ** int(exponent.group(1)))
    return "unable to parse quantity's suffix"


def quantity(text: Any) -> Any:
    parsed = parse_quantity(str(text))
    return CELEvalError(parsed) if isinstance(parsed, str) else parsed


def is_quantity(text: Any) -> Any:
    return celtypes.BoolType(isinstance(parse_quantity(str(text)), Quantity))


def _operand(value: Any) -> Fraction:
    if isinstance(value, Quantity):
        return value.value
    if isinstance(value, int):
        return Fraction(int(value))
    raise TypeError(f"no such overload: quantity and {type(value).__name__}")


def _q(method: str, q: Any) -> Quantity:
    if not isinstance(q, Quantity):
        raise TypeError(f"no such overload: {method} on {type(q).__name__}")
    return q


def _fits_int64(value: Fraction) -> bool:
    return value.denominator == 1 and _INT64[0] <= value.numerator <= _INT64[1]


def as_integer(q: Any) -> Any:
    value = _q("asInteger", q).value
    if not _fits_int64(value):
        return CELEvalError("cannot convert value to integer")
    return celtypes.IntType(value.numerator)


def compare_to(q: Any, other: Any) -> Any:
    a, b = _q("compareTo", q).value, _operand(other)
    return celtypes.IntType((a > b) - (a < b))


def _compare_fn(sign: int) -> CELFunction:
    return lambda q, other: celtypes.BoolType(int(compare_to(q, other)) == sign)


def _arith(method: str, op: Any) -> CELFunction:
    def apply(q: Any, other: Any) -> Any:
        if method in ("div", "divInt") and _operand(other) == 0:
            return CELEvalError("division by zero")
        return Quantity(op(_q(method, q).value, _operand(other)))
    return apply


QUANTITY_FUNCTIONS: dict[str, CELFunction] = {
    "quantity": quantity, "isQuantity": is_quantity,
    "sign": lambda q: celtypes.IntType((_q("sign", q).value > 0) - (q.value < 0)),
    "isInteger": lambda q: celtypes.BoolType(_fits_int64(_q("isInteger", q).value)),
    "asInteger": as_integer,
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(_q("asApproximateFloat", q).value)),
    "compareTo": compare_to, "isGreaterThan": _compare_fn(1), "isLessThan": _compare_fn(-1),
    "add": _arith("add", lambda a, b: a + b), "sub": _arith("sub", lambda a, b: a - b),
    "mul": _arith("mul", lambda a, b: a * b), "div": _arith("div", lambda a, b: a / b),
    "divInt": _arith("divInt", lambda a, b: Fraction(int(a / b))),
}


# urls.go: url(), isURL() and the getters --------------------------------------------------

class URL:
    def __init__(self, text: str) -> None:
        self.text = text
        self.parts = urlsplit(text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, URL) and self.text == other.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __str__(self) -> str:
        return self.text


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _url_error(text: str) -> str | None:
    """Why Go's url.ParseRequestURI refuses `text` (it takes an absolute URI or an absolute
    path; spaces in the path and query, and a fragment, pass), roughly; None when it takes it."""
    if not text or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return "invalid URI for request" if text else "empty url"
    if not (_SCHEME.match(text) or text.startswith("/")):
        return "invalid URI for request"
    try:
        parts = urlsplit(text)
        _ = parts.port
    except ValueError as exc:
        return str(exc)
    if " " in parts.netloc:
        return "invalid character \" \" in host name"
    return None


def url(text: Any) -> Any:
    error = _url_error(str(text))
    if error:
        return CELEvalError(f"URL parse error during conversion from string: parse "
                            f"{str(text)!r}: {error}")
    return URL(str(text))


def _u(method: str, value: Any) -> URL:
    if not isinstance(value, URL):
        raise TypeError(f"no such overload: {method} on {type(value).__name__}")
    return value


def _host(value: Any) -> Any:
    return celtypes.StringType(_u("getHost", value).parts.netloc.rpartition("@")[2])


def _hostname(value: Any) -> Any:
    host = _u("getHostname", value).parts.netloc.rpartition("@")[2]
    if host.startswith("["):
        return celtypes.StringType(host[1:host.find("]")])
    return celtypes.StringType(host.rsplit(":", 1)[0] if ":" in host else host)


def _port(value: Any) -> Any:
    host = _u("getPort", value).parts.netloc.rpartition("@")[2]
    tail = host[host.find("]") + 1:] if host.startswith("[") else host
    return celtypes.StringType(tail.rsplit(":", 1)[1] if ":" in tail else "")


def _query(value: Any) -> Any:
    found = parse_qs(_u("getQuery", value).parts.query, keep_blank_values=True)
    return celtypes.MapType({celtypes.StringType(k): celtypes.ListType(
        [celtypes.StringType(v) for v in vs]) for k, vs in found.items()})


URL_FUNCTIONS: dict[str, CELFunction] = {
    "url": url, "isURL": lambda text: celtypes.BoolType(_url_error(str(text)) is None),
    "getScheme": lambda u: celtypes.StringType(_u("getScheme", u).parts.scheme),
    "getHost": _host, "getHostname": _hostname, "getPort": _port,
    "getEscapedPath": lambda u: celtypes.StringType(quote(_u("getEscapedPath", u).parts.path,
                                                          safe="/:@!$&'()*+,;=-._~%")),
    "getQuery": _query,
}


# ip.go and cidr.go ------------------------------------------------------------------------

class IP:
    def __init__(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
        self.address = address

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and self.address == other.address

    def __hash__(self) -> int:
        return hash(self.address)

    def __str__(self) -> str:
        return str(self.address)


class CIDR:
    def __init__(self, address: IP, prefix: int) -> None:
        self.address, self.prefix = address, prefix

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(f"{self.address}/{self.prefix}", strict=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CIDR) and (self.address, self.prefix) == \
            (other.address, other.prefix)

    def __hash__(self) -> int:
        return hash((self.address, self.prefix))

    def __str__(self) -> str:
        return f"{self.address}/{self.prefix}"


def _parse_ip(text: str) -> IP | str:
    """The address, or why ip.go refuses it (zones and IPv4-mapped IPv6 included)."""
    if "%" in text:
        return "IP address with zone value is not allowed"
    try:
        address = ipaddress.ip_address(text)
    except ValueError as exc:
        return f"ParseAddr({text!r}): {exc}".replace("'", '"')
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return "IPv4-mapped IPv6 address is not allowed"
    return IP(address)


def ip(text: Any) -> Any:
    """`ip(string)`, and `cidr.ip()`: the prefix's address as written."""
    if isinstance(text, CIDR):
        return text.address
    parsed = _parse_ip(str(text))
    if isinstance(parsed, str):
        return CELEvalError(f'IP Address "{text}" parse error during conversion from string: '
                            f"{parsed}")
    return parsed


def is_canonical(_ip_function: Any, text: Any) -> Any:
    """`ip.isCanonical(string)`: cel-python hands the `ip` function in as the receiver."""
    parsed = ip(text)
    if isinstance(parsed, CELEvalError):
        return parsed
    return celtypes.BoolType(str(parsed) == str(text))


def _i(method: str, value: Any) -> IP:
    if not isinstance(value, IP):
        raise TypeError(f"no such overload: {method} on {type(value).__name__}")
    return value


def _global_unicast(value: Any) -> Any:
    """Go's netip IsGlobalUnicast: private ranges count; broadcast, link-local, loopback,
    multicast and unspecified do not."""
    a = _i("isGlobalUnicast", value).address
    broadcast = a == ipaddress.IPv4Address("255.255.255.255")
    return celtypes.BoolType(not (a.is_unspecified or a.is_loopback or a.is_multicast
                                  or a.is_link_local or broadcast))


def _link_local_multicast(value: Any) -> Any:
    a = _i("isLinkLocalMulticast", value).address
    net = ipaddress.ip_network("224.0.0.0/24" if a.version == 4 else "ff02::/16")
    return celtypes.BoolType(a in net)


def _parse_cidr(text: str) -> CIDR | str:
    """The prefix, or why netip.ParsePrefix refuses it (Go's wording; quoted with %q)."""
    address, slash, bits = text.partition("/")
    where = f'netip.ParsePrefix("{text}")'
    if not slash:
        return f"{where}: no '/'"
    if not bits.isdigit() or (len(bits) > 1 and bits.startswith("0")):
        return f'{where}: bad bits after slash: "{bits}"'
    parsed = _parse_ip(address)
    if isinstance(parsed, str):
        return f"{where}: {parsed}"
    if int(bits) > parsed.address.max_prefixlen:
        return f"{where}: prefix length out of range"
    return CIDR(parsed, int(bits))


def cidr(text: Any) -> Any:
    parsed = _parse_cidr(str(text))
    if isinstance(parsed, str):
        # cidr.go wraps the error twice (cidr_test.go TestCIDR "parse invalid ipv4")
        prefix = "network address parse error during conversion from string: "
        return CELEvalError(prefix + prefix + parsed)
    return parsed


def _c(method: str, value: Any) -> CIDR:
    if not isinstance(value, CIDR):
        raise TypeError(f"no such overload: {method} on {type(value).__name__}")
    return value


def _contains_ip(value: Any, other: Any) -> Any:
    target = ip(other) if isinstance(other, str) else other
    if isinstance(target, CELEvalError):
        return target
    return celtypes.BoolType(_i("containsIP", target).address in _c("containsIP", value).network)


def _contains_cidr(value: Any, other: Any) -> Any:
    target = cidr(other) if isinstance(other, str) else other
    if isinstance(target, CELEvalError):
        return target
    inner, outer = _c("containsCIDR", target).network, _c("containsCIDR", value).network
    return celtypes.BoolType(inner.version == outer.version and inner.subnet_of(outer))  # type: ignore[arg-type]


def _string(value: Any) -> Any:
    """`string(x)`: the standard conversion, and these types' string forms."""
    if isinstance(value, IP | CIDR | URL):
        return celtypes.StringType(str(value))
    return celtypes.StringType(value)


IP_FUNCTIONS: dict[str, CELFunction] = {
    "ip": ip, "isIP": lambda text: celtypes.BoolType(isinstance(_parse_ip(str(text)), IP)),
    "isCanonical": is_canonical,
    "family": lambda v: celtypes.IntType(_i("family", v).address.version),
    "isUnspecified": lambda v: celtypes.BoolType(_i("isUnspecified", v).address.is_unspecified),
    "isLoopback": lambda v: celtypes.BoolType(_i("isLoopback", v).address.is_loopback),
    "isLinkLocalMulticast": _link_local_multicast,
    "isLinkLocalUnicast": lambda v: celtypes.BoolType(
        _i("isLinkLocalUnicast", v).address.is_link_local),
    "isGlobalUnicast": _global_unicast,
    "cidr": cidr, "isCIDR": lambda text: celtypes.BoolType(
        isinstance(_parse_cidr(str(text)), CIDR)),
    "containsIP": _contains_ip, "containsCIDR": _contains_cidr,
    "prefixLength": lambda v: celtypes.IntType(_c("prefixLength", v).prefix),
    "masked": lambda v: CIDR(IP(_c("masked", v).network.network_address), v.prefix),
    "string": _string,
}

__all__ = ["CIDR", "IP", "IP_FUNCTIONS", "QUANTITY_FUNCTIONS", "URL", "URL_FUNCTIONS",
           "Quantity", "parse_quantity"]
