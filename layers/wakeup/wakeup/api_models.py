"""The HTTP API's bodies: what requests carry and how replies show an instance."""

from typing import Any

from pydantic import BaseModel, ConfigDict

from wakeup.model import Instance
from wakeup.times import format_time


class _Body(BaseModel):
    # Strict: a number where a string belongs is refused, not quietly turned into one.
    model_config = ConfigDict(strict=True, extra="ignore")


class RegisterInstanceBody(_Body):
    url: str
    token: str


class RegisterWakeBody(_Body):
    at: str


def instance_reply(instance: Instance) -> dict[str, Any]:
    """`{id, url, at, calledAt, attempts, lastError}`: an instance as the API shows it."""
    return {
        "id": instance.id,
        "url": instance.url,
        "at": format_time(instance.at) if instance.at else None,
        "calledAt": format_time(instance.called_at) if instance.called_at else None,
        "attempts": instance.attempts,
        "lastError": instance.last_error,
    }
