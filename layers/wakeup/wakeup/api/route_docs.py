"""What each route says about itself in the OpenAPI document (`docs/openapi.json`, built by `apidoc`).

The routes pass these to Powertools' decorators (`responses=`, `openapi_extensions=`). They are
plain dictionaries that name schemas by reference: the schemas themselves are generated from the
pydantic models of `wakeup.api.models` and `apidoc.schema` when the document is built, never
at run time, so documenting a route costs its cold start nothing.
"""

from typing import Any

JSON = "application/json"

# Every error the service answers, and when; the body is always `{"error": ...}`.
ERRORS = {
    400: "The body, a field or a query parameter breaks the contract; the sentence says which.",
    401: "The token is missing, malformed, unknown, revoked, or of the wrong kind for the route.",
    403: "The instance belongs to another account, or the account may not do what was asked.",
    404: "No such instance (an unknown or malformed id).",
    409: "Another account registered this instance token; or, for a wake, a newer wake of the instance, registered "
    "while this one was written, stands instead.",
    413: "The body is larger than 16 KiB.",
    429: 'Too many requests: the service\'s limit (`{"error"}`, with `Retry-After`: the seconds until its window '
    'opens again), or API Gateway\'s throttle (`{"message"}`).',
    500: 'The service failed, or API Gateway could not run it (`{"message"}`); a retry may help.',
    503: 'AWS throttled or failed underneath, or API Gateway timed out (`{"message"}`); retry shortly.',
}
RETRY_AFTER = {
    "description": "with the service's own 429: the seconds until the request may succeed",
    "schema": {"type": "integer", "minimum": 1},
}
# Statuses API Gateway may answer itself, in its own shape, before the service sees a request.
GATEWAY_STATUSES = (429, 500, 503)


def ref(schema: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{schema}"}


def replies(ok: dict[int, tuple[str | None, str]], errors: tuple[int, ...]) -> dict[int, Any]:
    """`responses=` for a route: its successes (`status: (schema or None for no body, description)`)
    and its errors, each in the service's shape (or API Gateway's, for the statuses it answers)."""
    documented: dict[int, Any] = {}
    for status, (schema, description) in ok.items():
        # No body: an empty content map, which `apidoc` leaves out (Powertools would otherwise
        # document the route's return type as a JSON body).
        documented[status] = {"description": description, "content": {JSON: {"schema": ref(schema)}} if schema else {}}
    for status in sorted({*errors, *GATEWAY_STATUSES}):
        shape = {"anyOf": [ref("Error"), ref("GatewayError")]} if status in GATEWAY_STATUSES else ref("Error")
        documented[status] = {"description": ERRORS[status], "content": {JSON: {"schema": shape}}}
    documented[429]["headers"] = {"Retry-After": RETRY_AFTER}
    return documented


def body(schema: str) -> dict[str, Any]:
    """`openapi_extensions=` for a route that reads a JSON body (with `wakeup.api.http.read_body`)."""
    return {"requestBody": {"required": True, "content": {JSON: {"schema": ref(schema)}}}}


def query(*parameters: dict[str, Any]) -> dict[str, Any]:
    """`openapi_extensions=` for a route that reads query parameters (it has no path parameters)."""
    return {"parameters": [{"in": "query", "required": False, **parameter} for parameter in parameters]}
