"""An in-memory table with DynamoDB's semantics, under `DynamoStore` itself.

`MemoryStore` is `DynamoStore` over a client that answers from memory (`_MemoryClient`): the caller,
the triggers' users and the sweeper run the service's own reads and guarded writes, each the
expression DynamoDB evaluates, here evaluated by `wakeup_sim.expressions`. So a guarded write is
written once, in `wakeup.table`, and tests/functional/test_store_contract.py runs one suite against
both tables, a lost reply on every write included. The items are kept as DynamoDB returns them
(same attribute names and values), so that what each request costs is computed from DynamoDB's own
rules (`wakeup_awsfacts.dynamodb`); `MemoryTable` is the items and the request cycle: each request's
time, faults and admission (its `Io`), its units (`Metered`), and botocore's retries.
"""

import random
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from boto3.dynamodb.types import DYNAMODB_CONTEXT, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from wakeup.deadlines import AWS_REQUEST
from wakeup.model import Account, CallRecord, Instance, TokenOwner
from wakeup.observability import logger
from wakeup.signing import SigningVersions
from wakeup.table import DynamoStore, Registered
from wakeup.table.items import (
    Loaded,
    account_item,
    account_key,
    account_of,
    call_item,
    dump,
    instance_item,
    instance_key,
    instance_of,
    load_value,
    owner_of,
    signing_of,
    token_item,
    token_key,
)
from wakeup.table.mechanics import BATCH_GET_KEYS, BATCH_WRITE_ITEMS
from wakeup.tokens import TokenKind
from wakeup_awsfacts.dynamodb import Index, item_size, read_units, write_units
from wakeup_sim import expressions

Item = dict[str, Any]
_serializer = TypeSerializer()
# botocore's standard retry mode, as `wakeup.aws.CLIENT_CONFIG` sets it: its attempts in all.
MAX_ATTEMPTS = AWS_REQUEST.attempts


def _as_stored(item: Item) -> Item:
    """`item` as DynamoDB gives it back after a `PutItem` of `dump(item)`: the same values as a
    round trip through its typed JSON (a whole number as a `Decimal` in DynamoDB's context, a
    None left out), without the round trip for a string or a whole number."""
    stored: Item = {}
    for name, value in item.items():
        kind = type(value)
        if kind is str:
            stored[name] = value
        elif kind is int:
            stored[name] = DYNAMODB_CONTEXT.create_decimal(value)
        elif value is not None:
            stored[name] = load_value(_serializer.serialize(value))
    return stored


class _ConditionFailed(Exception):
    """The write's condition did not hold on `item` (None: no item), which is left as it was."""

    def __init__(self, item: Item | None = None) -> None:
        super().__init__("the condition failed")
        self.item = item


@dataclass
class Metered:
    """What the table was asked and what it consumed (requests that were throttled consume nothing)."""

    requests: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    write_units: float = 0.0
    index_write_units: Counter[str] = field(default_factory=Counter)
    throttled: int = 0
    # The puts of BatchWriteItem requests (the history's items), each billed as a PutItem.
    batch_puts: int = 0


class Io:
    """How long a request takes and whether DynamoDB admits it: here, at once and always."""

    def request(self, operation: str) -> None:
        """Called before a request reaches the table (the caller's side and the network)."""

    def admit(self, reads: float, writes: int, index_writes: list[tuple[str, Any, int]]) -> bool:
        return True

    def backoff(self, attempt: int) -> None:
        """Waits before attempt `attempt + 1` of a throttled request."""

    def fault(self, operation: str, attempt: int) -> Exception | None:
        """The error attempt `attempt` (0 first) of a request meets before it reaches the table, its
        time waited out (None: it reaches the table). `wakeup_sim.faults` injects them here."""
        return None

    def reply_lost(self, operation: str) -> Exception | None:
        """The error a request that reached the table (and, a write, applied) gets instead of its
        reply, its time waited out (None: the reply arrives)."""
        return None


def _key(key: dict[str, Any]) -> str:
    return str(load_value(key["pk"]))


def _refused(code: str, message: str, operation: str, **extra: Any) -> ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": message}, **extra}
    return ClientError(response, operation)  # type: ignore[arg-type]  # botocore's response, as a dict


