"""The contract's field rules (DESIGN section 2), shared by the clients, the fake and the CLI.

Times travel as ISO 8601 with a zone; the service answers in UTC with ``Z`` and milliseconds.
Instance URLs are stored normalised: ``HTTP://Example.COM:80/Path/`` is ``http://example.com/Path``.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import quote

import idna

# The service's rules, kept in step with its `wakeup.urls` and `wakeup.times` (the tests run both
# over the same cases, and compare them on generated input).

# A date, a time to the minute at least, and a zone: `Z` or `±hh:mm` (RFC 3339 also allows a
# lower-case `t` and `z`). Fractions of a second may have any number of digits.
_ISO_DATE_TIME = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})[Tt](?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})"
    r"(?::(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]+))?)?"
    r"(?:[Zz]|(?P<sign>[+-])(?P<zone_hour>[0-9]{2}):(?P<zone_minute>[0-9]{2}))"
)
# What a time before the earliest instant a datetime holds is read as: a wake in the past means now.
LONG_AGO = datetime.min.replace(tzinfo=UTC)

MAX_URL_LENGTH = 2048
MAX_HOST_LENGTH = 253
_DEFAULT_PORTS = {"http": 80, "https": 443}
_URL_RULE = "url must be an http(s) URL with a host and no user, password, query or fragment"
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/]*)(?P<path>/.*)?", re.DOTALL)
_BRACKETED = re.compile(r"\[(?P<address>[0-9A-Fa-f:.]+)\](?::(?P<port>.*))?", re.DOTALL)
_PORT = re.compile(r"[0-9]{1,5}")
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_NUMERIC = re.compile(r"[0-9]+|0x[0-9a-f]*")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})
_PATH_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def format_time(moment: datetime) -> str:
    """``moment`` as the service writes times: UTC, millisecond precision, ``Z``."""
    if moment.tzinfo is None:
        raise ValueError("a time must carry its time zone (an aware datetime)")
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_time(text: str) -> datetime:
    """An ISO 8601 date-time with a zone (``Z`` or ``±hh:mm``), in UTC, truncated to the millisecond.

    A leap second (``23:59:60``) is the second after ``23:59:59``; an instant before the year 1 in
    UTC is ``LONG_AGO``. Raises ``ValueError`` for anything else: a date alone, a time without a
    zone, an impossible date such as ``2026-02-30``, an offset such as ``+01:99``.
    """
    match = _ISO_DATE_TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not an ISO 8601 date-time with a time zone (2026-12-01T09:30:00Z)")
    zone = UTC
    if match["sign"]:
        hours, minutes = int(match["zone_hour"]), int(match["zone_minute"])
        if hours > 23 or minutes > 59:
            raise ValueError(f"{text!r} has a time zone offset out of range: ±hh:mm, hh up to 23, mm up to 59")
        offset = timedelta(hours=hours, minutes=minutes)
        zone = timezone(-offset if match["sign"] == "-" else offset)
    second = int(match["second"] or 0)
    leap = second == 60
    milliseconds = int((match["fraction"] or "0")[:3].ljust(3, "0"))
    year = int(match["year"])
    try:
        local = datetime(
            year or 2000,  # the year 0 has the calendar of 2000 (a leap year too), and is long past
            int(match["month"]),
            int(match["day"]),
            int(match["hour"]),
            int(match["minute"]),
            59 if leap else second,
            milliseconds * 1000,
            tzinfo=zone,
        )
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a possible date and time") from exc
    if year == 0:
        return LONG_AGO
    try:
        return (local + timedelta(seconds=1 if leap else 0)).astimezone(UTC)
    except OverflowError as exc:
        if local.year == 1:
            return LONG_AGO
        raise ValueError(f"{text!r} is later than the latest time the service can hold") from exc


def round_up_to_millisecond(moment: datetime) -> datetime:
    """``moment`` on the next whole millisecond (itself if it is one), so a host is never called early."""
    extra = moment.microsecond % 1000
    return moment if extra == 0 else moment + timedelta(microseconds=1000 - extra)


def normalise_url(url: str) -> str:
    """An instance URL as the service stores it, or ``ValueError`` saying why it refuses it.

    The message never repeats the URL: it may carry a password.
    """
    if len(url) > MAX_URL_LENGTH:
        raise ValueError(f"url must be at most {MAX_URL_LENGTH} characters")
    if any(unicodedata.category(c) in _INVISIBLE for c in url):
        raise ValueError("url must not contain spaces, control characters or invisible characters")
    if "?" in url or "#" in url:
        raise ValueError("url must have no query and no fragment: leave out ? and #")
    match = _URL.fullmatch(url)
    if match is None:
        raise ValueError(_URL_RULE)
    scheme = match["scheme"].lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError("url must start with http:// or https://")
    authority = match["authority"]
    if "@" in authority:
        raise ValueError("url must not carry a user or password: leave out the part before @")
    host, port = _host_and_port(authority)
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return f"{scheme}://{netloc}{_path(match['path'] or '')}"


def _host_and_port(authority: str) -> tuple[str, int | None]:
    if authority.startswith("["):
        bracketed = _BRACKETED.fullmatch(authority)
        try:
            address = ipaddress.IPv6Address(bracketed["address"]) if bracketed else None
        except ValueError:
            address = None
        if bracketed is None or address is None:
            raise ValueError("url has an IPv6 host that is not [address] or [address]:port, such as [2001:db8::1]")
        return f"[{address.compressed}]", _port(bracketed["port"])
    name, colon, port = authority.partition(":")
    return _host_name(name), _port(port if colon else None)


def _port(text: str | None) -> int | None:
    if not text:
        return None
    if not _PORT.fullmatch(text) or not 1 <= int(text) <= 65535:
        raise ValueError("url has a port that is not a number from 1 to 65535")
    return int(text)


def _host_name(name: str) -> str:
    if not name:
        raise ValueError("url must have a host: http://host or https://host")
    ascii_name = name.lower()
    if not name.isascii() or "xn--" in ascii_name:
        try:
            ascii_name = idna.encode(name, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError):
            raise ValueError("url has a host name that is not a valid internationalised domain name") from None
    labels = ascii_name.removesuffix(".").split(".")
    if _NUMERIC.fullmatch(labels[-1]):
        try:
            return str(ipaddress.IPv4Address(ascii_name))
        except ValueError:
            raise ValueError("url has a numeric host that is not an IPv4 address like 192.0.2.1") from None
    if len(ascii_name.removesuffix(".")) > MAX_HOST_LENGTH or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(
            "url has a host name that is not valid: labels of 1 to 63 letters, digits or hyphens,"
            " none starting or ending with a hyphen, at most 253 characters in all"
        )
    return ascii_name


def _path(path: str) -> str:
    if "%" in _ESCAPE.sub("", path):
        raise ValueError("url has a % that does not start a percent escape such as %20")
    encoded = quote(path, safe=_PATH_SAFE + "%")
    return _ESCAPE.sub(lambda escape: escape[0].upper(), encoded).rstrip("/")
