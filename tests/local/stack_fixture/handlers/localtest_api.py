"""Test handler: echoes the API Gateway event it gets, crashes on /crash, answers bytes on /files."""

import base64
import json
import os
from typing import Any

# Read at import (cold start), as real handlers read their settings.
ENVIRONMENT_AT_IMPORT = dict(os.environ)


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event["rawPath"] == "/crash":
        raise RuntimeError("secret-internal-detail in a stack trace")
    if event["rawPath"].startswith("/files/"):
        return {
            "statusCode": 200,
            "headers": {"content-type": "application/octet-stream"},
            "body": base64.b64encode(b"\x00\xffbinary").decode(),
            "isBase64Encoded": True,
        }
    reply = {
        "event": event,
        "context": {
            "function_name": context.function_name,
            "invoked_function_arn": context.invoked_function_arn,
            "memory_limit_in_mb": context.memory_limit_in_mb,
            "aws_request_id": context.aws_request_id,
            "remaining_ms": context.get_remaining_time_in_millis(),
        },
        "environment_at_import": {key: ENVIRONMENT_AT_IMPORT.get(key) for key in ("STAGE", "API_ONLY")},
    }
    headers = {"content-type": "application/json", "x-test": "yes"}
    return {"statusCode": 201, "headers": headers, "body": json.dumps(reply)}
