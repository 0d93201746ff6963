"""Test handler for the `$default` route: answers 404 with the route key and method it saw."""

import json
from typing import Any


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    body = {"error": "not found", "routeKey": event["routeKey"], "method": event["requestContext"]["http"]["method"]}
    return {"statusCode": 404, "headers": {"content-type": "application/json"}, "body": json.dumps(body)}
