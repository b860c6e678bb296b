"""Kubernetes' CEL libraries as the fake evaluates them (fakes/kube_api/crd_schema/cel_library.py,
cel_types.py), each table re-expressed from its upstream test, then the cost limits
(cel_cost.py). Over HTTP with the real client: tests/contract/test_fake_crd_cel.py."""

from __future__ import annotations

from typing import Any

import pytest

celpy = pytest.importorskip("celpy")

from celpy.adapter import json_to_cel  # noqa: E402

from kube_elevator.fakes.kube_api.crd_schema.cel import (  # noqa: E402
    UnsupportedFunction,
    _program,
)
from kube_elevator.fakes.kube_api.crd_schema.cel_cost import (  # noqa: E402
    CostLimitExceeded,
    evaluate_costed,
)


def run(expr: str, self_value: Any = None) -> Any:
    value, _ = evaluate_costed(_program(expr), {"self": json_to_cel(self_value)})
    return value


def error_of(expr: str) -> str:
    with pytest.raises(celpy.CELEvalError) as raised:
        run(expr)
    return str(raised.value.args[0])


# kubernetes staging/src/k8s.io/apiserver/pkg/cel/library/quantity_test.go TestQuantity
QUANTITY_TRUE = [
    'quantity("12Mi") == quantity("12582912")',  # parse
    'isQuantity("20")', 'isQuantity("20M")', 'isQuantity("20Mi")',
    '!isQuantity("20Mo")', '!isQuantity("10Mm")',  # isQuantity_invalidSuffix, _passingRegex
    'quantity("200M") == quantity("200M")',  # equality_reflexivity
    'quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")',
    'quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && '
    'quantity("0.002G") == quantity("2000k")',  # equality_transitivity
    '!(quantity("200M") == quantity("0.3G"))',  # inequality
    'quantity("50M").isLessThan(quantity("50Mi"))',  # quantity_less
    'quantity("50M").isLessThan(quantity("100M"))',
    '!quantity("100M").isLessThan(quantity("50M"))',
    'quantity("50Mi").isGreaterThan(quantity("50M"))',  # quantity_greater
    'quantity("150Mi").isGreaterThan(quantity("100Mi"))',
    '!quantity("50M").isGreaterThan(quantity("100M"))',
    'quantity("200M").compareTo(quantity("0.2G")) == 0',  # compare_equal
    'quantity("50M").compareTo(quantity("50Mi")) == -1',  # compare_less
    'quantity("50Mi").compareTo(quantity("50M")) == 1',  # compare_greater
    'quantity("50k").add(quantity("20")) == quantity("50.02k")',  # add_quantity
    '!quantity("50k").add(20).isLessThan(quantity("50020"))',  # add_int
    'quantity("50k").sub(quantity("20")) == quantity("49.98k")',  # sub_quantity
    'quantity("50k").sub(20) == quantity("49980")',  # sub_int
    'quantity("50k").mul(2) == quantity("100000")',  # multiply
    'quantity("10k").div(2) == quantity("5000")',  # divide_scaled
    'quantity("10000").divInt(3) == quantity("3333")',  # integer_division
    'quantity("50k").add(20).sub(quantity("100k")).asInteger() == -49980',  # arith_chain_1
    'quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger() == 20',
    'quantity("50k").asInteger() == 50000',  # as_integer
    '!quantity("9999999999999999999999999999999999999G").isInteger()',  # is_integer
    'quantity("50").isInteger()',
    'quantity("50.703k").asApproximateFloat() == 50703.0',  # as_float
]


@pytest.mark.parametrize("expr", QUANTITY_TRUE)
def test_quantity(expr: str) -> None:
    assert bool(run(expr)) is True


@pytest.mark.parametrize(("expr", "error"), [
    ('quantity("10Mo")', "quantities must match the regular expression"),  # parseInvalidSuffix
    ('quantity("10Mm")', "unable to parse quantity's suffix"),  # ...PassesRegex
    ('quantity("9999999999999999999999999999999999999G").asInteger()',
     "cannot convert value to integer"),  # as_integer_error
])
def test_quantity_errors(expr: str, error: str) -> None:
    assert error_of(expr).startswith(error)


