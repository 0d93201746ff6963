"""Fixes to moto's speed that the local stack needs, applied in its own process.

Both replace a function with one that answers the same, faster; each is applied once, and only if
moto still has what it replaces (a newer moto may not need them).

- moto 5's SQS `receive_message` checks each message's retention period through
  `get_queue_attributes`, which computes every attribute of the queue (counting its messages) each
  time: receiving costs O(messages in the queue) per message received. With a hundred wakes due at
  once that is most of a second spent in moto. The replacement reads the same value directly.
- moto's server finds the service of every request by listing its own package folder on disk
  (`list_of_moto_modules`, about 0.7 ms, under a lock all requests share). The folder does not
  change while the process runs: it is listed once.
"""

import logging
from typing import Any

from moto import backends
from moto.core.utils import unix_time
from moto.sqs.models import SQSBackend

log = logging.getLogger(__name__)

_applied = False


def _is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
    retention_period = int(self.get_queue(queue_name).message_retention_period)
    return bool(retention_period + message.sent_timestamp / 1000 > unix_time())


def apply() -> None:
    global _applied
    if _applied:
        return
    _applied = True
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
