"""Test handler for schedules: records each event it gets and when."""

import time
from typing import Any

from records import record


def lambda_handler(event: Any, context: Any) -> None:
    record({"at": time.time(), "event": event, "function_name": context.function_name})