def test_quantity_division_is_approximate() -> None:
    """quantity_test.go TestQuantity divide_float_result: within 0.0001."""
    assert abs(float(run('quantity("10000").div(3).asApproximateFloat()')) - 3333.3333) < 1e-4


# kubernetes staging/src/k8s.io/apiserver/pkg/cel/library/ip_test.go TestIP
IP_TRUE = [
    'ip("192.168.0.1") == ip("192.168.0.1")', 'isIP("192.168.0.1")', '!isIP("192.168.0.1.0")',
    'ip.isCanonical("127.0.0.1")', 'ip("192.168.0.1").family() == 4',
    'ip("0.0.0.0").isUnspecified()', '!ip("127.0.0.1").isUnspecified()',
    'ip("127.0.0.1").isLoopback()', '!ip("1.2.3.4").isLoopback()',
    'ip("224.0.0.1").isLinkLocalMulticast()', '!ip("224.0.1.1").isLinkLocalMulticast()',
    'ip("169.254.169.254").isLinkLocalUnicast()', '!ip("192.168.0.1").isLinkLocalUnicast()',
    'ip("192.168.0.1").isGlobalUnicast()', '!ip("255.255.255.255").isGlobalUnicast()',
    'isIP("2001:db8::68")', '!isIP("2001:db8:::68")', 'ip.isCanonical("2001:db8::68")',
    '!ip.isCanonical("2001:DB8::68")', 'ip("2001:db8::68").family() == 6',
    'ip("::").isUnspecified()', '!ip("::1").isUnspecified()', 'ip("::1").isLoopback()',
    '!ip("2001:db8::abcd").isLoopback()', 'ip("ff02::1").isLinkLocalMulticast()',
    '!ip("fd00::1").isLinkLocalMulticast()', 'ip("fe80::1").isLinkLocalUnicast()',
    '!ip("fd80::1").isLinkLocalUnicast()', 'ip("2001:db8::abcd").isGlobalUnicast()',
    '!ip("ff00::1").isGlobalUnicast()', 'string(ip("192.168.0.1")) == "192.168.0.1"',
]


@pytest.mark.parametrize("expr", IP_TRUE)
def test_ip(expr: str) -> None:
    assert bool(run(expr)) is True


@pytest.mark.parametrize("expr", ['ip("192.168.0.1.0")', 'ip.isCanonical("127.0.0.1.0")',
                                  'ip("2001:db8:::68")'])
def test_ip_parse_errors(expr: str) -> None:
    """ip_test.go TestIP "parse invalid ..." (Go's netip reason after the colon differs)."""
    address = expr.split('"')[1]
    assert error_of(expr).startswith(
        f'IP Address "{address}" parse error during conversion from string: ')


# kubernetes staging/src/k8s.io/apiserver/pkg/cel/library/cidr_test.go TestCIDR (isCIDR: cidr.go)
CIDR_TRUE = [
    'cidr(dyn("192.168.0.0/24")) == cidr("192.168.0.0/24")',  # parse ipv4
    'cidr("192.168.0.0/24").containsIP(ip("192.168.0.1"))',
    '!cidr("192.168.0.0/24").containsIP(ip("192.168.1.1"))',
    'cidr("192.168.0.0/24").containsIP("192.168.0.1")',
    '!cidr("192.168.0.0/24").containsIP("192.168.1.1")',
    'cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/25"))',
    '!cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/23"))',
    'cidr("192.168.0.0/24").containsCIDR("192.168.0.0/25")',
    '!cidr("192.168.0.0/24").containsCIDR("192.168.0.0/23")',
    'cidr("192.168.0.0/24").ip() == ip("192.168.0.0")',
    'cidr("192.168.0.0/24").masked() == cidr("192.168.0.0/24")',
    'cidr("192.168.0.1/24").masked() == cidr("192.168.0.0/24")',
    'cidr("192.168.0.0/24").prefixLength() == 24',
    'cidr("2001:db8::/32") == cidr("2001:db8::/32")',  # parse ipv6
    'cidr("2001:db8::/32").containsIP(ip("2001:db8::1"))',
    '!cidr("2001:db8::/32").containsIP(ip("2001:dc8::1"))',
    'cidr("2001:db8::/32").containsIP("2001:db8::1")',
    '!cidr("2001:db8::/32").containsIP("2001:dc8::1")',
    'cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/33"))',
    '!cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/31"))',
    'cidr("2001:db8::/32").containsCIDR("2001:db8::/33")',
    '!cidr("2001:db8::/32").containsCIDR("2001:db8::/31")',
    'cidr("2001:db8::/32").ip() == ip("2001:db8::")',
    'cidr("2001:db8::/32").masked() == cidr("2001:db8::/32")',
    'cidr("2001:db8:1::/32").masked() == cidr("2001:db8::/32")',
    'cidr("2001:db8::/32").prefixLength() == 32',
    'string(cidr("192.168.0.0/24")) == "192.168.0.0/24"',
    'isCIDR("192.168.0.0/24")', '!isCIDR("192.168.0.0/33")', '!isCIDR("192.168.0.0")',
]


