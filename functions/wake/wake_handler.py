"""`/wakeup/wake`: an instance registers the wake it wants (PUT: the hot path, kept small), or
reads it back (GET)."""

from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from wakeup.api.http import authenticate, install, json_response, read_body
from wakeup.api.models import RegisterWakeBody, wake_reply
from wakeup.api.route_docs import body, replies
from wakeup.api.routes import READ_WAKE, REGISTER_WAKE
from wakeup.deadlines import timed
from wakeup.factories import get_store, get_triggers
from wakeup.logic.wakes import WakeLimit, read_wake, register_wake
from wakeup.observability import logger, tracer
from wakeup.settings import get_settings
from wakeup.times import format_time, now, parse_at
from wakeup.tokens import TokenKind

# Read at import, Lambda's init: invalid settings fail the init with the reason, never a request.
get_settings()

app = APIGatewayHttpResolver()
install(app)


@app.route(
    REGISTER_WAKE.rule,
    REGISTER_WAKE.method,
    summary="Register the instance's wake (instance token)",
    description="Replaces whatever wake the instance had; a time in the past means now.",
    responses=replies({204: (None, "Registered.")}, errors=(400, 401, 409, 413, 429)),
    openapi_extensions=body("RegisterWakeBody"),
)
def put_wake() -> Response[str]:
    owner = authenticate(app.current_event, get_store(), TokenKind.INSTANCE)
    at = parse_at(read_body(app.current_event, RegisterWakeBody).at)
    assert owner.instance_id is not None  # an instance token always names its instance
    logger.append_keys(instance_id=owner.instance_id)
    settings = get_settings()
    limit = WakeLimit(settings.max_wakes_per_window, settings.wake_window_s)
    register_wake(get_store(), get_triggers(), owner.instance_id, at, now(), limit)
    logger.info("wake registered", at=format_time(at))
    return json_response(204)


@app.route(
    READ_WAKE.rule,
    READ_WAKE.method,
    summary="Read the instance's own wake (instance token)",
    description="When it is to be woken, whether the host answered, and why the last call failed; nothing of the "
    "account.",
    responses=replies({200: ("WakeReply", "The instance's wake.")}, errors=(401,)),
)
def get_wake() -> Response[str]:
    owner = authenticate(app.current_event, get_store(), TokenKind.INSTANCE)
    assert owner.instance_id is not None  # an instance token always names its instance
    logger.append_keys(instance_id=owner.instance_id)
    return json_response(200, wake_reply(read_wake(get_store(), owner.instance_id)))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
@tracer.capture_lambda_handler
@timed  # every request within the invocation's time left (wakeup.deadlines)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
