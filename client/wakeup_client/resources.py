"""An instance as a managed resource: read it, plan it from a desired URL, and apply the plan.

The instance token names the instance. ``create`` and ``update`` both register the stored token
with the desired URL (minting and storing one first when none is stored), so a host that moved is
the same instance at a new URL, never a replacement. Moving forgets the wake, as the service does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from .account import WakeupClient
from .errors import ErrorCode, refused
from .formats import normalise_url
from .instance import InstanceClient
from .models import Instance
from .tokens import mint_instance_token

INSTANCE_TOKEN_SECRET = "WAKEUP_TOKEN"

Action = Literal["none", "create", "update", "delete"]


class SecretStore(Protocol):
    """Where the host's secrets live; the resource keeps the instance token there."""

    def get(self, name: str) -> str | None:
        """The secret ``name``, or None when none is stored."""
        ...

    def put(self, name: str, value: str) -> None:
        """Store ``value`` as the secret ``name``."""
        ...


class InMemorySecretStore:
    """A ``SecretStore`` in a dict: for tests and scripts that keep the token themselves."""

    def __init__(self, secrets: dict[str, str] | None = None) -> None:
        self.secrets = dict(secrets or {})

    def get(self, name: str) -> str | None:
        return self.secrets.get(name)

    def put(self, name: str, value: str) -> None:
        self.secrets[name] = value


def _unregistered(instance_id: str, url: str) -> Instance:
    """An instance that has asked for no wake: a new one, or one that moved to ``url``."""
    return Instance(id=instance_id, url=url, at=None, called_at=None, attempts=0, last_error=None)


def _as_stored(url: str) -> str:
    # A URL the service would refuse is kept as given: applying the plan then reports the service's reason.
    try:
        return normalise_url(url)
    except ValueError:
        return url


@dataclass(frozen=True)
class Plan:
    """What applying a desired URL to an instance would do.

    ``current`` is the instance as the service holds it (None when there is none); ``url`` the
    desired URL as the service would store it (None when no instance is desired).
    """

    action: Action
    current: Instance | None
    url: str | None

    @property
    def planned(self) -> Instance | None:
        """The instance as applying leaves it, where that is known (not for a create or a delete)."""
        if self.action == "none":
            return self.current
        if self.action == "update" and self.current is not None and self.url is not None:
            # A move forgets the wake registered at the old URL.
            return _unregistered(self.current.id, self.url)
        return None


class WakeupResource:
    """An account's instances as resources, with the instance token kept in ``secrets``."""

    def __init__(self, client: WakeupClient, secrets: SecretStore, *, token_name: str = INSTANCE_TOKEN_SECRET):
        self.client = client
        self.secrets = secrets
        self.token_name = token_name

    def read(self, instance_id: str) -> Instance | None:
        """The instance as the service holds it, or None when it is gone."""
        return self.client.get(instance_id)

    def plan(self, instance_id: str | None, url: str | None) -> Plan:
        """What it takes to go from instance ``instance_id`` (None: none yet) to an instance at ``url``
        (None: no instance): none, create, update (a new URL) or delete."""
        current = None if instance_id is None else self.read(instance_id)
        if url is None:
            return Plan("delete" if current else "none", current, None)
        desired = _as_stored(url)
        if current is None:
            return Plan("create", None, desired)
        if current.url == desired:
            return Plan("none", current, desired)
        return Plan("update", current, desired)

    def create(self, url: str) -> Instance:
        """Register the host at ``url`` under the stored instance token (minted and stored first if
        none is). Returns the instance as applying leaves it."""
        return self._register(_as_stored(url))

    def update(self, instance_id: str, url: str, *, expect: Plan | None = None) -> Instance:
        """Bring instance ``instance_id`` to ``url``: moved when the URL is new, made again when gone.

        With ``expect`` (the plan shown to whoever approved it), refused with code ``plan_changed``
        when planning now gives another action.
        """
        fresh = self.plan(instance_id, url)
        if expect is not None and expect.action != fresh.action:
            raise refused(
                f"update: the plan changed (it was {expect.action}, now it is {fresh.action}): plan again",
                ErrorCode.PLAN_CHANGED,
            )
        if fresh.action == "none" and fresh.current is not None:
            return fresh.current
        return self._register(_as_stored(url))

    def delete(self, instance_id: str) -> None:
        """Delete the instance and its pending wake; an instance already gone is fine."""
        self.client.delete(instance_id)

    def register_wake(self, at: datetime) -> datetime:
        """Ask the service to wake the host at ``at`` with the stored instance token, replacing the
        wake registered before. Returns the time as the service keeps it."""
        token = self.secrets.get(self.token_name)
        if not token:
            raise refused(
                f"register_wake: no instance token is stored as {self.token_name}: "
                "create the instance first (create mints and stores one)",
                ErrorCode.NO_INSTANCE_TOKEN,
            )
        host = InstanceClient(self.client.url, token, timeout=self.client.timeout, session=self.client.session)
        return host.wake_at(at)

    def _register(self, url: str) -> Instance:
        token = self.secrets.get(self.token_name)
        if not token:
            token = mint_instance_token()
            self.secrets.put(self.token_name, token)
        registration = self.client.register(url, token)
        if registration.created:
            return _unregistered(registration.id, url)
        # Registered before: after a lost reply the service kept the wake, so ask it what it holds.
        return self.client.get(registration.id) or _unregistered(registration.id, url)
