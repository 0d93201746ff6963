import pytest

from wakeup.backoff import MAX_RETRY_DELAY_S, retry_delay_s


@pytest.mark.parametrize(("failures", "delay"), [(1, 1), (2, 2), (3, 4), (4, 8), (9, 256), (10, 512)])
def test_delay_doubles_from_one_second(failures: int, delay: int) -> None:
    assert retry_delay_s(failures) == delay


@pytest.mark.parametrize("failures", [11, 12, 50, 10_000])
def test_delay_is_capped_at_fifteen_minutes(failures: int) -> None:
    assert retry_delay_s(failures) == MAX_RETRY_DELAY_S == 900


def test_zero_failures_is_refused() -> None:
    with pytest.raises(ValueError, match="from 1"):
        retry_delay_s(0)
