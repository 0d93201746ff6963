"""The DynamoDB table: every read and write of accounts, tokens and instances.

Item shapes (key `pk`) are described in docs/architecture.md. Conditional writes keep the rules
that concurrent requests could otherwise break: a token names one instance, only the newest
registration records an outcome, only one call holds a claim.
"""

import base64
import binascii
import json
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from wakeup import aws
from wakeup.decoding import decode_object
from wakeup.errors import (
    BadRequestError,
    ConflictError,
    ForbiddenError,
    TooManyRequestsError,
    UnauthorizedError,
    UnavailableError,
)
from wakeup.model import Account, Instance, TokenOwner, Trigger
from wakeup.signing import SigningVersions
from wakeup.times import format_time, parse_stored
from wakeup.tokens import TokenKind

# Shards of the pending-wakes index. A partition takes at most 1,000 write units a second
# ("Understanding DynamoDB warm throughput in different scenarios", uneven access patterns), and
# each outcome of a burst deletes its wake's entry. In the simulator (docs/scaling.md), 100,000 near
# wakes at one second throttle on 16 shards (p99 5.2 s, 201 wakes called twice) and on neither 32
# nor 64 (p99 3.2 s); 64 keeps that margin twice over, for a burst delivered faster or failures' new
# due times (a delete and a put each), at the cost of the sweeper's 64 small queries a minute.
# Raising it is safe (an entry keeps the shard it was written with, and the sweeper queries every
# shard below the new count); lowering it would hide the higher shards' wakes from the sweeper.
PENDING_SHARDS = 64
ACCOUNTS_LIST = "ACCOUNTS"
BY_ACCOUNT = "ByAccount"
PENDING_WAKES = "PendingWakes"
# BatchGetItem's most keys a request; how often its unprocessed keys are asked for, and the longest
# wait between two asks.
BATCH_GET_KEYS = 100
_UNPROCESSED_ATTEMPTS = 8
_UNPROCESSED_BACKOFF_CAP_S = 2.0

# What a registration is made of; a move or a new registration clears all of it.
_REGISTRATION_FIELDS = ("#at", "reg", "called_at", "last_error", "claim_until", "pending_shard", "pending_due")

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

Item = dict[str, Any]


def _token_key(token_hash: str) -> str:
    return f"TOKEN#{token_hash}"


def _account_key(account_id: str) -> str:
    return f"ACCOUNT#{account_id}"


def _instance_key(instance_id: str) -> str:
    return f"INSTANCE#{instance_id}"


def pending_shard(instance_id: str) -> str:
    """The shard of the pending-wakes index an instance's wake goes in, spread by its id."""
    return str(uuid.UUID(instance_id).int % PENDING_SHARDS)


def is_id(value: str) -> bool:
    """Whether `value` is an id this service could have made (a UUID in its usual form)."""
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def _dump(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in item.items() if v is not None}


def _load(item: Mapping[str, Any]) -> Item:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def _time(value: Any) -> datetime | None:
    return parse_stored(str(value)) if value is not None else None


def _signing(item: Item) -> SigningVersions:
    previous = item.get("signing_previous")
    return SigningVersions(
        current=int(item.get("signing_version", 1)),
        previous=int(previous) if previous is not None else None,
        previous_until=_time(item.get("signing_previous_until")),
    )


def _account(item: Item) -> Account:
    return Account(
        id=item["id"],
        label=item["label"],
        created_at=parse_stored(item["created_at"]),
        revoked_at=_time(item.get("revoked_at")),
        signing=_signing(item),
        instance_count=int(item.get("instance_count", 0)),
        max_instances=int(item["max_instances"]) if "max_instances" in item else None,
    )


def _instance(item: Item) -> Instance:
    claim = item.get("claim_until")
    return Instance(
        id=item["id"],
        account_id=item["account_id"],
        url=item["url"],
        created_at=parse_stored(item["created_at"]),
        at=_time(item.get("at")),
        reg=item.get("reg"),
        called_at=_time(item.get("called_at")),
        attempts=int(item.get("attempts", 0)),
        last_error=item.get("last_error"),
        due=_time(item.get("pending_due")),
        claim_until=int(claim) if claim is not None else None,
        revoked_at=_time(item.get("revoked_at")),
        history_seq=int(item.get("history_seq", 0)),
    )


