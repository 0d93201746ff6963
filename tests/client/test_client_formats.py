"""The contract's field rules as the client writes and the fake checks them, and minted tokens."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.input_cases import TIMES_READ, TIMES_REFUSED, URLS_REFUSED, URLS_STORED
from wakeup import times as service_times
from wakeup import urls as service_urls
from wakeup.errors import BadRequestError
from wakeup_client import mint_instance_token
from wakeup_client.formats import LONG_AGO, format_time, normalise_url, parse_time, round_up_to_millisecond


def test_times_are_written_in_utc_with_milliseconds_and_z() -> None:
    moment = datetime(2026, 12, 1, 10, 30, 0, 250_999, tzinfo=timezone(timedelta(hours=1)))

    assert format_time(moment) == "2026-12-01T09:30:00.250Z"


def test_a_naive_time_is_not_written() -> None:
    with pytest.raises(ValueError):
        format_time(datetime(2026, 12, 1, 9, 30))


@pytest.mark.parametrize(("text", "expected"), TIMES_READ.items())
def test_times_with_a_zone_are_read_in_utc_truncated_to_the_millisecond(text: str, expected: datetime | None) -> None:
    assert parse_time(text) == (expected or LONG_AGO)


@pytest.mark.parametrize("text", TIMES_REFUSED)
def test_times_without_a_zone_or_impossible_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time(text)


def test_rounding_up_keeps_a_whole_millisecond_and_raises_the_rest() -> None:
    whole = datetime(2026, 1, 1, 0, 0, 0, 5_000, tzinfo=UTC)

    assert round_up_to_millisecond(whole) == whole
    assert round_up_to_millisecond(whole + timedelta(microseconds=1)) == whole + timedelta(milliseconds=1)


@pytest.mark.parametrize(("url", "stored"), URLS_STORED.items())
def test_urls_are_normalised_as_the_service_stores_them(url: str, stored: str) -> None:
    assert normalise_url(url) == stored


@pytest.mark.parametrize("url", URLS_REFUSED, ids=URLS_REFUSED.values())
def test_urls_the_service_refuses_are_refused(url: str) -> None:
    with pytest.raises(ValueError) as refusal:
        normalise_url(url)

    assert str(refusal.value).startswith("url ")


def test_a_refusal_never_repeats_the_password() -> None:
    for url in ("http://user:s3cret-pass@[::1", "http://user:s3cret-pass＠ex＃ample.com", "http://u:s3cret-pass@h"):
        with pytest.raises(ValueError) as refusal:
            normalise_url(url)
        assert "s3cret" not in str(refusal.value)


# --- the client's rules are the service's: the same answer for any input ------------------------

_URL_TEXT = st.text(
    st.sampled_from("hHtTpPsS:/[]@.-_%?#09afAF:é\u00ad\u200b\x7f＃：／＠ＥｘＸ。．") | st.characters(), max_size=40
)


@given(st.one_of(_URL_TEXT, st.builds("http://{}".format, _URL_TEXT)))
def test_the_client_stores_or_refuses_a_url_as_the_service_does(url: str) -> None:
    assert _outcome(normalise_url, url) == _outcome(service_urls.normalise_url, url)


@given(st.text(st.sampled_from("0123456789-:T.Zz+ t") | st.characters(), max_size=40) | st.datetimes().map(str))
def test_the_client_reads_or_refuses_a_time_as_the_service_does(text: str) -> None:
    assert _outcome(parse_time, text) == _outcome(service_times.parse_at, text)


def _outcome(parse: Callable[[str], object], value: str) -> object:
    """What `parse` made of `value`, or "refused" (the service's BadRequestError, the client's ValueError)."""
    try:
        return parse(value)
    except (ValueError, BadRequestError):
        return "refused"


def test_a_minted_instance_token_is_swi_and_43_url_safe_characters() -> None:
    tokens = {mint_instance_token() for _ in range(100)}

    assert len(tokens) == 100
    assert all(re.fullmatch(r"swi_[A-Za-z0-9_-]{43}", token) for token in tokens)
