"""The replies' shapes as pydantic models, for the OpenAPI document and the tests.

The routes build their replies with `wakeup.api.models` (an instance, its wake, a call: each shape a
`TypedDict` there, the models below made from it) and `wakeup.api.http`; these models describe
them. They live here, outside the Lambda layer, because nothing at run time needs them: a model
costs cold start, and the hot path's is kept small. The tests check each reply against them
(tests/functional/test_openapi.py, and the fuzz run against the local stack).
"""

from typing import TYPE_CHECKING, Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from wakeup.api import models


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _model_of(shape: Any) -> type[_Reply]:
    """The model of a reply's `TypedDict` in `wakeup.api.models`: its fields, each required."""
    fields: dict[str, Any] = {name: (hint, ...) for name, hint in get_type_hints(shape, include_extras=True).items()}
    return create_model(shape.__name__, __base__=_Reply, __doc__=shape.__doc__, **fields)


if TYPE_CHECKING:  # to mypy, a model made at run time is a reply model like the others
    InstanceReply = _Reply
    WakeReply = _Reply
    AttemptReply = _Reply
else:
    InstanceReply = _model_of(models.InstanceReply)
    WakeReply = _model_of(models.WakeReply)
    AttemptReply = _model_of(models.AttemptReply)


class Registered(_Reply):
    """`POST /wakeup/instances`: the instance's id."""

    id: str


class InstancePage(_Reply):
    """`GET /wakeup/instances`: a page of the account's instances, oldest first."""

    instances: list[InstanceReply]
    next: str | None = Field(description="the cursor of the next page (`?cursor=`); null on the last")


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
