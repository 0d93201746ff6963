"""The contract's field rules (DESIGN section 2), shared by the clients, the fake and the CLI.

Times travel as ISO 8601 with a zone; the service answers in UTC with ``Z`` and milliseconds.
Instance URLs are stored normalised: ``HTTP://Example.COM:80/Path/`` is ``http://example.com/Path``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import urlsplit

# A date-time with a zone; seconds and fractions optional. A date alone or a naive time is refused.
_ISO_DATE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|([+-])(\d{2}):(\d{2}))"
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_LENGTH = 2048


def format_time(moment: datetime) -> str:
    """``moment`` as the service writes times: UTC, millisecond precision, ``Z``."""
    if moment.tzinfo is None:
        raise ValueError("a time must carry its time zone (an aware datetime)")
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_time(text: str) -> datetime:
    """An ISO 8601 date-time with a zone (``Z`` or ``±hh:mm``), in UTC, to the millisecond (rounded up).

    Raises ``ValueError`` for anything else: a date alone, a time without a zone, an impossible
    date such as ``2026-02-30``.
    """
    match = _ISO_DATE_TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not an ISO 8601 date-time with a time zone (2026-12-01T09:30:00Z)")
    year, month, day, hour, minute, second, fraction, zone, sign, zone_h, zone_m = match.groups()
    if zone == "Z":
        tz = UTC
    else:
        if int(zone_h) > 23 or int(zone_m) > 59:
            raise ValueError(f"{text!r} has an impossible time zone offset")
        offset = timedelta(hours=int(zone_h), minutes=int(zone_m))
        tz = timezone(-offset if sign == "-" else offset)
    # The service keeps milliseconds, rounding up: a host is never called earlier than it asked.
    milliseconds = -(-int((fraction or "0").ljust(9, "0")) // 1_000_000)
    try:
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0), tzinfo=tz)
        return (moment + timedelta(milliseconds=milliseconds)).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{text!r} is not a possible date and time") from exc


def round_up_to_millisecond(moment: datetime) -> datetime:
    """``moment`` on the next whole millisecond (itself if it is one), as the service keeps times."""
    extra = moment.microsecond % 1000
    return moment if extra == 0 else moment + timedelta(microseconds=1000 - extra)


def normalise_url(url: str) -> str:
    """An instance URL as the service stores it, or ``ValueError`` saying why it refuses it."""
    refusal = "url must be an http(s) URL with a host and no user, password, query or fragment"
    if len(url) > MAX_URL_LENGTH:
        raise ValueError(f"url must be at most {MAX_URL_LENGTH} characters")
    if "?" in url or "#" in url or any(c.isspace() or ord(c) < 32 for c in url):
        raise ValueError(refusal)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # an impossible port, or a malformed IPv6 address
        raise ValueError(refusal) from exc
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
        raise ValueError(refusal)
    host = parts.hostname  # lower-cased already
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"
