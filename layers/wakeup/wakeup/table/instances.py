"""Instances in the table: registered (with their token and their account's count), moved,
read, listed, deleted and revoked."""

import random
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from wakeup import aws
from wakeup.errors import ConflictError, UnavailableError
from wakeup.model import Instance, TokenOwner
from wakeup.table.accounts import Accounts
from wakeup.table.cursors import decode_cursor, encode_cursor
from wakeup.table.items import (
    BY_ACCOUNT,
    REGISTRATION_FIELDS,
    Item,
    account_key,
    dump,
    instance_item,
    instance_key,
    instance_of,
    load,
    token_item,
    token_key,
)
from wakeup.table.mechanics import Table, cancellation_reasons, refused_item
from wakeup.table.registrations import NO_LIVE_CLAIM
from wakeup.times import epoch_ms, format_time
from wakeup.tokens import TokenKind

# An account below its limit: its own (`max_instances`, set by the operator) or the default.
_BELOW_INSTANCE_LIMIT = (
    "(attribute_not_exists(instance_count)"
    " OR (attribute_exists(max_instances) AND instance_count < max_instances)"
    " OR (attribute_not_exists(max_instances) AND instance_count < :default_max))"
)
# How often a registration is tried again when DynamoDB cancels it for a concurrent transaction on
# the same account item (its count), as DynamoDB advises for TransactionConflict.
_CONFLICT_ATTEMPTS = 8
_BEING_DELETED = "this instance token was being deleted; retry the request"


