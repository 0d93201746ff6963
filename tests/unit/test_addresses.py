"""Where the caller may call: global addresses only, every IPv4 address an IPv6 one carries
checked too, ranges the operator denies or allows back, and the schemes and ports allowed."""

import ipaddress

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from wakeup.addresses import (
    HTTPS_ONLY,
    LOOPBACK_CIDRS,
    AddressPolicy,
    embedded_ipv4,
    literal_address,
    parse_networks,
    parse_ports,
)

DEFAULT = AddressPolicy()


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.255.255.254",
        "10.0.0.1",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "100.64.0.1",  # carrier-grade NAT
        "169.254.169.254",  # the instance metadata service
        "224.0.0.1",
        "239.255.255.250",
        "0.0.0.0",
        "255.255.255.255",
        "198.18.0.1",  # benchmarking
        "198.19.255.254",
        "192.0.0.1",  # IETF protocol assignments, the whole /24
        "192.0.0.9",
        "192.0.0.10",
        "192.0.2.1",  # documentation
        "::",
        "::1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "fe80::1%eth0",
        "fec0::1",
        "ff02::1",
        "ff0e::1",
        "2001:db8::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::ffff:10.0.0.1",
        "64:ff9b::a9fe:a9fe",  # 169.254.169.254 through NAT64
        "64:ff9b::7f00:1",  # 127.0.0.1 through NAT64
        "64:ff9b::10.0.0.1",
        "64:ff9b:1::a00:1",  # local-use NAT64
        "64:ff9b:1:0:a:0:100:0",
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "2002:808:808::1",  # 6to4 of a global address: 6to4 is not global
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        "::10.0.0.1",  # IPv4-compatible
        "::8.8.8.8",
    ],
)
def test_the_default_refuses_what_is_not_global(address: str) -> None:
    assert DEFAULT.refuses(address)


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "1.1.1.1", "172.32.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "64:ff9b::8.8.4.4"],
)
def test_the_default_calls_global_addresses(address: str) -> None:
    assert not DEFAULT.refuses(address)


ipv4 = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)
not_global_ipv4 = ipv4.filter(
    lambda ip: not ip.is_global or ip.is_multicast or ip in ipaddress.ip_network("192.0.0.0/24")
)


def _wrapped(v4: ipaddress.IPv4Address, form: str, rest: int) -> ipaddress.IPv6Address:
    """`v4` carried in an IPv6 address of `form`; `rest` fills the bits the form leaves free."""
    n = int(v4)
    if form == "mapped":
        return ipaddress.IPv6Address(0xFFFF << 32 | n)
    if form == "6to4":
        return ipaddress.IPv6Address(0x2002 << 112 | n << 80 | rest % 2**80)
    if form == "teredo client":  # the client's address is stored inverted (RFC 4380)
        return ipaddress.IPv6Address(0x20010000 << 96 | (rest % 2**32) << 64 | (rest % 2**32) << 32 | n ^ 0xFFFFFFFF)
    if form == "teredo server":
        return ipaddress.IPv6Address(0x20010000 << 96 | n << 64 | rest % 2**64)
    if form == "nat64":
        return ipaddress.IPv6Address(0x64FF9B << 96 | n)
    assert form == "compatible"
    return ipaddress.IPv6Address(n)


FORMS = ["mapped", "6to4", "teredo client", "teredo server", "nat64", "compatible"]
# Each wrapper's own range allowed back, so that only the check of what it carries can refuse.
WRAPPERS_ALLOWED = AddressPolicy.of(allowed="2002::/16,2001::/32,64:ff9b::/96,::/96")


@given(not_global_ipv4, st.sampled_from(FORMS), st.integers(0, 2**80))
def test_an_ipv6_address_carrying_an_ipv4_one_that_is_not_global_is_refused(
    v4: ipaddress.IPv4Address, form: str, rest: int
) -> None:
    assume(form != "compatible" or int(v4) > 1)  # :: and ::1 are not IPv4-compatible addresses
    wrapped = _wrapped(v4, form, rest)
    assert DEFAULT.refuses(wrapped)
    assert WRAPPERS_ALLOWED.refuses(wrapped), f"{wrapped} carries {v4}"


@given(st.sampled_from(FORMS[1:]), st.integers(0, 2**80))
def test_each_form_is_read_for_the_ipv4_address_it_carries(form: str, rest: int) -> None:
    v4 = ipaddress.IPv4Address("8.8.4.4")
    assert v4 in list(embedded_ipv4(_wrapped(v4, form, rest)))


@given(ipv4)
def test_an_ipv4_address_is_called_exactly_when_it_is_global_and_not_special(v4: ipaddress.IPv4Address) -> None:
    special = v4.is_multicast or v4 in ipaddress.ip_network("192.0.0.0/24")
    assert DEFAULT.refuses(v4) == (not v4.is_global or special)
    # NAT64 reaches the same address, and is called or refused with it.
    assert DEFAULT.refuses(_wrapped(v4, "nat64", 0)) == DEFAULT.refuses(v4)


def test_allowed_ranges_are_carved_out_of_the_refused_ones() -> None:
    local = AddressPolicy.of(allowed=LOOPBACK_CIDRS)
    assert not local.refuses("127.0.0.1") and not local.refuses("::1") and not local.refuses("::ffff:127.0.0.1")
    assert local.refuses("169.254.169.254") and local.refuses("10.0.0.1")
    # Loopback reached through a wrapper is not loopback: the wrapper is refused.
    assert local.refuses("2002:7f00:1::1")


def test_the_operator_denies_global_ranges_too() -> None:
    policy = AddressPolicy.of(denied="8.8.8.0/24,2606:4700::/32")
    assert policy.refuses("8.8.8.8") and policy.refuses("2606:4700::1111") and policy.refuses("64:ff9b::808:808")
    assert not policy.refuses("1.1.1.1")


def test_a_range_that_is_not_one_is_named() -> None:
    with pytest.raises(ValueError, match="'10.0.0.1/8' is not a CIDR range"):
        parse_networks("127.0.0.0/8, 10.0.0.1/8")


@pytest.mark.parametrize("text", ["0", "65536", "80-", "-80", "90-80", "http", "4 43"])
def test_a_port_that_is_not_one_is_named(text: str) -> None:
    with pytest.raises(ValueError, match=f"'{text.strip()}' is not a port"):
        parse_ports(f"443,{text}")


def test_by_default_both_schemes_and_every_port_are_called() -> None:
    for scheme in ("http", "https"):
        for port in (1, 80, 443, 8080, 65535):
            assert DEFAULT.url_refusal(scheme, port) is None


def test_https_only_refuses_http() -> None:
    policy = AddressPolicy.of(https_only=True)
    assert policy.url_refusal("http", 80) == HTTPS_ONLY
    assert policy.url_refusal("https", 8443) is None


@given(st.integers(1, 65535))
def test_only_the_allowed_ports_are_called(port: int) -> None:
    policy = AddressPolicy.of(ports="443, 8000-8999")
    refusal = policy.url_refusal("https", port)
    assert (refusal is None) == (port == 443 or 8000 <= port <= 8999)
    if refusal is not None:
        assert refusal == "url's port is not one this service calls: it calls ports 443, 8000-8999"


@pytest.mark.parametrize(
    ("host", "expected"),
    [("169.254.169.254", "169.254.169.254"), ("[::1]", "::1"), ("example.com", None), ("xn--xample-9ua.com", None)],
)
def test_a_literal_address_is_told_from_a_host_name(host: str, expected: str | None) -> None:
    found = literal_address(host)
    assert (str(found) if found else None) == expected
