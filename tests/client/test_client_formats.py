"""The contract's field rules as the client writes and the fake checks them, and minted tokens."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from wakeup_client import mint_instance_token
from wakeup_client.formats import format_time, normalise_url, parse_time, round_up_to_millisecond


def test_times_are_written_in_utc_with_milliseconds_and_z() -> None:
    moment = datetime(2026, 12, 1, 10, 30, 0, 250_999, tzinfo=timezone(timedelta(hours=1)))

    assert format_time(moment) == "2026-12-01T09:30:00.250Z"


def test_a_naive_time_is_not_written() -> None:
    with pytest.raises(ValueError):
        format_time(datetime(2026, 12, 1, 9, 30))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-12-01T09:30:00Z", datetime(2026, 12, 1, 9, 30, tzinfo=UTC)),
        ("2026-12-01T10:30:00.250+01:00", datetime(2026, 12, 1, 9, 30, 0, 250_000, tzinfo=UTC)),
        ("2026-12-01T09:30Z", datetime(2026, 12, 1, 9, 30, tzinfo=UTC)),
        ("2026-12-01T04:00:00.1-05:30", datetime(2026, 12, 1, 9, 30, 0, 100_000, tzinfo=UTC)),
        ("2026-12-01T09:30:00.000000001Z", datetime(2026, 12, 1, 9, 30, 0, 1_000, tzinfo=UTC)),
        ("2028-02-29T00:00:00Z", datetime(2028, 2, 29, tzinfo=UTC)),
    ],
)
def test_times_with_a_zone_are_read_in_utc_rounded_up_to_the_millisecond(text: str, expected: datetime) -> None:
    assert parse_time(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-01",
        "2026-12-01T09:30:00",
        "2026-02-30T09:30:00Z",
        "2026-12-01T25:00:00Z",
        "2026-12-01T09:30:00+24:00",
        "2026-12-01 09:30:00Z",
        "2026-12-01T09:30:00.1234567890Z",
        "9999-12-31T23:59:59.9999Z",
        "",
    ],
)
def test_times_without_a_zone_or_impossible_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time(text)


def test_rounding_up_keeps_a_whole_millisecond_and_raises_the_rest() -> None:
    whole = datetime(2026, 1, 1, 0, 0, 0, 5_000, tzinfo=UTC)

    assert round_up_to_millisecond(whole) == whole
    assert round_up_to_millisecond(whole + timedelta(microseconds=1)) == whole + timedelta(milliseconds=1)


@pytest.mark.parametrize(
    "url, stored",
    [
        ("HTTP://Example.COM:80/Path/", "http://example.com/Path"),
        ("https://example.com:443", "https://example.com"),
        ("https://example.com:8443/a//", "https://example.com:8443/a"),
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        ("http://127.0.0.1:9/host", "http://127.0.0.1:9/host"),
    ],
)
def test_urls_are_normalised_as_the_service_stores_them(url: str, stored: str) -> None:
    assert normalise_url(url) == stored


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com",
        "http://user:pw@example.com",
        "http://@example.com",
        "http://example.com/?",
        "http://example.com/#top",
        "http:///path",
        "http://example.com:99999",
        "http://exa mple.com",
        "http://example.com/" + "a" * 2048,
        "example.com",
    ],
)
def test_urls_the_service_refuses_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        normalise_url(url)


def test_a_minted_instance_token_is_swi_and_43_url_safe_characters() -> None:
    tokens = {mint_instance_token() for _ in range(100)}

    assert len(tokens) == 100
    assert all(re.fullmatch(r"swi_[A-Za-z0-9_-]{43}", token) for token in tokens)
