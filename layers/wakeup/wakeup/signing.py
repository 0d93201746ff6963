"""Signed wakes, as Standard Webhooks define them (https://www.standardwebhooks.com/).

Each call carries `webhook-id`, `webhook-timestamp` (whole seconds) and `webhook-signature`:
`v1,<base64 HMAC-SHA256>` of `{id}.{timestamp}.{body}` with the account's signing secret, and the
body of a `GET` is empty. During a rotation two secrets sign, and the header holds both
signatures, space-separated, as the specification allows.

No account secret is stored. Each is derived, HMAC-SHA256 again, from one master key (a secret
in AWS Secrets Manager) and the account's id and signing version (kept on the account item):
rotating an account's secret is a new version, and the master never leaves the functions and
`wakeup-admin`. The caller reads the master through Powertools' Parameters utility, which caches
it for `MASTER_MAX_AGE_S`, so a warm caller derives keys without a request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from wakeup.errors import UnavailableError

SECRET_PREFIX = "whsec_"
SIGNATURE_VERSION = "v1"
# How long a warm function keeps the master key before reading it again (Secrets Manager charges
# per request; the master changes only if an operator replaces it).
MASTER_MAX_AGE_S = 900
# The derivation's context: another purpose of the same master would use another label.
_DERIVATION_LABEL = "wakeup signing secret"


@dataclass(frozen=True)
class WakeId:
    """What a `webhook-id` names: the instance and its registration, one message whatever the
    attempt. Standard Webhooks keep a message's id when it is sent again, so that a host can drop
    a repeat by its id (https://www.standardwebhooks.com/, "webhook-id")."""

    instance_id: str
    reg: str

    def __str__(self) -> str:
        return f"wake_{self.instance_id}_{self.reg}"


def derive_key(master: str, account_id: str, version: int) -> bytes:
    """The account's signing key for `version`: HMAC-SHA256(master, label, account, version)."""
    message = f"{_DERIVATION_LABEL}\x00{account_id}\x00{version}".encode()
    return hmac.new(master.encode(), message, hashlib.sha256).digest()


def secret_text(key: bytes) -> str:
    """The key as a host is given it: `whsec_` and its base64 (what Standard Webhooks libraries take)."""
    return SECRET_PREFIX + base64.b64encode(key).decode()


def signature(key: bytes, msg_id: str, timestamp: int, body: str = "") -> str:
    """`v1,<base64 HMAC-SHA256 of {id}.{timestamp}.{body}>`."""
    digest = hmac.new(key, f"{msg_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode()}"


def signed_headers(keys: Iterable[bytes], wake: WakeId, at: datetime) -> dict[str, str]:
    """The three headers of a call started at `at`, signed with each of `keys` (newest first)."""
    msg_id, timestamp = str(wake), int(at.timestamp())
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signature(key, msg_id, timestamp) for key in keys),
    }


@dataclass(frozen=True)
class SigningVersions:
    """An account's signing versions: the current one, and the one it replaced while both sign."""

    current: int
    previous: int | None = None
    previous_until: datetime | None = None

    def signing_at(self, moment: datetime) -> list[int]:
        """The versions that sign a call at `moment`, the current one first."""
        versions = [self.current]
        if self.previous is not None and self.previous_until is not None and moment < self.previous_until:
            versions.append(self.previous)
        return versions


class SigningKeys:
    """Account keys derived from the master key, read through a Powertools `SecretsProvider`."""

    def __init__(self, provider: Any, master_secret_id: str) -> None:
        self.provider = provider
        self.master_secret_id = master_secret_id
        # A batch's calls sign in threads of their own. Without a lock, a cold start's threads all
        # miss the provider's cache at once and each reads the secret (moto counted about 8 reads a
        # cold start): one thread reads, the others then find it cached.
        self._reading = threading.Lock()

    def master(self) -> str:
        """The master key; `UnavailableError` when it cannot be read (throttled, gone, empty)."""
        try:
            with self._reading:
                value = self.provider.get(self.master_secret_id, max_age=MASTER_MAX_AGE_S)
        except GetParameterError as exc:  # Powertools' wrapper of Secrets Manager's errors
            raise UnavailableError("the signing master key could not be read") from exc
        if not isinstance(value, str) or not value:
            raise UnavailableError("the signing master key secret holds no text")
        return value

    def keys(self, account_id: str, versions: Iterable[int]) -> list[bytes]:
        master = self.master()
        return [derive_key(master, account_id, version) for version in versions]

    def secret(self, account_id: str, version: int) -> str:
        """The `whsec_` secret a host of the account verifies with, for `version`."""
        [key] = self.keys(account_id, [version])
        return secret_text(key)