@pytest.mark.parametrize("expr", CIDR_TRUE)
def test_cidr(expr: str) -> None:
    assert bool(run(expr)) is True


@pytest.mark.parametrize("text", ["192.168.0.0/", "2001:db8::/"])
def test_cidr_parse_errors(text: str) -> None:
    """cidr_test.go TestCIDR "parse invalid ipv4" / "parse invalid ipv6", word for word."""
    assert error_of(f'cidr("{text}")') == (
        "network address parse error during conversion from string: network address parse "
        f'error during conversion from string: netip.ParsePrefix("{text}"): bad bits after '
        'slash: ""')


# kubernetes staging/src/k8s.io/apiserver/pkg/cel/library/urls.go URLs(): its documented examples
URL_TRUE = [
    "isURL('https://user:pass@example.com:80/path?query=val#fragment')",
    "isURL('/absolute-path')", "!isURL('https://a:b:c/')", "!isURL('../relative-path')",
    "url('/path').getScheme() == ''", "url('https://example.com/').getScheme() == 'https'",
    "url('https://example.com:80/').getHost() == 'example.com:80'",
    "url('https://example.com/').getHost() == 'example.com'",
    "url('https://[::1]:80/').getHost() == '[::1]:80'",
    "url('https://[::1]/').getHost() == '[::1]'", "url('/path').getHost() == ''",
    "url('https://example.com:80/').getHostname() == 'example.com'",
    "url('https://127.0.0.1:80/').getHostname() == '127.0.0.1'",
    "url('https://[::1]:80/').getHostname() == '::1'", "url('/path').getHostname() == ''",
    "url('https://example.com:80/').getPort() == '80'",
    "url('https://example.com/').getPort() == ''", "url('/path').getPort() == ''",
    "url('https://example.com/path').getEscapedPath() == '/path'",
    "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
    "url('https://example.com').getEscapedPath() == ''",
    "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == "
    "{'k1': ['a'], 'k2': ['b', 'c']}",
    "url('https://example.com/path?key with spaces=value with spaces').getQuery() == "
    "{'key with spaces': ['value with spaces']}",
    "url('https://example.com/path?').getQuery() == {}",
    "url('https://example.com/path').getQuery() == {}",
]


@pytest.mark.parametrize("expr", URL_TRUE)
def test_url(expr: str) -> None:
    assert bool(run(expr)) is True


@pytest.mark.parametrize("expr", ["url('https://a:b:c/')", "url('../relative-path')"])
def test_url_parse_errors(expr: str) -> None:
    assert error_of(expr).startswith("URL parse error during conversion from string: ")