def _invalid(error: expressions.ExpressionError, operation: str) -> ClientError:
    return _refused("ValidationException", str(error), operation)


@dataclass(frozen=True)
class _Write:
    """One item's write of a request, as DynamoDB evaluates it: its condition (None: none), then
    its change (an update's expression, or a whole item put, or a delete)."""

    pk: str
    condition: expressions.ParsedCondition | None
    scope: dict[str, Any]
    update: expressions.ParsedUpdate | None = None
    put: Item | None = None
    delete: bool = False
    return_on_refusal: bool = False

    def change(self, item: Item | None) -> Item | None:
        if self.condition is not None and not expressions.holds(self.condition, item, self.scope):
            raise _ConditionFailed(item)
        if self.delete:
            return None
        if self.put is not None:
            return dict(self.put)
        if self.update is None:  # a transaction's ConditionCheck: the item as it is
            return item
        return expressions.apply(self.update, item if item is not None else {"pk": self.pk}, self.scope)


def _write_of(request: dict[str, Any], operation: str) -> _Write:
    """An `UpdateItem`, `PutItem`, `DeleteItem` or `ConditionCheck`'s write, its expressions parsed
    and its names and values checked as DynamoDB checks them."""
    names: dict[str, str] = dict(request.get("ExpressionAttributeNames") or {})
    values = {name: load_value(value) for name, value in (request.get("ExpressionAttributeValues") or {}).items()}
    parsed: list[expressions.Parsed] = []
    condition = update = None
    try:
        if request.get("ConditionExpression"):
            condition = expressions.condition(request["ConditionExpression"])
            parsed.append(condition)
        if request.get("UpdateExpression"):
            update = expressions.update(request["UpdateExpression"])
            parsed.append(update)
        expressions.check_used(names, values, *parsed)
    except expressions.ExpressionError as error:
        raise _invalid(error, operation) from None
    put = {name: load_value(value) for name, value in request["Item"].items()} if "Item" in request else None
    pk = str(put["pk"]) if put is not None else _key(request["Key"])
    return _Write(
        pk,
        condition,
        {**values, **names},
        update,
        put,
        delete=operation in ("DeleteItem", "Delete"),
        return_on_refusal=request.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD",
    )


