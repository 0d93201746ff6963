"""An in-memory table with DynamoDB's conditional semantics, in the item shapes `wakeup.table` writes.

`MemoryStore` implements `wakeup.table.Store`: the caller, the triggers' users and the sweeper take
it as they take `DynamoStore`, and tests/functional/test_store_contract.py runs one suite of
conditions against both. It keeps the items as `DynamoStore` writes them (same attribute names and
values), so that what each request costs is computed from DynamoDB's own rules
(`wakeup_awsfacts.dynamodb`), and asks its `Io` for the time each request takes and whether DynamoDB's
throughput admits it. The writes the simulation makes are its own; the other requests are
`DynamoStore`'s, made through a client that answers from memory. Both end in `MemoryTable`, the
items and the request cycle (retries, faults, units); `MemoryStore` is what the service asks of it.
"""

import random
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from boto3.dynamodb.types import DYNAMODB_CONTEXT, TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from wakeup.errors import ConflictError
from wakeup.model import Account, CallRecord, Instance, TokenOwner, Trigger
from wakeup.signing import SigningVersions
from wakeup.table import Claim, DynamoStore, Page, Registered, WakeWindow
from wakeup.table.items import (
    account_item,
    account_key,
    account_of,
    call_item,
    dump,
    instance_item,
    instance_key,
    instance_of,
    owner_of,
    pending_shard,
    signing_of,
    token_item,
    token_key,
)
from wakeup.table.mechanics import BATCH_GET_KEYS
from wakeup.table.registrations import registration_stands
from wakeup.times import format_time
from wakeup.tokens import TokenKind
from wakeup_awsfacts.dynamodb import Index, item_size, read_units, write_units

Item = dict[str, Any]
_deserializer = TypeDeserializer()
_serializer = TypeSerializer()
# botocore's standard retry mode, as `wakeup.aws.CLIENT_CONFIG` sets it: three attempts in all.
MAX_ATTEMPTS = 3


def _load_value(value: Any) -> Any:
    """`TypeDeserializer.deserialize`, with its two most common types (a string, a number) read
    without its dispatch: the same values (a number as a `Decimal` in DynamoDB's context)."""
    if len(value) == 1:
        if "S" in value:
            return value["S"]
        if "N" in value:
            return DYNAMODB_CONTEXT.create_decimal(value["N"])
    return _deserializer.deserialize(value)


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
            stored[name] = _load_value(_serializer.serialize(value))
    return stored


class _ConditionFailed(Exception):
    """The write's condition did not hold; the item is left as it was."""


@dataclass
class Metered:
    """What the table was asked and what it consumed (requests that were throttled consume nothing)."""

    requests: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    write_units: float = 0.0
    index_write_units: Counter[str] = field(default_factory=Counter)
    throttled: int = 0


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


class _MemoryClient:
    """The client requests `DynamoStore` makes outside the writes `MemoryStore` has as methods: an
    index's query, reads by key (`BatchGetItem`), the call history's `PutItem`, and a `DeleteItem`;
    any other raises, so a new one is seen at once."""

    def __init__(self, table: "MemoryTable") -> None:
        self._table = table

    def put_item(self, TableName: str, Item: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        item = {name: _load_value(value) for name, value in Item.items()}
        self._table.write(str(item["pk"]), lambda _: item, operation="PutItem")
        return {}

    def delete_item(self, TableName: str, Key: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        self._table.write(str(_deserializer.deserialize(Key["pk"])), lambda _: None, operation="DeleteItem")
        return {}

    def query(self, **request: Any) -> dict[str, Any]:
        return self._table.query(request)

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        ((table, request),) = RequestItems.items()
        pks = [str(_deserializer.deserialize(key["pk"])) for key in request["Keys"]]
        if len(pks) > BATCH_GET_KEYS or len(set(pks)) != len(pks):
            # As DynamoDB: at most 100 keys, none twice (BatchGetItem, DynamoDB API reference).
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "bad keys"}}, "BatchGetItem")
        items = self._table.read_many(pks, consistent=bool(request.get("ConsistentRead", False)))
        return {"Responses": {table: [dump(item) for item in items]}, "UnprocessedKeys": {}}

    def __getattr__(self, name: str) -> Any:
        raise NotImplementedError(f"MemoryStore does not implement the request behind {name}")


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
        values = {k: _deserializer.deserialize(v) for k, v in request["ExpressionAttributeValues"].items()}
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
            after = (str(_deserializer.deserialize(start[range_key])), str(_deserializer.deserialize(start["pk"])))
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
        self,
        pk: str,
        change: Callable[[Item | None], Item | None],
        operation: str = "UpdateItem",
        knows_own_write: bool = False,
    ) -> tuple[Item | None, Item | None]:
        """Applies `change` to the item as one conditional write; returns the item before and after.

        `change` gets a copy of the item (None when absent) and returns the new one (None deletes),
        or raises `_ConditionFailed`, which is raised again once the failed write is metered.

        A write whose reply was lost is sent again, as botocore does: applied again, or refused by
        its own first application. `knows_own_write`: the write is `DynamoStore`'s
        `conditional_update`, which tells its own refusal by the `write_id` it stamped; here, by
        the item being still the one it wrote (a change since by any write counts as another's).
        """
        applied: tuple[Item | None, Item | None] | None = None
        error: Exception | None = None
        for attempt in range(MAX_ATTEMPTS):
            self.io.request(operation)
            error = self.io.fault(operation, attempt)
            if error is not None:
                self.io.backoff(attempt + 1)
                continue
            old = self.items.get(pk)
            failed = False
            try:
                new = change(old.copy() if old is not None else None)
            except _ConditionFailed:
                failed, new = True, old
            # The table's own units: the larger of the item before and after (`table_write_units`).
            old_size = self._size(pk, old)
            new_size = old_size if new is old else (item_size(new) if new is not None else 0)
            units = write_units(max(old_size, new_size))
            index_writes = [] if failed else self._index_writes(old, new)
            if self.io.admit(0, units, index_writes):
                self.metered.requests[f"dynamodb:{operation}"] += 1
                self.metered.write_units += units
                for name, _, index_units in index_writes:
                    self.metered.index_write_units[name] += index_units
                if failed:
                    if knows_own_write and applied is not None and self.items.get(pk) is applied[1]:
                        return applied
                    raise _ConditionFailed
                self._store(pk, old, new)
                if new is None:
                    self._sizes.pop(pk, None)
                else:
                    self._sizes[pk] = (new, new_size)
                error = self.io.reply_lost(operation)
                if error is None:
                    return old, new
                applied = (old, new)
            else:
                self.metered.throttled += 1
            self.io.backoff(attempt + 1)
        raise error or self._throttled(operation)

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


