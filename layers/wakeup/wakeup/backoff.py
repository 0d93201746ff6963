"""How long to wait before calling a failing host again (DESIGN section 3)."""

# Fifteen minutes: a host that has failed for a while is still tried four times an hour.
MAX_RETRY_DELAY_S = 900


def retry_delay_s(failures: int) -> int:
    """The wait after the `failures`-th failed call in a row: 1, 2, 4 ... seconds, at most 900."""
    if failures < 1:
        raise ValueError("failures counts failed calls, from 1")
    # 2^10 already exceeds the cap; stopping there keeps huge counts from making huge integers.
    return min(1 << min(failures - 1, 10), MAX_RETRY_DELAY_S)