class _MemoryClient:
    """The DynamoDB client `DynamoStore` makes its requests through: every request it makes,
    answered from `MemoryTable` as DynamoDB answers it, its expressions evaluated
    (`wakeup_sim.expressions`); any other request raises, so a new one is seen at once."""

    def __init__(self, table: "MemoryTable") -> None:
        self._table = table

    def _answer(self, answer: dict[str, Any]) -> dict[str, Any]:
        answer["ResponseMetadata"] = {"RetryAttempts": self._table.retry_attempts}
        return answer

    def _write(self, request: dict[str, Any], operation: str) -> dict[str, Any]:
        write = _write_of(request, operation)
        try:
            old, new = self._table.write(write.pk, write.change, operation=operation)
        except _ConditionFailed as refused:
            extra: dict[str, Any] = {"ResponseMetadata": {"RetryAttempts": self._table.retry_attempts}}
            if write.return_on_refusal and refused.item is not None:
                extra["Item"] = Loaded(refused.item)
            raise _refused(
                "ConditionalCheckFailedException", "The conditional request failed", operation, **extra
            ) from None
        except expressions.ExpressionError as error:
            raise _invalid(error, operation) from None
        returned = request.get("ReturnValues", "NONE")
        if returned not in ("NONE", "ALL_OLD", "ALL_NEW"):
            raise NotImplementedError(f"the simulated table returns no {returned}")
        shown = old if returned == "ALL_OLD" else new if returned == "ALL_NEW" else None
        return self._answer({"Attributes": Loaded(shown)} if shown is not None else {})

    def update_item(self, **request: Any) -> dict[str, Any]:
        return self._write(request, "UpdateItem")

    def put_item(self, **request: Any) -> dict[str, Any]:
        return self._write(request, "PutItem")

    def delete_item(self, **request: Any) -> dict[str, Any]:
        return self._write(request, "DeleteItem")

    def get_item(self, **request: Any) -> dict[str, Any]:
        item = self._table.read(_key(request["Key"]), consistent=bool(request.get("ConsistentRead", False)))
        if item is None:
            return self._answer({})
        projection = request.get("ProjectionExpression")
        if projection is not None:
            names = request.get("ExpressionAttributeNames") or {}
            wanted = {names.get(name.strip(), name.strip()) for name in projection.split(",")}
            item = {name: value for name, value in item.items() if name in wanted}
        return self._answer({"Item": Loaded(item)})

    def transact_write_items(self, TransactItems: list[dict[str, Any]], **request: Any) -> dict[str, Any]:  # noqa: N803
        writes = [_write_of(body, kind) for action in TransactItems for kind, body in action.items()]
        try:
            self._table.transact(writes, request.get("ClientRequestToken"))
        except _TransactionCancelled as cancelled:
            raise _refused(
                "TransactionCanceledException",
                "Transaction cancelled, please refer cancellation reasons for specific reasons",
                "TransactWriteItems",
                CancellationReasons=cancelled.reasons,
            ) from None
        except expressions.ExpressionError as error:
            raise _invalid(error, "TransactWriteItems") from None
        return self._answer({})

    def query(self, **request: Any) -> dict[str, Any]:
        return self._table.query(request)

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        ((table, request),) = RequestItems.items()
        pks = [_key(key) for key in request["Keys"]]
        if len(pks) > BATCH_GET_KEYS or len(set(pks)) != len(pks):
            # As DynamoDB: at most 100 keys, none twice (BatchGetItem, DynamoDB API reference).
            raise _refused("ValidationException", "bad keys", "BatchGetItem")
        items = self._table.read_many(pks, consistent=bool(request.get("ConsistentRead", False)))
        return {"Responses": {table: [Loaded(item) for item in items]}, "UnprocessedKeys": {}}

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        ((_, writes),) = RequestItems.items()
        if any(set(write) != {"PutRequest"} for write in writes):
            raise NotImplementedError("the simulated table's BatchWriteItem only puts")
        items = [{name: load_value(value) for name, value in write["PutRequest"]["Item"].items()} for write in writes]
        pks = [str(item["pk"]) for item in items]
        if not pks or len(pks) > BATCH_WRITE_ITEMS or len(set(pks)) != len(pks):
            # As DynamoDB: 1 to 25 puts, no key twice (BatchWriteItem, DynamoDB API reference).
            raise _refused("ValidationException", "bad puts", "BatchWriteItem")
        self._table.write_many(items)
        return self._answer({"UnprocessedItems": {}})

    def __getattr__(self, name: str) -> Any:
        raise NotImplementedError(f"the simulated table does not implement the request behind {name}")


class _TransactionCancelled(Exception):
    def __init__(self, reasons: list[dict[str, Any]]) -> None:
        super().__init__("cancelled")
        self.reasons = reasons


