"""The string formats apiextensions checks (k8s.io/apiextensions-apiserver
pkg/apiserver/validation/formats.go `supportedFormats`, checked by kube-openapi's strfmt);
a format outside the list is accepted as any string, as there."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable
from datetime import date, datetime

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_UUID_V = {n: re.compile(rf"^[0-9a-f]{{8}}-[0-9a-f]{{4}}-{n}[0-9a-f]{{3}}-[0-9a-f]{{4}}-"
                         r"[0-9a-f]{12}$", re.I) for n in "345"}
_HOSTNAME = re.compile(r"^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)"
                       r"(\.([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?))*\.?$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_MAC = re.compile(r"^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$")
# Go's time.ParseDuration (strfmt's "duration" also takes "1 day" forms; Go's are the common)
_DURATION = re.compile(r"^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+$|^0$")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_HEX_COLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")


def _date_time(value: str) -> bool:
    if not _DATE_TIME.match(value):
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _date(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return len(value) == 10


def _ip(version: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return ipaddress.ip_address(value).version == version
        except ValueError:
            return False
    return check


def _cidr(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return "/" in value


def _byte(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _uri(value: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", value))


FORMATS: dict[str, Callable[[str], bool]] = {
    "uuid": lambda v: bool(_UUID.match(v)),
    "uuid3": lambda v: bool(_UUID_V["3"].match(v)),
    "uuid4": lambda v: bool(_UUID_V["4"].match(v)),
    "uuid5": lambda v: bool(_UUID_V["5"].match(v)),
    "hostname": lambda v: bool(_HOSTNAME.match(v)) and len(v) <= 255,
    "email": lambda v: bool(_EMAIL.match(v)),
    "ipv4": _ip(4),
    "ipv6": _ip(6),
    "cidr": _cidr,
    "mac": lambda v: bool(_MAC.match(v)),
    "byte": _byte,
    "date": _date,
    "date-time": _date_time,
    "datetime": _date_time,
    "duration": lambda v: bool(_DURATION.match(v)),
    "uri": _uri,
    "hexcolor": lambda v: bool(_HEX_COLOR.match(v)),
}


def format_ok(name: str, value: str) -> bool:
    """Whether `value` is of the string format `name` (unknown formats accept anything)."""
    check = FORMATS.get(name)
    return check is None or check(value)


__all__ = ["FORMATS", "format_ok"]