# kubernetes staging/src/k8s.io/apiserver/pkg/cel/library/lists.go and regex.go (the
# documented examples each function's comment lists; regex.go's write `[0-9]*`, whose first
# match in Go is the empty one at 0, so the pattern here is `[0-9]+`, which means what they say)
LISTS_AND_REGEX = [
    ("[1, 2, 3].isSorted()", True), ("['a', 'b', 'b', 'c'].isSorted()", True),
    ("[2.0, 1.0].isSorted()", False), ("[1].isSorted()", True), ("[].isSorted()", True),
    ("[1, 3].sum()", 4), ("[1.0, 3.0].sum()", 4.0), ("[].sum()", 0),
    ("[1, 3].min()", 1), ("[1, 3].max()", 3), ("[1].min()", 1),
    ("[1, 2, 2, 3].indexOf(2)", 1), ("['a', 'b', 'b', 'c'].lastIndexOf('b')", 2),
    ("[1.0].indexOf(1.1)", -1), ("[].indexOf('string')", -1),
    ("[1, 2, 3].includes(2)", True), ("[1, 2, 3].includes(4)", False),
    ("'model-a'.includes('model-a')", True), ("'model-a'.includes('model-b')", False),
    ("'abc 123'.find('[0-9]+')", "123"), ("'abc 123'.find('xyz')", ""),
    ("'123 abc 456'.findAll('[0-9]+')", ["123", "456"]),
    ("'123 abc 456'.findAll('[0-9]+', 1)", ["123"]), ("'123 abc 456'.findAll('xyz')", []),
]


@pytest.mark.parametrize(("expr", "expected"), LISTS_AND_REGEX)
def test_lists_and_regex(expr: str, expected: Any) -> None:
    assert run(expr) == expected


@pytest.mark.parametrize(("expr", "error"), [
    ("[].min()", "min called on empty list"), ("[].max()", "max called on empty list")])
def test_min_and_max_of_nothing(expr: str, error: str) -> None:
    assert error_of(expr) == error


# cel-go ext/strings_test.go stringTests (Kubernetes enables ext.Strings(ext.StringsVersion(2)))
STRINGS = [
    ("'tacocat'.charAt(3)", "o"), ("'tacocat'.charAt(7)", ""),
    ("'tacocat'.indexOf('')", 0), ("'tacocat'.indexOf('ac')", 1),
    ("'tacocat'.indexOf('none') == -1", True), ("'tacocat'.indexOf('a', 3)", 5),
    ("'tacocat'.lastIndexOf('')", 7), ("'tacocat'.lastIndexOf('at')", 5),
    ("'tacocat'.lastIndexOf('a', 3)", 1),
    ("'TacoCat'.lowerAscii()", "tacocat"), ("'TacoCÆt'.lowerAscii()", "tacocÆt"),
    ("'tacoCat'.upperAscii()", "TACOCAT"), ("'tacoCαt'.upperAscii()", "TACOCαT"),
    ("'hello hello'.replace('he', 'we')", "wello wello"),
    ("'hello hello'.replace('he', 'we', -1)", "wello wello"),
    ("'hello hello'.replace('he', 'we', 1)", "wello hello"),
    ("'hello hello'.replace('he', 'we', 0)", "hello hello"),
    ("'hello hello'.split(' ')", ["hello", "hello"]),
    ("'hello hello hello'.split(' ', 0)", []),
    ("'hello hello hello'.split(' ', 1)", ["hello hello hello"]),
    ("'hello hello hello'.split(' ', 2)", ["hello", "hello hello"]),
    ("'hello hello hello'.split(' ', -1)", ["hello", "hello", "hello"]),
    ("'tacocat'.substring(4)", "cat"), ("'tacocat'.substring(7)", ""),
    ("'tacocat'.substring(0, 4)", "taco"), ("'tacocat'.substring(4, 4)", ""),
    ("' \\f\\n\\r\\t\\vtext  '.trim()", "text"),
    ("['x', 'y'].join()", "xy"), ("['x', 'y'].join('-')", "x-y"), ("[].join()", ""),
    # format: the verbs cel-go ext/strings.go documents for it
    ("'%s has %d items'.format(['list', 3])", "list has 3 items"),
    ("'%.2f'.format([1.2345])", "1.23"), ("'%f'.format([1.5])", "1.500000"),
    ("'%x'.format([30])", "1e"), ("'%X'.format([30])", "1E"), ("'%o'.format([8])", "10"),
    ("'%b'.format([5])", "101"), ("'%s'.format([true])", "true"),
    ("'%s'.format([[1, 2]])", "[1, 2]"), ("'100%%'.format([])", "100%"),
]


