"""Test handler for SQS: records each batch; a body starting `fail` is reported failed, one starting
`raise` fails the whole batch."""

import threading
import time
from typing import Any

batches: list[dict[str, Any]] = []
_lock = threading.Lock()


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    with _lock:
        batches.append({"received_at": time.time(), "records": event["Records"]})
    if any(record["body"].startswith("raise") for record in event["Records"]):
        raise RuntimeError("the whole batch fails")
    failures = [
        {"itemIdentifier": record["messageId"]} for record in event["Records"] if record["body"].startswith("fail")
    ]
    return {"batchItemFailures": failures}
