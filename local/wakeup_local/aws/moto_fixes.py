"""Fixes to moto that the local stack needs, applied in its own process.

Each is applied once, and only if moto still has what it replaces (a newer moto may not need it).

- DynamoDB's writes are atomic, and a transaction's conditions and writes happen as one; moto's
  are not under concurrent requests: its `transact_write_items` checks conditions, then writes, and
  deep-copies tables meanwhile, with no lock. Two requests racing to put one item under
  `attribute_not_exists` could both succeed (seen: two accounts both got 201 for one token), or
  the copy fails with "dictionary changed size during iteration". One lock serialises moto's
  DynamoDB operations, which makes each as atomic as DynamoDB's. moto's `UpdateItem` handler also
  deep-copies the item it is about to update (its old attributes, for `ALL_OLD` and `UPDATED_OLD`)
  before it calls the backend, outside that lock: racing another write to the item, the copy failed
  with "dictionary changed size during iteration" (a 500), or held attributes that write had since
  changed. The handler's whole update runs under the same lock.
- moto's `transact_write_items` deep-copies every table it writes to before it starts, to roll back
  a cancelled transaction: its cost grows with the table, so a registration slows as instances
  accumulate. Here it snapshots only the items the transaction names (at most 100), and
  on any failure puts exactly those back; its checks, writes and errors stay moto's own.
- `TransactWriteItems` is idempotent by its `ClientRequestToken` on AWS: a request sent again with
  the same token within ten minutes is not applied again and succeeds as the first did; with the
  same token and other parameters it is refused with IdempotentParameterMismatchException
  ("TransactWriteItems", DynamoDB API reference:
  https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
  botocore sends a token with every such request, and the same token again on its retry after a
  reply that came too late. moto ignores it, so the retry of a registration that had applied was
  refused on its own condition and answered 200 instead of AWS's 201. Here a token's first
  success is kept for the window and answers its repeats.

- moto 5's SQS `receive_message` checks each message's retention period through
  `get_queue_attributes`, which computes every attribute of the queue (counting its messages) each
  time: receiving costs O(messages in the queue) per message received, so a burst of wakes due at
  once is quadratic in moto. The replacement reads the same value directly.
- moto 5's SQS `Queue.attributes` computes every attribute of the queue each time it is read,
  counting its messages three times over (visible, delayed, in flight); `send_message` reads it
  for one flag (`ContentBasedDeduplication`). Sending cost O(messages in the queue): with many
  wakes' messages waiting, it outweighed the rest of a PUT. The replacement is a read-only mapping that
  computes an attribute when it is read, with the same names and values as moto's.
- moto 5's SQS reads the clock twice per message each time it looks at a queue (is it visible,
  is it delayed), through `unix_time_millis`, which builds two datetimes and subtracts them: each
  receive pays it for every delayed message, and an idle poller pays it at every look. SQS's module
  gets the same clock read from `time.time()`.
- moto 5's SQS looks at a queue (`Queue.messages`: its visible messages, for every receive and
  every look of a long poll) through two properties of each message, each reading the clock; and
  deletes a message (`Queue.delete_message`) by going through every message of the queue twice,
  building each one's list of receipt handles as it goes. A burst's thousand messages made each
  receive and each delete cost a thousand of those, so delivering a burst was quadratic in moto.
  Here a look reads the clock once and compares each message's times itself, and a delete finds
  its message in one pass that compares the handles in place: the same messages seen, the same
  message deleted, the same refusal of a handle no message ever had.
- moto's long poll (`ReceiveMessage` with `WaitTimeSeconds`) wakes when a message is sent, but a
  delayed message coming due, or one whose visibility timeout ends, waits for its next one-second
  look. SQS's long poll returns as soon as a message is available ("Amazon SQS short and long
  polling", SQS developer guide), so the wait here ends when the next message becomes visible (or
  one is sent), and the local poller long-polls instead of asking 20 times a second.
- moto's `BaseResponse.call_action` lists the methods of the request's response class, with
  `inspect.getmembers`, on every request: a class's methods do not change while the process runs,
  so each class is listed once.
- moto's server finds the service of every request by listing its own package folder on disk
  (`list_of_moto_modules`, a read of the disk under a lock all requests share). The folder does
  not change while the process runs: it is listed once.
- moto's DynamoDB lexes each condition expression anew on every request, and parses a write's
  condition twice: each text is lexed once, and parsed once a request (moto_expressions.py).
- moto writes each item of a DynamoDB reply through the service model, attribute by attribute and
  member by member, for a registration's and a delivered wake's replies alike, and reads each
  request's keys, items and expression values back the same way. An item is already in the
  reply's shape, and goes into it as it is; a request's plain values are taken as they are
  (moto_attribute_values.py).
- moto adds up the size of every attribute of an item each time it sets one (its 400 KB check):
  a string's and a number's sizes are read there without `DynamoType.size`'s dispatch, the same
  sums and the same refusals (moto_item_sizes.py).
- moto parses an update expression twice per `UpdateItem`, deep-copies the tree, and asks at each
  node of its ten walks which node types the walk processes: each text is parsed once into one
  tree that moto only reads, the validator's copy of it is unpickled, its three walks that read
  only the text, names and table's key are made until they pass once, and each node type's answers
  are worked out once (moto_expressions.py).

- Lambda's event source mappings (the planner changes the caller's, wakeup.event_source):
  - moto's SQS hands a queue's messages to moto's Lambda when a mapping names the queue, which
    runs functions in Docker. The local stack's own poller is the mapping's consumer
    (sqs_poller.py), so an SQS mapping is kept off moto's queue.
  - An `UpdateEventSourceMapping` applies at once in moto, its state always `Enabled`. On AWS it
    answers 202 with the mapping `Updating`, and the mapping is `Enabled` again once the change
    applies ("UpdateEventSourceMapping", Lambda API reference:
    https://docs.aws.amazon.com/lambda/latest/api/API_UpdateEventSourceMapping.html); an operation
    that "conflicts with the resource's availability" meanwhile is refused with
    ResourceInUseException (its examples: an update while `Creating`, a delete while `Updating`).
    Here the mapping is `Updating` for `mapping_update_s` seconds after an update (AWS gives no
    figure), and another update meanwhile is refused so, as wakeup.event_source expects.
  - `ProvisionedPollerConfig` is checked as AWS checks it for SQS (MinimumPollers 2 to 200,
    MaximumPollers 2 to 2,000, the minimum not above the maximum: "ProvisionedPollerConfig",
    https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html); an empty one
    turns provisioned mode off (wakeup.event_source), so the mapping no longer shows one.
"""

