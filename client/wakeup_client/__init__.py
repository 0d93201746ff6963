"""wakeup-client: the wakeup service from Python.

- ``WakeupClient``: an account registers, reads, lists and deletes its instances.
- ``InstanceClient``: a host asks to be woken (``wake_at``, ``wake_in``).
- ``mint_instance_token``: a fresh ``swi_`` token for a new instance.
- ``verify_wake``: a host's check that a call to its ``/wake`` is a wake the service signed.
- ``WakeupResource``: plan and apply an instance from a desired URL.
- ``wakeup_client.testing.FakeWakeupService``: the service in memory, for tests.

Every failure is a ``WakeupError`` whose ``retryable`` says whether trying again can help.
"""

from .account import WakeupClient
from .errors import ErrorCode, WakeupError
from .instance import InstanceClient
from .models import Attempt, Instance, OwnWake, Registration
from .resources import InMemorySecretStore, Plan, SecretStore, WakeupResource
from .signing import Wake, WakeVerificationError, verify_wake
from .tokens import mint_instance_token

__all__ = [
    "Attempt",
    "ErrorCode",
    "InMemorySecretStore",
    "Instance",
    "InstanceClient",
    "OwnWake",
    "Plan",
    "Registration",
    "SecretStore",
    "Wake",
    "WakeVerificationError",
    "WakeupClient",
    "WakeupError",
    "WakeupResource",
    "mint_instance_token",
    "verify_wake",
]
