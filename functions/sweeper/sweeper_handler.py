"""The sweeper, every minute: re-arms pending wakes that are overdue with no live claim."""

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from wakeup.deadlines import timed
from wakeup.factories import get_store, get_triggers
from wakeup.logic.sweeper import UnreadShardsError, publish, sweep
from wakeup.observability import logger, metrics, tracer
from wakeup.settings import get_settings
from wakeup.times import now

# Read at import, Lambda's init: invalid settings fail the init with the reason, never a request.
get_settings()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@timed  # every request within the invocation's time left (wakeup.deadlines)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        result = sweep(get_store(), get_triggers(), get_settings(), now())
    except UnreadShardsError as unswept:
        publish(unswept.result)  # what the other shards' sweep re-armed still counts
        raise
    publish(result)
    logger.info("sweep done", overdue=result.overdue, rearmed=result.rearmed, failed=result.failed)
    return asdict(result)