def call_under_way(claim_until_ms: int, now: datetime) -> UnavailableError:
    """The 503 for a delete or a URL move refused while a call of the instance holds its claim."""
    retry_in = max(-(-(claim_until_ms - epoch_ms(now)) // 1000), 1)
    return UnavailableError(f"a call to this instance is under way; retry in {retry_in} s")


@dataclass(frozen=True)
class Registered:
    """The outcome of registering an instance token: the instance, and what happened to it."""

    instance: Instance
    created: bool
    # The instance as it was before a move to a new URL, so its pending trigger can be removed.
    moved_from: Instance | None = None


@dataclass(frozen=True)
class Page:
    instances: list[Instance]
    next_cursor: str | None


class AccountRefused(Exception):
    """Raised when the account registers no instance: it is gone or revoked, or it holds `limit`
    instances already (`wakeup.logic.instances` words the refusal)."""

    def __init__(self, revoked: bool, limit: int) -> None:
        super().__init__("revoked" if revoked else f"at its limit of {limit}")
        self.revoked = revoked
        self.limit = limit


class Instances:
    """The instances' items, their tokens, and their account's count of them."""

    def __init__(self, db: Table, accounts: Accounts) -> None:
        self.db = db
        self.accounts = accounts

    def get_instance(self, instance_id: str) -> Instance | None:
        item = self.db.get(instance_key(instance_id))
        return instance_of(item) if item else None

    def all_instances(self, account_id: str) -> list[Instance]:
        return [instance_of(item) for item in self.accounts.listed(account_key(account_id))]

    def list_instances(self, account_id: str, limit: int, cursor: str | None) -> Page:
        """One page of an account's instances, oldest first; `cursor` is a previous page's next.

        One entry more than the page is queried, so the last page says so (`next` None) instead of
        sending the caller for an empty one. The items are then read by key: one deleted meanwhile
        is left out, and the cursor is the index entry's key, so the next page starts after it.
        """
        list_pk = account_key(account_id)
        kwargs: dict[str, Any] = {
            "TableName": self.db.table,
            "IndexName": BY_ACCOUNT,
            "KeyConditionExpression": "list_pk = :p",
            "ExpressionAttributeValues": dump({":p": list_pk}),
            "Limit": limit + 1,
        }
        if cursor:
            kwargs["ExclusiveStartKey"] = dump(decode_cursor(cursor, list_pk))
        found = self.db.client.query(**kwargs)
        entries = [load(entry) for entry in found["Items"]]
        last: Item | None = None
        if len(entries) > limit:
            entries = entries[:limit]
            last = {key: entries[-1][key] for key in ("pk", "list_pk", "list_sk")}
        elif "LastEvaluatedKey" in found:  # DynamoDB stopped early (its 1 MB page)
            last = load(found["LastEvaluatedKey"])
        items = self.db.read_items([entry["pk"] for entry in entries])
        return Page([instance_of(item) for item in items], encode_cursor(last) if last else None)

    def register_instance(
        self, account_id: str, url: str, token_hash: str, now: datetime, max_instances: int | None = None
    ) -> Registered:
        """The instance the token names for this account, created, kept, or moved to `url`.

        Raises `ConflictError` when another account registered the token, `AccountRefused` when
        the account is revoked or holds as many instances as it may (its own limit, else
        `max_instances`; None: no limit). Two registrations of one new token at the same moment
        make one instance: the loser's transaction fails on the token's condition, and it reads
        what the winner wrote. The account's count is kept in the same transaction, so concurrent
        registrations never pass the limit.
        """
        for _ in range(_CONFLICT_ATTEMPTS):
            owner = self.accounts.owner_of(token_hash)
            if owner is not None:
                return self._reregister(owner, account_id, url, token_hash, now)
            instance = Instance(id=str(uuid.uuid4()), account_id=account_id, url=url, created_at=now)
            try:
                self.db.client.transact_write_items(
                    TransactItems=[
                        self.db.put_new(token_item(token_hash, TokenKind.INSTANCE, account_id, instance.id)),
                        self.db.put_new(instance_item(instance, token_hash)),
                        # A revoked account registers nothing, even with a request already under
                        # way; nor does one at its limit. Its count goes up with the instance.
                        {
                            "Update": {
                                "TableName": self.db.table,
                                "Key": dump({"pk": account_key(account_id)}),
                                "UpdateExpression": "SET instance_count = if_not_exists(instance_count, :zero) + :one",
                                "ConditionExpression": (
                                    "attribute_exists(pk) AND attribute_not_exists(revoked_at) AND "
                                    + _BELOW_INSTANCE_LIMIT
                                ),
                                "ExpressionAttributeValues": dump(
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
                reasons = cancellation_reasons(exc, 3)
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
        raise ConflictError() if self.accounts.owner_of(token_hash) is not None else UnavailableError()

    def _reregister(self, owner: TokenOwner, account_id: str, url: str, token_hash: str, now: datetime) -> Registered:
        if owner.kind is not TokenKind.INSTANCE or owner.account_id != account_id or owner.instance_id is None:
            raise ConflictError()
        current = self.get_instance(owner.instance_id)
        if current is None:  # deleted between the two reads: the token is free again
            raise UnavailableError(_BEING_DELETED)
        if current.url == url:
            return Registered(current, created=False)
        try:
            # Not while a call holds the claim: the caller claims before its call and calls the URL
            # its claim read, so a move during the claim would be followed by a call to the old URL.
            found = self.db.client.update_item(
                TableName=self.db.table,
                Key=dump({"pk": instance_key(current.id)}),
                UpdateExpression="SET #url = :url, attempts = :zero REMOVE " + ", ".join(REGISTRATION_FIELDS),
                ConditionExpression=f"attribute_exists(pk) AND token_hash = :h AND {NO_LIVE_CLAIM}",
                ExpressionAttributeNames={"#url": "url", "#at": "at"},
                ExpressionAttributeValues=dump({":url": url, ":zero": 0, ":h": token_hash, ":now": epoch_ms(now)}),
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            item = refused_item(exc)  # any other error is raised again
            if item is not None and item.get("token_hash") == token_hash and "claim_until" in item:
                raise call_under_way(int(item["claim_until"]), now) from exc
            raise UnavailableError(_BEING_DELETED) from exc
        moved = Instance(id=current.id, account_id=account_id, url=url, created_at=current.created_at)
        return Registered(moved, created=False, moved_from=instance_of(load(found["Attributes"])))

    def delete_instance(self, instance: Instance, now: datetime) -> Instance | None:
        """Removes the instance and frees its token; returns it as it was, None when it was gone
        before this request read it. Refused (503) while a call holds the instance's claim: the
        caller claims before its call, so a delete during the claim would be followed by a call of
        the deleted wake; once the claim ends, no call of it can start."""
        item = self.db.get(instance_key(instance.id))
        if item is None:
            return None
        account = {
            "TableName": self.db.table,
            "Key": dump({"pk": account_key(item["account_id"])}),
            "UpdateExpression": "SET instance_count = if_not_exists(instance_count, :one) - :one",
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeValues": dump({":one": 1}),
        }
        mine = {"TableName": self.db.table, "Key": dump({"pk": instance_key(instance.id)})}
        try:
            self.db.client.transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            **mine,
                            "ConditionExpression": f"attribute_exists(pk) AND {NO_LIVE_CLAIM}",
                            "ExpressionAttributeValues": dump({":now": epoch_ms(now)}),
                        }
                    },
                    {"Delete": {"TableName": self.db.table, "Key": dump({"pk": token_key(item["token_hash"])})}},
                    {"Update": account},
                ]
            )
        except ClientError as exc:
            if aws.error_code(exc) != "TransactionCanceledException":
                raise
            if cancellation_reasons(exc, 3)[0].get("Code") != "ConditionalCheckFailed":
                raise UnavailableError("the instance could not be deleted for writes racing it; retry") from exc
            # Refused for a call's live claim, or gone: read again to tell which. One still there
            # was not deleted, though its claim may have ended since the refusal: retry.
            standing = self.db.get(instance_key(instance.id))
            if standing is not None:
                raise call_under_way(int(standing.get("claim_until", 0)), now) from exc
            # The instance is gone: deleted by this very transaction when its reply was lost and
            # botocore retried it, or by another request meanwhile. Either way what was asked
            # holds, as it would without the loss. (AWS answers the retry itself with success when
            # it comes within ten minutes: botocore sends TransactWriteItems' idempotency token,
            # ClientRequestToken, again; "TransactWriteItems", DynamoDB API reference:
            # https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html)
        return instance_of(item)

    def revoke_instance(self, instance_id: str, now: datetime) -> None:
        """Frees the instance's token and drops its pending wake, which no trigger will call."""
        item = self.db.get(instance_key(instance_id))
        if item is None:
            return
        self.db.client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": self.db.table,
                        "Key": dump({"pk": instance_key(instance_id)}),
                        "UpdateExpression": "SET revoked_at = :now REMOVE reg, claim_until, pending_shard, pending_due",
                        "ExpressionAttributeValues": dump({":now": format_time(now)}),
                    }
                },
                {"Delete": {"TableName": self.db.table, "Key": dump({"pk": token_key(item["token_hash"])})}},
            ]
        )


def _account_refusal(item: Any, max_instances: int | None) -> AccountRefused:
    """Why a registration's condition on the account failed: revoked or gone, or full."""
    account = load(item) if isinstance(item, dict) else None
    if account is None or "revoked_at" in account:
        return AccountRefused(revoked=True, limit=0)
    return AccountRefused(revoked=False, limit=int(account.get("max_instances", max_instances or 0)))
