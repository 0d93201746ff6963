"""The planner, every minute: provisioned pollers on the caller's event source for a coming burst,
and provisioned mode off when none is coming (wakeup.logic.planner)."""

import functools
import os
from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from wakeup.deadlines import timed
from wakeup.event_source import CallerMapping, StackDeploys
from wakeup.factories import get_pending_index
from wakeup.logic.planner import PlannerSettings, Watch, publish, publish_idle, run
from wakeup.observability import logger, metrics, tracer
from wakeup.settings import get_settings
from wakeup.times import now


@functools.cache
def get_planner_settings() -> PlannerSettings:
    return PlannerSettings.model_validate(os.environ)


@functools.cache
def get_mapping() -> CallerMapping:
    return CallerMapping(get_planner_settings().mapping_uuid)


@functools.cache
def get_deploys() -> StackDeploys | None:
    stack_name = get_planner_settings().stack_name
    return StackDeploys(stack_name) if stack_name else None


@functools.cache
def get_watch() -> Watch:
    """This environment's memory of its last update, kept between runs (wakeup.logic.planner.Watch)."""
    return Watch()


# Read at import, Lambda's init: invalid settings fail the init with the reason, never a run.
get_settings()
get_planner_settings()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@timed  # every request within the invocation's time left (wakeup.deadlines)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = get_planner_settings()
    if not settings.mapping_uuid:
        # A stack with no caller mapping to name (the local stack names it too, in its moto).
        logger.info("no event source mapping configured, nothing to plan")
        publish_idle()
        return {"planned": False}
    result = run(get_pending_index(), get_mapping(), settings, int(now().timestamp()), get_watch(), get_deploys())
    publish(result)
    return {"planned": True, **asdict(result)}