class MemoryTable:
    """The items, and DynamoDB's request cycle over them: each request's time, faults and admission
    (`Io`), its units (`Metered`), botocore's retries, and the indexes' writes. `MemoryStore`'s
    requests, and those `DynamoStore` makes through `_MemoryClient`, all come here."""

    def __init__(self, indexes: list[Index], io: Io) -> None:
        self.items: dict[str, Item] = {}
        self.indexes = indexes
        self.io = io
        self.metered = Metered()
        # The pending-wakes index, kept for the sweeper's queries: shard -> pk -> due.
        self._pending: dict[str, dict[str, str]] = {}
        # Each stored item's size, with the item it is the size of: a write or a read of an item
        # sizes it once, not again each time it is read or written over (see `_size`).
        self._sizes: dict[str, tuple[Item, int]] = {}
        # The attempts before the one the last request's answer came from (botocore's `RetryAttempts`).
        self.retry_attempts = 0
        # The `ClientRequestToken`s of the transactions applied.
        self._tokens: set[str] = set()

    def _throttled(self, operation: str) -> ClientError:
        return ClientError(
            {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "throttled (simulated)"}},
            operation,
        )

    def _size(self, pk: str, item: Item | None) -> int:
        """`item_size` of `item`, the item stored at `pk` (None: absent, size 0).

        Known once per item: a stored item is never changed in place (every write stores a new
        dict), and the size is kept with the very dict it was computed for, so an item replaced
        by any means, even written into `items` directly, is sized again."""
        if item is None:
            return 0
        known = self._sizes.get(pk)
        if known is not None and known[0] is item:
            return known[1]
        size = item_size(item)
        self._sizes[pk] = (item, size)
        return size

    def read(self, pk: str, operation: str = "GetItem", consistent: bool = True) -> Item | None:
        error: Exception | None = None
        for attempt in range(MAX_ATTEMPTS):
            self.retry_attempts = attempt
            self.io.request(operation)
            error = self.io.fault(operation, attempt)
            if error is None:
                item = self.items.get(pk)
                units = read_units(self._size(pk, item), consistent)
                if self.io.admit(units, 0, []):
                    self.metered.requests[f"dynamodb:{operation}"] += 1
                    self.metered.read_units += units
                    error = self.io.reply_lost(operation)
                    if error is None:
                        return item.copy() if item is not None else None
                else:
                    self.metered.throttled += 1
            self.io.backoff(attempt + 1)
        raise error or self._throttled(operation)

    def read_many(self, pks: list[str], consistent: bool) -> list[Item]:
        """One BatchGetItem: each item costs its own read units, a missing one the least (DynamoDB
        read and write operations); all admitted or the request throttled, never a part."""
        error: Exception | None = None
        for attempt in range(MAX_ATTEMPTS):
            self.io.request("BatchGetItem")
            error = self.io.fault("BatchGetItem", attempt)
            if error is None:
                found = [self.items[pk] for pk in pks if pk in self.items]
                units = sum(read_units(self._size(pk, self.items.get(pk)), consistent) for pk in pks)
                if self.io.admit(units, 0, []):
                    self.metered.requests["dynamodb:BatchGetItem"] += 1
                    self.metered.read_units += units
                    error = self.io.reply_lost("BatchGetItem")
                    if error is None:
                        return [item.copy() for item in found]
                else:
                    self.metered.throttled += 1
            self.io.backoff(attempt + 1)
        raise error or self._throttled("BatchGetItem")

    def query(self, request: dict[str, Any]) -> dict[str, Any]:
        """A Query of an index, as DynamoDB answers it: the entries in the index's order, each with
        only what the index projects (`KEYS_ONLY`: its keys and the table's), at most `Limit`, with
        `LastEvaluatedKey` when the limit stopped it; eventually consistent read units for the
        entries' size. Only the key conditions `DynamoStore` writes are understood."""
        # A failed attempt retried as botocore's standard mode does (its throttling is not simulated).
        for attempt in range(MAX_ATTEMPTS):
            self.io.request("Query")
            error = self.io.fault("Query", attempt) or self.io.reply_lost("Query")
            if error is None:
                return self._answer_query(request)
            if attempt + 1 == MAX_ATTEMPTS:
                raise error
            self.io.backoff(attempt + 1)
        raise AssertionError("unreachable")

    def _answer_query(self, request: dict[str, Any]) -> dict[str, Any]:
        index = next(i for i in self.indexes if i.name == request["IndexName"])
        values = {k: load_value(v) for k, v in request["ExpressionAttributeValues"].items()}
        hash_key, range_key = index.keys
        condition = re.fullmatch(
            rf"{hash_key} = (:\w+)(?: AND {range_key} < (:\w+))?", request["KeyConditionExpression"]
        )
        if condition is None:
            raise NotImplementedError(f"MemoryStore does not query {request['KeyConditionExpression']!r}")
        partition, below = values[condition[1]], values[condition[2]] if condition[2] else None
        if hash_key == "pending_shard":  # the sweeper's index, kept apart for its every-minute queries
            # Its due times kept with it pass over the wakes not yet due without a look at their items.
            pending = self._pending.get(str(partition), {})
            pks: Iterable[str] = (
                pk for pk, due in pending.items() if (below is None or due < below) and pk in self.items
            )
        else:
            pks = (pk for pk, item in self.items.items() if item.get(hash_key) == partition)
        entries = sorted(
            (str(self.items[pk][range_key]), pk)
            for pk in pks
            if index.holds(self.items[pk]) and (below is None or self.items[pk][range_key] < below)
        )
        start = request.get("ExclusiveStartKey")
        if start is not None:
            after = (str(load_value(start[range_key])), str(load_value(start["pk"])))
            entries = [entry for entry in entries if entry > after]
        limit = request.get("Limit")
        page = entries[:limit] if limit is not None else entries
        projected = [index.entry(self.items[pk]) for _, pk in page]
        self.metered.requests["dynamodb:Query"] += 1
        self.metered.read_units += read_units(sum(item_size(entry) for entry in projected), consistent=False)
        answer: dict[str, Any] = {"Items": [dump(entry) for entry in projected], "Count": len(projected)}
        if limit is not None and len(page) == limit and page:
            # The index's keys and the table's (mypyc, sim/build_native.py, cannot compile a starred
            # tuple in a comprehension's condition: `k in (*index.keys, "pk")`).
            answer["LastEvaluatedKey"] = dump({k: v for k, v in projected[-1].items() if k in index.keys or k == "pk"})
        return answer

    def write(
        self, pk: str, change: Callable[[Item | None], Item | None], operation: str = "UpdateItem"
    ) -> tuple[Item | None, Item | None]:
        """Applies `change` to the item as one conditional write; returns the item before and after.

        `change` gets a copy of the item (None when absent) and returns the new one (None deletes),
        or raises `_ConditionFailed`, which is raised again once the failed write is metered.

        A write whose reply was lost is sent again, as botocore does, and evaluated again on the
        item as it is then: applied again, or refused (by its own first application, or by any
        other), exactly as DynamoDB answers botocore's retry. `retry_attempts` then says how many
        attempts came before the one answered, as botocore's `ResponseMetadata` does.
        """
        error: Exception | None = None
        for attempt in range(MAX_ATTEMPTS):
            self.retry_attempts = attempt
            self.io.request(operation)
            error = self.io.fault(operation, attempt)
            if error is not None:
                self.io.backoff(attempt + 1)
                continue
            old = self.items.get(pk)
            refused: _ConditionFailed | None = None
            try:
                new = change(old.copy() if old is not None else None)
            except _ConditionFailed as failed:
                refused, new = failed, old
            # The table's own units: the larger of the item before and after (`table_write_units`).
            old_size = self._size(pk, old)
            new_size = old_size if new is old else (item_size(new) if new is not None else 0)
            units = write_units(max(old_size, new_size))
            index_writes = [] if refused is not None else self._index_writes(old, new)
            if self.io.admit(0, units, index_writes):
                self.metered.requests[f"dynamodb:{operation}"] += 1
                self.metered.write_units += units
                for name, _, index_units in index_writes:
                    self.metered.index_write_units[name] += index_units
                if refused is not None:
                    raise refused
                self._store(pk, old, new)
                if new is None:
                    self._sizes.pop(pk, None)
                else:
                    self._sizes[pk] = (new, new_size)
                error = self.io.reply_lost(operation)
                if error is None:
                    return old, new
            else:
                self.metered.throttled += 1
            self.io.backoff(attempt + 1)
        raise error or self._throttled(operation)

    def write_many(self, items: Sequence[Item]) -> None:
        """One BatchWriteItem of whole items (no condition): each put costs the units its PutItem
        would (DynamoDB read and write operations); all admitted or the request throttled, never a
        part (a part left unprocessed is `wakeup_sim.fault_hooks.UnprocessedBatches`'s)."""
        error: Exception | None = None
        for attempt in range(MAX_ATTEMPTS):
            self.retry_attempts = attempt
            self.io.request("BatchWriteItem")
            error = self.io.fault("BatchWriteItem", attempt)
            if error is not None:
                self.io.backoff(attempt + 1)
                continue
            # Each put's own units: the larger of the item before and after (`table_write_units`).
            units = 0
            index_writes: list[tuple[str, Any, int]] = []
            for item in items:
                pk = str(item["pk"])
                old = self.items.get(pk)
                units += write_units(max(self._size(pk, old), item_size(item)))
                index_writes.extend(self._index_writes(old, item))
            if self.io.admit(0, units, index_writes):
                self.metered.requests["dynamodb:BatchWriteItem"] += 1
                self.metered.batch_puts += len(items)
                self.metered.write_units += units
                for name, _, index_units in index_writes:
                    self.metered.index_write_units[name] += index_units
                for item in items:
                    pk = str(item["pk"])
                    self._store(pk, self.items.get(pk), item)
                    self._sizes.pop(pk, None)
                error = self.io.reply_lost("BatchWriteItem")
                if error is None:
                    return
            else:
                self.metered.throttled += 1
            self.io.backoff(attempt + 1)
        raise error or self._throttled("BatchWriteItem")

    def transact(self, writes: list["_Write"], token: str | None) -> None:
        """One `TransactWriteItems`: every condition checked, then every write applied, or none
        (`_TransactionCancelled`, with each action's reason); two units per item written
        ("Capacity management for transactions", DynamoDB developer guide).

        botocore sends a `ClientRequestToken` with each call, the same on its retries; a token
        already applied is answered with success and applies nothing ("TransactWriteItems", its
        idempotency, DynamoDB API reference). moto does not honour it (the contract suite
        says where that shows); its 10 minutes are longer than any simulated retry."""
        error: Exception | None = None
        for attempt in range(MAX_ATTEMPTS):
            self.retry_attempts = attempt
            self.io.request("TransactWriteItems")
            error = self.io.fault("TransactWriteItems", attempt)
            if error is not None:
                self.io.backoff(attempt + 1)
                continue
            if token is not None and token in self._tokens:
                return
            reasons: list[dict[str, Any]] = []
            made: list[tuple[str, Item | None, Item | None]] = []
            for write in writes:
                old = self.items.get(write.pk)
                try:
                    made.append((write.pk, old, write.change(old.copy() if old is not None else None)))
                    reasons.append({"Code": "None"})
                except _ConditionFailed as failed:
                    reason: dict[str, Any] = {
                        "Code": "ConditionalCheckFailed",
                        "Message": "The conditional request failed",
                    }
                    if write.return_on_refusal and failed.item is not None:
                        reason["Item"] = Loaded(failed.item)
                    reasons.append(reason)
            units = 2 * sum(
                write_units(max(self._size(pk, old), item_size(new) if new is not None else 0)) for pk, old, new in made
            )
            index_writes = [w for pk, old, new in made for w in self._index_writes(old, new)]
            if not self.io.admit(0, units, index_writes):
                self.metered.throttled += 1
                self.io.backoff(attempt + 1)
                continue
            self.metered.requests["dynamodb:TransactWriteItems"] += 1
            self.metered.write_units += units
            if len(made) < len(writes):
                raise _TransactionCancelled(reasons)
            for name, _, index_units in index_writes:
                self.metered.index_write_units[name] += index_units
            for pk, old, new in made:
                self._store(pk, old, new)
                self._sizes.pop(pk, None)
            if token is not None:
                self._tokens.add(token)
            error = self.io.reply_lost("TransactWriteItems")
            if error is None:
                return
            self.io.backoff(attempt + 1)
        raise error or self._throttled("TransactWriteItems")

    def _index_writes(self, old: Item | None, new: Item | None) -> list[tuple[str, Any, int]]:
        writes = []
        for index in self.indexes:
            units = index.write_units(old, new)
            if units:
                holder = new if new is not None and index.holds(new) else (old or {})
                key = holder.get(index.keys[0])
                writes.append((index.name, key, units))
        return writes

    def _store(self, pk: str, old: Item | None, new: Item | None) -> None:
        if old is not None and old.get("pending_shard") is not None:
            self._pending.get(str(old["pending_shard"]), {}).pop(pk, None)
        if new is None:
            self.items.pop(pk, None)
            return
        self.items[pk] = new
        if new.get("pending_shard") is not None and new.get("pending_due") is not None:
            self._pending.setdefault(str(new["pending_shard"]), {})[pk] = new["pending_due"]


