"""Instance tokens, which the account mints and keeps, and the host uses to ask for its wakes."""

from __future__ import annotations

import secrets

INSTANCE_TOKEN_PREFIX = "swi_"


def mint_instance_token() -> str:
    """A fresh instance token: ``swi_`` and 43 url-safe base64 characters (256 random bits).

    Store it with the host (its ``WAKEUP_TOKEN``) before registering it: the service keeps only
    its hash and never shows it again.
    """
    return INSTANCE_TOKEN_PREFIX + secrets.token_urlsafe(32)
