"""The planner, every minute: provisioned pollers on the caller's event source for a coming burst,
and provisioned mode off when none is coming (wakeup.logic.planner)."""

import functools
import os
from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from wakeup.event_source import CallerFunction, CallerMapping
from wakeup.factories import get_pending_index
from wakeup.logic.planner import PlannerSettings, publish, publish_idle, run
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
def get_caller() -> CallerFunction:
    return CallerFunction(get_settings().caller_arn)


# Read at import, Lambda's init: invalid settings fail the init with the reason, never a run.
get_settings()
get_planner_settings()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = get_planner_settings()
    if not settings.mapping_uuid:
        # A stack with no caller mapping to name (the local stack names it too, in its moto).
        logger.info("no event source mapping configured, nothing to plan")
        publish_idle()
        return {"planned": False}
    # The caller's memory is the planner's only when the template gives both its sizes.
    caller = get_caller() if settings.rest_memory_mb and settings.burst_memory_mb else None
    result = run(get_pending_index(), get_mapping(), settings, int(now().timestamp()), caller)
    publish(result)
    return {"planned": True, **asdict(result)}