class MemoryStore(DynamoStore):
    """`DynamoStore` itself, over a client that answers from memory (`_MemoryClient`): every read
    and guarded write is `DynamoStore`'s own request, its expressions evaluated as DynamoDB does.

    What it does apart: a scenario's setup (`create_account`, `register_instance`: items written as
    `DynamoStore` writes them, unmetered, with ids from the world's random numbers), and the reads
    and the history's `BatchWriteItem` that the simulation makes millions of (whole items by key, no
    condition), which skip the typed JSON's round trip unless a test swapped in a client of its
    own; `tests/functional/test_store_contract.py` holds them to `DynamoStore`'s answers."""

    def __init__(self, indexes: list[Index], io: Io | None = None, rng: random.Random | None = None) -> None:
        self.memory = MemoryTable(indexes, io or Io())
        super().__init__("memory", client=_MemoryClient(self.memory))
        self.rng = rng or random.Random(0)

    # The table's items and meters, which scenarios and reports read (a fault row swaps the table's
    # `Io` itself: `memory.io`).
    @property
    def items(self) -> dict[str, Item]:
        return self.memory.items

    @property
    def metered(self) -> Metered:
        return self.memory.metered

    def _own_client(self) -> bool:
        return isinstance(self.client, _MemoryClient)

    # -- reads by key, as `DynamoStore` makes them, without the typed JSON -------------------------

    def owner_of(self, token_hash: str) -> TokenOwner | None:
        if not self._own_client():
            return super().owner_of(token_hash)
        item = self.memory.read(token_key(token_hash))
        return owner_of(item) if item is not None else None

    def get_account(self, account_id: str) -> Account | None:
        if not self._own_client():
            return super().get_account(account_id)
        item = self.memory.read(account_key(account_id))
        return account_of(item) if item else None

    def get_instance(self, instance_id: str) -> Instance | None:
        if not self._own_client():
            return super().get_instance(instance_id)
        item = self.memory.read(instance_key(instance_id))
        return instance_of(item) if item else None

    def signing_versions(self, account_id: str) -> SigningVersions | None:
        """An eventually consistent GetItem of the account (the caller reads it for every call it signs)."""
        if not self._own_client():
            return super().signing_versions(account_id)
        item = self.memory.read(account_key(account_id), consistent=False)
        return signing_of(item) if item is not None else None

    def record_calls(self, calls: Sequence[CallRecord], may_wait: Callable[[float], bool]) -> list[CallRecord]:
        """The calls' items (one a wake), a `BatchWriteItem` for up to 25, without the typed JSON's
        round trip; as `DynamoStore`, a request that fails leaves its calls unwritten, returned. The
        table's own client leaves nothing unprocessed, so there is nothing to send again."""
        if not self._own_client():
            return super().record_calls(calls, may_wait)
        unwritten: list[CallRecord] = []
        for start in range(0, len(calls), BATCH_WRITE_ITEMS):
            batch = calls[start : start + BATCH_WRITE_ITEMS]
            try:
                self.memory.write_many([_as_stored(call_item(call)) for call in batch])
            except (ClientError, BotoCoreError) as exc:
                logger.warning("batch write failed", items=len(batch), error=str(exc))
                unwritten.extend(batch)
        return unwritten

    # -- a scenario's setup --------------------------------------------------------------------

    def create_account(self, label: str, token_hash: str, now: datetime, master: int = 1) -> Account:
        account = Account(id=str(uuid.uuid4()), label=label, created_at=now, signing=SigningVersions(1, master=master))
        for item in (account_item(account, token_hash), token_item(token_hash, TokenKind.ACCOUNT, account.id)):
            self.items[item["pk"]] = _as_stored(item)
        return account

    def register_instance(
        self, account_id: str, url: str, token_hash: str, now: datetime, max_instances: int | None = None
    ) -> Registered:
        """A new instance for a token never registered, written as a scenario's setup; a token
        registered before goes through `DynamoStore.register_instance` itself (kept, moved to a new
        URL, or another account's), as the instance routes' races of the fault matrix ask."""
        if token_key(token_hash) in self.items:
            return super().register_instance(account_id, url, token_hash, now, max_instances)
        instance = Instance(
            id=str(uuid.UUID(int=self.rng.getrandbits(128), version=4)), account_id=account_id, url=url, created_at=now
        )
        for item in (
            token_item(token_hash, TokenKind.INSTANCE, account_id, instance.id),
            instance_item(instance, token_hash),
        ):
            self.items[item["pk"]] = _as_stored(item)
        account = self.items.get(account_key(account_id))
        if account is not None:  # its count, as `DynamoStore.register_instance` keeps it
            self.items[account_key(account_id)] = {**account, "instance_count": account.get("instance_count", 0) + 1}
        return Registered(instance, created=True)
