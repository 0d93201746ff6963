"""Lambda's SQS event source mapping, for the template's `Type: SQS` events.

Each mapping works as many batches at once as Lambda's scaling allows (`wakeup_awsfacts.sqs_scaling`: five when
messages appear, up to 300 more a minute while they remain, capped by `ScalingConfig` or the
function's bound; `ProvisionedPollerConfig` for provisioned mode; a change of either through
Lambda's API once it applies, `reconfigure` from mappings.py). One receiver per mapping
long-polls the queue (moto's long poll, as fixed in moto_fixes.py, returns as soon as a message is
visible, a delayed one coming due included) whenever a slot is free, gathers records up to `BatchSize` for at most
`MaximumBatchingWindowInSeconds` from the first one, and hands the batch to a worker that invokes
the function and deletes what succeeded, then receives the next batch itself while messages remain
(one batch is gathered at a time by the receiver). A batch the handler
raises on stays on the queue and comes back after the visibility timeout; with
`ReportBatchItemFailures` the records it names stay and the rest are deleted. moto keeps delays,
visibility timeouts and the redrive to a dead-letter queue.

The mapping's parameters are checked as Lambda's CreateEventSourceMapping checks them ("Lambda
parameters for Amazon SQS event source mappings", services-sqs-parameters): a template Lambda would
refuse does not start.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from wakeup_awsfacts.quotas import SQS_MAX_RECEIVE
from wakeup_awsfacts.sqs_scaling import MAXIMUM_CONCURRENCY_RANGE, MAXIMUM_POLLERS_RANGE, MINIMUM_POLLERS_RANGE, Scaling
from wakeup_awsfacts.template import TemplateError
from wakeup_local.aws.resources import Queue, StackResources
from wakeup_local.event_sources.sqs_scaling import Concurrency, Counters
from wakeup_local.lambda_.functions import Functions, LocalFunction

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 10
# services-sqs-parameters: BatchSize up to 10,000 (10 for FIFO queues), a batching window up to
# 300 s (none for FIFO queues); and "when you set BatchSize to a value greater than 10, you must set
# MaximumBatchingWindowInSeconds to at least 1" (the API reference of CreateEventSourceMapping).
MAX_BATCH_SIZE = 10_000
MAX_FIFO_BATCH_SIZE = 10
MAX_BATCHING_WINDOW_S = 300
LARGEST_BATCH_WITHOUT_WINDOW = 10
# How often a receiver looks for a free slot, and gathers more of a batching window's records.
POLL_INTERVAL_S = 0.05
# An idle receiver's long poll (SQS's shortest is 1 s): a message is handed over as soon as it is
# visible, and stopping waits for at most this.
LONG_POLL_S = 1


@dataclass(frozen=True)
class SqsEventSource:
    name: str  # `FunctionLogicalId.EventName`
    function: LocalFunction
    queue: Queue
    scaling: Scaling
    batch_size: int = DEFAULT_BATCH_SIZE
    batching_window_s: float = 0.0
    report_batch_item_failures: bool = False


def event_sources(functions: Functions, resources: StackResources, *, unbounded: bool = False) -> list[SqsEventSource]:
    """The mappings the functions' `SQS` events declare (their properties already resolved).

    Raises TemplateError for a mapping Lambda would refuse. `unbounded` (the local developer's
    setting) starts each mapping at its maximum concurrency.
    """
    sources = []
    for function in functions:
        for event_name, event in function.spec.events.items():
            if event.get("Type") != "SQS":
                continue
            properties = event.get("Properties") or {}
            if str(properties.get("Enabled", True)).lower() == "false":
                continue
            name = f"{function.spec.logical_id}.{event_name}"
            queue = resources.queue_by_arn(str(properties["Queue"]))
            batch_size, window = batching_of(name, properties, fifo=queue.name.endswith(".fifo"))
            scaling = scaling_of(name, properties, _function_bound(function))
            sources.append(
                SqsEventSource(
                    name=name,
                    function=function,
                    queue=queue,
                    scaling=scaling.unbounded() if unbounded else scaling,
                    batch_size=batch_size,
                    batching_window_s=window,
                    report_batch_item_failures="ReportBatchItemFailures"
                    in (properties.get("FunctionResponseTypes") or []),
                )
            )
    return sources


def batching_of(name: str, properties: Mapping[str, Any], *, fifo: bool) -> tuple[int, float]:
    batch_size = int(properties.get("BatchSize", DEFAULT_BATCH_SIZE))
    window = int(properties.get("MaximumBatchingWindowInSeconds", 0))
    largest = MAX_FIFO_BATCH_SIZE if fifo else MAX_BATCH_SIZE
    if not 1 <= batch_size <= largest:
        raise TemplateError(f"{name}: BatchSize must be from 1 to {largest}, not {batch_size}")
    if not 0 <= window <= MAX_BATCHING_WINDOW_S or (fifo and window):
        limit = "not supported for FIFO queues" if fifo else f"must be from 0 to {MAX_BATCHING_WINDOW_S} seconds"
        raise TemplateError(f"{name}: MaximumBatchingWindowInSeconds {limit}")
    if batch_size > LARGEST_BATCH_WITHOUT_WINDOW and window < 1:
        raise TemplateError(
            f"{name}: a BatchSize of {batch_size} (over {LARGEST_BATCH_WITHOUT_WINDOW}) needs "
            "MaximumBatchingWindowInSeconds of at least 1, as Lambda requires"
        )
    return batch_size, float(window)


def scaling_of(name: str, properties: Mapping[str, Any], function_bound: int | None) -> Scaling:
    maximum_concurrency = (properties.get("ScalingConfig") or {}).get("MaximumConcurrency")
    provisioned = properties.get("ProvisionedPollerConfig")
    if provisioned is not None and maximum_concurrency is not None:
        raise TemplateError(f"{name}: ScalingConfig and ProvisionedPollerConfig cannot be used together")
    if provisioned is not None:
        minimum = _optional_int(provisioned.get("MinimumPollers"))
        maximum = _optional_int(provisioned.get("MaximumPollers"))
        if not (_within(minimum, MINIMUM_POLLERS_RANGE) and _within(maximum, MAXIMUM_POLLERS_RANGE)):
            (low, high), (low_max, high_max) = MINIMUM_POLLERS_RANGE, MAXIMUM_POLLERS_RANGE
            raise TemplateError(
                f"{name}: MinimumPollers must be from {low} to {high}, and MaximumPollers from {low_max} to {high_max}"
            )
        if minimum is not None and maximum is not None and minimum > maximum:
            raise TemplateError(f"{name}: MinimumPollers is more than MaximumPollers")
        return Scaling.provisioned(minimum, maximum, function_bound)
    if maximum_concurrency is not None:
        low, high = MAXIMUM_CONCURRENCY_RANGE
        if not low <= int(maximum_concurrency) <= high:
            raise TemplateError(f"{name}: ScalingConfig.MaximumConcurrency must be from {low} to {high}")
        return Scaling.standard(int(maximum_concurrency), function_bound)
    return Scaling.standard(None, function_bound)


def _within(value: int | None, limits: tuple[int, int]) -> bool:
    return value is None or limits[0] <= value <= limits[1]


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _function_bound(function: LocalFunction) -> int:
    """How many invocations the function runs at once: its reserved concurrency, or the local
    stack's bound on its execution environments."""
    return function.pool.concurrency


