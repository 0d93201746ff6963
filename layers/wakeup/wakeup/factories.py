"""The store, the triggers and the signing keys each handler uses, made once per cold start;
tests reset them."""

import functools
from typing import Any

from aws_lambda_powertools.utilities.parameters.secrets import SecretsProvider

from wakeup import aws
from wakeup.logic.rates import AccountThrottle
from wakeup.settings import SettingsError, get_settings
from wakeup.signing import SigningKeys
from wakeup.table import DynamoStore
from wakeup.table.pending import PendingIndex
from wakeup.triggers import Triggers


@functools.cache
def get_store() -> DynamoStore:
    return DynamoStore(get_settings().table)


@functools.cache
def get_pending_index() -> PendingIndex:
    """The planner's keys-only read of the pending-wakes index."""
    return PendingIndex(get_settings().table)


@functools.cache
def get_throttle() -> AccountThrottle:
    """The accounts' rates on the account routes, as this execution environment enforces them."""
    return AccountThrottle(get_store(), get_settings().account_requests_per_s)


@functools.cache
def get_triggers() -> Triggers:
    return Triggers(get_settings())


NO_MASTER_KEY = (
    "WAKEUP_MASTER_KEY_SECRET is empty: the caller signs every wake and does not start without the"
    " signing master key's secret (the template sets it: its SigningMasterKey, or"
    " ExistingMasterKeySecretArn; the local stack makes one)"
)


def require_master_key() -> str:
    """The master key's secret id; `SettingsError` when there is none. The caller checks it at its
    init: a caller that sent unsigned wakes would have hosts that verify refuse every one, and
    hosts that do not verify it accept anyone's."""
    secret_id = get_settings().master_key_secret
    if not secret_id:
        raise SettingsError(NO_MASTER_KEY)
    return secret_id


@functools.cache
def get_signing_keys() -> SigningKeys:
    """The keys that sign wakes, from the configured master key (`SettingsError` without one)."""
    return signing_keys(require_master_key())


def signing_keys(secret_id: str, client: Any = None) -> SigningKeys:
    """Keys from the master key in `secret_id`, read and cached by Powertools' `SecretsProvider`."""
    return SigningKeys(SecretsProvider(boto3_client=client or aws.client("secretsmanager")), secret_id)


def reset() -> None:
    """Forgets settings, store, triggers and keys, so the next call reads the environment again."""
    get_settings.cache_clear()
    get_store.cache_clear()
    get_pending_index.cache_clear()
    get_triggers.cache_clear()
    get_throttle.cache_clear()
    get_signing_keys.cache_clear()
