"""Signed wakes, as Standard Webhooks define them (https://www.standardwebhooks.com/).

Each call carries `webhook-id`, `webhook-timestamp` (whole seconds) and `webhook-signature`:
`v1,<base64 HMAC-SHA256>` of `{id}.{timestamp}.{body}` with the account's signing secret, and the
body of a `GET` is empty. During a rotation two secrets sign, and the header holds both
signatures, space-separated, as the specification allows.

No account secret is stored. Each is derived, HMAC-SHA256 again, from a master key (a secret in
AWS Secrets Manager) and the account's id and signing version (kept on the account item):
rotating an account's secret is a new version, and the master never leaves the functions and
`wakeup-admin`. The caller reads the master through Powertools' Parameters utility, which caches
it for `MASTER_MAX_AGE_S`, so a warm caller derives keys without a request.

The master is versioned (`MasterKeys`): the secret holds every master still in use, and names the
current one, which new accounts and each rotation derive from. The template's secret, one plain
string, is master version 1. Each account's item says which master each of its signing versions
derives from, so an account moves to a new master through its own rotation, both signing through
the overlap, and a master retires once no account uses it (`wakeup-admin master-key`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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
# A master version the cached secret lacks (added since it was read) is read afresh at most this
# often: an account rotated to a new master is signed for at once, and a wrong version named by an
# item costs one read a minute, not one a call.
MASTER_REFRESH_S = 60


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
    """An account's signing versions: the current one, and the one it replaced while both sign;
    and the master version each derives from (1, the template's, for an account older than them)."""

    current: int
    previous: int | None = None
    previous_until: datetime | None = None
    master: int = 1
    previous_master: int = 1

    def signing_at(self, moment: datetime) -> list[int]:
        """The versions that sign a call at `moment`, the current one first."""
        return [version for version, _ in self.keys_at(moment)]

    def keys_at(self, moment: datetime) -> list[tuple[int, int]]:
        """(signing version, master version) of each key that signs a call at `moment`, the current first."""
        keys = [(self.current, self.master)]
        if self.previous is not None and self.previous_until is not None and moment < self.previous_until:
            keys.append((self.previous, self.previous_master))
        return keys

    def masters_at(self, moment: datetime) -> set[int]:
        """The master versions the account signs with at `moment`."""
        return {master for _, master in self.keys_at(moment)}


class MasterKeyError(ValueError):
    """Raised when a master key secret's text is neither a plain key nor the versioned form."""


@dataclass(frozen=True)
class MasterKeys:
    """The master key's versions as its secret holds them: `{"current": 2, "versions": {"1": ...,
    "2": ...}}`, or a plain string, which is version 1 alone (the template's generated secret)."""

    current: int
    versions: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> MasterKeys:
        if not text.lstrip().startswith("{"):
            return cls(1, {1: text})
        try:
            found = json.loads(text)
            keys = cls(int(found["current"]), {int(v): str(key) for v, key in found["versions"].items()})
        except (ValueError, KeyError, TypeError, AttributeError):
            raise MasterKeyError("the master key secret is JSON but not {current, versions}") from None
        if keys.current not in keys.versions or not all(keys.versions.values()):
            raise MasterKeyError("the master key secret's current version is not among its versions")
        return keys

    def text(self) -> str:
        """As the secret holds it."""
        return json.dumps({"current": self.current, "versions": {str(v): k for v, k in sorted(self.versions.items())}})

    def adding(self, key: str) -> MasterKeys:
        """A new version holding `key`, current from now on; the others stay."""
        version = max(self.versions) + 1
        return MasterKeys(version, {**self.versions, version: key})

    def without(self, version: int) -> MasterKeys:
        return MasterKeys(self.current, {v: key for v, key in self.versions.items() if v != version})


class SigningKeys:
    """Account keys derived from the master key, read through a Powertools `SecretsProvider`."""

    def __init__(self, provider: Any, master_secret_id: str) -> None:
        self.provider = provider
        self.master_secret_id = master_secret_id
        # A batch's calls sign in threads of their own. Without a lock, a cold start's threads all
        # miss the provider's cache at once and each reads the secret (moto counted about 8 reads a
        # cold start): one thread reads, the others then find it cached.
        self._reading = threading.Lock()
        self._forced_at = -float(MASTER_REFRESH_S)

    def masters(self, needed: Iterable[int] = ()) -> MasterKeys:
        """The master's versions; read afresh (once a minute at most) when one `needed` is not
        among the cached ones. `UnavailableError` when they cannot be read (throttled, gone,
        empty, malformed) or a needed one is not there."""
        wanted = set(needed)
        with self._reading:
            keys = self._read(force=False)
            if not wanted <= keys.versions.keys() and time.monotonic() - self._forced_at >= MASTER_REFRESH_S:
                self._forced_at = time.monotonic()
                keys = self._read(force=True)
        missing = wanted - keys.versions.keys()
        if missing:
            raise UnavailableError(f"the signing master key has no version {min(missing)}")
        return keys

    def _read(self, force: bool) -> MasterKeys:
        try:  # Powertools' wrapper of Secrets Manager's errors
            # force_fetch only when forcing: the simulator's providers take what the caller usually passes.
            forcing = {"force_fetch": True} if force else {}
            value = self.provider.get(self.master_secret_id, max_age=MASTER_MAX_AGE_S, **forcing)
        except GetParameterError as exc:
            raise UnavailableError("the signing master key could not be read") from exc
        if not isinstance(value, str) or not value:
            raise UnavailableError("the signing master key secret holds no text")
        try:
            return MasterKeys.parse(value)
        except MasterKeyError as exc:
            raise UnavailableError(str(exc)) from None

    def keys(self, account_id: str, versions: Iterable[int], master: int = 1) -> list[bytes]:
        """The account's keys for `versions`, all derived from master version `master`."""
        key = self.masters([master]).versions[master]
        return [derive_key(key, account_id, version) for version in versions]

    def keys_at(self, account_id: str, versions: SigningVersions, moment: datetime) -> list[bytes]:
        """The account's keys that sign a call at `moment`, each from its own master (two during an overlap)."""
        pairs = versions.keys_at(moment)
        masters = self.masters(master for _, master in pairs).versions
        return [derive_key(masters[master], account_id, version) for version, master in pairs]

    def current_master(self) -> int:
        """The master version new accounts and rotations derive from."""
        return self.masters().current

    def secret(self, account_id: str, version: int, master: int = 1) -> str:
        """The `whsec_` secret a host of the account verifies with, for `version` of `master`."""
        [key] = self.keys(account_id, [version], master)
        return secret_text(key)
