"""The address policy: the default ranges refused on AWS, ranges allowed back, and IPv6 addresses
that carry an IPv4 one (IPv4-mapped, NAT64)."""

import pytest

from wakeup.addresses import DEFAULT_DENIED_CIDRS, LOOPBACK_CIDRS, AddressPolicy, literal_address, parse_networks

DEFAULT = AddressPolicy.of(DEFAULT_DENIED_CIDRS)


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
        "::",
        "::1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "fe80::1%eth0",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::ffff:10.0.0.1",
        "64:ff9b::a9fe:a9fe",  # 169.254.169.254 through NAT64
        "64:ff9b::7f00:1",  # 127.0.0.1 through NAT64
        "64:ff9b::10.0.0.1",
    ],
)
def test_the_default_refuses_internal_addresses(address: str) -> None:
    assert DEFAULT.refuses(address)


@pytest.mark.parametrize(
    "address", ["192.0.2.1", "198.51.100.7", "172.32.0.1", "2001:db8::1", "::ffff:192.0.2.1", "64:ff9b::c000:201"]
)
def test_the_default_allows_other_addresses(address: str) -> None:
    assert not DEFAULT.refuses(address)


def test_allowed_ranges_are_carved_out_of_the_denied_ones() -> None:
    local = AddressPolicy.of(DEFAULT_DENIED_CIDRS, LOOPBACK_CIDRS)
    assert not local.refuses("127.0.0.1") and not local.refuses("::1") and not local.refuses("::ffff:127.0.0.1")
    assert local.refuses("169.254.169.254") and local.refuses("10.0.0.1")


def test_a_range_that_is_not_one_is_named() -> None:
    with pytest.raises(ValueError, match="'10.0.0.1/8' is not a CIDR range"):
        parse_networks("127.0.0.0/8, 10.0.0.1/8")


@pytest.mark.parametrize(
    ("host", "expected"),
    [("169.254.169.254", "169.254.169.254"), ("[::1]", "::1"), ("example.com", None), ("xn--xample-9ua.com", None)],
)
def test_a_literal_address_is_told_from_a_host_name(host: str, expected: str | None) -> None:
    found = literal_address(host)
    assert (str(found) if found else None) == expected
