"""The caller: delivers triggers from SQS (a batch) and from EventBridge Scheduler (one trigger).

SQS hands over up to ten messages at once, often all due at the same second; they are delivered
concurrently (each in a thread, since a call may wait up to its timeout on a host), and a record
that raises is reported as a partial batch failure, so only it comes back. No record's step runs
past the invocation's time (the caller checks it before each), so a slow record fails or is sent
again alone, and its batch-mates' outcomes are written and reported: a Lambda timeout would have
returned every message of the batch, done or not, after the queue's visibility timeout. Once every
record is done, the batch's calls are kept in the history together (one request, not one a call),
within the time left; a call not kept is logged, and fails no record.
"""

import asyncio
import functools
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType, async_process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from wakeup.deadlines import timed
from wakeup.factories import get_signing_keys, get_store, get_triggers, require_master_key
from wakeup.host_call import call_wake
from wakeup.logic.delivery import Caller, Delivery, publish, publish_baseline
from wakeup.model import Origin, Trigger
from wakeup.observability import logger, metrics, tracer
from wakeup.settings import get_settings
from wakeup.triggers import parse_trigger

# Read at import, Lambda's init: invalid settings, or no master key to sign with, fail the init
# with the reason, never a request.
get_settings()
require_master_key()


def _caller(context: LambdaContext) -> Caller:
    settings = get_settings()
    # Every call checks the addresses it connects to against the operator's ranges.
    call = functools.partial(call_wake, addresses=settings.address_policy)

    def time_left_s() -> float:
        return context.get_remaining_time_in_millis() / 1000

    # One caller per invocation: it reads each account's signing versions once for its batch, and
    # starts no step that the invocation's time left cannot hold (wakeup.logic.delivery).
    return Caller(
        get_store(),
        get_triggers(),
        settings,
        call=call,
        signing=get_signing_keys(),
        versions={},
        time_left_s=time_left_s,
    )


def _trigger_in(body: str, message_id: str) -> Trigger:
    try:
        return parse_trigger(json.loads(body))
    except ValueError:
        # Raised again so the message fails and, after its retries, rests in the dead-letter queue.
        logger.error("message is not a trigger", message_id=message_id)
        raise


def _deliver_batch(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    # Made here, in one thread, with the store's and the keys' clients (the triggers make theirs on
    # first use, one at a time: wakeup.aws).
    caller = _caller(context)
    # A thread for every record: a host that hangs until its timeout must not hold back the
    # others (asyncio's default pool has only a few threads).
    threads = ThreadPoolExecutor(max_workers=max(len(event["Records"]), 1), thread_name_prefix="deliver")
    delivered: list[Delivery] = []

    async def deliver_record(record: SQSRecord) -> str:
        trigger = _trigger_in(record.body, record.message_id)
        loop = asyncio.get_running_loop()
        delivery = await loop.run_in_executor(threads, caller.deliver, trigger, Origin.QUEUE)
        publish(delivery)  # back in the event loop's thread
        delivered.append(delivery)
        return delivery.result.value

    # A processor per invocation: it holds the batch's state.
    processor = AsyncBatchProcessor(event_type=EventType.SQS)
    with threads:
        response = async_process_partial_response(
            event=event, record_handler=deliver_record, processor=processor, context=context
        )
    caller.keep_history(delivered)
    return response


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@timed  # every request within the invocation's time left (wakeup.deadlines)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    publish_baseline()
    if "Records" in event:
        return dict(_deliver_batch(event, context))
    # Scheduler invokes asynchronously with the schedule's input, the trigger itself; raising makes
    # Lambda retry it (EventInvokeConfig in template.yaml) and then keep it in the caller's
    # failed-events queue. The schedules' dead-letter queue never sees it.
    caller = _caller(context)
    delivery = caller.deliver(parse_trigger(event), Origin.SCHEDULE)
    publish(delivery)
    # The same request as a batch's, for its one call: one path, and a BatchWriteItem of one put
    # costs what a PutItem does.
    caller.keep_history([delivery])
    return {"result": delivery.result.value}
