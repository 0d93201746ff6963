from datetime import UTC, datetime

import pytest

from wakeup.errors import BadRequestError
from wakeup.times import format_time, parse_at


@pytest.mark.parametrize(
    ("given", "instant"),
    [
        ("2026-12-01T09:30:00Z", datetime(2026, 12, 1, 9, 30, tzinfo=UTC)),
        ("2026-12-01T10:30:00.250+01:00", datetime(2026, 12, 1, 9, 30, 0, 250000, tzinfo=UTC)),
        ("2026-12-01T09:30Z", datetime(2026, 12, 1, 9, 30, tzinfo=UTC)),
        ("2026-12-01T04:00:00-05:30", datetime(2026, 12, 1, 9, 30, tzinfo=UTC)),
    ],
)
def test_at_with_a_zone_is_accepted(given: str, instant: datetime) -> None:
    assert parse_at(given) == instant


def test_at_finer_than_a_millisecond_is_rounded_up_never_earlier() -> None:
    assert parse_at("2026-12-01T09:30:00.2501Z") == datetime(2026, 12, 1, 9, 30, 0, 251000, tzinfo=UTC)
    assert parse_at("2026-12-01T09:30:00.250000001Z") == datetime(2026, 12, 1, 9, 30, 0, 251000, tzinfo=UTC)
    assert parse_at("2026-12-01T09:30:59.9999Z") == datetime(2026, 12, 1, 9, 31, tzinfo=UTC)


@pytest.mark.parametrize(
    "refused",
    [
        "2026-12-01",
        "2026-12-01T09:30:00",
        "2026-02-30T09:30:00Z",
        "2026-12-01T25:00:00Z",
        "2026-12-01 09:30:00Z",
        "tomorrow",
        "2026-12-01T09:30:00+0100",
        "9999-12-31T23:59:59-01:00",
    ],
)
def test_at_without_a_zone_or_impossible_is_refused(refused: str) -> None:
    with pytest.raises(BadRequestError):
        parse_at(refused)


def test_times_are_written_in_utc_with_z_and_milliseconds() -> None:
    assert format_time(datetime(2026, 12, 1, 9, 30, 0, 250000, tzinfo=UTC)) == "2026-12-01T09:30:00.250Z"
