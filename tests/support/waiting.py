"""Waiting for a condition with a deadline, instead of sleeping and hoping."""

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T], timeout: float = 10.0, interval: float = 0.01, message: str = "the condition"
) -> T:
    """Polls `condition` until it returns something truthy and returns that; raises AssertionError
    naming `message` once `timeout` seconds pass without it."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message} did not happen within {timeout} s")
        time.sleep(interval)