def _refused_item(exc: ClientError) -> Item | None:
    """The item as it stood when a write's condition refused it (asked for with
    `ReturnValuesOnConditionCheckFailure`); any other error is raised again."""
    if not _condition_failed(exc):
        raise exc
    item = exc.response.get("Item")
    return _load(item) if isinstance(item, dict) else None


def _condition_failed(exc: ClientError) -> bool:
    return aws.error_code(exc) == "ConditionalCheckFailedException"


def _cancelled_for_condition(exc: ClientError) -> list[bool]:
    """For a cancelled transaction, which of its actions failed their condition."""
    reasons = exc.response.get("CancellationReasons", [])
    return [r.get("Code") == "ConditionalCheckFailed" for r in reasons]


@dataclass(frozen=True)
class Registered:
    """The outcome of registering an instance token: the instance, and what happened to it."""

    instance: Instance
    created: bool
    # The instance as it was before a move to a new URL, so its pending trigger can be removed.
    moved_from: Instance | None = None


@dataclass(frozen=True)
class ClaimAttempt:
    """What `Store.claim_if_due` came to: whether the claim was taken, and the instance it saw."""

    claimed: bool
    instance: Instance | None


@dataclass(frozen=True)
class WakeLimit:
    """At most `count` wakes registered per instance in each window of `window_s` seconds."""

    count: int
    window_s: int


# An account below its limit: its own (`max_instances`, set by the operator) or the default.
_BELOW_INSTANCE_LIMIT = (
    "(attribute_not_exists(instance_count)"
    " OR (attribute_exists(max_instances) AND instance_count < max_instances)"
    " OR (attribute_not_exists(max_instances) AND instance_count < :default_max))"
)
# How often a registration is tried again when DynamoDB cancels it for a concurrent transaction on
# the same account item (its count), as DynamoDB advises for TransactionConflict.
_CONFLICT_ATTEMPTS = 8


@dataclass(frozen=True)
class Written:
    """What a conditional write came to: applied or not, and the item as it is now (None: gone)."""

    applied: bool
    item: Item | None


@dataclass(frozen=True)
class Page:
    instances: list[Instance]
    next_cursor: str | None


