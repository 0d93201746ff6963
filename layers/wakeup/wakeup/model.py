"""The domain: accounts, instances and the wake an instance registered."""

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from wakeup.signing import SigningVersions
from wakeup.tokens import TokenKind


class Origin(StrEnum):
    """Where a trigger came from, in one vocabulary: which way it was armed (`Triggers.route`), what
    the caller was handed, and what a call's history says delivered it."""

    QUEUE = "queue"  # a (delayed) SQS message
    SCHEDULE = "schedule"  # the instance's one-time schedule
    SWEEPER = "sweeper"  # a message the sweeper sent (a lost trigger re-armed); a trigger carries it


@dataclass(frozen=True)
class Account:
    id: str
    label: str
    created_at: datetime
    revoked_at: datetime | None = None
    # Which derived secrets sign its wakes (see wakeup.signing); accounts start at version 1.
    signing: SigningVersions = SigningVersions(current=1)
    # How many instances it holds, and its own limit (None: the service's default).
    instance_count: int = 0
    max_instances: int | None = None
    # Its own rate on the account routes, requests a second (None: the service's default).
    max_requests_per_s: int | None = None


@dataclass(frozen=True)
class TokenOwner:
    """Whom a token names: an account, or an instance of an account."""

    kind: TokenKind
    account_id: str
    instance_id: str | None = None
    # An account token replaced by a rotation works until then (None: until it is revoked).
    valid_until: datetime | None = None

    def valid_at(self, moment: datetime) -> bool:
        return self.valid_until is None or moment < self.valid_until


@dataclass(frozen=True)
class Instance:
    id: str
    account_id: str
    url: str
    created_at: datetime
    # The registration: `reg` is new for each `PUT /wakeup/wake`, so a trigger armed for an older
    # one can tell it no longer stands, even when the time is the same.
    at: datetime | None = None
    reg: str | None = None
    called_at: datetime | None = None
    attempts: int = 0
    last_error: str | None = None
    # When the next call is due (`at`, then each retry); None once called, moved or given up.
    due: datetime | None = None
    # The end of the claim of a call in flight, in epoch milliseconds.
    claim_until: int | None = None
    revoked_at: datetime | None = None
    # How many calls were ever claimed for it: the number of the newest in its history.
    history_seq: int = 0

    @property
    def pending(self) -> bool:
        """Whether a call is still owed for the registration."""
        return self.reg is not None and self.due is not None and self.revoked_at is None


@dataclass(frozen=True)
class Trigger:
    """What an SQS message or a schedule carries: the registration and attempt it was armed for."""

    instance_id: str
    reg: str
    attempt: int
    # `Origin.SWEEPER` for a trigger the sweeper re-armed (kept in the call's history); not part of its identity.
    origin: Origin | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CallRecord:
    """One call to a host, as the instance's history keeps it: when it started, for which
    registration, and what came of it."""

    instance_id: str
    seq: int
    started_at: datetime
    at: datetime
    # The registration's attempt (0 first), as the trigger names it.
    attempt: int
    lateness_ms: int | None
    duration_ms: int
    status: int | None
    error: str | None
    # What delivered the trigger.
    trigger: Origin
    webhook_id: str
