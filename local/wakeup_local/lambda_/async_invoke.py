"""Lambda's asynchronous invocation: an event queue per function, retries, and destinations.

EventBridge Scheduler (one-time schedules, the template's recurring ones) invokes its targets
asynchronously: Lambda accepts the event at once and runs it from its own queue. When a failed
event runs again, and when it is too old, is `wakeup_awsfacts.lambda_async`'s rule (the simulator's
too), given this invoker's clock. "Function errors include errors returned by the function's code
and errors returned by the function's runtime, such as timeouts" ("How Lambda handles errors and
retries with asynchronous invocation"). "Capturing records of Lambda asynchronous invocations"
(invocation-async-retain-records): an event that fails all its attempts, or grows too old, goes to
the `OnFailure` destination as an invocation record (`requestContext.condition` `RetriesExhausted`
or `EventAgeExceeded`); a success to `OnSuccess`.

Scheduler's own retry policy and dead-letter queue apply only when Scheduler cannot deliver the
event to Lambda ("Configuring a dead-letter queue for EventBridge Scheduler"), never to the
function's errors: a local target that is not a function of the stack is only logged.

`WAKEUP_LOCAL_ASYNC_TIME_SCALE` (a local-only setting; 1 by default, AWS's times) is the real time
one second of the invoker's clock takes (0.01: the clock runs a hundred times faster), so the waits
between attempts and the maximum event age shrink with it, and a test can see three attempts in
seconds.
Left out: SNS, Lambda, EventBridge and S3 destinations (only SQS ones are delivered; the others are
logged), dead-letter queues on the function, throttling retries (an invocation waits for the
function's bound instead), and the duplicate deliveries AWS allows.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from wakeup_awsfacts.lambda_async import (
    DEFAULT_MAX_EVENT_AGE_S,
    DEFAULT_RETRY_ATTEMPTS,
    MAX_EVENT_AGE_RANGE_S,
    RETRY_ATTEMPTS_RANGE,
    AsyncRetries,
)
from wakeup_awsfacts.template import Resolver, Template, TemplateError
from wakeup_local.aws.resources import StackResources
from wakeup_local.lambda_.functions import FunctionError, Functions, LocalFunction

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger(__name__)

# Asynchronous invocations run side by side up to this many at a time (each still waits for the
# function's own bound).
WORKERS = 64


@dataclass(frozen=True)
class EventInvokeConfig:
    """A function's `EventInvokeConfig`: its retries, and its destinations (an SQS queue's URL here)."""

    retries: AsyncRetries = AsyncRetries()
    on_failure_queue_url: str | None = None
    on_success_queue_url: str | None = None


def event_invoke_configs(
    template: Template, functions: Functions, resources: StackResources, resolver: Resolver
) -> dict[str, EventInvokeConfig]:
    """Each function's `EventInvokeConfig` (with `Globals.Function`'s), by function name.

    Raises TemplateError for values Lambda refuses.
    """
    globals_config = template.function_globals.get("EventInvokeConfig") or {}
    configs = {}
    for function in functions:
        definition = template.resources.get(function.spec.logical_id) or {}
        own = (definition.get("Properties") or {}).get("EventInvokeConfig") or {}
        merged = {**globals_config, **own}
        merged["DestinationConfig"] = {
            **(globals_config.get("DestinationConfig") or {}),
            **(own.get("DestinationConfig") or {}),
        }
        configs[function.name] = _config(function.spec.logical_id, resolver.resolve(merged), resources)
    return configs


def _config(logical_id: str, properties: Mapping[str, Any], resources: StackResources) -> EventInvokeConfig:
    retries = int(properties.get("MaximumRetryAttempts", DEFAULT_RETRY_ATTEMPTS))
    age = int(properties.get("MaximumEventAgeInSeconds", DEFAULT_MAX_EVENT_AGE_S))
    low, high = MAX_EVENT_AGE_RANGE_S
    if not RETRY_ATTEMPTS_RANGE[0] <= retries <= RETRY_ATTEMPTS_RANGE[1]:
        raise TemplateError(f"{logical_id}: EventInvokeConfig.MaximumRetryAttempts must be from 0 to 2")
    if not low <= age <= high:
        raise TemplateError(f"{logical_id}: EventInvokeConfig.MaximumEventAgeInSeconds must be from {low} to {high}")
    destinations = properties.get("DestinationConfig") or {}
    return EventInvokeConfig(
        retries=AsyncRetries(maximum_retry_attempts=retries, maximum_event_age_s=float(age)),
        on_failure_queue_url=_queue_url(logical_id, "OnFailure", destinations.get("OnFailure"), resources),
        on_success_queue_url=_queue_url(logical_id, "OnSuccess", destinations.get("OnSuccess"), resources),
    )


def _queue_url(logical_id: str, which: str, destination: Any, resources: StackResources) -> str | None:
    if not destination:
        return None
    arn = str(destination.get("Destination") or "")
    if destination.get("Type", "SQS") == "SQS" and arn.startswith("arn:aws:sqs:"):
        try:
            return resources.queue_by_arn(arn).url
        except KeyError:
            pass
    log.warning("%s: the %s destination %s is not emulated locally; its records are logged", logical_id, which, arn)
    return None


@dataclass(frozen=True)
class Attempt:
    """One run of an asynchronous event: `at` epoch seconds (real time), `error` None on success."""

    request_id: str
    attempt: int
    at: float
    error: str | None


@dataclass(order=True)
class _Queued:
    due: float  # on the invoker's clock, as `received`
    sequence: int
    function: LocalFunction = field(compare=False)
    event: Any = field(compare=False)
    request_id: str = field(compare=False)
    received: float = field(compare=False)
    attempts: int = field(default=0, compare=False)


class AsyncInvoker:
    """Runs asynchronous invocations as Lambda does, until stopped."""

    def __init__(self, configs: Mapping[str, EventInvokeConfig], sqs: SQSClient, *, time_scale: float = 1.0) -> None:
        self._configs = dict(configs)
        self._sqs = sqs
        if not time_scale > 0:
            raise ValueError(f"the asynchronous invoker's time scale must be above 0, not {time_scale}")
        # Seconds of real time to one of the invoker's clock.
        self._scale = time_scale
        self._queue: list[_Queued] = []
        self._sequence = itertools.count()
        self._changed = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._workers = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="async-invoke")
        self._history: dict[str, list[Attempt]] = {}

    def invoke(self, function: LocalFunction, event: Any) -> str:
        """Queues the event for the function and returns its request id at once (Lambda's 202)."""
        request_id = str(uuid.uuid4())
        now = self._now()
        with self._changed:
            heapq.heappush(self._queue, _Queued(now, next(self._sequence), function, event, request_id, now))
            self._changed.notify()
        return request_id

    def history(self, function_name: str) -> list[Attempt]:
        """Every run of the function's asynchronous events so far, in order."""
        with self._changed:
            return list(self._history.get(function_name, []))

    def _now(self) -> float:
        """The invoker's clock: epoch seconds divided by `time_scale` (0.01: a hundred times faster)."""
        return time.time() / self._scale

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="async-invoke", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops taking events from the queue (those waiting are dropped) and waits for those running."""
        with self._changed:
            self._stopping = True
            self._changed.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._workers.shutdown(wait=True)

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._stopping and (not self._queue or self._queue[0].due > self._now()):
                    self._changed.wait((self._queue[0].due - self._now()) * self._scale if self._queue else None)
                if self._stopping:
                    return
                queued = heapq.heappop(self._queue)
            self._workers.submit(self._attempt, queued)

    def _attempt(self, queued: _Queued) -> None:
        config = self._configs.get(queued.function.name, EventInvokeConfig())
        if config.retries.too_old(queued.received, self._now()):
            log.warning("%s: event %s too old, discarded", queued.function.name, queued.request_id)
            self._send(config.on_failure_queue_url, self._record(queued, "EventAgeExceeded", None))
            return
        queued.attempts += 1
        try:
            result = queued.function.invoke(queued.event)
        except Exception as exc:
            self._note(queued, error=str(exc) or type(exc).__name__)
            self._failed(queued, config, exc)
            return
        self._note(queued, error=None)
        if config.on_success_queue_url:
            self._send(config.on_success_queue_url, self._record(queued, "Success", None, result))

    def _failed(self, queued: _Queued, config: EventInvokeConfig, exc: Exception) -> None:
        now = self._now()
        retry_at = config.retries.after_error(queued.attempts, now)
        if retry_at is not None:
            log.warning(
                "%s failed on an asynchronous event (attempt %d); retried in %.1f s",
                queued.function.name,
                queued.attempts,
                (retry_at - now) * self._scale,
            )
            with self._changed:
                queued.due = retry_at
                queued.sequence = next(self._sequence)
                heapq.heappush(self._queue, queued)
                self._changed.notify()
            return
        log.error("%s failed on an asynchronous event %d times; given up", queued.function.name, queued.attempts)
        self._send(config.on_failure_queue_url, self._record(queued, "RetriesExhausted", exc))

    def _note(self, queued: _Queued, error: str | None) -> None:
        with self._changed:
            self._history.setdefault(queued.function.name, []).append(
                Attempt(queued.request_id, queued.attempts, time.time(), error)
            )

    @staticmethod
    def _record(queued: _Queued, condition: str, exc: Exception | None, result: Any = None) -> dict[str, Any]:
        """The invocation record Lambda sends to a destination (invocation-async-retain-records)."""
        record: dict[str, Any] = {
            "version": "1.0",
            "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "requestContext": {
                "requestId": queued.request_id,
                "functionArn": f"{queued.function.arn}:$LATEST",
                "condition": condition,
                "approximateInvokeCount": queued.attempts,
            },
            "requestPayload": queued.event,
        }
        if condition == "EventAgeExceeded":
            return record
        record["responseContext"] = {"statusCode": 200, "executedVersion": "$LATEST"}
        if exc is None:
            record["responsePayload"] = result
        else:
            record["responseContext"]["functionError"] = "Unhandled"
            # The function's own error document, as its runtime posted it (errorMessage, errorType, ...).
            record["responsePayload"] = (
                exc.payload
                if isinstance(exc, FunctionError)
                else {"errorMessage": str(exc), "errorType": type(exc).__name__}
            )
        return record

    def _send(self, queue_url: str | None, record: dict[str, Any]) -> None:
        body = json.dumps(record)
        if queue_url is None:
            log.warning("asynchronous invocation record (no destination): %s", body)
            return
        try:
            self._sqs.send_message(QueueUrl=queue_url, MessageBody=body)
        except (BotoCoreError, ClientError):
            log.exception("sending an invocation record to %s failed", queue_url)