import copy
import functools
import hashlib
import json
import logging
import threading
import time
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import moto.core.parse as moto_parse
import moto.core.responses as core_responses
import moto.core.serialize as moto_serialize
import moto.dynamodb.models as dynamodb_models
import moto.dynamodb.parsing.validators as dynamodb_validators
import moto.sqs.models as sqs_models
from moto import backends
from moto.awslambda.exceptions import InvalidParameterValueException, LambdaClientError
from moto.awslambda.models import EventSourceMapping, LambdaBackend
from moto.core import utils as moto_utils
from moto.core.utils import camelcase_to_underscores, unix_time
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.exceptions import ERROR_TYPE_PREFIX, DynamodbException
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node  # type: ignore[attr-defined]  # untyped
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]  # untyped too
from moto.dynamodb.responses import DynamoHandler
from moto.sqs.exceptions import ReceiptHandleIsInvalid
from moto.sqs.models import Queue, SQSBackend, sqs_backends

from wakeup_awsfacts.sqs_scaling import MAXIMUM_POLLERS_RANGE, MINIMUM_POLLERS_RANGE
from wakeup_local.aws import moto_expressions, moto_item_sizes
from wakeup_local.aws.moto_attribute_values import items_as_they_are, requests_as_they_are, values_as_they_are

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


