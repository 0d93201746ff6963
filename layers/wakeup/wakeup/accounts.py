"""Accounts, which only the operator makes and revokes (through `wakeup-admin`)."""

from wakeup.model import Account
from wakeup.store import Store
from wakeup.times import now
from wakeup.tokens import TokenKind, hash_token, mint


def mint_account(store: Store, label: str) -> tuple[Account, str]:
    """A new account and its token, which exists only in this return value: only its hash is stored."""
    token = mint(TokenKind.ACCOUNT)
    return store.create_account(label, hash_token(token), now()), token


def revoke_account(store: Store, account_id: str) -> Account | None:
    """Revokes the account: its token and its instances' tokens are refused from now on."""
    return store.revoke_account(account_id, now())
