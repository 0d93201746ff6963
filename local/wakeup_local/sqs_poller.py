"""Lambda's SQS event source mapping, for the template's `Type: SQS` events.

One receiver per mapping short-polls the queue (moto's long polling only wakes for new messages, not
for delayed ones coming due) and hands each batch to a pool of invokers, as Lambda runs several
invocations at once. A batch the handler raises on stays on the queue and comes back after the
visibility timeout; with `ReportBatchItemFailures` the records it names stay and the rest are
deleted. moto keeps delays, visibility timeouts and the redrive to a dead-letter queue.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from wakeup_local.functions import Functions, LocalFunction
from wakeup_local.resources import Queue, StackResources

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 10
# Concurrent invocations per mapping, unless its ScalingConfig says otherwise. Lambda scales a
# mapping out to hundreds; here a burst of messages coming due a few at a time (small batches, each
# holding an invoker while its handler waits) must still all be handed over at once.
DEFAULT_CONCURRENCY = 50
# How often an idle receiver looks again: a message is handed over this soon after it is visible.
POLL_INTERVAL_S = 0.05
SQS_MAX_RECEIVE = 10


@dataclass(frozen=True)
class SqsEventSource:
    function: LocalFunction
    queue: Queue
    batch_size: int = DEFAULT_BATCH_SIZE
    report_batch_item_failures: bool = False
    concurrency: int = DEFAULT_CONCURRENCY


def event_sources(functions: Functions, resources: StackResources) -> list[SqsEventSource]:
    """The mappings the functions' `SQS` events declare (their properties already resolved)."""
    sources = []
    for function in functions:
        for event in function.spec.events.values():
            if event.get("Type") != "SQS":
                continue
            properties = event.get("Properties") or {}
            if str(properties.get("Enabled", True)).lower() == "false":
                continue
            scaling = properties.get("ScalingConfig") or {}
            sources.append(
                SqsEventSource(
                    function=function,
                    queue=resources.queue_by_arn(str(properties["Queue"])),
                    batch_size=int(properties.get("BatchSize", DEFAULT_BATCH_SIZE)),
                    report_batch_item_failures="ReportBatchItemFailures"
                    in (properties.get("FunctionResponseTypes") or []),
                    concurrency=int(scaling.get("MaximumConcurrency", DEFAULT_CONCURRENCY)),
                )
            )
    return sources


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
    ) -> None:
        self.sources = sources
        self._sqs = sqs
        self._region = region
        self._poll_interval_s = poll_interval_s
        self._stopping = threading.Event()
        self._receivers: list[threading.Thread] = []
        self._pools: list[ThreadPoolExecutor] = []

    def start(self) -> None:
        for source in self.sources:
            pool = ThreadPoolExecutor(max_workers=source.concurrency, thread_name_prefix=f"sqs-{source.queue.name}")
            receiver = threading.Thread(
                target=self._receive_loop,
                args=(source, pool, threading.BoundedSemaphore(source.concurrency)),
                name=f"sqs-receiver-{source.queue.name}",
                daemon=True,
            )
            self._pools.append(pool)
            self._receivers.append(receiver)
            receiver.start()
            log.info("polling %s for %s (batches of %d)", source.queue.name, source.function.name, source.batch_size)

    def stop(self) -> None:
        """Stops receiving and waits for the invocations under way."""
        self._stopping.set()
        for receiver in self._receivers:
            receiver.join()
        for pool in self._pools:
            pool.shutdown(wait=True)
        self._receivers.clear()
        self._pools.clear()

    def _receive_loop(self, source: SqsEventSource, pool: ThreadPoolExecutor, free: threading.BoundedSemaphore) -> None:
        while not self._stopping.is_set():
            # Receive only for an invoker that is free: a message held here would use up its
            # visibility timeout while waiting.
            if not free.acquire(timeout=self._poll_interval_s):
                continue
            try:
                messages = self._receive(source)
            except Exception:
                # The mapping keeps polling whatever happened, as Lambda's does.
                log.exception("receiving from %s failed", source.queue.name)
                messages = []
            if not messages:
                free.release()
                self._stopping.wait(self._poll_interval_s)
                continue
            pool.submit(self._invoke, source, messages, free)

    def _receive(self, source: SqsEventSource) -> list[MessageTypeDef]:
        messages: list[MessageTypeDef] = []
        while len(messages) < source.batch_size:
            wanted = min(SQS_MAX_RECEIVE, source.batch_size - len(messages))
            received = self._sqs.receive_message(
                QueueUrl=source.queue.url,
                MaxNumberOfMessages=wanted,
                WaitTimeSeconds=0,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            messages.extend(received)
            if len(received) < wanted:
                break
        return messages

    def _invoke(self, source: SqsEventSource, messages: list[MessageTypeDef], free: threading.BoundedSemaphore) -> None:
        try:
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
        finally:
            free.release()

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
