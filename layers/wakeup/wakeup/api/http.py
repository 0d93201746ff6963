"""The HTTP edge shared by both API functions: errors, bodies, tokens, and the `$default` route.

Every refusal leaves through `install`'s handlers as `{"error": ...}` with its status, so routes
raise and never build an error reply themselves.
"""

import base64
import json
import re
from collections.abc import Mapping
from typing import TypeVar

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ValidationError

from wakeup.api.routes import allowed_methods
from wakeup.decoding import decode_object
from wakeup.errors import (
    BadRequestError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    TooManyRequestsError,
    UnauthorizedError,
    UnavailableError,
    WakeupError,
)
from wakeup.model import TokenOwner
from wakeup.observability import logger
from wakeup.table import Store
from wakeup.times import now
from wakeup.tokens import PREFIXES, TokenKind, hash_token, is_token

MAX_BODY_BYTES = 16 * 1024

Body = TypeVar("Body", bound=BaseModel)


def json_response(
    status: int, body: Mapping[str, object] | None = None, headers: dict[str, str] | None = None
) -> Response[str]:
    """A reply with a JSON body, or none at all (204)."""
    if body is None:
        return Response(status_code=status, headers=headers)
    return Response(status_code=status, content_type="application/json", body=json.dumps(body), headers=headers)


def error_reply(exc: WakeupError) -> Response[str]:
    """`{"error": ...}` with the error's status (and `Allow` for a 405, `Retry-After` for a 429)."""
    headers = None
    if isinstance(exc, MethodNotAllowedError):
        headers = {"Allow": ", ".join(exc.allowed)}
    elif isinstance(exc, TooManyRequestsError) and exc.retry_after_s is not None:
        headers = {"Retry-After": str(exc.retry_after_s)}
    return json_response(exc.status, {"error": exc.message}, headers)


def unexpected_reply(exc: Exception) -> Response[str]:
    """The one place an unexpected failure is caught: logged with its trace, never shown."""
    logger.exception("request failed")
    # AWS failing underneath, after botocore's retries, is worth retrying; anything else is ours.
    if isinstance(exc, ClientError | BotoCoreError):
        return error_reply(UnavailableError())
    return json_response(500, {"error": WakeupError.message})


def unknown_route_reply(method: str, path: str) -> Response[str]:
    """404 for a path the API does not serve, 405 for one it serves with other methods.

    A served path and method end here only when the path's id holds characters the router never
    matches (`"`, `\\`, a NUL, `€` ...): no instance has such an id, so it is 404 like any unknown id.
    """
    methods = allowed_methods(path)
    if methods is None:
        return error_reply(NotFoundError("no such path"))
    if method in methods:
        return error_reply(NotFoundError())
    return error_reply(MethodNotAllowedError(methods))


def install(app: APIGatewayHttpResolver) -> None:
    """Maps every error to its reply, and unknown paths and methods to 404 and 405."""
    app.exception_handler(WakeupError)(error_reply)
    app.exception_handler(Exception)(unexpected_reply)
    app.not_found(
        lambda _: unknown_route_reply(app.current_event.request_context.http.method, app.current_event.raw_path)
    )


def read_body(event: APIGatewayProxyEventV2, model: type[Body]) -> Body:
    """The request's JSON object body as `model`, or a 400 (413 when too large) that says why."""
    raw = body_bytes(event)
    if len(raw) > MAX_BODY_BYTES:
        raise PayloadTooLargeError()
    try:
        return model.model_validate(decode_object(raw))
    except ValidationError as exc:
        raise BadRequestError(_explain(exc)) from None


def body_bytes(event: APIGatewayProxyEventV2) -> bytes:
    """The body's bytes as the client sent them (API Gateway passes some bodies base64-encoded)."""
    body = event.body or ""
    if event.is_base64_encoded:
        try:
            return base64.b64decode(body, validate=True)
        except ValueError:  # binascii.Error, or text that is not ASCII
            raise BadRequestError("the body must be a JSON object") from None
    # A body API Gateway passed as text is text; a lone surrogate in it stays for the decoder to refuse.
    return body.encode("utf-8", "surrogatepass")


def _explain(exc: ValidationError) -> str:
    """The first problem pydantic found, as a sentence about the field."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "body"
    if error["type"] == "missing":
        return f"{field} is required"
    expected = {"string_type": "a string", "int_type": "an integer"}.get(error["type"], "valid")
    return f"{field} must be {expected}"


_BEARER = re.compile(r"Bearer +(\S+)", re.IGNORECASE)


def authenticate(event: APIGatewayProxyEventV2, store: Store, kind: TokenKind) -> TokenOwner:
    """Whom the request's bearer token names; 401 unless it is a live token of `kind`."""
    header = event.headers.get("authorization") or ""
    match = _BEARER.fullmatch(header.strip())
    needed = f"this route needs an {kind.value} token: send Authorization: Bearer {PREFIXES[kind]}..."
    if match is None or not is_token(match.group(1), kind):
        raise UnauthorizedError(needed)
    owner = store.owner_of(hash_token(match.group(1)))
    if owner is None or owner.kind is not kind:
        raise UnauthorizedError(f"this {kind.value} token is unknown or revoked")
    if not owner.valid_at(now()):  # replaced by a rotation, and its overlap is over
        raise UnauthorizedError(
            f"this {kind.value} token was replaced by a new one and no longer works: use the new one"
        )
    return owner
