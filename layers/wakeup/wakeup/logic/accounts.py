"""Accounts, which only the operator makes and revokes (through `wakeup-admin`), and their
signing secrets, which are derived rather than stored (see `wakeup.signing`)."""

from datetime import timedelta

from wakeup.model import Account
from wakeup.signing import SigningKeys
from wakeup.table import Store
from wakeup.times import now
from wakeup.tokens import TokenKind, hash_token, mint


def mint_account(store: Store, label: str) -> tuple[Account, str]:
    """A new account and its token, which exists only in this return value: only its hash is stored."""
    token = mint(TokenKind.ACCOUNT)
    return store.create_account(label, hash_token(token), now()), token


def revoke_account(store: Store, account_id: str) -> Account | None:
    """Revokes the account: its token and its instances' tokens are refused from now on; None
    when there is no such account.

    The account's token goes first, so no new instance can be registered meanwhile; each instance
    then loses its token and its pending wake, which no trigger will call.
    """
    moment = now()
    if not store.revoke_account(account_id, moment):
        return None
    for instance in store.all_instances(account_id):
        store.revoke_instance(instance.id, moment)
    return store.get_account(account_id)


def signing_secret(keys: SigningKeys, account: Account) -> str:
    """The `whsec_` secret that signs the account's wakes now (its current version)."""
    return keys.secret(account.id, account.signing.current)


def rotate_signing_secret(
    store: Store, keys: SigningKeys, account_id: str, overlap: timedelta
) -> tuple[Account, str] | None:
    """A new signing secret for the account; the current one keeps signing beside it for
    `overlap`, so its hosts can move over without refusing a wake. None when there is no such
    account, it is revoked, or another rotation won the race (nothing changed then)."""
    account = store.get_account(account_id)
    if account is None or account.revoked_at is not None:
        return None
    rotated = store.rotate_signing(account, now() + overlap)
    if rotated is None:
        return None
    return rotated, signing_secret(keys, rotated)
