"""Accounts, which only the operator makes and revokes (through `wakeup-admin`), and their
signing secrets, which are derived rather than stored (see `wakeup.signing`)."""

import time
from collections.abc import Callable
from datetime import datetime, timedelta

from wakeup.errors import UnavailableError
from wakeup.model import Account
from wakeup.signing import SigningKeys
from wakeup.table import Store
from wakeup.times import now
from wakeup.tokens import TokenKind, hash_token, mint

# How often a revocation lists the account's instances while the index lags behind their count,
# and the first wait between two lists (doubled each time: about 3 s in all).
_INDEX_READS = 6
_INDEX_WAIT_S = 0.1


def mint_account(store: Store, label: str, master: int = 1) -> tuple[Account, str]:
    """A new account and its token, which exists only in this return value: only its hash is
    stored. Its signing secret derives from master version `master` (the current one)."""
    token = mint(TokenKind.ACCOUNT)
    return store.create_account(label, hash_token(token), now(), master), token


def revoke_account(store: Store, account_id: str, sleep: Callable[[float], None] = time.sleep) -> Account | None:
    """Revokes the account: its token and its instances' tokens are refused from now on; None
    when there is no such account.

    The account's token goes first, so no new instance can be registered meanwhile; each instance
    then loses its token and its pending wake, which no trigger will call. The instances are
    listed through an index, which is eventually consistent ("Using Global Secondary Indexes",
    DynamoDB developer guide: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html):
    one registered a moment before may not be listed yet. The account's count of its instances,
    written in each registration's own transaction and read consistently, says when all are.
    """
    moment = now()
    if not store.revoke_account(account_id, moment):
        return None
    for read in range(_INDEX_READS):
        listed = store.all_instances(account_id)
        for instance in listed:
            if instance.revoked_at is None:
                store.revoke_instance(instance.id, moment)
        account = store.get_account(account_id)
        if account is None or len(listed) >= account.instance_count:
            return account
        sleep(_INDEX_WAIT_S * 2**read)
    raise UnavailableError("the account is revoked, but its index has not listed all its instances yet: revoke again")


def rotate_token(
    store: Store, account_id: str, overlap: timedelta, moment: datetime | None = None
) -> tuple[Account, str] | None:
    """A new token for the account, which exists only in this return value; the one it replaces
    keeps working for `overlap` from `moment` (now), so its platform can move over without a
    refused request. None when there is no such account, it is revoked, or another rotation won
    the race."""
    token = mint(TokenKind.ACCOUNT)
    rotated = store.rotate_token(account_id, hash_token(token), (moment or now()) + overlap)
    return (rotated, token) if rotated is not None else None


def signing_secret(keys: SigningKeys, account: Account) -> str:
    """The `whsec_` secret that signs the account's wakes now (its current version)."""
    return keys.secret(account.id, account.signing.current, account.signing.master)


def rotate_signing_secret(
    store: Store, keys: SigningKeys, account_id: str, overlap: timedelta
) -> tuple[Account, str] | None:
    """A new signing secret for the account, derived from the current master; the current secret
    keeps signing beside it for `overlap`, so its hosts can move over without refusing a wake
    (this is also how an account moves to a new master). None when there is no such account, it
    is revoked, or another rotation won the race (nothing changed then)."""
    account = store.get_account(account_id)
    if account is None or account.revoked_at is not None:
        return None
    rotated = store.rotate_signing(account, now() + overlap, keys.current_master())
    if rotated is None:
        return None
    return rotated, signing_secret(keys, rotated)
