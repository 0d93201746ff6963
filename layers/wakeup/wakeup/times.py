"""Times as the contract writes them: ISO 8601 in, UTC with `Z` and milliseconds out.

`parse_at` is the one reader of a requested wake time (the client library's `parse_time` keeps
the same rules; the tests run both over the same cases, `tests/support/input_cases.py`).
"""

import re
from datetime import UTC, datetime, timedelta, timezone

from wakeup.errors import BadRequestError

# A date, a time to the minute at least, and a zone: `Z` or `±hh:mm` (RFC 3339 also allows a
# lower-case `t` and `z`). Fractions of a second may have any number of digits.
_AT = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})[Tt](?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})"
    r"(?::(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]+))?)?"
    r"(?:[Zz]|(?P<sign>[+-])(?P<zone_hour>[0-9]{2}):(?P<zone_minute>[0-9]{2}))"
)
AT_RULE = (
    "at must be an ISO 8601 date-time with a time zone, such as 2026-12-01T09:30:00Z or 2026-12-01T10:30:00.250+01:00"
)
# What a wake before the earliest instant a datetime holds is taken as: a time in the past means now.
LONG_AGO = datetime.min.replace(tzinfo=UTC)


def now() -> datetime:
    return datetime.now(UTC)


def parse_at(value: str) -> datetime:
    """The instant `value` names, in UTC, truncated to the millisecond.

    A leap second (`23:59:60`) is the second after `23:59:59`; an instant before the year 1 in
    UTC (the year 0, or the year 1 in a zone east of UTC) is `LONG_AGO`, which a wake takes as now.
    """
    match = _AT.fullmatch(value)
    if match is None:
        raise BadRequestError(AT_RULE)
    zone = UTC
    if match["sign"]:
        hours, minutes = int(match["zone_hour"]), int(match["zone_minute"])
        if hours > 23 or minutes > 59:
            raise BadRequestError("at has a time zone offset out of range: ±hh:mm with hh up to 23 and mm up to 59")
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
    except ValueError:
        raise BadRequestError(f"at is not a real date and time: {value}") from None
    if year == 0:
        return LONG_AGO
    try:
        return (local + timedelta(seconds=1 if leap else 0)).astimezone(UTC)
    except OverflowError:
        if local.year == 1:
            return LONG_AGO
        raise BadRequestError("at is later than the latest time the service can hold (9999-12-31T23:59:59Z)") from None


def format_time(value: datetime) -> str:
    """`2026-12-01T09:30:00.250Z`: how replies and the table write times."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_stored(value: str) -> datetime:
    """A time the table holds (written by `format_time`)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def epoch_ms(value: datetime) -> int:
    return round(value.timestamp() * 1000)