# --- transactions that snapshot only their own items --------------------------------------------------


def _deepcopy_all_but_tables(value: Any, memo: dict[int, Any] | None = None) -> Any:
    # moto's transaction "copies" a table, then on a failure puts the copy back: with the table
    # itself in its place that is a no-op, and the items it touched are restored by the wrapper.
    return value if isinstance(value, Table) else copy.deepcopy(value, memo)


# What moto's DynamoDB models module sees as `copy`: the transaction's table backup is the only
# deep copy of a table there; the others (an updated item's old image) stay real copies.
COPY_WITHOUT_TABLES = types.SimpleNamespace(deepcopy=_deepcopy_all_but_tables, copy=copy.copy)

_ItemKey = tuple[Table, DynamoType, DynamoType | None]


def _touched_items(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> dict[_ItemKey, Item | None]:
    """A copy of each item the transaction names (None: absent), by table and key."""
    snapshots: dict[_ItemKey, Item | None] = {}
    for action in transact_items:
        for kind, operation in action.items():
            table = backend.tables.get(str(operation.get("TableName")))
            key = operation.get("Item") if kind == "Put" else operation.get("Key")
            if table is None or not isinstance(key, dict) or table.hash_key_attr not in key:
                continue  # moto refuses it before writing anything of its own
            hash_key = DynamoType(key[table.hash_key_attr])
            range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr in key else None
            if table.has_range_key and range_key is None:
                continue
            snapshots.setdefault((table, hash_key, range_key), copy.deepcopy(table.get_item(hash_key, range_key)))
    return snapshots


def _restore(snapshots: dict[_ItemKey, Item | None]) -> None:
    for (table, hash_key, range_key), item in snapshots.items():
        items: dict[Any, Any] = table.items[hash_key] if range_key is not None else table.items
        slot = range_key if range_key is not None else hash_key
        if item is None:
            items.pop(slot, None)
        else:
            items[slot] = item


def snapshotting_touched_items(transact_write_items: Callable[..., Any]) -> Callable[..., Any]:
    """moto's `transact_write_items`, rolled back item by item instead of table by table."""

    @functools.wraps(transact_write_items)
    def transact(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> Any:
        snapshots = _touched_items(self, transact_items)
        try:
            return transact_write_items(self, transact_items)
        except BaseException:
            _restore(snapshots)
            raise

    return transact


# DynamoDB's idempotency window for a ClientRequestToken ("TransactWriteItems", above).
IDEMPOTENCY_WINDOW_S = 600.0
# Each token's first success: when, a digest of the request without its token, the reply.
_transactions: dict[str, tuple[float, bytes, Any]] = {}


class IdempotentParameterMismatch(DynamodbException):
    def __init__(self) -> None:
        super().__init__(
            ERROR_TYPE_PREFIX + "IdempotentParameterMismatchException",
            message="The request uses the same client token as a previous, but non-identical request.",
        )


def idempotent_by_token(transact_write_items: Callable[..., Any]) -> Callable[..., Any]:
    """moto's `DynamoHandler.transact_write_items`, answering a token's repeat with its first success."""

    @functools.wraps(transact_write_items)
    def transact(self: Any) -> Any:
        token = self.body.get("ClientRequestToken")
        if token is None:
            return transact_write_items(self)
        without_token = {key: value for key, value in self.body.items() if key != "ClientRequestToken"}
        request = hashlib.sha256(json.dumps(without_token, sort_keys=True).encode()).digest()
        with _dynamodb_lock:
            now = time.monotonic()
            while _transactions:  # kept in the order they came: the oldest first
                oldest = next(iter(_transactions))
                if now - _transactions[oldest][0] <= IDEMPOTENCY_WINDOW_S:
                    break
                del _transactions[oldest]
            seen = _transactions.get(token)
            if seen is not None:
                if seen[1] != request:
                    raise IdempotentParameterMismatch()
                return seen[2]
            reply = transact_write_items(self)
            _transactions[token] = (now, request, reply)
            return reply

    return transact


def _is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
    retention_period = int(self.get_queue(queue_name).message_retention_period)
    return bool(retention_period + message.sent_timestamp / 1000 > unix_time())


class QueueAttributes(Mapping[str, Any]):
    """moto's `Queue.attributes` (the same names, in its order, and values), each computed when
    read: the message counts only when asked for."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        names = list(queue.BASE_ATTRIBUTES)
        if queue.fifo_queue:
            names += queue.FIFO_ATTRIBUTES
        if queue.kms_master_key_id:
            names += queue.KMS_ATTRIBUTES
        self._names = dict.fromkeys(names)

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        if name == "RedrivePolicy" and self._queue.redrive_policy:
            return json.dumps(self._queue.redrive_policy)
        value = getattr(self._queue, camelcase_to_underscores(name))
        return str(value).lower() if isinstance(value, bool) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


# moto's own, kept to compare with (the tests do).
MOTO_QUEUE_ATTRIBUTES = Queue.attributes


def _lazy_attributes(queue: Any) -> QueueAttributes:
    return QueueAttributes(queue)


def fast_unix_time(dt: Any = None) -> float:
    """moto's `unix_time`: seconds since the epoch of `dt`, a naive UTC datetime, or of now."""
    return time.time() if dt is None else float(moto_utils.unix_time(dt))


def fast_unix_time_millis(dt: Any = None) -> float:
    """moto's `unix_time_millis`, the same way."""
    return fast_unix_time(dt) * 1000.0


# A message is visible once the clock is past its `visible_at` and `delayed_until` (milliseconds).
_VISIBLE_MARGIN_S = 0.001


def visible_messages(self: Any) -> list[Any]:
    """moto's `Queue.messages`: the messages neither in flight nor delayed, at one reading of the
    clock (moto's `Message.visible` and `Message.delayed`, each of which reads it)."""
    now = fast_unix_time_millis()
    return [message for message in self._messages if now > message.visible_at and now >= message.delayed_until]


def delete_message_by_handle(self: Any, receipt_handle: str) -> None:
    """moto's `Queue.delete_message`: a handle already deleted is let be; the message that ever had
    the handle is deleted, its handles remembered as deleted; a handle no message had is refused."""
    if receipt_handle in self.deleted_messages:
        return
    messages = self._messages
    at = next(
        (
            at
            for at, message in enumerate(messages)
            if message.receipt_handle == receipt_handle or receipt_handle in message._old_receipt_handles
        ),
        None,
    )
    if at is None:
        raise ReceiptHandleIsInvalid()
    message = messages[at]
    self.pending_messages.discard(message)
    self.deleted_messages.update(message.all_receipt_handles)
    # A new list, as moto makes: a receive going through the old one meanwhile is not disturbed.
    self._messages = messages[:at] + messages[at + 1 :]


def _sqs_messages_replaceable() -> bool:
    """Whether moto's messages still keep what the replacements read: their times, and their
    current and earlier receipt handles."""
    kept = set(sqs_models.Message.__init__.__code__.co_names)
    properties = ("visible", "delayed", "all_receipt_handles")
    return {"visible_at", "delayed_until", "receipt_handle", "_old_receipt_handles"} <= kept and all(
        isinstance(vars(sqs_models.Message).get(name), property) for name in properties
    )


def wait_for_a_visible_message(self: Any, timeout: float) -> None:
    """moto's `Queue.wait_for_messages`: returns once the queue holds a visible message, or after
    `timeout` s; wakes for a message sent (moto notifies) and for one that comes due meanwhile."""
    deadline = time.time() + timeout
    with self._messages_lock:
        while not self.messages:
            now = time.time()
            coming = [max(message.visible_at, message.delayed_until) / 1000 for message in self._messages]
            wake = min([due + _VISIBLE_MARGIN_S for due in coming if due >= now - _VISIBLE_MARGIN_S] + [deadline])
            if now >= deadline:
                return
            self._messages_lock.wait(wake - now)


@functools.cache
def method_names_of(clazz: type) -> frozenset[str]:
    """moto's `method_names_from_class`, once per class (its callers only ask what it contains)."""
    return frozenset(moto_utils.method_names_from_class(clazz))


# --- event source mappings as Lambda's ---------------------------------------------------------------

# How long a mapping stays `Updating` after an update (apply's `mapping_update_s`).
_mapping_update_s = 0.0
# Until when (time.monotonic()) each mapping is `Updating`, by UUID.
_updating_until: dict[str, float] = {}


def _is_updating(uuid: str) -> bool:
    return time.monotonic() < _updating_until.get(uuid, 0.0)


def off_moto_queues(create: Callable[..., Any]) -> Callable[..., Any]:
    """moto's `create_event_source_mapping`, leaving an SQS mapping off its queue (moto's SQS would
    consume the queue for it)."""

    @functools.wraps(create)
    def create_mapping(self: LambdaBackend, spec: dict[str, Any]) -> EventSourceMapping:
        mapping: EventSourceMapping = create(self, spec)
        for queue in sqs_backends[self.account_id][self.region_name].queues.values():
            if queue.queue_arn == mapping.event_source_arn:
                queue.lambda_event_source_mappings.pop(mapping.function_arn, None)
        return mapping

    return create_mapping


def _checked_poller_config(config: Any) -> dict[str, int] | None:
    """The ProvisionedPollerConfig to keep (None: provisioned mode off), or AWS's refusal."""
    if not config:
        return None
    minimum, maximum = config.get("MinimumPollers"), config.get("MaximumPollers")
    for name, value, (low, high) in (
        ("MinimumPollers", minimum, MINIMUM_POLLERS_RANGE),
        ("MaximumPollers", maximum, MAXIMUM_POLLERS_RANGE),
    ):
        if value is not None and not low <= int(value) <= high:
            raise InvalidParameterValueException(f"{name} must be between {low} and {high} for an SQS event source")
    if minimum is not None and maximum is not None and int(minimum) > int(maximum):
        raise InvalidParameterValueException("MinimumPollers must not be greater than MaximumPollers")
    return dict(config)


def updating_as_lambda(update: Callable[..., Any]) -> Callable[..., Any]:
    """moto's `update_event_source_mapping`, refused while an update applies, and `Updating` after."""

    @functools.wraps(update)
    def update_mapping(self: LambdaBackend, uuid: str, spec: dict[str, Any]) -> EventSourceMapping | None:
        if self.get_event_source_mapping(uuid) is not None:
            if _is_updating(uuid):
                raise LambdaClientError(
                    "ResourceInUseException",
                    f"Cannot update the event source mapping {uuid} because it is in use (Updating).",
                )
            if "ProvisionedPollerConfig" in spec:
                spec = {**spec, "ProvisionedPollerConfig": _checked_poller_config(spec["ProvisionedPollerConfig"])}
        mapping: EventSourceMapping | None = update(self, uuid, spec)
        if mapping is not None:
            _updating_until[uuid] = time.monotonic() + _mapping_update_s
        return mapping

    return update_mapping


def state_as_lambda(get_configuration: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """moto's mapping description, `Updating` while an update applies."""

    @functools.wraps(get_configuration)
    def configuration(self: EventSourceMapping) -> dict[str, Any]:
        described = get_configuration(self)
        if _is_updating(self.uuid):
            described["State"] = "Updating"
        return described

    return configuration


def apply(mapping_update_s: float = 0.0) -> None:
    global _applied, _mapping_update_s
    _mapping_update_s = mapping_update_s
    if _applied:
        return
    _applied = True
    if getattr(dynamodb_models, "copy", None) is copy and hasattr(DynamoDBBackend, "transact_write_items"):
        setattr(dynamodb_models, "copy", COPY_WITHOUT_TABLES)  # noqa: B010 - the module's `copy` replaced
        DynamoDBBackend.transact_write_items = snapshotting_touched_items(  # type: ignore[method-assign]
            DynamoDBBackend.transact_write_items
        )
    else:
        log.warning("moto changed: its transactions still copy whole tables (registering may be slow)")
    if hasattr(DynamoHandler, "transact_write_items"):
        DynamoHandler.transact_write_items = idempotent_by_token(DynamoHandler.transact_write_items)  # type: ignore[method-assign]
    else:
        log.warning("moto changed: its TransactWriteItems is not made idempotent by ClientRequestToken")
    if "__setitem__" in vars(LimitedSizeDict):
        LimitedSizeDict.__setitem__ = moto_item_sizes.sized_as_moto_sizes(LimitedSizeDict.__setitem__)  # type: ignore[method-assign]
    else:
        log.warning("moto changed: its item sizes are added up through DynamoType.size (writes may be slower)")
    if hasattr(DynamoHandler, "update_item"):
        DynamoHandler.update_item = _serialised(DynamoHandler.update_item)  # type: ignore[method-assign]
    else:
        log.warning("moto changed: its UpdateItem handler is not made atomic")
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
    if isinstance(getattr(Queue, "attributes", None), property) and hasattr(Queue, "BASE_ATTRIBUTES"):
        setattr(Queue, "attributes", property(_lazy_attributes))  # noqa: B010 - a property replaced on purpose
    else:
        log.warning("moto changed: its SQS queue attributes are not made lazy (sending may be slow)")
    if getattr(sqs_models, "unix_time_millis", None) is moto_utils.unix_time_millis:
        setattr(sqs_models, "unix_time", fast_unix_time)  # noqa: B010 - the module's clock replaced
        setattr(sqs_models, "unix_time_millis", fast_unix_time_millis)  # noqa: B010
    else:
        log.warning("moto changed: its SQS clock is not replaced (receiving may be slow)")
    replaceable = isinstance(vars(Queue).get("messages"), property) and "delete_message" in vars(Queue)
    if replaceable and _sqs_messages_replaceable():
        setattr(Queue, "messages", property(visible_messages))  # noqa: B010 - a property replaced on purpose
        setattr(Queue, "delete_message", delete_message_by_handle)  # noqa: B010 - a method replaced on purpose
    else:
        log.warning("moto changed: its SQS looks and deletes still go through every message twice (slow)")
    if hasattr(Queue, "wait_for_messages") and hasattr(Queue, "messages"):
        setattr(Queue, "wait_for_messages", wait_for_a_visible_message)  # noqa: B010 - a method replaced on purpose
    else:
        log.warning("moto changed: its SQS long poll is not replaced (a due message may wait a second)")
    if getattr(core_responses, "method_names_from_class", None) is moto_utils.method_names_from_class:
        setattr(core_responses, "method_names_from_class", method_names_of)  # noqa: B010 - cached on purpose
    else:
        log.warning("moto changed: its response methods are not cached (requests may be slower)")
    if hasattr(ConditionExpressionParser, "_lex_condition_expression"):
        lexed = moto_expressions.lexing_each_text_once(ConditionExpressionParser._lex_condition_expression)
        setattr(ConditionExpressionParser, "_lex_condition_expression", lexed)  # noqa: B010 - replaced on purpose
    else:
        log.warning("moto changed: its condition expressions are not lexed once (writes may be slower)")
    if hasattr(ConditionExpressionParser, "parse"):
        parsed = moto_expressions.parsing_each_condition_once(ConditionExpressionParser.parse)
        setattr(ConditionExpressionParser, "parse", parsed)  # noqa: B010 - replaced on purpose
    else:
        log.warning("moto changed: its write conditions are parsed twice (writes may be slower)")
    serializer = getattr(moto_serialize, "BaseJSONSerializer", None)
    if all(hasattr(serializer, name) for name in ("_serialize_type_map", "_serialize_type_structure")):
        serializer._serialize_type_map = items_as_they_are(serializer._serialize_type_map)  # type: ignore[union-attr]
        serializer._serialize_type_structure = values_as_they_are(  # type: ignore[union-attr]
            serializer._serialize_type_structure  # type: ignore[union-attr]
        )
    else:
        log.warning("moto changed: its DynamoDB items are written member by member (replies may be slower)")
    parser = getattr(moto_parse, "JSONParser", None)
    if parser is not None and callable(getattr(parser, "_parse_map", None)):
        parser._parse_map = requests_as_they_are(parser._parse_map)
    else:
        log.warning("moto changed: its DynamoDB requests are read member by member (writes may be slower)")
    _apply_update_expression_fixes()
    if hasattr(backends, "list_of_moto_modules"):
        modules = tuple(backends.list_of_moto_modules())
        backends.list_of_moto_modules = lambda: modules
    else:
        log.warning("moto changed: its list of services is not cached (requests may be slower)")
    if all(hasattr(LambdaBackend, name) for name in ("create_event_source_mapping", "update_event_source_mapping")):
        LambdaBackend.create_event_source_mapping = off_moto_queues(  # type: ignore[method-assign]
            LambdaBackend.create_event_source_mapping
        )
        LambdaBackend.update_event_source_mapping = updating_as_lambda(  # type: ignore[method-assign]
            LambdaBackend.update_event_source_mapping
        )
        EventSourceMapping.get_configuration = state_as_lambda(  # type: ignore[method-assign]
            EventSourceMapping.get_configuration
        )
    else:
        log.warning("moto changed: its event source mappings' updates apply at once")


# The walks of moto's update validator that read only the text, the names and the table's key, in
# the order moto makes them, ahead of the others (moto_expressions.text_walks_once).
TEXT_ONLY_WALKS = ("ActionCountValidator", "OverlappingPathsValidator", "UpdateHashRangeKeyValidator")


def _apply_text_walks_once() -> None:
    base = getattr(dynamodb_validators, "Validator", None)
    names = TEXT_ONLY_WALKS
    text_only: tuple[type, ...] = tuple(
        getattr(dynamodb_validators, name) for name in names if hasattr(dynamodb_validators, name)
    )
    # The walks' answers are kept by the table's key attributes too (the key check reads them).
    keyed = "table_key_attrs" in Table.__init__.__code__.co_names
    if base is None or len(text_only) < len(names) or not keyed or not {"__init__", "validate"} <= set(vars(base)):
        log.warning("moto changed: its update validator's text-only walks run at every request (writes may be slower)")
        return
    base.__init__ = moto_expressions.keeping_the_source_tree(base.__init__)
    base.validate = moto_expressions.text_walks_once(text_only)(base.validate)


def _apply_update_expression_fixes() -> None:
    if "make" in vars(UpdateExpressionParser):
        make = UpdateExpressionParser.make.__func__  # the class method's function
        parse = moto_expressions.parsing_each_text_once(functools.partial(make, UpdateExpressionParser))
        UpdateExpressionParser.make = staticmethod(parse)
    else:
        log.warning("moto changed: its update expressions are parsed on every request (writes may be slower)")
    if getattr(dynamodb_validators, "deepcopy", None) is copy.deepcopy:
        setattr(dynamodb_validators, "deepcopy", moto_expressions.copied)  # noqa: B010 - the module's copy replaced
    else:
        log.warning("moto changed: its update expressions are deep-copied (writes may be slower)")
    _apply_text_walks_once()
    walks = ("nodes_to_be_processed", "traverse_node_recursively", "process", "pre_processing_of_child")
    if all(hasattr(DepthFirstTraverser, name) for name in walks) and hasattr(Node, "find_clauses"):
        node_types = moto_expressions.node_types_once(DepthFirstTraverser.nodes_to_be_processed)
        DepthFirstTraverser.nodes_to_be_processed = node_types
        DepthFirstTraverser.traverse_node_recursively = moto_expressions.traverse_node_recursively
        Node.find_clauses = moto_expressions.find_clauses
    else:
        log.warning("moto changed: its expression walks ask their node types at each node (writes may be slower)")
