"""What the table stores: its keys, its indexes and the items' shapes, and the mapping between an
item and the domain (`wakeup.model`). Public, so that nothing outside builds a key or an item by hand.

Item shapes (key `pk`) are described in docs/architecture.md.
"""

import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import DYNAMODB_CONTEXT, TypeDeserializer, TypeSerializer

from wakeup.model import Account, CallRecord, Instance, Origin, TokenOwner
from wakeup.signing import SigningVersions
from wakeup.times import format_time, parse_stored
from wakeup.tokens import TokenKind

# Shards of the pending-wakes index, which each outcome of a burst writes: a partition takes 1,000
# write units a second ("Understanding DynamoDB warm throughput in different scenarios"); why 64:
# docs/scaling.md. Raising it is safe (entries keep their shard); lowering it hides the higher ones.
PENDING_SHARDS = 64
ACCOUNTS_LIST = "ACCOUNTS"
BY_ACCOUNT = "ByAccount"
PENDING_WAKES = "PendingWakes"
# The history's ring: at most this many calls per instance, each kept this long (wakeup.logic.history).
HISTORY_SIZE = 100
HISTORY_KEEP = timedelta(days=7)

# What a registration is made of; a move or a new registration clears all of it.
REGISTRATION_FIELDS = ("#at", "reg", "called_at", "last_error", "claim_until", "pending_shard", "pending_due")

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()
# A whole number below this in magnitude has at most 38 digits, all DynamoDB keeps.
_WHOLE_LIMIT = 10**38

Item = dict[str, Any]


def token_key(token_hash: str) -> str:
    return f"TOKEN#{token_hash}"


def account_key(account_id: str) -> str:
    return f"ACCOUNT#{account_id}"


def rate_key(account_id: str) -> str:
    """The item that counts an account's requests on the account routes: apart from the account's
    own item, which a registration's transaction and the caller's signing read use."""
    return f"RATE#{account_id}"


def instance_key(instance_id: str) -> str:
    return f"INSTANCE#{instance_id}"


def call_key(instance_id: str, seq: int) -> str:
    """The slot of the instance's history ring that call number `seq` is kept in."""
    return f"ATTEMPT#{instance_id}#{seq % HISTORY_SIZE}"


def pending_shard(instance_id: str) -> str:
    """The shard of the pending-wakes index an instance's wake goes in, spread by its id."""
    return str(uuid.UUID(instance_id).int % PENDING_SHARDS)


def is_id(value: str) -> bool:
    """Whether `value` is an id this service could have made (a UUID in its usual form)."""
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def dump_value(value: Any) -> dict[str, Any]:
    """`TypeSerializer.serialize`, with a string, a whole number of up to 38 digits (DynamoDB's
    precision) and a finite `Decimal` written without its dispatch: the same typed JSON."""
    kind = type(value)
    if kind is str:
        return {"S": value}
    if kind is int and -_WHOLE_LIMIT < value < _WHOLE_LIMIT:
        return {"N": str(value)}
    if kind is Decimal and value.is_finite():
        return {"N": str(DYNAMODB_CONTEXT.create_decimal(value))}
    return dict(_serializer.serialize(value))


def load_value(value: Mapping[str, Any]) -> Any:
    """`TypeDeserializer.deserialize`, with a string and a number read without its dispatch: the
    same values (a number as a `Decimal` in DynamoDB's context)."""
    if len(value) == 1:
        if "S" in value:
            return value["S"]
        if "N" in value:
            return DYNAMODB_CONTEXT.create_decimal(value["N"])
    return _deserializer.deserialize(value)  # type: ignore[arg-type]  # a typed value, as boto3 gives it