def build_record(message: MessageTypeDef, queue_arn: str, region: str) -> dict[str, Any]:
    """A record of an SQS event, as Lambda makes it from a received message."""
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": dict(message.get("Attributes") or {}),
        "messageAttributes": {
            name: _message_attribute(value) for name, value in (message.get("MessageAttributes") or {}).items()
        },
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def _message_attribute(value: Any) -> dict[str, Any]:
    attribute: dict[str, Any] = {
        "dataType": value["DataType"],
        "stringListValues": list(value.get("StringListValues") or []),
        "binaryListValues": [base64.b64encode(item).decode() for item in value.get("BinaryListValues") or []],
    }
    if "StringValue" in value:
        attribute["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        attribute["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode()
    return attribute


def failed_message_ids(result: Any, message_ids: Iterable[str], report_batch_item_failures: bool) -> set[str]:
    """The messages of a batch that failed, by the rules of Lambda's partial batch responses.

    Without `ReportBatchItemFailures` a returned batch succeeded whole. With it, an empty or null
    response or list is a success; an identifier that is empty or names no message of the batch, or a
    response of the wrong shape, fails the whole batch.
    """
    batch = set(message_ids)
    if not report_batch_item_failures or result is None:
        return set()
    if not isinstance(result, dict):
        return batch
    failures = result.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        return batch
    failed = set()
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not isinstance(identifier, str) or identifier not in batch:
            return batch
        failed.add(identifier)
    return failed


class SqsPoller:
    """Runs the event source mappings in threads until stopped."""

    def __init__(
        self,
        sources: list[SqsEventSource],
        sqs: SQSClient,
        region: str,
        poll_interval_s: float = POLL_INTERVAL_S,
        *,
        unbounded: bool = False,
    ) -> None:
        self.sources = sources
        self._sqs = sqs
        self._region = region
        self._poll_interval_s = poll_interval_s
        self._unbounded = unbounded
        self._stopping = threading.Event()
        self._receivers: list[threading.Thread] = []
        self._pools: list[ThreadPoolExecutor] = []
        self._concurrency = {source.name: Concurrency(source.scaling) for source in sources}

    def counters(self) -> dict[str, Counters]:
        """Each mapping's counters (batches, messages, concurrency over time), by `Function.Event`."""
        return {name: concurrency.counters() for name, concurrency in self._concurrency.items()}

    def reconfigure(self, name: str, properties: Mapping[str, Any]) -> Scaling:
        """The mapping `name`'s configuration changed (its `ProvisionedPollerConfig` or
        `ScalingConfig`, mappings.py): it scales by the new one from now on. Raises TemplateError
        for one Lambda would refuse."""
        source = next(source for source in self.sources if source.name == name)
        scaling = scaling_of(name, properties, _function_bound(source.function))
        scaling = scaling.unbounded() if self._unbounded else scaling
        self._concurrency[name].rescale(scaling)
        log.info(
            "%s now scales from %d at once, up to %d (%s)",
            name,
            scaling.initial,
            scaling.maximum,
            "provisioned" if properties.get("ProvisionedPollerConfig") else "standard",
        )
        return scaling

    def start(self) -> None:
        for source in self.sources:
            # Threads for as many batches as the function runs at once: a mapping reconfigured
            # later may scale past what it starts with.
            workers = max(source.scaling.maximum, _function_bound(source.function))
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"sqs-{source.queue.name}")
            receiver = threading.Thread(
                target=self._receive_loop,
                args=(source, pool, self._concurrency[source.name]),
                name=f"sqs-receiver-{source.queue.name}",
                daemon=True,
            )
            self._pools.append(pool)
            self._receivers.append(receiver)
            receiver.start()
            scaling = source.scaling
            log.info(
                "polling %s for %s (batches of %d; %d at once, up to %d)",
                source.queue.name,
                source.function.name,
                source.batch_size,
                scaling.initial,
                scaling.maximum,
            )

    def stop(self) -> None:
        """Stops receiving and waits for the invocations under way."""
        self._stopping.set()
        for receiver in self._receivers:
            receiver.join()
        for pool in self._pools:
            pool.shutdown(wait=True)
        self._receivers.clear()
        self._pools.clear()

    def _receive_loop(self, source: SqsEventSource, pool: ThreadPoolExecutor, concurrency: Concurrency) -> None:
        while not self._stopping.is_set():
            # Receive only for a free slot: a message held here would use up its visibility timeout
            # while waiting.
            if not concurrency.acquire(timeout=self._poll_interval_s):
                continue
            messages = self._receive_or_nothing(source, wait_s=LONG_POLL_S)
            if not messages:
                concurrency.release(worked=False)
                concurrency.queue_empty()
                continue
            concurrency.received(len(messages))
            pool.submit(self._work, source, messages, concurrency)

    def _receive_or_nothing(self, source: SqsEventSource, wait_s: int = 0) -> list[MessageTypeDef]:
        try:
            return self._receive(source, wait_s)
        except Exception:
            # The mapping keeps polling whatever happened, as Lambda's does.
            log.exception("receiving from %s failed", source.queue.name)
            self._stopping.wait(self._poll_interval_s)
            return []

    def _receive(self, source: SqsEventSource, wait_s: int = 0) -> list[MessageTypeDef]:
        """A batch: what the queue holds now, up to the batch size, or what comes within `wait_s`
        (a long poll); with a batching window, what comes within the window after the first record
        as well."""
        messages: list[MessageTypeDef] = []
        gather_until: float | None = None
        while len(messages) < source.batch_size:
            wanted = min(SQS_MAX_RECEIVE, source.batch_size - len(messages))
            received = self._sqs.receive_message(
                QueueUrl=source.queue.url,
                MaxNumberOfMessages=wanted,
                WaitTimeSeconds=0 if messages else wait_s,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            messages.extend(received)
            if messages and gather_until is None:
                gather_until = time.monotonic() + source.batching_window_s
            if len(received) < wanted:
                if gather_until is None or time.monotonic() >= gather_until:
                    break
                if self._stopping.wait(min(self._poll_interval_s, gather_until - time.monotonic())):
                    break
        return messages

    def _work(self, source: SqsEventSource, messages: list[MessageTypeDef], concurrency: Concurrency) -> None:
        """Works a batch, then, as a poller of Lambda's does while messages remain, receives the next
        one itself and keeps its slot; gives the slot back once a receive finds nothing."""
        found_empty = False
        try:
            while True:
                self._invoke(source, messages)
                if self._stopping.is_set():
                    return
                messages = self._receive_or_nothing(source)
                if not messages:
                    found_empty = True
                    return
                concurrency.messages_remain(len(messages))
        finally:
            concurrency.release(worked=True)
            if found_empty:
                concurrency.queue_empty()

    def _invoke(self, source: SqsEventSource, messages: list[MessageTypeDef]) -> None:
        records = [build_record(message, source.queue.arn, self._region) for message in messages]
        try:
            result = source.function.invoke({"Records": records})
        except Exception:
            # As Lambda: a failed invocation leaves the whole batch to come back after the
            # visibility timeout (and to the dead-letter queue after maxReceiveCount).
            log.exception("%s failed on a batch from %s", source.function.name, source.queue.name)
            return
        failed = failed_message_ids(
            result, (record["messageId"] for record in records), source.report_batch_item_failures
        )
        if failed:
            log.info("%s: %d of %d records failed", source.function.name, len(failed), len(records))
        self._delete(source, [message for message in messages if message["MessageId"] not in failed])

    def _delete(self, source: SqsEventSource, messages: list[MessageTypeDef]) -> None:
        for start in range(0, len(messages), SQS_MAX_RECEIVE):
            chunk = messages[start : start + SQS_MAX_RECEIVE]
            try:
                reply = self._sqs.delete_message_batch(
                    QueueUrl=source.queue.url,
                    Entries=[
                        {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]}
                        for index, message in enumerate(chunk)
                    ],
                )
            except (BotoCoreError, ClientError):
                log.exception("deleting processed messages from %s failed", source.queue.name)
                continue
            for failure in reply.get("Failed", []):
                log.warning("a message was not deleted from %s: %s", source.queue.name, failure.get("Message"))
