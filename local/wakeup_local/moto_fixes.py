"""Fixes to moto that the local stack needs, applied in its own process.

Each is applied once, and only if moto still has what it replaces (a newer moto may not need it).

- DynamoDB's writes are atomic, and a transaction's conditions and writes happen as one; moto's
  are not under concurrent requests: its `transact_write_items` checks conditions, then writes, and
  deep-copies tables meanwhile, with no lock. Two requests racing to put one item under
  `attribute_not_exists` could both succeed (seen: two accounts both got 201 for one token), or
  the copy fails with "dictionary changed size during iteration". One lock serialises moto's
  DynamoDB operations, which makes each as atomic as DynamoDB's.

- moto 5's SQS `receive_message` checks each message's retention period through
  `get_queue_attributes`, which computes every attribute of the queue (counting its messages) each
  time: receiving costs O(messages in the queue) per message received. With a hundred wakes due at
  once that is most of a second spent in moto. The replacement reads the same value directly.
- moto's server finds the service of every request by listing its own package folder on disk
  (`list_of_moto_modules`, about 0.7 ms, under a lock all requests share). The folder does not
  change while the process runs: it is listed once.
"""

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from moto import backends
from moto.core.utils import unix_time
from moto.dynamodb.models import DynamoDBBackend
from moto.sqs.models import SQSBackend

log = logging.getLogger(__name__)

_applied = False

# The DynamoDB operations the local stack's code and tests use, each made atomic by one lock.
_DYNAMODB_OPERATIONS = (
    "create_table",
    "delete_table",
    "put_item",
    "get_item",
    "update_item",
    "delete_item",
    "query",
    "scan",
    "transact_write_items",
)
_dynamodb_lock = threading.RLock()


def _serialised(operation: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(operation)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _dynamodb_lock:
            return operation(*args, **kwargs)

    return locked


def _is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
    retention_period = int(self.get_queue(queue_name).message_retention_period)
    return bool(retention_period + message.sent_timestamp / 1000 > unix_time())


def apply() -> None:
    global _applied
    if _applied:
        return
    _applied = True
    for name in _DYNAMODB_OPERATIONS:
        if hasattr(DynamoDBBackend, name):
            setattr(DynamoDBBackend, name, _serialised(getattr(DynamoDBBackend, name)))
        else:
            log.warning("moto changed: its DynamoDB %s is not made atomic", name)
    if hasattr(SQSBackend, "is_message_valid_based_on_retention_period"):
        setattr(  # noqa: B010 - a method replaced on purpose
            SQSBackend, "is_message_valid_based_on_retention_period", _is_message_valid_based_on_retention_period
        )
    else:
        log.warning("moto changed: its SQS retention check is not replaced (receiving may be slow)")
    if hasattr(backends, "list_of_moto_modules"):
        modules = tuple(backends.list_of_moto_modules())
        backends.list_of_moto_modules = lambda: modules
    else:
        log.warning("moto changed: its list of services is not cached (requests may be slower)")
