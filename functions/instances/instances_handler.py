"""The account routes of the HTTP API, and the `$default` route's 404 and 405."""

from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from wakeup.api.http import authenticate, install, json_response, read_body
from wakeup.api.models import RegisterInstanceBody, attempt_reply, instance_reply
from wakeup.api.route_docs import body, query, replies
from wakeup.api.routes import DELETE_INSTANCE, GET_INSTANCE, LIST_ATTEMPTS, LIST_INSTANCES, REGISTER_INSTANCE
from wakeup.deadlines import timed
from wakeup.factories import get_store, get_throttle, get_triggers
from wakeup.logic import instances
from wakeup.logic.instances import MAX_PAGE
from wakeup.model import TokenOwner
from wakeup.observability import logger, tracer
from wakeup.settings import get_settings
from wakeup.times import now
from wakeup.tokens import TokenKind

# Read at import, Lambda's init: invalid settings fail the init with the reason, never a request.
get_settings()

app = APIGatewayHttpResolver()
install(app)


def _account() -> TokenOwner:
    """The account the request's token names, its request counted against its rate (429 past it)."""
    owner = authenticate(app.current_event, get_store(), TokenKind.ACCOUNT)
    logger.append_keys(account_id=owner.account_id)
    get_throttle().admit(owner.account_id, now())
    return owner


@app.route(
    REGISTER_INSTANCE.rule,
    REGISTER_INSTANCE.method,
    summary="Register an instance (account token)",
    description="201 for a token never registered; 200 when this account registered it before (a new url moves "
    "the instance and forgets its wake).",
    responses=replies(
        {201: ("Registered", "A new instance."), 200: ("Registered", "This account's instance, at this url now.")},
        errors=(400, 401, 403, 409, 413, 429),
    ),
    openapi_extensions=body("RegisterInstanceBody"),
)
def register_instance() -> Response[str]:
    account = _account()
    body = read_body(app.current_event, RegisterInstanceBody)
    settings = get_settings()
    registered = instances.register(
        get_store(),
        get_triggers(),
        account,
        body.url,
        body.token,
        now(),
        settings.address_policy,
        settings.max_instances_per_account,
    )
    logger.info("instance registered", instance_id=registered.instance.id, new=registered.created)
    return json_response(201 if registered.created else 200, {"id": registered.instance.id})


@app.route(
    LIST_INSTANCES.rule,
    LIST_INSTANCES.method,
    summary="List the account's instances, a page at a time (account token)",
    responses=replies({200: ("InstancePage", "A page of instances, oldest first.")}, errors=(400, 401, 429)),
    openapi_extensions=query(
        {"name": "limit", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": MAX_PAGE}},
        {"name": "cursor", "schema": {"type": "string"}, "description": "the previous page's next"},
    ),
)
def list_instances() -> Response[str]:
    query = app.current_event.query_string_parameters or {}
    page = instances.list_page(get_store(), _account(), query.get("limit"), query.get("cursor"))
    return json_response(200, {"instances": [instance_reply(i) for i in page.instances], "next": page.next_cursor})


@app.route(
    GET_INSTANCE.rule,
    GET_INSTANCE.method,
    summary="Read an instance (account token)",
    responses=replies({200: ("InstanceReply", "The instance and its wake.")}, errors=(401, 403, 404, 429)),
)
def get_instance(id: str) -> Response[str]:
    return json_response(200, instance_reply(instances.get(get_store(), _account(), id)))


@app.route(
    LIST_ATTEMPTS.rule,
    LIST_ATTEMPTS.method,
    summary="The instance's calls of the last 7 days, newest first, a page at a time (account token)",
    description="At most 100 are kept per instance. Each says when it started, how late (first calls), how long "
    "it took, the host's status or the error, and what delivered it.",
    responses=replies({200: ("AttemptPage", "A page of calls, newest first.")}, errors=(400, 401, 403, 404, 429)),
    openapi_extensions=query(
        {"name": "limit", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": MAX_PAGE}},
        {"name": "cursor", "schema": {"type": "string"}, "description": "the previous page's next"},
    ),
)
def list_attempts(id: str) -> Response[str]:
    query = app.current_event.query_string_parameters or {}
    page = instances.calls_page(get_store(), _account(), id, query.get("limit"), query.get("cursor"), now())
    return json_response(200, {"attempts": [attempt_reply(c) for c in page.calls], "next": page.next_cursor})


@app.route(
    DELETE_INSTANCE.rule,
    DELETE_INSTANCE.method,
    summary="Delete an instance and what is pending for it (account token)",
    description="Its token is free again afterwards.",
    responses=replies({204: (None, "Deleted.")}, errors=(401, 403, 404, 429)),
)
def delete_instance(id: str) -> Response[str]:
    instances.delete(get_store(), get_triggers(), _account(), id, now())
    logger.info("instance deleted", instance_id=id)
    return json_response(204)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
@tracer.capture_lambda_handler
@timed  # every request within the invocation's time left (wakeup.deadlines)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
