"""`wakeup.times`: the one reader of a wake time (the client's copy runs the same cases in
tests/client/test_client_formats.py)."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.input_cases import TIMES_READ, TIMES_REFUSED
from wakeup.errors import BadRequestError
from wakeup.times import LONG_AGO, format_time, parse_at


@pytest.mark.parametrize(("given_at", "instant"), TIMES_READ.items())
def test_at_with_a_zone_is_read_in_utc_truncated_to_the_millisecond(given_at: str, instant: datetime | None) -> None:
    assert parse_at(given_at) == (instant or LONG_AGO)


@pytest.mark.parametrize("refused", TIMES_REFUSED)
def test_at_without_a_zone_or_impossible_is_refused(refused: str) -> None:
    with pytest.raises(BadRequestError) as refusal:
        parse_at(refused)

    assert refusal.value.message.startswith("at ")


def test_an_offset_with_60_minutes_or_more_is_refused_with_the_reason() -> None:
    with pytest.raises(BadRequestError) as refusal:
        parse_at("2026-12-01T09:30:00+01:99")

    assert refusal.value.message == "at has a time zone offset out of range: ±hh:mm with hh up to 23 and mm up to 59"


def test_times_are_written_in_utc_with_z_and_milliseconds() -> None:
    assert format_time(datetime(2026, 12, 1, 9, 30, 0, 250000, tzinfo=UTC)) == "2026-12-01T09:30:00.250Z"


_ZONES = st.builds(
    lambda minutes: timezone(timedelta(minutes=minutes)), st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59)
)


@given(st.datetimes(timezones=_ZONES), st.integers(min_value=0, max_value=12))
def test_any_zoned_time_written_in_iso_8601_is_read_as_its_instant(moment: datetime, digits: int) -> None:
    # given an instant written with its offset and a fraction of 0 to 12 digits
    fraction = f"{moment.microsecond:06d}{'0' * 6}"[:digits]
    offset = moment.strftime("%z")
    text = (
        f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}" + (f".{fraction}" if digits else "") + f"{offset[:3]}:{offset[3:]}"
    )
    # when it is read
    try:
        read = parse_at(text)
    except BadRequestError as refusal:
        # then only an instant after the latest a datetime holds is refused
        assert moment.year == 9999 and "latest" in refusal.message
        return
    # then it is that instant, truncated to the millisecond (or long ago, before the year 1 in UTC)
    whole_ms = moment.replace(microsecond=int(fraction.ljust(3, "0")[:3]) * 1000 if digits else 0)
    assert read == LONG_AGO or read == whole_ms
    assert read != LONG_AGO or moment.year == 1


@given(st.text(st.sampled_from("0123456789-:T.Zz+ t９") | st.characters(), max_size=40))
def test_any_text_is_read_or_refused_with_a_400_never_an_exception(text: str) -> None:
    try:
        parse_at(text)
    except BadRequestError as refusal:
        assert refusal.status == 400 and refusal.message.startswith("at ")
