"""The HTTP API's bodies: what requests carry and how replies show an instance.

A reply's shape is written once, here, as a `TypedDict` whose fields carry their documentation;
the functions that build a reply return it (mypy holds them to it), and `apidoc.schema` makes the
OpenAPI document's pydantic models from it, outside the layer (a model costs cold start).
"""

from typing import Annotated, TypedDict

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


# A time as the service writes it (`wakeup.times.format_time`): UTC, milliseconds, `Z`.
Timestamp = Annotated[
    str, Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$", examples=["2026-12-01T09:30:00.250Z"])
]
# The wake's fields, which an instance's reply and its own wake's share.
WakeAt = Annotated[Timestamp | None, Field(description="the registered wake; null until one is registered")]
CalledAt = Annotated[Timestamp | None, Field(description="when the host answered 2xx for this registration")]
Attempts = Annotated[int, Field(ge=0, description="failed calls of this registration since the last success")]
LastError = Annotated[str | None, Field(description="why the last call failed; null once a call succeeds")]


class InstanceReply(TypedDict):
    """An instance as the API shows it."""

    id: str
    url: Annotated[str, Field(description="the URL the service calls `{url}/wake` on, normalised")]
    at: WakeAt
    calledAt: CalledAt  # noqa: N815
    attempts: Attempts
    lastError: LastError  # noqa: N815


class WakeReply(TypedDict):
    """`GET /wakeup/wake`: the instance's own wake, as its host reads it (nothing of the account)."""

    at: WakeAt
    calledAt: CalledAt  # noqa: N815
    attempts: Attempts
    lastError: LastError  # noqa: N815


class AttemptReply(TypedDict):
    """One call of an instance's history."""

    startedAt: Annotated[Timestamp, Field(description="when the call started")]  # noqa: N815
    at: Annotated[Timestamp, Field(description="the registration's wake time")]
    attempt: Annotated[int, Field(ge=1, description="which call of the registration: 1 for the first")]
    latenessMs: Annotated[  # noqa: N815
        int | None, Field(description="how late the first call started, in ms; null for retries")
    ]
    durationMs: Annotated[int, Field(ge=0, description="how long the call took, in ms")]  # noqa: N815
    status: Annotated[int | None, Field(description="the host's HTTP status; null when it did not answer")]
    error: Annotated[str | None, Field(description="why the call failed; null when it succeeded")]
    trigger: Annotated[str, Field(description="what delivered it: queue, schedule or sweeper")]
    webhookId: Annotated[str, Field(description="the call's webhook-id header")]  # noqa: N815


def instance_reply(instance: Instance) -> InstanceReply:
    """An instance as the API shows it."""
    return {
        "id": instance.id,
        "url": instance.url,
        "at": format_time(instance.at) if instance.at else None,
        "calledAt": format_time(instance.called_at) if instance.called_at else None,
        "attempts": instance.attempts,
        "lastError": instance.last_error,
    }


def wake_reply(instance: Instance) -> WakeReply:
    """An instance's own wake, as `GET /wakeup/wake` shows it to the host (nothing of its account,
    not even the URL the account gave it)."""
    shown = instance_reply(instance)
    return {
        "at": shown["at"],
        "calledAt": shown["calledAt"],
        "attempts": shown["attempts"],
        "lastError": shown["lastError"],
    }


def attempt_reply(attempt: CallRecord) -> AttemptReply:
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