@pytest.mark.parametrize(("expr", "expected"), STRINGS)
def test_ext_strings(expr: str, expected: Any) -> None:
    assert run(expr) == expected


@pytest.mark.parametrize(("expr", "error"), [
    ("'tacocat'.charAt(30)", "index out of range: 30"),
    ("'tacocat'.indexOf('a', 30)", "index out of range: 30"),
    ("'tacocat'.lastIndexOf('a', -1)", "index out of range: -1"),
    ("'tacocat'.substring(40)", "index out of range: 40"),
    ("'tacocat'.substring(-1)", "index out of range: -1"),
    ("'tacocat'.substring(4, 3)", "invalid substring range. start: 4, end: 3"),
    ("'%s and %s'.format(['one'])", "index 1 out of range"),
])
def test_ext_strings_errors(expr: str, error: str) -> None:
    """cel-go ext/strings_test.go stringTests' `err:` cases."""
    assert error_of(expr) == error


# What cel-python cannot do: refused at compile (so at CRD install), naming the function

@pytest.mark.parametrize(("expr", "names"), [
    ("!format.dns1123Label().validate(self).hasValue()", ["hasValue", "validate",
                                                          "dns1123Label"]),
    ("isSemver(self)", ["isSemver"]), ("self.reverse() == 'a'", ["reverse"])])
def test_functions_the_fake_lacks_are_refused_by_name(expr: str, names: list[str]) -> None:
    with pytest.raises(UnsupportedFunction) as raised:
        _program(expr)
    assert all(repr(name) in str(raised.value) for name in names)


# Runtime cost (k8s.io/apiserver pkg/apis/cel/config.go PerCallLimit) ----------------------

def test_cost_grows_with_the_work_and_stops_past_the_per_call_limit() -> None:
    small = evaluate_costed(_program("self.all(x, self.all(y, x + y >= 0))"),
                            {"self": json_to_cel(list(range(10)))})[1]
    large = evaluate_costed(_program("self.all(x, self.all(y, x + y >= 0))"),
                            {"self": json_to_cel(list(range(100)))})[1]
    assert 50 * small < large  # quadratic: 100x the pairs
    with pytest.raises(CostLimitExceeded, match="operation cancelled: actual cost limit exceeded"):
        evaluate_costed(_program("self.all(x, self.all(y, x + y >= 0))"),
                        {"self": json_to_cel(list(range(100)))}, limit=large - 1)


# apiextensions validation.go getCostErrorMessage: its three ways of showing the factor
@pytest.mark.parametrize(("cost", "shown"), [
    (1_000_000_001, "more than 100x"), (12_000_000, "1.200000x"), (25_000_000, "2.5x")])
def test_cost_message_factor(cost: int, shown: str) -> None:
    from kube_elevator.fakes.kube_api.crd_schema.cel_estimate import (
        PER_EXPRESSION_LIMIT,
        cost_message,
    )

    assert cost_message("estimated rule cost", cost, PER_EXPRESSION_LIMIT).startswith(
        f"estimated rule cost exceeds budget by factor of {shown} (try simplifying the rule")


def test_estimate_follows_the_schemas_sizes() -> None:
    """A macro costs its body times the receiver's maxItems; a string function 0.1 a
    character of maxLength (cel_estimate.py)."""
    from kube_elevator.fakes.kube_api.crd_schema.cel_estimate import estimate

    def cost(rule: str, items: int, length: int) -> float:
        schema = {"type": "object", "properties": {"names": {
            "type": "array", "maxItems": items,
            "items": {"type": "string", "maxLength": length}}}}
        return estimate(_program(rule).ast, schema)[0]

    rule = "self.names.all(n, n.contains('x'))"
    assert cost(rule, 100, 10) < cost(rule, 1000, 10) < cost(rule, 1000, 1000)
    assert cost(rule, 1000, 10) > 9 * cost(rule, 100, 10)  # linear in maxItems
    nested = "self.names.all(a, self.names.all(b, a == b || a != b))"
    assert cost(nested, 100, 10) > 100 * 100
