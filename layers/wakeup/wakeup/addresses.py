"""Where the caller may call: global addresses only, on the schemes and ports the operator allows.

An account chooses the URL the caller calls, so without a rule it could have the caller probe
what only the caller reaches (the instance metadata service at 169.254.169.254, the VPC, loopback)
or aim it at anyone's port. The address rule is checked on every address a host name resolves to,
at the moment of the call, and the call then connects to an address it checked
(`wakeup.host_call`), so a DNS answer that changes between the check and the connection (DNS
rebinding) cannot pass. Registration refuses a URL whose scheme or port is not allowed, or whose
host is itself a refused address, as early as it can be told.

An address is called only if it is global, as Python's `ipaddress` says (IANA's special-purpose
registries' "globally reachable"), and so is every IPv4 address it carries: IPv4-mapped
(::ffff:0:0/96), 6to4 (2002::/16), Teredo (2001::/32, its server and its client), NAT64's
well-known prefix (64:ff9b::/96) and IPv4-compatible (::/96). `NOT_GLOBAL` adds what Python
versions before 3.13 still counted global, so the rule is the same on every version.
"""

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Never called, whatever `is_global` says of them on the running Python.
NOT_GLOBAL = tuple(
    ipaddress.ip_network(cidr)
    for cidr in (
        "192.0.0.0/24",  # IETF protocol assignments (RFC 6890), .9 and .10 too
        "198.18.0.0/15",  # benchmarking (RFC 2544)
        "224.0.0.0/4",  # multicast
        "::/96",  # IPv4-compatible, deprecated (RFC 4291 section 2.5.5.1): nothing routes it
        "64:ff9b:1::/48",  # local-use NAT64 (RFC 8215): where it carries IPv4 is each network's choice
        "2002::/16",  # 6to4, deprecated (RFC 7526); Python 3.13 counts it not global
        "fec0::/10",  # site-local, deprecated (RFC 3879)
        "ff00::/8",  # multicast
    )
)
# The well-known NAT64 prefix (RFC 6052): its last 32 bits are the IPv4 address reached ("DNS64
# and NAT64" in the Amazon VPC user guide: a NAT gateway translates 64:ff9b::a9fe:a9fe to
# 169.254.169.254).
NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
# Loopback, which the local stack allows: its hosts run on this machine.
LOOPBACK_CIDRS = "127.0.0.0/8,::1/128"
# Any port: the default (`WAKEUP_CALL_ALLOWED_PORTS` empty).
ANY_PORT = (range(1, 65536),)

REFUSED_CALL = "the host's address is in a range this service does not call"
REFUSED_URL = (
    "url's host is an address this service does not call:"
    " loopback, private, link-local and other addresses that are not global are refused"
)
HTTPS_ONLY = "url must start with https://: this service calls hosts over HTTPS only"


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


def parse_ports(text: str) -> tuple[range, ...]:
    """Comma-separated ports and ranges (`443,8000-8999`); empty is any port; ValueError naming
    the part that is not one."""
    ports = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()) or not 1 <= int(low) <= int(high or low) <= 65535:
            raise ValueError(f"{part!r} is not a port from 1 to 65535, nor a range of them like 8000-8999")
        ports.append(range(int(low), int(high or low) + 1))
    return tuple(ports) or ANY_PORT


def _ports_text(ports: tuple[range, ...]) -> str:
    return ", ".join(str(r.start) if len(r) == 1 else f"{r.start}-{r.stop - 1}" for r in ports)


@dataclass(frozen=True)
class AddressPolicy:
    """Refuses an address that is not global, or carries one that is not, or that the operator
    denies, unless the operator allows it; and a scheme or port the operator does not allow."""

    denied: tuple[Network, ...] = ()
    allowed: tuple[Network, ...] = ()
    https_only: bool = False
    ports: tuple[range, ...] = ANY_PORT

    @classmethod
    def of(cls, denied: str = "", allowed: str = "", https_only: bool = False, ports: str = "") -> "AddressPolicy":
        return cls(parse_networks(denied), parse_networks(allowed), https_only, parse_ports(ports))

    def refuses(self, address: str | Address) -> bool:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        reached = _reached(ip) if isinstance(ip, ipaddress.IPv6Address) else ip
        # The address and each IPv4 address it carries: allowing a wrapper (2002::/16, say)
        # allows none of the addresses it wraps.
        return not all(self._callable(each) for each in (reached, *embedded_ipv4(reached)))

    def _callable(self, ip: Address) -> bool:
        if _within(ip, self.allowed):
            return True
        return ip.is_global and not _within(ip, NOT_GLOBAL) and not _within(ip, self.denied)

    def url_refusal(self, scheme: str, port: int) -> str | None:
        """Why a URL of `scheme` on `port` is not called (a sentence for the account); None when it is."""
        if self.https_only and scheme != "https":
            return HTTPS_ONLY
        if not any(port in allowed for allowed in self.ports):
            return f"url's port is not one this service calls: it calls ports {_ports_text(self.ports)}"
        return None


def _reached(ip: ipaddress.IPv6Address) -> Address:
    """The address a connection to `ip` reaches: fe80::1%eth0 is fe80::1 on some interface, and
    ::ffff:10.0.0.1 is 10.0.0.1 (an IPv4-mapped address is an IPv4 connection)."""
    ip = ipaddress.IPv6Address(str(ip).partition("%")[0])
    return ip.ipv4_mapped if ip.ipv4_mapped is not None else ip


def embedded_ipv4(ip: Address) -> Iterator[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries: 6to4's, Teredo's server and client, NAT64's
    and an IPv4-compatible one's (not :: nor ::1, which are not IPv4 addresses)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return
    if ip.sixtofour is not None:
        yield ip.sixtofour
    if ip.teredo is not None:
        yield from ip.teredo
    if ip in NAT64_PREFIX or (ip in IPV4_COMPATIBLE and int(ip) > 1):
        yield ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


def _within(ip: Address, networks: tuple[Network, ...]) -> bool:
    return any(ip.version == network.version and ip in network for network in networks)


def literal_address(host: str) -> Address | None:
    """The address a URL's host is, when it is one (`[::1]` too); None for a host name."""
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None
