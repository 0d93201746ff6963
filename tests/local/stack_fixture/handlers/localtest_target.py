"""Test handler for schedules: records each event it gets and when."""

import threading
import time
from typing import Any

events: list[dict[str, Any]] = []
_lock = threading.Lock()


def lambda_handler(event: Any, context: Any) -> None:
    with _lock:
        events.append({"at": time.time(), "event": event, "function_name": context.function_name})
