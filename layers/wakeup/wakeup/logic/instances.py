"""What an account does with its instances: register, read, delete and list them."""

import re
from datetime import datetime
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from wakeup.addresses import REFUSED_URL, AddressPolicy, literal_address
from wakeup.errors import BadRequestError, ForbiddenError, NotFoundError, UnauthorizedError
from wakeup.logic import history
from wakeup.logic.wakes import forget_trigger
from wakeup.model import Instance, TokenOwner
from wakeup.observability import logger
from wakeup.table import AccountRefused, Page, Registered, Store
from wakeup.table.items import is_id
from wakeup.tokens import TokenKind, hash_token, is_token
from wakeup.triggers import Triggers
from wakeup.urls import normalise_url

MAX_PAGE = 100
_LIMIT = re.compile(r"[0-9]{1,3}")
TOKEN_RULE = "token must be an instance token: swi_ followed by 32 to 128 url-safe base64 characters"


def register(
    store: Store,
    triggers: Triggers,
    account: TokenOwner,
    url: str,
    token: str,
    now: datetime,
    addresses: AddressPolicy,
    max_instances: int | None = None,
) -> Registered:
    """The instance for this token: new, as it was (same URL), or moved to `url` (its wake forgotten).

    A URL whose host is an address the caller may not call is refused now (a host name is checked
    at each call, on the addresses it resolves to then). An account revoked meanwhile is 401, one
    that holds as many instances as it may (its own limit, else `max_instances`) 403.
    """
    normalised = normalise_url(url)
    parts = urlsplit(normalised)
    refusal = addresses.url_refusal(parts.scheme, parts.port or (443 if parts.scheme == "https" else 80))
    if refusal is not None:
        raise BadRequestError(refusal)
    literal = literal_address(parts.hostname or "")
    if literal is not None and addresses.refuses(literal):
        raise BadRequestError(REFUSED_URL)
    if not is_token(token, TokenKind.INSTANCE):
        raise BadRequestError(TOKEN_RULE)
    try:
        registered = store.register_instance(account.account_id, normalised, hash_token(token), now, max_instances)
    except AccountRefused as refused:
        raise account_refusal(refused) from refused
    if registered.moved_from is not None:
        _forget(store, triggers, registered.moved_from, now)
    return registered


def account_refusal(refused: AccountRefused) -> UnauthorizedError | ForbiddenError:
    """Why the account registers no instance: revoked or gone (401), or at its limit (403)."""
    if refused.revoked:
        return UnauthorizedError()
    instances = "instance" if refused.limit == 1 else "instances"
    return ForbiddenError(
        f"this account has reached its limit of {refused.limit} {instances}:"
        " delete some, or ask the service's operator to raise the limit"
    )


def get(store: Store, account: TokenOwner, instance_id: str) -> Instance:
    """The account's instance; 404 when there is none (or the id is malformed), 403 when not its own."""
    instance = store.get_instance(instance_id) if is_id(instance_id) else None
    if instance is None:
        raise NotFoundError()
    if instance.account_id != account.account_id:
        raise ForbiddenError()
    return instance


def delete(store: Store, triggers: Triggers, account: TokenOwner, instance_id: str, now: datetime) -> None:
    """Removes the account's instance and what is pending for it; its token is free again."""
    instance = get(store, account, instance_id)
    removed = store.delete_instance(instance, now)
    if removed is None:
        raise NotFoundError()
    _forget(store, triggers, removed, now, deleted=True)


def list_page(store: Store, account: TokenOwner, limit: str | None, cursor: str | None) -> Page:
    """One page of the account's instances; `limit` from 1 to 100 (100 when absent)."""
    size = MAX_PAGE
    if limit is not None:
        # ASCII digits only, and few of them: `str.isdigit` takes `²` and `int` refuses 5,000 digits.
        if not _LIMIT.fullmatch(limit) or not 1 <= int(limit) <= MAX_PAGE:
            raise BadRequestError(f"limit must be a whole number from 1 to {MAX_PAGE}")
        size = int(limit)
    return store.list_instances(account.account_id, size, cursor or None)


def calls_page(
    store: Store, account: TokenOwner, instance_id: str, limit: str | None, cursor: str | None, now: datetime
) -> history.CallPage:
    """One page of the calls of the account's instance in the last 7 days, newest first."""
    instance = get(store, account, instance_id)
    size = MAX_PAGE
    if limit is not None:
        if not _LIMIT.fullmatch(limit) or not 1 <= int(limit) <= MAX_PAGE:
            raise BadRequestError(f"limit must be a whole number from 1 to {MAX_PAGE}")
        size = int(limit)
    return history.page(store, instance, size, cursor or None, now)


def _forget(store: Store, triggers: Triggers, previous: Instance, now: datetime, *, deleted: bool = False) -> None:
    # The table no longer holds the old registration, so a trigger left behind finds nothing to
    # call and is dropped: removing its schedule is tidiness, not correctness. (A newer wake's
    # schedule removed instead is armed again by `forget_trigger`, or, when that fails, by the
    # sweeper once the wake is overdue.)
    try:
        forget_trigger(store, triggers, previous, now, deleted=deleted)
    except (ClientError, BotoCoreError):
        logger.warning("could not remove the schedule of a forgotten wake", instance_id=previous.id)
