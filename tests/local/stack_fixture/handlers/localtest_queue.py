"""Test handler for SQS: records each batch; a body starting `fail` is reported failed, one starting
`raise` fails the whole batch."""

import time
from typing import Any

from records import record


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    record({"received_at": time.time(), "records": event["Records"]})
    if any(item["body"].startswith("raise") for item in event["Records"]):
        raise RuntimeError("the whole batch fails")
    failures = [{"itemIdentifier": item["messageId"]} for item in event["Records"] if item["body"].startswith("fail")]
    return {"batchItemFailures": failures}
