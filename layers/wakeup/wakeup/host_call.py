"""One call to a host: `GET {url}/wake`, and its outcome in words a person can act on.

urllib3 comes with botocore, so the caller needs no HTTP library of its own. Each call opens its
own connection and closes it: a kept-alive connection that the host closed meanwhile would turn a
healthy host into a failed call, and calls are far apart.
"""

import errno
import socket
import ssl
from dataclasses import dataclass

import urllib3
from urllib3.exceptions import (
    HTTPError,
    LocationValueError,
    NewConnectionError,
    ProtocolError,
    SSLError,
)
from urllib3.exceptions import TimeoutError as Urllib3TimeoutError

from wakeup import __version__

USER_AGENT = f"wakeup/{__version__}"

# What an OS error at connect time means to the person reading `lastError`.
_OS_ERRORS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.ENETUNREACH: "network unreachable",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ETIMEDOUT: "connection timed out",
}


@dataclass(frozen=True)
class CallOutcome:
    """What came of one call: the host's status when it answered, and why it failed when it did."""

    status: int | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


def wake_url(url: str) -> str:
    """The address called for an instance registered at `url` (stored without a trailing slash)."""
    return f"{url}/wake"


def call_wake(url: str, instance_id: str, timeout_s: float) -> CallOutcome:
    """Calls `GET {url}/wake` once: no retry, no redirect followed, at most `timeout_s` to answer."""
    pool = urllib3.PoolManager(
        num_pools=1,
        maxsize=1,
        retries=False,
        timeout=urllib3.Timeout(total=timeout_s),
    )
    headers = {
        "User-Agent": USER_AGENT,
        "Wakeup-Instance": instance_id,
        "Connection": "close",
    }
    try:
        # The body is never read: only the status counts, and a large or endless body must not
        # hold the call open.
        response = pool.request("GET", wake_url(url), headers=headers, redirect=False, preload_content=False)
        response.close()
    except HTTPError as exc:
        return CallOutcome(status=None, error=describe_failure(exc, timeout_s))
    finally:
        pool.clear()
    return outcome_of_status(response.status)


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
