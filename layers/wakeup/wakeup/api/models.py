"""The HTTP API's bodies: what requests carry and how replies show an instance."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from wakeup.model import CallRecord, Instance
from wakeup.times import format_time


class _Body(BaseModel):
    # Strict: a number where a string belongs is refused, not quietly turned into one.
    model_config = ConfigDict(strict=True, extra="ignore")


class RegisterInstanceBody(_Body):
    """`POST /wakeup/instances`: the host's URL and the instance token it holds."""

    url: str = Field(
        description="http or https, with a host; no user, password, query or fragment (the service calls {url}/wake)",
        json_schema_extra={"maxLength": 2048, "examples": ["https://host.example.com/app"]},
    )
    token: str = Field(
        description="the instance's own token, minted by the account: swi_ and 32 to 128 url-safe base64 characters",
        json_schema_extra={"pattern": "^swi_[A-Za-z0-9_-]{32,128}$"},
    )


class RegisterWakeBody(_Body):
    """`PUT /wakeup/wake`: when to wake the instance (a time in the past means now)."""

    at: str = Field(
        description="an ISO 8601 date-time with a time zone: 2026-12-01T09:30:00Z, 2026-12-01T10:30:00.250+01:00",
        json_schema_extra={"format": "date-time"},
    )


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


def wake_reply(instance: Instance) -> dict[str, Any]:
    """`{at, calledAt, attempts, lastError}`: an instance's own wake, as `GET /wakeup/wake` shows
    it to the host (nothing of its account, not even the URL the account gave it)."""
    shown = instance_reply(instance)
    return {key: shown[key] for key in ("at", "calledAt", "attempts", "lastError")}


def attempt_reply(attempt: CallRecord) -> dict[str, Any]:
    """One call of an instance's history as the API shows it (`attempt`: 1 for a registration's first call)."""
    return {
        "startedAt": format_time(attempt.started_at),
        "at": format_time(attempt.at),
        "attempt": attempt.attempt + 1,
        "latenessMs": attempt.lateness_ms,
        "durationMs": attempt.duration_ms,
        "status": attempt.status,
        "error": attempt.error,
        "trigger": attempt.trigger.value,
        "webhookId": attempt.webhook_id,
    }
