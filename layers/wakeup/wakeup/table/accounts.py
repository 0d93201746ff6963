"""Accounts and their tokens in the table: created, read, listed, rotated, limited and revoked."""

import math
import uuid
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from wakeup import aws
from wakeup.errors import UnavailableError
from wakeup.model import Account, TokenOwner
from wakeup.signing import SigningVersions
from wakeup.table.items import (
    ACCOUNTS_LIST,
    BY_ACCOUNT,
    Item,
    account_item,
    account_key,
    account_of,
    dump,
    load,
    owner_of,
    signing_of,
    token_item,
    token_key,
)
from wakeup.table.mechanics import Table, cancellation_reasons, condition_failed
from wakeup.times import format_time
from wakeup.tokens import TokenKind

# How often a revocation reads the account again when a rotation changed its token meanwhile.
_REVOKE_ATTEMPTS = 3
# How often a rotation is tried again when DynamoDB cancels it for a concurrent transaction on the
# account's item: a reason `TransactionConflict` ("TransactWriteItems" in the DynamoDB API reference:
# https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
_ROTATE_ATTEMPTS = 3


class Accounts:
    """The accounts' items and the tokens that name them."""

    def __init__(self, db: Table) -> None:
        self.db = db

    def owner_of(self, token_hash: str) -> TokenOwner | None:
        """Whom the token with this hash names, by one consistent read; None for no one."""
        item = self.db.get(token_key(token_hash))
        return owner_of(item) if item is not None else None

    def get_account(self, account_id: str) -> Account | None:
        item = self.db.get(account_key(account_id))
        return account_of(item) if item else None

    def signing_versions(self, account_id: str) -> SigningVersions | None:
        """The account's signing versions, by an eventually consistent read (half a read unit):
        a rotation keeps the old version signing for its overlap, so a read a moment stale is
        still right. None when there is no such account."""
        found = self.db.client.get_item(
            TableName=self.db.table,
            Key=dump({"pk": account_key(account_id)}),
            ProjectionExpression=(
                "signing_version, signing_previous, signing_previous_until, signing_master, signing_previous_master"
            ),
        )
        return signing_of(load(found["Item"])) if "Item" in found else None

    def listed(self, list_pk: str) -> list[Item]:
        """Every item the `ByAccount` index lists under `list_pk`, in its order (by `list_sk`)."""
        entries = self.db.query_keys(
            IndexName=BY_ACCOUNT,
            KeyConditionExpression="list_pk = :p",
            ExpressionAttributeValues=dump({":p": list_pk}),
        )
        return [item for item in self.db.read_items([e["pk"] for e in entries]) if item.get("list_pk") == list_pk]

    def list_accounts(self) -> list[Account]:
        return [account_of(item) for item in self.listed(ACCOUNTS_LIST)]

    def create_account(self, label: str, token_hash: str, now: datetime, master: int = 1) -> Account:
        """A new account, its signing secret derived from master version `master`."""
        account = Account(id=str(uuid.uuid4()), label=label, created_at=now, signing=SigningVersions(1, master=master))
        self.db.client.transact_write_items(
            TransactItems=[
                self.db.put_new(account_item(account, token_hash)),
                self.db.put_new(token_item(token_hash, TokenKind.ACCOUNT, account.id)),
            ]
        )
        return account

    def rotate_signing(self, account: Account, previous_until: datetime, master: int = 1) -> Account | None:
        """A new signing version for the account, derived from master version `master`; the one it
        replaces keeps signing until `previous_until`. None when the account changed meanwhile
        (another rotation, a revocation)."""
        current = account.signing.current
        unchanged = "signing_version = :current"
        if current == 1:  # an account made before signing existed has no version yet: it is 1
            unchanged = f"({unchanged} OR attribute_not_exists(signing_version))"
        # Through the mechanics' write that knows its own refusal: the retry of a rotation whose
        # reply was lost meets the version it wrote, and is this rotation, not "changed meanwhile".
        written = self.db.conditional_update(
            account_key(account.id),
            "SET signing_version = :next, signing_previous = :current, signing_previous_until = :until,"
            " signing_master = :master, signing_previous_master = :current_master",
            f"attribute_exists(pk) AND attribute_not_exists(revoked_at) AND {unchanged}",
            {
                ":next": current + 1,
                ":current": current,
                ":until": format_time(previous_until),
                ":master": master,
                ":current_master": account.signing.master,
            },
        )
        return account_of(written.item) if written.applied and written.item is not None else None

    def rotate_token(self, account_id: str, token_hash: str, previous_until: datetime) -> Account | None:
        """The account's token becomes the one hashed `token_hash`; the one it replaces keeps
        working until `previous_until`, and one replaced before stops now. None when there is no
        such account, it is revoked, or another rotation or a revocation won the race.

        One transaction: the account names the new token and the one it replaced; the new token's
        item is put; the replaced one's is marked `valid_until`, which the token check compares
        (its `expires_at`, the table's TTL attribute, removes it later: TTL deletes an expired item
        within days, and until then reads still return it, "Working with expired items" in the
        DynamoDB developer guide: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ttl-expired-items.html).
        """
        for _ in range(_ROTATE_ATTEMPTS):
            item = self.db.get(account_key(account_id))
            if item is None or "revoked_at" in item:
                return None
            actions = self._rotation(account_id, item, token_hash, previous_until)
            try:
                self.db.client.transact_write_items(TransactItems=actions)
            except ClientError as exc:
                if aws.error_code(exc) != "TransactionCanceledException":
                    raise
                reasons = cancellation_reasons(exc, len(actions))
                if not any(reason.get("Code") == "TransactionConflict" for reason in reasons):
                    return None  # a condition refused it: revoked, or rotated meanwhile
                # Another transaction on the account's item at that moment (a registration counting
                # an instance): DynamoDB cancelled this one, and the same rotation may be tried again.
                continue
            return self.get_account(account_id)
        raise UnavailableError("the account was busy with other changes while its token was rotated: rotate again")

    def _rotation(self, account_id: str, item: Item, token_hash: str, previous_until: datetime) -> list[dict[str, Any]]:
        """The transaction's actions that rotate the account (as read: `item`) to `token_hash`."""
        current, older = item["token_hash"], item.get("token_previous")
        until = format_time(previous_until)
        actions: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.db.table,
                    "Key": dump({"pk": account_key(account_id)}),
                    "UpdateExpression": (
                        "SET token_hash = :new, token_previous = :current, token_previous_until = :until"
                    ),
                    "ConditionExpression": "attribute_not_exists(revoked_at) AND token_hash = :current",
                    "ExpressionAttributeValues": dump({":new": token_hash, ":current": current, ":until": until}),
                }
            },
            self.db.put_new(token_item(token_hash, TokenKind.ACCOUNT, account_id)),
            {
                "Update": {
                    "TableName": self.db.table,
                    "Key": dump({"pk": token_key(current)}),
                    "UpdateExpression": "SET valid_until = :until, expires_at = :expires",
                    "ConditionExpression": "attribute_exists(pk)",
                    "ExpressionAttributeValues": dump(
                        {":until": until, ":expires": math.ceil(previous_until.timestamp())}
                    ),
                }
            },
        ]
        if older is not None and older != current:
            actions.append({"Delete": {"TableName": self.db.table, "Key": dump({"pk": token_key(older)})}})
        return actions

    def set_account_limit(self, account_id: str, max_instances: int | None) -> Account | None:
        """Sets the account's own limit of instances (None: the service's default again); None
        when there is no such account. Instances it holds beyond a lower limit stay."""
        update = "SET max_instances = :max" if max_instances is not None else "REMOVE max_instances"
        kwargs: dict[str, Any] = {}
        if max_instances is not None:
            kwargs["ExpressionAttributeValues"] = dump({":max": max_instances})
        return self._update(account_id, UpdateExpression=update, ConditionExpression="attribute_exists(pk)", **kwargs)

    def _update(self, account_id: str, **update: Any) -> Account | None:
        """The account as one conditional update leaves it; None when its condition failed."""
        try:
            found = self.db.client.update_item(
                TableName=self.db.table, Key=dump({"pk": account_key(account_id)}), ReturnValues="ALL_NEW", **update
            )
        except ClientError as exc:
            if condition_failed(exc):
                return None
            raise
        return account_of(load(found["Attributes"]))

    def revoke_account(self, account_id: str, now: datetime) -> bool:
        """Marks the account revoked and deletes its tokens, the one a rotation replaced too (its
        instances are left to the caller: `wakeup.logic.accounts`); False when there is no such
        account. A rotation between the read and the write fails the write's condition: read again."""
        for _ in range(_REVOKE_ATTEMPTS):
            item = self.db.get(account_key(account_id))
            if item is None:
                return False
            if "revoked_at" in item:
                return True
            tokens = {item["token_hash"], item.get("token_previous")} - {None}
            try:
                self.db.client.transact_write_items(
                    TransactItems=[
                        {
                            "Update": {
                                "TableName": self.db.table,
                                "Key": dump({"pk": account_key(account_id)}),
                                "UpdateExpression": "SET revoked_at = :now",
                                "ConditionExpression": "token_hash = :token",
                                "ExpressionAttributeValues": dump(
                                    {":now": format_time(now), ":token": item["token_hash"]}
                                ),
                            }
                        },
                        *({"Delete": {"TableName": self.db.table, "Key": dump({"pk": token_key(t)})}} for t in tokens),
                    ]
                )
            except ClientError as exc:
                if aws.error_code(exc) != "TransactionCanceledException":
                    raise
                continue
            return True
        raise UnavailableError("the account's token was rotated while it was being revoked: revoke again")