def dump(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item (or a key, or expression values) in DynamoDB's typed JSON; None values left out."""
    return {k: dump_value(v) for k, v in item.items() if v is not None}


class Loaded(dict[str, Any]):
    """An item in a reply already in Python's types, the values `load` would give: `load` takes it
    as it is. The simulator's table (`wakeup_sim.dynamodb`) answers so, sparing itself the typed
    JSON's round trip, which DynamoDB's replies need and its own did not."""


def load(item: Mapping[str, Any]) -> Item:
    """An item from DynamoDB's typed JSON."""
    if type(item) is Loaded:
        return dict(item)
    return {k: load_value(v) for k, v in item.items()}


def _time(value: Any) -> datetime | None:
    return parse_stored(str(value)) if value is not None else None


def signing_of(item: Item) -> SigningVersions:
    previous = item.get("signing_previous")
    return SigningVersions(
        current=int(item.get("signing_version", 1)),
        previous=int(previous) if previous is not None else None,
        previous_until=_time(item.get("signing_previous_until")),
        master=int(item.get("signing_master", 1)),
        previous_master=int(item.get("signing_previous_master", 1)),
    )


def account_of(item: Item) -> Account:
    return Account(
        id=item["id"],
        label=item["label"],
        created_at=parse_stored(item["created_at"]),
        revoked_at=_time(item.get("revoked_at")),
        signing=signing_of(item),
        instance_count=int(item.get("instance_count", 0)),
        max_instances=int(item["max_instances"]) if "max_instances" in item else None,
        max_requests_per_s=int(item["max_requests_per_s"]) if "max_requests_per_s" in item else None,
    )


def owner_of(item: Item) -> TokenOwner:
    return TokenOwner(
        TokenKind(item["kind"]), item["account_id"], item.get("instance_id"), _time(item.get("valid_until"))
    )


def instance_of(item: Item) -> Instance:
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


def account_item(account: Account, token_hash: str) -> Item:
    created = format_time(account.created_at)
    return {
        "pk": account_key(account.id),
        "type": "account",
        "id": account.id,
        "label": account.label,
        "created_at": created,
        "token_hash": token_hash,
        "signing_version": account.signing.current,
        "signing_master": account.signing.master,
        "instance_count": 0,
        "list_pk": ACCOUNTS_LIST,
        "list_sk": f"{created}#{account.id}",
    }


def token_item(token_hash: str, kind: TokenKind, account_id: str, instance_id: str | None = None) -> Item:
    item: Item = {"pk": token_key(token_hash), "type": "token", "kind": kind.value, "account_id": account_id}
    if instance_id is not None:
        item["instance_id"] = instance_id
    return item


def instance_item(instance: Instance, token_hash: str) -> Item:
    """A new instance's item: registered, with no wake yet."""
    created = format_time(instance.created_at)
    return {
        "pk": instance_key(instance.id),
        "type": "instance",
        "id": instance.id,
        "account_id": instance.account_id,
        "url": instance.url,
        "token_hash": token_hash,
        "created_at": created,
        "attempts": 0,
        "list_pk": account_key(instance.account_id),
        "list_sk": f"{created}#{instance.id}",
    }


def call_item(call: CallRecord) -> Item:
    """A call of the history as its item (attribute names as stored since the history began)."""
    return {
        "pk": call_key(call.instance_id, call.seq),
        "type": "attempt",
        "instance_id": call.instance_id,
        "seq": call.seq,
        "started_at": format_time(call.started_at),
        "at": format_time(call.at),
        "attempt": call.attempt,
        "lateness_ms": call.lateness_ms,
        "duration_ms": call.duration_ms,
        "status": call.status,
        "error": call.error,
        "trigger": call.trigger.value,
        "webhook_id": call.webhook_id,
        # DynamoDB's TTL attribute: epoch seconds.
        "expires_at": int((call.started_at + HISTORY_KEEP).timestamp()),
    }


def call_of(item: Item) -> CallRecord:
    def number(name: str) -> int | None:
        return int(item[name]) if item.get(name) is not None else None

    return CallRecord(
        instance_id=item["instance_id"],
        seq=int(item["seq"]),
        started_at=parse_stored(item["started_at"]),
        at=parse_stored(item["at"]),
        attempt=int(item["attempt"]),
        lateness_ms=number("lateness_ms"),
        duration_ms=int(item["duration_ms"]),
        status=number("status"),
        error=item.get("error"),
        trigger=Origin(item["trigger"]),
        webhook_id=item["webhook_id"],
    )
