"""The retry rule, whole (DESIGN section 3): how long after a failed call the next one is due,
and when a failing wake is given up instead."""

from datetime import datetime, timedelta

# Fifteen minutes: a host that has failed for a while is still tried four times an hour.
MAX_RETRY_DELAY_S = 900


def retry_delay_s(failures: int) -> int:
    """The wait after the `failures`-th failed call in a row: 1, 2, 4 ... seconds, at most 900."""
    if failures < 1:
        raise ValueError("failures counts failed calls, from 1")
    # 2^10 already exceeds the cap; stopping there keeps huge counts from making huge integers.
    return min(1 << min(failures - 1, 10), MAX_RETRY_DELAY_S)


def next_due(failed_at: datetime, failures: int, at: datetime | None, max_wake_age_s: int | None) -> datetime | None:
    """When the call after the `failures`-th failure in a row is due, counted from when that one
    ended; None when that is past the operator's maximum age of a wake (`at` its registered time,
    no maximum when unset): the wake is given up."""
    due = failed_at + timedelta(seconds=retry_delay_s(failures))
    if max_wake_age_s and at is not None and due > at + timedelta(seconds=max_wake_age_s):
        return None
    return due
