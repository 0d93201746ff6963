"""Test handler for SQS scaling: each batch takes a quarter of a second, as a call to a host might."""

import time
from typing import Any

BATCH_SECONDS = 0.25


def lambda_handler(event: dict[str, Any], context: Any) -> None:
    time.sleep(BATCH_SECONDS)
