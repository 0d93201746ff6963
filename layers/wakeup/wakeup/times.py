"""Times as the contract writes them: ISO 8601 in, UTC with `Z` and milliseconds out."""

import math
import re
from datetime import UTC, datetime, timedelta

from wakeup.errors import BadRequestError

# A date, a time to the minute at least, and a zone: `Z` or `±hh:mm`.
_AT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})")
AT_RULE = (
    "at must be an ISO 8601 date-time with a time zone, such as 2026-12-01T09:30:00Z or 2026-12-01T10:30:00.250+01:00"
)


def now() -> datetime:
    return datetime.now(UTC)


def parse_at(value: str) -> datetime:
    """The instant `value` names, in UTC, rounded up to the millisecond (never earlier than asked)."""
    if not _AT.fullmatch(value):
        raise BadRequestError(AT_RULE)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        fraction = re.search(r"\.(\d+)", value)
        micros = parsed.microsecond
        if fraction and int(fraction.group(1)[6:] or 0) > 0:
            micros += 1  # sub-microsecond digits that fromisoformat dropped
        rounded = math.ceil(micros / 1000) * 1000
        return parsed.replace(microsecond=0).astimezone(UTC) + timedelta(microseconds=rounded)
    except (ValueError, OverflowError):
        raise BadRequestError(f"at is not a real date and time: {value}") from None


def format_time(value: datetime) -> str:
    """`2026-12-01T09:30:00.250Z`: how replies and the table write times."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_stored(value: str) -> datetime:
    """A time the table holds (written by `format_time`)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def epoch_ms(value: datetime) -> int:
    return round(value.timestamp() * 1000)
