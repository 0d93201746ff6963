"""The signing master key's versions, as `wakeup-admin master-key` adds, lists and retires them.

The secret holds every master version still in use (`wakeup.signing.MasterKeys`). Adding one makes
it current: new accounts and every rotation of an account's signing secret derive from it, while
the accounts not yet rotated keep signing with theirs. A version retires once no live account signs
with it, neither as its current secret nor as the previous one still in its overlap.
"""

import secrets
import string
from collections import Counter
from datetime import datetime
from typing import Any

from wakeup.signing import MasterKeys
from wakeup.table import DynamoStore

# As the template's SigningMasterKey: 64 letters and digits (GenerateSecretString, no punctuation).
MASTER_LENGTH = 64
_ALPHABET = string.ascii_letters + string.digits


def read(client: Any, secret_id: str) -> MasterKeys:
    """The versions as the secret holds them now (its AWSCURRENT value, never a cached one)."""
    return MasterKeys.parse(client.get_secret_value(SecretId=secret_id)["SecretString"])


def add(client: Any, secret_id: str) -> MasterKeys:
    """A new random master beside the others, current from now on."""
    keys = read(client, secret_id).adding("".join(secrets.choice(_ALPHABET) for _ in range(MASTER_LENGTH)))
    client.put_secret_value(SecretId=secret_id, SecretString=keys.text())
    return keys


def usage(store: DynamoStore, moment: datetime) -> Counter[int]:
    """How many live accounts sign with each master version at `moment`."""
    used: Counter[int] = Counter()
    for account in store.list_accounts():
        if account.revoked_at is None:  # a revoked account's wakes are never called
            used.update(account.signing.masters_at(moment))
    return used


def retire(client: Any, secret_id: str, store: DynamoStore, version: int, moment: datetime) -> str | None:
    """Removes master `version` from the secret; why not (a sentence) when it cannot go yet."""
    keys = read(client, secret_id)
    if version not in keys.versions:
        return f"the master key has no version {version} (versions: {', '.join(map(str, sorted(keys.versions)))})"
    if version == keys.current:
        return f"version {version} is the current master: add a new one first (master-key add)"
    users = usage(store, moment)[version]
    if users:
        return (
            f"{users} live account{' still signs' if users == 1 else 's still sign'} with version {version}: rotate"
            " each one's signing secret (accounts rotate-signing-secret ID) and wait out the overlap"
        )
    client.put_secret_value(SecretId=secret_id, SecretString=keys.without(version).text())
    # The value before this one (which held the retired master) loses its AWSPREVIOUS label, so no
    # staging label reaches it any more.
    _unlabel_previous(client, secret_id)
    return None


def _unlabel_previous(client: Any, secret_id: str) -> None:
    """PutSecretValue moves AWSPREVIOUS to the value it replaced; a version whose last label is
    removed is "deprecated and can be deleted by Secrets Manager" (UpdateSecretVersionStage, in
    the Secrets Manager API reference:
    https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_UpdateSecretVersionStage.html)."""
    versions = client.list_secret_version_ids(SecretId=secret_id)["Versions"]
    for each in versions:
        if "AWSPREVIOUS" in each.get("VersionStages", []):
            client.update_secret_version_stage(
                SecretId=secret_id, VersionStage="AWSPREVIOUS", RemoveFromVersionId=each["VersionId"]
            )