class Store:
    """The table, through one DynamoDB client (given, or made from the environment)."""

    def __init__(self, table: str, client: Any = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.table = table
        self.client = client or aws.client("dynamodb")
        self.sleep = sleep

    # -- reads -------------------------------------------------------------------------------

    def _get(self, pk: str) -> Item | None:
        found = self.client.get_item(TableName=self.table, Key=_dump({"pk": pk}), ConsistentRead=True)
        return _load(found["Item"]) if "Item" in found else None

    def owner_of(self, token_hash: str) -> TokenOwner | None:
        """Whom the token with this hash names, by one consistent read; None for no one."""
        item = self._get(_token_key(token_hash))
        if item is None:
            return None
        return TokenOwner(TokenKind(item["kind"]), item["account_id"], item.get("instance_id"))

    def get_account(self, account_id: str) -> Account | None:
        item = self._get(_account_key(account_id))
        return _account(item) if item else None

    def get_instance(self, instance_id: str) -> Instance | None:
        item = self._get(_instance_key(instance_id))
        return _instance(item) if item else None

    def signing_versions(self, account_id: str) -> SigningVersions | None:
        """The account's signing versions, by an eventually consistent read (half a read unit):
        a rotation keeps the old version signing for its overlap, so a read a moment stale is
        still right. None when there is no such account."""
        found = self.client.get_item(
            TableName=self.table,
            Key=_dump({"pk": _account_key(account_id)}),
            ProjectionExpression="signing_version, signing_previous, signing_previous_until",
        )
        return _signing(_load(found["Item"])) if "Item" in found else None

    # Both indexes project keys only (template.yaml: `KEYS_ONLY`, "Projection" in the DynamoDB API
    # reference: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Projection.html),
    # so that a claim or an outcome, which change no index key, costs no index write. A query of
    # an index therefore returns keys (`pk` and the index's own), and the items are read by key.
    def _query_keys(self, **kwargs: Any) -> Iterator[Item]:
        """The index entries a query finds, page after page (DynamoDB stops a page at 1 MB)."""
        while True:
            page = self.client.query(TableName=self.table, **kwargs)
            yield from (_load(entry) for entry in page["Items"])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def read_items(self, pks: Sequence[str], consistent: bool = False) -> list[Item]:
        """The items with these keys, in the order given; a key whose item is gone is left out.

        BatchGetItem reads at most 100 keys a request, and may answer part of them, the rest in
        `UnprocessedKeys` (throttling, its 16 MB reply, an internal failure), which DynamoDB advises
        asking for again with exponential backoff ("BatchGetItem", DynamoDB API reference:
        https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html).
        """
        found: dict[str, Item] = {}
        unique = list(dict.fromkeys(pks))  # BatchGetItem refuses a key asked for twice
        for start in range(0, len(unique), BATCH_GET_KEYS):
            keys = [_dump({"pk": pk}) for pk in unique[start : start + BATCH_GET_KEYS]]
            request: dict[str, Any] = {self.table: {"Keys": keys, "ConsistentRead": consistent}}
            for attempt in range(_UNPROCESSED_ATTEMPTS):
                if attempt:
                    self.sleep(random.uniform(0, min(_UNPROCESSED_BACKOFF_CAP_S, 0.05 * 2**attempt)))
                answer = self.client.batch_get_item(RequestItems=request)
                for item in answer.get("Responses", {}).get(self.table, []):
                    loaded = _load(item)
                    found[loaded["pk"]] = loaded
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
            else:
                raise UnavailableError("the table is too busy to read this now; retry the request")
        return [found[pk] for pk in pks if pk in found]

    def _listed(self, list_pk: str) -> list[Item]:
        """Every item the `ByAccount` index lists under `list_pk`, in its order (by `list_sk`)."""
        entries = self._query_keys(
            IndexName=BY_ACCOUNT,
            KeyConditionExpression="list_pk = :p",
            ExpressionAttributeValues=_dump({":p": list_pk}),
        )
        return [item for item in self.read_items([e["pk"] for e in entries]) if item.get("list_pk") == list_pk]

    def list_accounts(self) -> list[Account]:
        return [_account(item) for item in self._listed(ACCOUNTS_LIST)]

    def all_instances(self, account_id: str) -> list[Instance]:
        return [_instance(item) for item in self._listed(_account_key(account_id))]

    def list_instances(self, account_id: str, limit: int, cursor: str | None) -> Page:
        """One page of an account's instances, oldest first; `cursor` is a previous page's next.

        One entry more than the page is queried, so the last page says so (`next` None) instead of
        sending the caller for an empty one. The page's items are then read by key: one deleted
        meanwhile is left out (the page is one shorter), and the cursor is the index entry's key,
        so the next page starts after it all the same.
        """
        list_pk = _account_key(account_id)
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": BY_ACCOUNT,
            "KeyConditionExpression": "list_pk = :p",
            "ExpressionAttributeValues": _dump({":p": list_pk}),
            "Limit": limit + 1,
        }
        if cursor:
            kwargs["ExclusiveStartKey"] = _dump(_decode_cursor(cursor, list_pk))
        found = self.client.query(**kwargs)
        entries = [_load(entry) for entry in found["Items"]]
        last: Item | None = None
        if len(entries) > limit:
            entries = entries[:limit]
            last = {key: entries[-1][key] for key in ("pk", "list_pk", "list_sk")}
        elif "LastEvaluatedKey" in found:  # DynamoDB stopped early (its 1 MB page)
            last = _load(found["LastEvaluatedKey"])
        items = self.read_items([entry["pk"] for entry in entries])
        return Page([_instance(item) for item in items], _encode_cursor(last) if last else None)

    def overdue(self, shard: int, before: datetime) -> list[Instance]:
        """Instances in one shard of the pending-wakes index whose next call was due before `before`.

        The items are read by key after the query, eventually consistent (half a read unit): the
        sweeper's re-arm is a conditional write that loses to any change it did not see. One no
        longer overdue by then (called, moved on, gone) is left out.
        """
        limit = format_time(before)
        entries = self._query_keys(
            IndexName=PENDING_WAKES,
            KeyConditionExpression="pending_shard = :s AND pending_due < :t",
            ExpressionAttributeValues=_dump({":s": str(shard), ":t": limit}),
        )
        items = self.read_items([entry["pk"] for entry in entries])
        return [
            _instance(item)
            for item in items
            if item.get("pending_shard") == str(shard) and str(item.get("pending_due", limit)) < limit
        ]

    # -- accounts ----------------------------------------------------------------------------

    def create_account(self, label: str, token_hash: str, now: datetime) -> Account:
        account = Account(id=str(uuid.uuid4()), label=label, created_at=now)
        created = format_time(now)
        self.client.transact_write_items(
            TransactItems=[
                self._put_new(
                    {
                        "pk": _account_key(account.id),
                        "type": "account",
                        "id": account.id,
                        "label": label,
                        "created_at": created,
                        "token_hash": token_hash,
                        "signing_version": account.signing.current,
                        "instance_count": 0,
                        "list_pk": ACCOUNTS_LIST,
                        "list_sk": f"{created}#{account.id}",
                    }
                ),
                self._put_new(
                    {
                        "pk": _token_key(token_hash),
                        "type": "token",
                        "kind": TokenKind.ACCOUNT.value,
                        "account_id": account.id,
                    }
                ),
            ]
        )
        return account

    def rotate_signing(self, account: Account, previous_until: datetime) -> Account | None:
        """A new signing version for the account; the one it replaces keeps signing until
        `previous_until`. None when the account changed meanwhile (another rotation, a revocation)."""
        current = account.signing.current
        unchanged = "signing_version = :current"
        if current == 1:  # an account made before signing existed has no version yet: it is 1
            unchanged = f"({unchanged} OR attribute_not_exists(signing_version))"
        return self._update_account(
            account.id,
            UpdateExpression=(
                "SET signing_version = :next, signing_previous = :current, signing_previous_until = :until"
            ),
            ConditionExpression=f"attribute_exists(pk) AND attribute_not_exists(revoked_at) AND {unchanged}",
            ExpressionAttributeValues=_dump(
                {":next": current + 1, ":current": current, ":until": format_time(previous_until)}
            ),
        )

    def set_account_limit(self, account_id: str, max_instances: int | None) -> Account | None:
        """Sets the account's own limit of instances (None: the service's default again); None
        when there is no such account. Instances it holds beyond a lower limit stay."""
        update = "SET max_instances = :max" if max_instances is not None else "REMOVE max_instances"
        kwargs: dict[str, Any] = {}
        if max_instances is not None:
            kwargs["ExpressionAttributeValues"] = _dump({":max": max_instances})
        return self._update_account(
            account_id, UpdateExpression=update, ConditionExpression="attribute_exists(pk)", **kwargs
        )

    def _update_account(self, account_id: str, **update: Any) -> Account | None:
        """The account as one conditional update leaves it; None when its condition failed."""
        try:
            found = self.client.update_item(
                TableName=self.table, Key=_dump({"pk": _account_key(account_id)}), ReturnValues="ALL_NEW", **update
            )
        except ClientError as exc:
            if _condition_failed(exc):
                return None
            raise
        return _account(_load(found["Attributes"]))

    def revoke_account(self, account_id: str, now: datetime) -> Account | None:
        """Revokes the account and its instances' tokens; None when there is no such account.

        The account's token goes first, so no new instance can be registered meanwhile; each
        instance then loses its token and its pending wake, which no trigger will call.
        """
        item = self._get(_account_key(account_id))
        if item is None:
            return None
        if "revoked_at" not in item:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": _dump({"pk": _account_key(account_id)}),
                            "UpdateExpression": "SET revoked_at = :now",
                            "ExpressionAttributeValues": _dump({":now": format_time(now)}),
                        }
                    },
                    {"Delete": {"TableName": self.table, "Key": _dump({"pk": _token_key(item["token_hash"])})}},
                ]
            )
        for instance in self.all_instances(account_id):
            self._revoke_instance(instance.id, now)
        return self.get_account(account_id)

    def _revoke_instance(self, instance_id: str, now: datetime) -> None:
        item = self._get(_instance_key(instance_id))
        if item is None:
            return
        self.client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": _dump({"pk": _instance_key(instance_id)}),
                        "UpdateExpression": "SET revoked_at = :now REMOVE reg, claim_until, pending_shard, pending_due",
                        "ExpressionAttributeValues": _dump({":now": format_time(now)}),
                    }
                },
                {"Delete": {"TableName": self.table, "Key": _dump({"pk": _token_key(item["token_hash"])})}},
            ]
        )

    # -- instances ---------------------------------------------------------------------------

    def _put_new(self, item: Item) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.table,
                "Item": _dump(item),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def register_instance(
        self, account_id: str, url: str, token_hash: str, now: datetime, max_instances: int | None = None
    ) -> Registered:
        """The instance the token names for this account, created, kept, or moved to `url`.

        Raises `ConflictError` when another account registered the token, `ForbiddenError` when
        the account holds as many instances as it may (its own limit, else `max_instances`; None:
        no limit). Two registrations of one new token at the same moment make one instance: the
        loser's transaction fails on the token's condition, and it reads what the winner wrote.
        The account's count of instances is kept in the same transaction, so concurrent
        registrations never pass the limit.
        """
        for _ in range(_CONFLICT_ATTEMPTS):
            owner = self.owner_of(token_hash)
            if owner is not None:
                return self._reregister(owner, account_id, url, token_hash)
            instance = Instance(id=str(uuid.uuid4()), account_id=account_id, url=url, created_at=now)
            created = format_time(now)
            try:
                self.client.transact_write_items(
                    TransactItems=[
                        self._put_new(
                            {
                                "pk": _token_key(token_hash),
                                "type": "token",
                                "kind": TokenKind.INSTANCE.value,
                                "account_id": account_id,
                                "instance_id": instance.id,
                            }
                        ),
                        self._put_new(
                            {
                                "pk": _instance_key(instance.id),
                                "type": "instance",
                                "id": instance.id,
                                "account_id": account_id,
                                "url": url,
                                "token_hash": token_hash,
                                "created_at": created,
                                "attempts": 0,
                                "list_pk": _account_key(account_id),
                                "list_sk": f"{created}#{instance.id}",
                            }
                        ),
                        # A revoked account registers nothing, even with a request already under
                        # way; nor does one at its limit. Its count goes up with the instance.
                        {
                            "Update": {
                                "TableName": self.table,
                                "Key": _dump({"pk": _account_key(account_id)}),
                                "UpdateExpression": "SET instance_count = if_not_exists(instance_count, :zero) + :one",
                                "ConditionExpression": (
                                    "attribute_exists(pk) AND attribute_not_exists(revoked_at) AND "
                                    + _BELOW_INSTANCE_LIMIT
                                ),
                                "ExpressionAttributeValues": _dump(
                                    {":zero": 0, ":one": 1, ":default_max": max_instances or 2**53}
                                ),
                                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                            }
                        },
                    ]
                )
            except ClientError as exc:
                if aws.error_code(exc) != "TransactionCanceledException":
                    raise
                reasons = (exc.response.get("CancellationReasons", []) + [{}] * 3)[:3]
                token_taken, _, account_refused = (r.get("Code") == "ConditionalCheckFailed" for r in reasons)
                if account_refused:
                    raise _account_refusal(reasons[2].get("Item"), max_instances) from exc
                if token_taken or any(r.get("Code") == "TransactionConflict" for r in reasons):
                    # The token was registered meanwhile (read it), or another registration of this
                    # account was in the same moment (DynamoDB cancelled this one): try again.
                    time.sleep(random.uniform(0.01, 0.05))
                    continue
                raise
            return Registered(instance, created=True)
        raise ConflictError() if self.owner_of(token_hash) is not None else UnavailableError()

    def _reregister(self, owner: TokenOwner, account_id: str, url: str, token_hash: str) -> Registered:
        if owner.kind is not TokenKind.INSTANCE or owner.account_id != account_id or owner.instance_id is None:
            raise ConflictError()
        current = self.get_instance(owner.instance_id)
        if current is None:  # deleted between the two reads: the token is free again
            raise UnavailableError("this instance token was being deleted; retry the request")
        if current.url == url:
            return Registered(current, created=False)
        try:
            found = self.client.update_item(
                TableName=self.table,
                Key=_dump({"pk": _instance_key(current.id)}),
                UpdateExpression="SET #url = :url, attempts = :zero REMOVE " + ", ".join(_REGISTRATION_FIELDS),
                ConditionExpression="attribute_exists(pk) AND token_hash = :h",
                ExpressionAttributeNames={"#url": "url", "#at": "at"},
                ExpressionAttributeValues=_dump({":url": url, ":zero": 0, ":h": token_hash}),
                ReturnValues="ALL_OLD",
            )
        except ClientError as exc:
            if _condition_failed(exc):
                raise UnavailableError("this instance token was being deleted; retry the request") from exc
            raise
        moved = Instance(id=current.id, account_id=account_id, url=url, created_at=current.created_at)
        return Registered(moved, created=False, moved_from=_instance(_load(found["Attributes"])))

    def delete_instance(self, instance: Instance) -> Instance | None:
        """Removes the instance and frees its token; returns it as it was, None when already gone."""
        item = self._get(_instance_key(instance.id))
        if item is None:
            return None
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self.table,
                            "Key": _dump({"pk": _instance_key(instance.id)}),
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                    {"Delete": {"TableName": self.table, "Key": _dump({"pk": _token_key(item["token_hash"])})}},
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": _dump({"pk": _account_key(item["account_id"])}),
                            "UpdateExpression": "SET instance_count = if_not_exists(instance_count, :one) - :one",
                            "ConditionExpression": "attribute_exists(pk)",
                            "ExpressionAttributeValues": _dump({":one": 1}),
                        }
                    },
                ]
            )
        except ClientError as exc:
            if aws.error_code(exc) == "TransactionCanceledException":
                return None
            raise
        return _instance(item)

    # -- wakes -------------------------------------------------------------------------------

    def register_wake(
        self, instance_id: str, at: datetime, reg: str, limit: WakeLimit | None = None, now: datetime | None = None
    ) -> Instance | None:
        """Replaces the instance's registration by a new one at `at`; returns the one it replaced.

        None when the instance is gone or revoked (its token no longer counts). With `limit`, at
        most `limit.count` registrations per window of `limit.window_s` (windows counted from the
        epoch, at `now`), refused past it with `TooManyRequestsError`: the limit is a condition of
        the registration's own write. The first wake of a window starts the window's count in that
        one write (a host that wakes now and then makes no other); a further one in the same window
        sees its count in the refusal (`ReturnValuesOnConditionCheckFailure`) and counts itself in a
        second conditional write.
        """
        # Every registration enters the pending-wakes index (one write unit, and one more when its
        # outcome deletes the entry), a near one armed through SQS too: it is written before its
        # trigger is armed, so a function that dies in between, or a message that ends in the
        # dead-letter queue, leaves a wake that only the sweeper, through this entry, finds again.
        update = "SET #at = :at, reg = :reg, attempts = :zero, pending_shard = :shard, pending_due = :at"
        condition = "attribute_exists(pk) AND attribute_not_exists(revoked_at)"
        values: Item = {":at": format_time(at), ":reg": reg, ":zero": 0, ":shard": pending_shard(instance_id)}
        window: int | None = None
        if limit is not None:
            moment = (now or at).timestamp()
            window = int(moment // limit.window_s) * limit.window_s
            values.update({":window": window, ":one": 1})
        starts_window = True
        for _ in range(3):
            counted, extra = "", {}
            if window is not None and starts_window:
                update_expression = f"{update}, wake_window = :window, wake_count = :one"
                counted = " AND (attribute_not_exists(wake_window) OR wake_window < :window)"
            elif window is not None and limit is not None:
                update_expression = f"{update}, wake_count = wake_count + :one"
                counted = " AND wake_window = :window AND wake_count < :limit"
                extra = {":limit": limit.count}
            else:
                update_expression = update
            try:
                found = self.client.update_item(
                    TableName=self.table,
                    Key=_dump({"pk": _instance_key(instance_id)}),
                    UpdateExpression=update_expression + " REMOVE called_at, last_error, claim_until",
                    ConditionExpression=condition + counted,
                    ExpressionAttributeNames={"#at": "at"},
                    ExpressionAttributeValues=_dump({**values, **extra}),
                    ReturnValues="ALL_OLD",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as exc:
                current = _refused_item(exc)
                if current is None or "revoked_at" in current or limit is None or window is None:
                    return None
                if int(current.get("wake_window", -1)) >= window:
                    # This window (or a later one, by a clock a little ahead) is under way.
                    window = int(current["wake_window"])
                    values[":window"] = window
                    if int(current.get("wake_count", 0)) >= limit.count:
                        raise TooManyRequestsError(
                            f"this instance registered {limit.count} wakes in {limit.window_s} s, as many as"
                            f" the service allows; retry in {max(window + limit.window_s - int(moment), 1)} s"
                        ) from exc
                    starts_window = False
                else:
                    starts_window = True
                continue
            return _instance(_load(found["Attributes"]))
        raise UnavailableError("the wake could not be registered for writes racing it; retry the request")

    def _conditional_update(self, instance_id: str, update: str, condition: str, values: Item) -> "Written":
        """Applies `update` (a `SET ...`, then maybe `REMOVE ...`) to the instance if `condition` holds.

        botocore retries a request whose reply was lost (a timeout, a 5xx, a dropped connection),
        and a write that was applied before its reply was lost then fails its own condition on
        the retry. So each write also stamps a fresh `write_id`, and a refusal whose item carries
        this write's id is this write, applied: it counts as done. DynamoDB returns the item with
        the refusal when asked (`ReturnValuesOnConditionCheckFailure`, in UpdateItem's API
        reference: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html).
        """
        write_id = uuid.uuid4().hex
        sets, removes = update.partition(" REMOVE ")[::2]
        try:
            found = self.client.update_item(
                TableName=self.table,
                Key=_dump({"pk": _instance_key(instance_id)}),
                UpdateExpression=f"{sets}, write_id = :write_id" + (f" REMOVE {removes}" if removes else ""),
                ConditionExpression=condition,
                ExpressionAttributeValues=_dump({**values, ":write_id": write_id}),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            current = _refused_item(exc)
            # This very write, applied before its reply was lost, or someone else's first.
            applied = current is not None and current.get("write_id") == write_id
            return Written(applied=applied, item=current)
        return Written(applied=True, item=_load(found["Attributes"]))

    def _update_registration(self, trigger: Trigger, update: str, values: Item, extra: str = "") -> bool:
        """Applies `update` only while the trigger's registration and attempt still stand."""
        condition = "reg = :reg AND attempts = :attempt AND attribute_not_exists(called_at)" + extra
        values = {":reg": trigger.reg, ":attempt": trigger.attempt, **values}
        return self._conditional_update(trigger.instance_id, update, condition, values).applied

    def claim(self, trigger: Trigger, now_ms: int, lease_ms: int) -> int | None:
        """Claims the call for the trigger's registration; the claim's end, or None when it is held."""
        until = now_ms + lease_ms
        claimed = self._update_registration(
            trigger,
            "SET claim_until = :until",
            {":until": until, ":now": now_ms},
            extra=" AND (attribute_not_exists(claim_until) OR claim_until < :now)",
        )
        return until if claimed else None

    def claim_if_due(self, trigger: Trigger, now_ms: int, due_by: datetime, lease_ms: int) -> "ClaimAttempt":
        """Claims the call for the trigger's registration if its next call is due by `due_by`.

        One conditional write that also reads: the caller's hot path at a busy second is this and
        the call. Refused (nothing written) when the registration or attempt no longer stands, the
        call is not due yet, or another call holds a live claim; the instance is then returned as
        it was, so the caller can tell which (None: it is gone).
        """
        condition = (
            "reg = :reg AND attempts = :attempt AND attribute_not_exists(called_at) AND pending_due <= :due_by"
            " AND (attribute_not_exists(claim_until) OR claim_until < :now)"
        )
        values = {
            ":reg": trigger.reg,
            ":attempt": trigger.attempt,
            ":due_by": format_time(due_by),
            ":now": now_ms,
            ":until": now_ms + lease_ms,
        }
        # The claim also numbers the call in the instance's history (wakeup.history): no write of its own.
        values.update({":zero": 0, ":one": 1})
        written = self._conditional_update(
            trigger.instance_id,
            "SET claim_until = :until, history_seq = if_not_exists(history_seq, :zero) + :one",
            condition,
            values,
        )
        return ClaimAttempt(claimed=written.applied, instance=_instance(written.item) if written.item else None)

    def record_success(self, trigger: Trigger, called_at: datetime) -> bool:
        return self._update_registration(
            trigger,
            "SET called_at = :called, attempts = :zero REMOVE last_error, claim_until, pending_shard, pending_due",
            {":called": format_time(called_at), ":zero": 0},
        )

    def record_failure(self, trigger: Trigger, error: str, next_due: datetime | None) -> bool:
        """Counts a failed call; `next_due` None gives the wake up (no retry is owed)."""
        values: Item = {":next": trigger.attempt + 1, ":error": error}
        if next_due is None:
            update = "SET attempts = :next, last_error = :error REMOVE claim_until, pending_shard, pending_due"
        else:
            update = "SET attempts = :next, last_error = :error, pending_due = :due REMOVE claim_until"
            values[":due"] = format_time(next_due)
        return self._update_registration(trigger, update, values)

    def postpone(self, trigger: Trigger, due: datetime, now_ms: int) -> bool:
        """Moves a pending wake's next check to `due`, while no claim is live (the sweeper's re-arm)."""
        return self._update_registration(
            trigger,
            "SET pending_due = :due",
            {":due": format_time(due), ":now": now_ms},
            extra=" AND (attribute_not_exists(claim_until) OR claim_until < :now)",
        )


def _account_refusal(item: Any, max_instances: int | None) -> Exception:
    """Why a registration's condition on the account failed: revoked or gone (401), or full (403)."""
    account = _load(item) if isinstance(item, dict) else None
    if account is None or "revoked_at" in account:
        return UnauthorizedError()
    limit = int(account.get("max_instances", max_instances or 0))
    return ForbiddenError(
        f"this account has reached its limit of {limit} instances:"
        " delete some, or ask the service's operator to raise the limit"
    )


def _encode_cursor(key: Item) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, sort_keys=True).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, list_pk: str) -> Item:
    """A cursor back into the key it came from, refused unless it is this account's listing's."""
    refused = BadRequestError("cursor is not one this service gave for this listing; start without it")
    try:
        key = decode_object(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)), "cursor")
    except (binascii.Error, ValueError, BadRequestError):
        raise refused from None
    if key.get("list_pk") != list_pk or set(key) != {"pk", "list_pk", "list_sk"}:
        raise refused
    if not all(isinstance(v, str) for v in key.values()):
        raise refused
    return key
