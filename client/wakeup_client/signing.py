"""``verify_wake``: what a host calls in its ``/wake`` handler to know a wake is the service's.

The service signs each call as `Standard Webhooks <https://www.standardwebhooks.com/>`_ define
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``) with the account's signing secret
(``whsec_...``), over an empty body. The signature is checked by the ``standardwebhooks`` library
itself, which also refuses a timestamp more than five minutes off (a replay); this module adds
what only this service's ids say: which instance and registration the call is for. A wake signed
for another instance of the same account is refused.

The id is the same on every attempt of one wake, as Standard Webhooks keep a message's id when it
is sent again: a host that has served a wake (answered it 2xx) can drop a call whose ``Wake.id``
it has seen, which is what the service's rare second call of a wake is (a 2xx the service could not
see). A host that keeps only its last served id is enough: a newer registration has a new id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

# `wake_<instance id>_<registration>`: the service's webhook-id. Earlier releases of the service
# added `_<attempt>` (a new id for each attempt); such an id is still accepted during an upgrade.
_WAKE_ID = re.compile(r"wake_([0-9a-f-]{36})_([0-9a-f]+)(?:_\d+)?")


class WakeVerificationError(ValueError):
    """Raised when a request is not a wake the service signed for this instance, recently."""


@dataclass(frozen=True)
class Wake:
    """A verified wake: the call's ``id`` (its ``webhook-id``, the same on every attempt of one
    wake: drop a call whose id you served already), the instance, the registration it is for (one
    per ``PUT /wakeup/wake``) and when the call was signed."""

    id: str
    instance_id: str
    registration: str
    timestamp: datetime


def verify_wake(headers: Mapping[str, str], secret: str, instance_id: str, body: bytes | str = b"") -> Wake:
    """The wake these request headers carry, verified with the account's ``secret`` for the
    instance ``instance_id``; ``WakeVerificationError`` when it is forged, altered, more than
    five minutes old (or ahead), or signed for another instance. ``body`` is the request's (a
    wake's ``GET`` has none)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    try:
        Webhook(secret).verify(body, lowered, json_parse=False)
    except (WebhookVerificationError, ValueError) as exc:  # ValueError: a malformed header or secret
        raise WakeVerificationError(f"not a wake signed with this secret: {exc}") from exc
    match = _WAKE_ID.fullmatch(lowered["webhook-id"])
    if match is None:
        raise WakeVerificationError("the webhook-id is not a wake's")
    if match.group(1) != instance_id:
        raise WakeVerificationError("the wake was signed for another instance")
    return Wake(
        id=match.group(0),
        instance_id=match.group(1),
        registration=match.group(2),
        timestamp=datetime.fromtimestamp(int(lowered["webhook-timestamp"]), UTC),
    )
