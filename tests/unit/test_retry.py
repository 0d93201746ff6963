"""The retry rule (`wakeup.logic.retry`): the delay after each failure, when a wake is given up,
and the client's fake held to the same delays."""

from datetime import UTC, datetime, timedelta

import pytest

from wakeup.logic.retry import MAX_RETRY_DELAY_S, next_due, retry_delay_s
from wakeup_client.testing import backoff_s

FAILED_AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)  # arithmetic only: nothing compares it with now


@pytest.mark.parametrize(("failures", "delay"), [(1, 1), (2, 2), (3, 4), (4, 8), (9, 256), (10, 512)])
def test_delay_doubles_from_one_second(failures: int, delay: int) -> None:
    assert retry_delay_s(failures) == delay


@pytest.mark.parametrize("failures", [11, 12, 50, 10_000])
def test_delay_is_capped_at_fifteen_minutes(failures: int) -> None:
    assert retry_delay_s(failures) == MAX_RETRY_DELAY_S == 900


def test_zero_failures_is_refused() -> None:
    with pytest.raises(ValueError, match="from 1"):
        retry_delay_s(0)


def test_the_next_call_is_due_the_delay_after_the_failure() -> None:
    assert next_due(FAILED_AT, 3, at=FAILED_AT, max_wake_age_s=None) == FAILED_AT + timedelta(seconds=4)


def test_a_wake_is_given_up_once_its_next_call_would_pass_the_maximum_age() -> None:
    at = FAILED_AT - timedelta(seconds=60)
    # the 4th failure's retry, 8 s later, is 68 s after the wake's time
    assert next_due(FAILED_AT, 4, at=at, max_wake_age_s=68) == FAILED_AT + timedelta(seconds=8)
    assert next_due(FAILED_AT, 4, at=at, max_wake_age_s=67) is None


def test_no_maximum_age_never_gives_up() -> None:
    long_ago = FAILED_AT - timedelta(days=365)
    assert next_due(FAILED_AT, 50, at=long_ago, max_wake_age_s=0) == FAILED_AT + timedelta(seconds=900)


@pytest.mark.parametrize("failures", range(1, 31))
def test_the_client_fakes_backoff_is_the_services(failures: int) -> None:
    assert backoff_s(failures) == retry_delay_s(failures)
