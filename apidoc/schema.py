"""The replies' shapes as pydantic models, for the OpenAPI document and the tests.

The routes build their replies with `wakeup.api.models.instance_reply` and `wakeup.api.http`; these
models describe them. They live here, outside the Lambda layer, because nothing at run time needs
them: a model costs cold start, and the hot path's is kept small. The tests check each reply
against them (tests/functional/test_openapi.py, and the fuzz run against the local stack).
"""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

# A time as the service writes it: UTC, milliseconds, `Z`.
Timestamp = Annotated[
    str, Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$", examples=["2026-12-01T09:30:00.250Z"])
]


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Registered(_Reply):
    """`POST /wakeup/instances`: the instance's id."""

    id: str


class InstanceReply(_Reply):
    """An instance as the API shows it."""

    id: str
    url: str = Field(description="the URL the service calls `{url}/wake` on, normalised")
    at: Timestamp | None = Field(description="the registered wake; null until one is registered")
    calledAt: Timestamp | None = Field(description="when the host answered 2xx for this registration")  # noqa: N815
    attempts: int = Field(ge=0, description="failed calls of this registration since the last success")
    lastError: str | None = Field(description="why the last call failed; null once a call succeeds")  # noqa: N815


class WakeReply(_Reply):
    """`GET /wakeup/wake`: the instance's own wake, as its host reads it (nothing of the account)."""

    at: Timestamp | None = Field(description="the registered wake; null until one is registered")
    calledAt: Timestamp | None = Field(description="when the host answered 2xx for this registration")  # noqa: N815
    attempts: int = Field(ge=0, description="failed calls of this registration since the last success")
    lastError: str | None = Field(description="why the last call failed; null once a call succeeds")  # noqa: N815


class InstancePage(_Reply):
    """`GET /wakeup/instances`: a page of the account's instances, oldest first."""

    instances: list[InstanceReply]
    next: str | None = Field(description="the cursor of the next page (`?cursor=`); null on the last")


class AttemptReply(_Reply):
    """One call of an instance's history."""

    startedAt: Timestamp = Field(description="when the call started")  # noqa: N815
    at: Timestamp = Field(description="the registration's wake time")
    attempt: int = Field(ge=1, description="which call of the registration: 1 for the first")
    latenessMs: int | None = Field(description="how late the first call started, in ms; null for retries")  # noqa: N815
    durationMs: int = Field(ge=0, description="how long the call took, in ms")  # noqa: N815
    status: int | None = Field(description="the host's HTTP status; null when it did not answer")
    error: str | None = Field(description="why the call failed; null when it succeeded")
    trigger: str = Field(description="what delivered it: queue, schedule or sweeper")
    webhookId: str = Field(description="the call's webhook-id header")  # noqa: N815


class AttemptPage(_Reply):
    """`GET /wakeup/instances/{id}/attempts`: the instance's calls of the last 7 days, newest first."""

    attempts: list[AttemptReply]
    next: str | None = Field(description="the cursor of the next page (`?cursor=`); null on the last")


class Error(_Reply):
    """Every error the service answers."""

    error: str = Field(min_length=1, description="what was wrong, as a sentence a person can act on")


class GatewayError(_Reply):
    """API Gateway's own reply, for a request it answers before the service sees it."""

    message: str


REPLY_MODELS: tuple[type[BaseModel], ...] = (
    Registered,
    InstanceReply,
    WakeReply,
    InstancePage,
    AttemptReply,
    AttemptPage,
    Error,
    GatewayError,
)
