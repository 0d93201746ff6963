"""Test handler for asynchronous invocations: always fails, as a function with a bug would."""

from typing import Any


def lambda_handler(event: Any, context: Any) -> None:
    raise RuntimeError(f"cannot handle {event!r}")
