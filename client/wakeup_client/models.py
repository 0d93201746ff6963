"""The service's replies as typed values. Validating a reply against these is how the client tells
the wakeup service's answers from another server's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PlainSerializer

from .formats import format_time

# A time as the service writes it (UTC, milliseconds, Z) when a model is dumped to JSON.
Timestamp = Annotated[AwareDatetime, PlainSerializer(format_time, return_type=str, when_used="json")]


class _Reply(BaseModel):
    # Strict: a reply with `"attempts": "3"` is not the service's. Extra fields are tolerated so a
    # newer service that adds one does not break older clients.
    model_config = ConfigDict(strict=True, frozen=True, validate_by_name=True, validate_by_alias=True)


class Instance(_Reply):
    """An instance as ``GET /wakeup/instances/{id}`` shows it."""

    id: Annotated[str, Field(min_length=1)]
    url: str
    at: Timestamp | None = Field(description="the registered wake; None until one is registered")
    called_at: Timestamp | None = Field(
        alias="calledAt", description="when the host answered 2xx for this registration"
    )
    attempts: Annotated[int, Field(ge=0, description="failed calls since the last success")]
    last_error: str | None = Field(alias="lastError", description="why the last call failed")

    def to_json(self) -> dict[str, object]:
        """The instance in the service's own JSON shape (camelCase keys, times in UTC with ``Z``)."""
        return self.model_dump(mode="json", by_alias=True)


class OwnWake(_Reply):
    """An instance's own wake, as its host reads it with ``GET /wakeup/wake`` (nothing of its account)."""

    at: Timestamp | None = Field(description="the registered wake; None until one is registered")
    called_at: Timestamp | None = Field(
        alias="calledAt", description="when the host answered 2xx for this registration"
    )
    attempts: Annotated[int, Field(ge=0, description="failed calls since the last success")]
    last_error: str | None = Field(alias="lastError", description="why the last call failed")


class InstancePage(_Reply):
    """One page of ``GET /wakeup/instances``: ``next`` is the cursor of the next page, None on the last."""

    instances: list[Instance]
    next: str | None


class Attempt(_Reply):
    """One call of an instance's history (``GET /wakeup/instances/{id}/attempts``)."""

    started_at: Timestamp = Field(alias="startedAt", description="when the call started")
    at: Timestamp = Field(description="the registration's wake time")
    attempt: Annotated[int, Field(ge=1, description="which call of the registration: 1 for the first")]
    lateness_ms: int | None = Field(alias="latenessMs", description="how late a first call started (ms)")
    duration_ms: Annotated[int, Field(alias="durationMs", ge=0, description="how long the call took (ms)")]
    status: int | None = Field(description="the host's HTTP status; None when it did not answer")
    error: str | None = Field(description="why the call failed; None when it succeeded")
    trigger: str = Field(description="what delivered it: queue, schedule or sweeper")
    webhook_id: str = Field(alias="webhookId", description="the call's webhook-id header")

    def to_json(self) -> dict[str, object]:
        """The call in the service's own JSON shape."""
        return self.model_dump(mode="json", by_alias=True)


class AttemptPage(_Reply):
    """One page of an instance's calls, newest first; ``next`` is the next page's cursor."""

    attempts: list[Attempt]
    next: str | None


class Posted(_Reply):
    """The reply to ``POST /wakeup/instances``."""

    id: Annotated[str, Field(min_length=1)]


class Problem(_Reply):
    """The service's error body: every error it answers has this shape."""

    error: str


class GatewayProblem(_Reply):
    """API Gateway's own error body (``{"message": "Too Many Requests"}``), for the requests it
    answers before the service sees them."""

    model_config = ConfigDict(extra="forbid")

    message: str


@dataclass(frozen=True)
class Registration:
    """What ``WakeupClient.register`` found: the instance's id, and whether this call created it
    (False: the account had registered the token before; its URL is now the one given)."""

    id: str
    created: bool
