"""One call to a host: `GET {url}/wake`, and its outcome in words a person can act on.

urllib3 comes with botocore, so the caller needs no HTTP library of its own. Each call opens its
own connection and closes it: a kept-alive connection that the host closed meanwhile would turn a
healthy host into a failed call, and calls are far apart.

The host name is resolved once, here; every address it resolves to is checked against the
operator's address policy (`wakeup.addresses`), and the connection is made to those checked
addresses, never to a second answer from DNS. The request still names the host (`Host`), and
HTTPS still sends it as SNI and verifies the certificate against it.

The timeout bounds the whole call (DESIGN section 3): the name lookup, every address tried, TLS and
the reply share one deadline, so a call never outlives the claim's lease that keeps a second call
out. urllib3's own timeouts are per step and per socket read, so a slow lookup, several silent
addresses or a host trickling its reply could each run past it alone.
"""

import errno
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    LocationValueError,
    NewConnectionError,
    ProtocolError,
    SSLError,
)
from urllib3.exceptions import TimeoutError as Urllib3TimeoutError
from urllib3.util.connection import create_connection

from wakeup import __version__
from wakeup.addresses import REFUSED_CALL, AddressPolicy

USER_AGENT = f"wakeup/{__version__}"

# What an OS error at connect time means to the person reading `lastError`.
_OS_ERRORS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.ENETUNREACH: "network unreachable",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ETIMEDOUT: "connection timed out",
}


# A host name and port to the addresses a connection may go to (`socket.getaddrinfo`'s, by default).
Resolver = Callable[[str, int], Sequence[str]]

# getaddrinfo cannot be interrupted: a lookup runs in one of these threads, and a call that stops
# waiting for it leaves it to finish there. A batch's calls run side by side (ten at most).
_lookups = ThreadPoolExecutor(max_workers=16, thread_name_prefix="host-lookup")


@dataclass(frozen=True)
class CallOutcome:
    """What came of one call: the host's status when it answered, and why it failed when it did."""

    status: int | None
    error: str | None
    # The address the policy refused (for the operator's log; never in `error`, which the
    # account reads: a private address would tell it about the network the caller runs in).
    refused_address: str | None = None

    @property
    def refused(self) -> bool:
        return self.refused_address is not None

    @property
    def ok(self) -> bool:
        return self.error is None


def wake_url(url: str) -> str:
    """The address called for an instance registered at `url` (stored without a trailing slash)."""
    return f"{url}/wake"


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to for a TCP connection, in the resolver's order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def call_wake(
    url: str,
    instance_id: str,
    timeout_s: float,
    signature_headers: Mapping[str, str] | None = None,
    *,
    addresses: AddressPolicy | None = None,
    resolver: Resolver = resolve,
) -> CallOutcome:
    """Calls `GET {url}/wake` once: no retry, no redirect followed, at most `timeout_s` to answer.

    `signature_headers` are the Standard Webhooks headers of `wakeup.signing`. With `addresses`,
    a host that resolves to any address it refuses is not called at all.
    """
    deadline = _Deadline(time.monotonic() + timeout_s)
    timed_out = CallOutcome(status=None, error=f"timed out after {timeout_s:g} s")
    target = urlsplit(wake_url(url))
    host = target.hostname or ""
    port = target.port or (443 if target.scheme == "https" else 80)
    # The operator may have narrowed the schemes or ports since the URL was registered.
    narrowed = addresses.url_refusal(target.scheme, port) if addresses is not None else None
    if narrowed is not None:
        return CallOutcome(status=None, error=narrowed)
    try:
        checked = list(_lookups.submit(resolver, host, port).result(timeout=timeout_s))
    except FutureTimeout:
        return timed_out
    except (socket.gaierror, UnicodeError):
        return CallOutcome(status=None, error="host name not found")
    refused = [address for address in checked if addresses is not None and addresses.refuses(address)]
    if refused:
        return CallOutcome(status=None, error=REFUSED_CALL, refused_address=refused[0])
    if not checked:
        return CallOutcome(status=None, error="host name not found")
    left_s = deadline.left_s()
    if left_s <= 0:
        return timed_out
    pool_class = _PinnedHTTPSPool if target.scheme == "https" else _PinnedHTTPPool
    pool = pool_class(
        host,
        port,
        timeout=urllib3.Timeout(total=left_s),
        maxsize=1,
        retries=False,
        addresses=checked,
        deadline=deadline,
    )
    headers = {
        "User-Agent": USER_AGENT,
        "Wakeup-Instance": instance_id,
        "Connection": "close",
        **(signature_headers or {}),
    }
    watchdog = threading.Timer(left_s, deadline.cut)
    watchdog.start()
    try:
        # The body is never read: only the status counts, and a large or endless body must not
        # hold the call open.
        response = pool.urlopen(
            "GET", target.path, headers=headers, redirect=False, preload_content=False, assert_same_host=False
        )
        response.close()
    except HTTPError as exc:
        if deadline.passed:
            return timed_out
        return CallOutcome(status=None, error=describe_failure(exc, timeout_s))
    finally:
        watchdog.cancel()
        pool.close()
    if deadline.passed:  # cut mid-reply: the status read may be all there was
        return timed_out
    return outcome_of_status(response.status)


