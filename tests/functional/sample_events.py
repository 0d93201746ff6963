"""The sample events of `events/`, loaded by one helper, and small factories that vary them.

The samples are what `sam local invoke -e` sends. A test takes a fresh copy and changes only what
it is about (the token, the body, the id in the path, the trigger ...), so every event it sends
keeps the shape API Gateway (HTTP API, payload format 2.0), SQS and EventBridge give.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from wakeup.model import Trigger

EVENTS = Path(__file__).resolve().parents[2] / "events"

# The samples' placeholders: syntactically valid tokens that no table knows.
SAMPLE_ACCOUNT_TOKEN = "swa_EXAMPLE_account_token_mint_your_own00000000"
SAMPLE_INSTANCE_TOKEN = "swi_EXAMPLE_instance_token_mint_your_own0000000"

# The API samples, by route.
REGISTER_INSTANCE = "api_register_instance"
GET_INSTANCE = "api_get_instance"
LIST_INSTANCES = "api_list_instances"
DELETE_INSTANCE = "api_delete_instance"
PUT_WAKE = "api_put_wake"
UNKNOWN_PATH = "api_unknown_path"


class _Keep:
    """Leave this part of the sample as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


@cache
def _sample(name: str) -> str:
    return (EVENTS / f"{name.removesuffix('.json')}.json").read_text()


def load_event(name: str) -> Any:
    """A fresh copy of `events/<name>.json` (`.json` may be left out)."""
    return json.loads(_sample(name))


def api_event(
    name: str,
    *,
    token: str | None = KEEP,
    body: Any = KEEP,
    base64_body: bool = False,
    instance_id: str | None = None,
    query: dict[str, str] | None = None,
    method: str | None = None,
    path: str | None = None,
    headers: dict[str, str] | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """The API sample `name` with these changes:

    - `token`: sent as `Authorization: Bearer <token>`; None sends no Authorization header.
    - `body`: a dict or list is sent as JSON, a str as it is, bytes base64-encoded, None sends no
      body; `base64_body` encodes it as API Gateway does for a binary body (`isBase64Encoded`).
    - `instance_id`: the id in the path of the `/wakeup/instances/{id}` samples.
    - `query`: the query string (`{}` for none).
    - `method`, `path`: the request line (for the `$default` sample: any method, any path).
    - `headers`: added, replacing any header of the same name whatever its case (the name is sent
      as given, so a test can send `Authorization` instead of API Gateway's `authorization`).
    - `request_id`: API Gateway's request id (the logs' correlation id); a fresh one by default.
    """
    event: dict[str, Any] = load_event(name)
    http = event["requestContext"]["http"]
    if token is not KEEP:
        _set_header(event, "authorization", None if token is None else f"Bearer {token}")
    if body is not KEEP:
        _set_body(event, body, base64_body)
    elif base64_body:
        _set_body(event, event.get("body"), base64_body)
    if instance_id is not None:
        event["pathParameters"] = {"id": instance_id}
        _set_path(event, f"/wakeup/instances/{instance_id}")
    if query is not None:
        event["rawQueryString"] = urlencode(query)
        event.pop("queryStringParameters", None)
        if query:
            event["queryStringParameters"] = dict(query)
    if method is not None:
        http["method"] = method
    if path is not None:
        _set_path(event, path)
    for header, value in (headers or {}).items():
        _set_header(event, header, value)
    event["requestContext"]["requestId"] = request_id or _request_id()
    return event


def _set_header(event: dict[str, Any], name: str, value: str | None) -> None:
    headers: dict[str, str] = event.setdefault("headers", {})
    for existing in [key for key in headers if key.lower() == name.lower()]:
        del headers[existing]
    if value is not None:
        headers[name] = value


def _set_body(event: dict[str, Any], body: Any, base64_body: bool) -> None:
    event.pop("body", None)
    event["isBase64Encoded"] = False
    if body is None:
        _set_header(event, "content-length", None)
        return
    if isinstance(body, bytes):  # bytes that are not UTF-8 reach a function base64-encoded
        _set_header(event, "content-length", str(len(body)))
        event["body"] = base64.b64encode(body).decode("ascii")
        event["isBase64Encoded"] = True
        return
    text = body if isinstance(body, str) else json.dumps(body)
    _set_header(event, "content-length", str(len(text.encode())))
    if base64_body:
        event["body"] = base64.b64encode(text.encode()).decode("ascii")
        event["isBase64Encoded"] = True
    else:
        event["body"] = text


def _set_path(event: dict[str, Any], path: str) -> None:
    event["rawPath"] = path
    event["requestContext"]["http"]["path"] = path


def _request_id() -> str:
    # API Gateway's ids look like `Xk3pQjGvIAMEVsA=`; any unique string will do.
    return base64.b64encode(uuid.uuid4().bytes[:11]).decode("ascii")


def sqs_batch(*triggers: Trigger | str) -> dict[str, Any]:
    """The sample SQS batch with one record per trigger (or raw message body), each its own id."""
    record = load_event("sqs_caller_batch")["Records"][0]
    records = []
    for trigger in triggers:
        body = trigger if isinstance(trigger, str) else trigger_body(trigger)
        records.append({**copy.deepcopy(record), "messageId": str(uuid.uuid4()), "body": body})
    return {"Records": records}


def scheduler_invocation(trigger: Trigger) -> dict[str, Any]:
    """What a one-time schedule hands the caller: its input, the trigger itself."""
    event: dict[str, Any] = load_event("scheduler_caller")
    event.update(instance_id=trigger.instance_id, reg=trigger.reg, attempt=trigger.attempt)
    return event


def trigger_body(trigger: Trigger) -> str:
    return json.dumps({"instance_id": trigger.instance_id, "reg": trigger.reg, "attempt": trigger.attempt})
