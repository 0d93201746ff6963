"""Which addresses the caller may call: the operator's denied ranges, less the allowed ones.

An account chooses the URL the caller calls, so without a rule it could have the caller probe
what only the caller reaches: the instance metadata service (169.254.169.254), the VPC, loopback.
The rule is checked on every address a host name resolves to, at the moment of the call, and the
call then connects to an address it checked (`wakeup.host_call`), so a DNS answer that changes
between the check and the connection (DNS rebinding) cannot pass. Registration refuses a URL whose
host is itself an address in a denied range, as early as it can be told.
"""

import ipaddress
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# On AWS, by default: what is not the public internet. IPv4-mapped IPv6 addresses
# (::ffff:10.0.0.1) and NAT64 ones (64:ff9b::a9fe:a9fe, which a NAT gateway translates to
# 169.254.169.254: "DNS64 and NAT64" in the Amazon VPC user guide) are checked as the IPv4 address
# they carry.
DEFAULT_DENIED_CIDRS = ",".join(
    [
        "0.0.0.0/8",  # "this network", 0.0.0.0 unspecified
        "10.0.0.0/8",  # private (RFC 1918)
        "100.64.0.0/10",  # carrier-grade NAT (RFC 6598)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, the instance metadata service among them
        "172.16.0.0/12",  # private (RFC 1918)
        "192.168.0.0/16",  # private (RFC 1918)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
        "::/128",  # unspecified
        "::1/128",  # loopback
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "ff00::/8",  # multicast
    ]
)
# The well-known NAT64 prefix (RFC 6052): its last 32 bits are the IPv4 address reached.
NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
# Loopback, which the local stack allows: its hosts run on this machine.
LOOPBACK_CIDRS = "127.0.0.0/8,::1/128"

REFUSED_CALL = "the host's address is in a range this service does not call"
REFUSED_URL = (
    "url's host is an address this service does not call:"
    " loopback, private, link-local and other internal ranges are refused"
)


def parse_networks(text: str) -> tuple[Network, ...]:
    """Comma-separated CIDRs (`10.0.0.0/8,fc00::/7`); ValueError naming the one that is not."""
    networks = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=True))
        except ValueError:
            raise ValueError(f"{part!r} is not a CIDR range like 10.0.0.0/8 or fc00::/7") from None
    return tuple(networks)


@dataclass(frozen=True)
class AddressPolicy:
    """Refuses an address in a denied range unless it is also in an allowed one."""

    denied: tuple[Network, ...]
    allowed: tuple[Network, ...] = ()

    @classmethod
    def of(cls, denied: str, allowed: str = "") -> "AddressPolicy":
        return cls(parse_networks(denied), parse_networks(allowed))

    def refuses(self, address: str | Address) -> bool:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        if isinstance(ip, ipaddress.IPv6Address):
            ip = _reached(ip)
        return _within(ip, self.denied) and not _within(ip, self.allowed)


def _reached(ip: ipaddress.IPv6Address) -> Address:
    """The address a connection to `ip` reaches: fe80::1%eth0 is fe80::1 on some interface,
    ::ffff:10.0.0.1 is 10.0.0.1, and so is 64:ff9b::a00:1 through NAT64."""
    ip = ipaddress.IPv6Address(str(ip).partition("%")[0])
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in NAT64_PREFIX:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def _within(ip: Address, networks: tuple[Network, ...]) -> bool:
    return any(ip.version == network.version and ip in network for network in networks)


def literal_address(host: str) -> Address | None:
    """The address a URL's host is, when it is one (`[::1]` too); None for a host name."""
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None