class MemoryStore:
    """The table in memory; every public method behaves as `DynamoStore`'s does against DynamoDB."""

    def __init__(self, indexes: list[Index], io: Io | None = None, rng: random.Random | None = None) -> None:
        self.memory = MemoryTable(indexes, io or Io())
        # `DynamoStore`'s own requests, for those this table does not simulate as methods.
        self._requests = DynamoStore("memory", client=_MemoryClient(self.memory))
        self.rng = rng or random.Random(0)

    # The table's items and meters, which scenarios and reports read (a fault row swaps the table's
    # `Io` itself: `memory.io`).
    @property
    def items(self) -> dict[str, Item]:
        return self.memory.items

    @property
    def metered(self) -> Metered:
        return self.memory.metered

    # The client and the sleep of `DynamoStore`'s requests (a test may swap in a racing client).
    @property
    def table(self) -> str:
        return self._requests.table

    @property
    def client(self) -> Any:
        return self._requests.client

    @client.setter
    def client(self, client: Any) -> None:
        self._requests.client = client

    @property
    def sleep(self) -> Callable[[float], None]:
        return self._requests.sleep

    @sleep.setter
    def sleep(self, sleep: Callable[[float], None]) -> None:
        self._requests.sleep = sleep

    # -- reads ----------------------------------------------------------------------------------

    def owner_of(self, token_hash: str) -> TokenOwner | None:
        item = self.memory.read(token_key(token_hash))
        return owner_of(item) if item is not None else None

    def get_account(self, account_id: str) -> Account | None:
        item = self.memory.read(account_key(account_id))
        return account_of(item) if item else None

    def get_instance(self, instance_id: str) -> Instance | None:
        item = self.memory.read(instance_key(instance_id))
        return instance_of(item) if item else None

    def signing_versions(self, account_id: str) -> SigningVersions | None:
        """As `DynamoStore.signing_versions`: an eventually consistent GetItem of the account (the
        caller reads it for every call it signs)."""
        item = self.memory.read(account_key(account_id), consistent=False)
        return signing_of(item) if item is not None else None

    def all_instances(self, account_id: str) -> list[Instance]:
        return self._requests.all_instances(account_id)

    def list_instances(self, account_id: str, limit: int, cursor: str | None) -> Page:
        return self._requests.list_instances(account_id, limit, cursor)

    def overdue(self, shard: int, before: datetime) -> list[Instance]:
        return self._requests.overdue(shard, before)

    def read_calls(self, instance_id: str, seqs: list[int]) -> list[CallRecord]:
        return self._requests.read_calls(instance_id, seqs)

    def record_call(self, call: CallRecord) -> None:
        """As `DynamoStore.record_call`: one `PutItem` of the call's item. Stored here without its
        typed JSON's round trip (one a wake, a twentieth of a steady scenario's CPU), unless a test
        swapped in a client of its own, which sees the request as `DynamoStore` makes it."""
        if not isinstance(self._requests.client, _MemoryClient):
            self._requests.record_call(call)
            return
        item = _as_stored(call_item(call))
        self.memory.write(str(item["pk"]), lambda _: item, operation="PutItem")

    # -- what a simulation does not do: `DynamoStore`'s requests (most raise NotImplementedError) --

    def rotate_signing(self, account: Account, previous_until: datetime, master: int = 1) -> Account | None:
        return self._requests.rotate_signing(account, previous_until, master)

    def rotate_token(self, account_id: str, token_hash: str, previous_until: datetime) -> Account | None:
        return self._requests.rotate_token(account_id, token_hash, previous_until)

    def revoke_account(self, account_id: str, now: datetime) -> bool:
        return self._requests.revoke_account(account_id, now)

    def delete_instance(self, instance: Instance) -> Instance | None:
        return self._requests.delete_instance(instance)

    def revoke_instance(self, instance_id: str, now: datetime) -> None:
        self._requests.revoke_instance(instance_id, now)

    # -- accounts and instances (what a scenario needs to set up its hosts) ---------------------

    def create_account(self, label: str, token_hash: str, now: datetime, master: int = 1) -> Account:
        account = Account(id=str(uuid.uuid4()), label=label, created_at=now, signing=SigningVersions(1, master=master))
        for item in (account_item(account, token_hash), token_item(token_hash, TokenKind.ACCOUNT, account.id)):
            self.items[item["pk"]] = item
        return account

    def register_instance(
        self, account_id: str, url: str, token_hash: str, now: datetime, max_instances: int | None = None
    ) -> Registered:
        """A new instance for a token never registered (the only case a scenario needs)."""
        if token_key(token_hash) in self.items:
            raise ConflictError()
        instance = Instance(
            id=str(uuid.UUID(int=self.rng.getrandbits(128), version=4)), account_id=account_id, url=url, created_at=now
        )
        for item in (
            token_item(token_hash, TokenKind.INSTANCE, account_id, instance.id),
            instance_item(instance, token_hash),
        ):
            self.items[item["pk"]] = item
        return Registered(instance, created=True)

    # -- wakes ----------------------------------------------------------------------------------

    def register_wake(
        self, instance_id: str, at: datetime, reg: str, window: WakeWindow | None = None
    ) -> Instance | None:
        # `window` (the per-instance rate) is not simulated: the simulation drives wakes, not hosts.
        def change(item: Item | None) -> Item | None:
            if item is None or item.get("revoked_at") is not None:
                raise _ConditionFailed
            for name in ("called_at", "last_error", "claim_until"):
                item.pop(name, None)
            at_text = format_time(at)
            item.update(at=at_text, reg=reg, attempts=0, pending_shard=pending_shard(instance_id), pending_due=at_text)
            return item

        try:
            old, _ = self.memory.write(instance_key(instance_id), change)
        except _ConditionFailed:
            return None
        assert old is not None
        return instance_of(old)

    @staticmethod
    def _registration_stands(item: Item | None, trigger: Trigger) -> Item:
        if item is None or not registration_stands(item, trigger):
            raise _ConditionFailed
        return item

    @staticmethod
    def _no_live_claim(item: Item, now_ms: int) -> None:
        if item.get("claim_until") is not None and not item["claim_until"] < now_ms:
            raise _ConditionFailed

    def claim_if_due(self, trigger: Trigger, now_ms: int, due_by: datetime, lease_ms: int) -> Claim:
        def change(item: Item | None) -> Item | None:
            item = self._registration_stands(item, trigger)
            due = item.get("pending_due")
            if due is None or not due <= format_time(due_by):
                raise _ConditionFailed
            self._no_live_claim(item, now_ms)
            item["claim_until"] = now_ms + lease_ms
            item["history_seq"] = item.get("history_seq", 0) + 1  # numbers the call in the history
            return item

        pk = instance_key(trigger.instance_id)
        try:
            _, new = self.memory.write(pk, change, knows_own_write=True)
        except _ConditionFailed:
            # ReturnValuesOnConditionCheckFailure=ALL_OLD: the item as it was, when there is one.
            current = self.items.get(pk)
            return Claim(claimed=False, instance=instance_of(current) if current is not None else None)
        assert new is not None
        return Claim(claimed=True, instance=instance_of(new))

    def _change_registration(self, trigger: Trigger, update: Callable[[Item], None], now_ms: int | None = None) -> bool:
        def change(item: Item | None) -> Item | None:
            item = self._registration_stands(item, trigger)
            if now_ms is not None:
                self._no_live_claim(item, now_ms)
            update(item)
            return item

        try:
            self.memory.write(instance_key(trigger.instance_id), change, knows_own_write=True)
        except _ConditionFailed:
            return False
        return True

    def record_success(self, trigger: Trigger, called_at: datetime) -> bool:
        def update(item: Item) -> None:
            item.update(called_at=format_time(called_at), attempts=0)
            for name in ("last_error", "claim_until", "pending_shard", "pending_due"):
                item.pop(name, None)

        return self._change_registration(trigger, update)

    def record_failure(self, trigger: Trigger, error: str, next_due: datetime | None) -> bool:
        def update(item: Item) -> None:
            item.update(attempts=trigger.attempt + 1, last_error=error)
            item.pop("claim_until", None)
            if next_due is None:
                item.pop("pending_shard", None)
                item.pop("pending_due", None)
            else:
                item["pending_due"] = format_time(next_due)

        return self._change_registration(trigger, update)

    def postpone(self, trigger: Trigger, due: datetime, now_ms: int) -> bool:
        def update(item: Item) -> None:
            item["pending_due"] = format_time(due)

        return self._change_registration(trigger, update, now_ms)
