"""Accounts and their tokens in the table: created, read, listed, rotated, limited and revoked."""

import uuid
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

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
from wakeup.table.mechanics import Table, condition_failed
from wakeup.times import format_time
from wakeup.tokens import TokenKind


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
            ProjectionExpression="signing_version, signing_previous, signing_previous_until",
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

    def create_account(self, label: str, token_hash: str, now: datetime) -> Account:
        account = Account(id=str(uuid.uuid4()), label=label, created_at=now)
        self.db.client.transact_write_items(
            TransactItems=[
                self.db.put_new(account_item(account, token_hash)),
                self.db.put_new(token_item(token_hash, TokenKind.ACCOUNT, account.id)),
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
        # Through the mechanics' write that knows its own refusal: the retry of a rotation whose
        # reply was lost meets the version it wrote, and is this rotation, not "changed meanwhile".
        written = self.db.conditional_update(
            account_key(account.id),
            "SET signing_version = :next, signing_previous = :current, signing_previous_until = :until",
            f"attribute_exists(pk) AND attribute_not_exists(revoked_at) AND {unchanged}",
            {":next": current + 1, ":current": current, ":until": format_time(previous_until)},
        )
        return account_of(written.item) if written.applied and written.item is not None else None

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
        """Marks the account revoked and deletes its token (its instances are left to the caller:
        `wakeup.logic.accounts`); False when there is no such account."""
        item = self.db.get(account_key(account_id))
        if item is None:
            return False
        if "revoked_at" not in item:
            self.db.client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.db.table,
                            "Key": dump({"pk": account_key(account_id)}),
                            "UpdateExpression": "SET revoked_at = :now",
                            "ExpressionAttributeValues": dump({":now": format_time(now)}),
                        }
                    },
                    {"Delete": {"TableName": self.db.table, "Key": dump({"pk": token_key(item["token_hash"])})}},
                ]
            )
        return True