@dataclass
class _Deadline:
    """The moment (`time.monotonic()`) a call must be over by, and the connections it made, which
    `cut` shuts down at that moment whatever they are doing (a reply read a byte at a time, say)."""

    at: float
    connections: list[HTTPConnection] = field(default_factory=list)
    passed: bool = False

    def left_s(self) -> float:
        return self.at - time.monotonic()

    def cut(self) -> None:
        self.passed = True  # what was read by then is cut short: not an answer
        for connection in self.connections:
            sock = connection.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # closed already: that part of the call ended in time


def _connect_to_checked(connection: Any, addresses: Sequence[str], deadline: _Deadline) -> socket.socket:
    """A socket to the first of the checked `addresses` that accepts, as urllib3 would connect to
    the host name's (the name is not resolved again: that answer could differ). The addresses
    share what is left of the call's time, so several that drop packets take no longer than one."""
    failure: OSError | None = None
    for address in addresses:
        left_s = deadline.left_s()
        if left_s <= 0:
            break
        try:
            return create_connection(
                (address, connection.port),
                left_s,
                source_address=connection.source_address,
                socket_options=connection.socket_options,
            )
        except OSError as exc:
            failure = exc
    if failure is None or isinstance(failure, TimeoutError):
        raise ConnectTimeoutError(connection, f"connection to {connection.host} timed out") from failure
    raise NewConnectionError(connection, f"failed to establish a new connection: {failure}") from failure


class _PinnedHTTPConnection(HTTPConnection):
    """A connection only to the addresses checked before it: the host name is not resolved again."""

    def __init__(self, *args: Any, addresses: Sequence[str], deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checked_addresses = tuple(addresses)
        self.deadline = deadline
        deadline.connections.append(self)

    def _new_conn(self) -> socket.socket:
        return _connect_to_checked(self, self.checked_addresses, self.deadline)


class _PinnedHTTPSConnection(_PinnedHTTPConnection, HTTPSConnection):
    """As `_PinnedHTTPConnection`, with TLS over the pinned socket: its `server_hostname` is the host
    name, so SNI and the certificate check are the host name's, as without pinning."""


class _PinnedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _PinnedHTTPConnection


class _PinnedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _PinnedHTTPSConnection


def outcome_of_status(status: int) -> CallOutcome:
    """Any 2xx is success; a 3xx is a failure, since a redirect would carry the call elsewhere."""
    if 200 <= status < 300:
        return CallOutcome(status=status, error=None)
    if 300 <= status < 400:
        return CallOutcome(status=status, error=f"HTTP {status} (redirects are not followed)")
    return CallOutcome(status=status, error=f"HTTP {status}")


def describe_failure(exc: HTTPError, timeout_s: float) -> str:
    """A short reason for a call that got no answer; never the URL, never library internals."""
    root = _root_os_error(exc)
    # NewConnectionError is a kind of ConnectTimeoutError in urllib3, so it is looked at first.
    if isinstance(exc, NewConnectionError):
        if isinstance(root, socket.gaierror):
            return "host name not found"
        if isinstance(root, socket.timeout):
            return f"timed out after {timeout_s:g} s"
        if root is not None and root.errno in _OS_ERRORS:
            return _OS_ERRORS[root.errno]
        return "connection failed"
    if isinstance(exc, Urllib3TimeoutError):
        return f"timed out after {timeout_s:g} s"
    if isinstance(exc, SSLError):
        if isinstance(root, ssl.SSLCertVerificationError):
            return "TLS certificate not trusted"
        return "TLS handshake failed"
    if isinstance(exc, LocationValueError):
        return "the instance's URL cannot be called"
    if isinstance(exc, ProtocolError):
        if isinstance(root, ConnectionResetError):
            return "connection reset"
        return "connection closed without a reply"
    return "connection failed"


def _root_os_error(exc: BaseException) -> OSError | None:
    """The operating system's error underneath urllib3's, when there is one."""
    seen: set[int] = set()
    current: BaseException | None = exc
    found: OSError | None = None
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and not isinstance(current, HTTPError):
            found = current
        for arg in getattr(current, "args", ()):
            if isinstance(arg, OSError) and not isinstance(arg, HTTPError):
                found = found or arg
        current = current.__cause__ or current.__context__
    return found
