"""Registering a wake and keeping its one trigger in step with the table.

The table is the truth; triggers are hints. A registration is written first, then armed; when
arming fails the request answers 503 and the sweeper re-arms the wake once it is overdue.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime

from botocore.exceptions import BotoCoreError, ClientError

from wakeup.errors import TooManyRequestsError, UnauthorizedError, UnavailableError
from wakeup.model import Instance, Origin, Trigger
from wakeup.observability import logger
from wakeup.table import Store, WakeWindow, WindowFull
from wakeup.triggers import ScheduleContentionError, Triggers

# How often a writer re-reads after arming a schedule before it leaves the rest to later writers.
_CONVERGE_ROUNDS = 5


@dataclass(frozen=True)
class WakeLimit:
    """At most `count` wakes registered per instance in each window of `window_s` seconds."""

    count: int
    window_s: int


def window_of(limit: WakeLimit, now: datetime) -> WakeWindow:
    """The window a registration at `now` counts in: windows are counted from the epoch, and the
    table counts the registrations in each in the registration's own write."""
    return WakeWindow(int(now.timestamp() // limit.window_s) * limit.window_s, limit.count)


def rate_refusal(limit: WakeLimit, full: WindowFull, now: datetime) -> TooManyRequestsError:
    """The 429 for a registration its window refused, with when the next window opens."""
    retry_in = max(full.start + limit.window_s - int(now.timestamp()), 1)
    return TooManyRequestsError(
        f"this instance registered {limit.count} wakes in {limit.window_s} s, as many as"
        f" the service allows; retry in {retry_in} s",
        retry_after_s=retry_in,
    )


def trigger_for(instance: Instance) -> Trigger | None:
    """The trigger the instance's pending registration needs now, None when nothing is owed."""
    if not instance.pending or instance.reg is None:
        return None
    return Trigger(instance.id, instance.reg, instance.attempts)


def stands(instance: Instance | None, trigger: Trigger) -> bool:
    """Whether the trigger's registration and attempt are still the instance's pending ones. The
    table checks the same in the writes it guards (`wakeup.table.registrations.STANDS`)."""
    return instance is not None and instance.pending and trigger_for(instance) == trigger


def register_wake(
    store: Store, triggers: Triggers, instance_id: str, at: datetime, now: datetime, limit: WakeLimit | None = None
) -> None:
    """Replaces the instance's wake by one at `at` (a past time means now) and arms it; 429 past
    the operator's rate (`limit`), with nothing written."""
    # Stored as now, so the wake's lateness counts from when it was asked for, and an operator's
    # maximum wake age does not give it up at its first failure.
    at = max(at, now)
    reg = uuid.uuid4().hex
    try:
        previous = store.register_wake(instance_id, at, reg, window_of(limit, now) if limit else None)
    except WindowFull as full:
        assert limit is not None  # only a counted registration is refused for its window
        raise rate_refusal(limit, full, now) from full
    if previous is None:
        raise UnauthorizedError("this instance token is no longer registered")
    trigger = Trigger(instance_id, reg, 0)
    try:
        armed = triggers.arm(trigger, at, now, replacing=_likely_scheduled(triggers, previous, now))
        # `previous` is this very registration when the write's reply was lost and botocore's
        # retry found it applied: what it replaced is unknown, so any schedule is removed.
        if armed.way is Origin.QUEUE and (previous.reg == reg or _may_have_schedule(previous, now)):
            _unschedule(store, triggers, instance_id, now)
        if armed.way is Origin.SCHEDULE and not armed.new_schedule:
            converge(store, triggers, instance_id, trigger, now)
    except (ClientError, BotoCoreError, ScheduleContentionError) as exc:
        # The registration stands in the table: the sweeper arms it once it is overdue.
        logger.exception("arming failed", instance_id=instance_id)
        raise UnavailableError("the wake was recorded but could not be armed; retry the request") from exc


def read_wake(store: Store, instance_id: str) -> Instance:
    """The instance's own registration, as its host asks for it (one consistent read); 401 when
    the instance went between the token's check and this read (deleted or revoked)."""
    instance = store.get_instance(instance_id)
    if instance is None or instance.revoked_at is not None:
        raise UnauthorizedError("this instance token is no longer registered")
    return instance


def forget_trigger(
    store: Store, triggers: Triggers, previous: Instance | None, now: datetime, *, deleted: bool = False
) -> None:
    """Removes the schedule a replaced, moved or `deleted` registration may have left."""
    if previous is None or not _may_have_schedule(previous, now):
        return
    if deleted:
        # A deleted instance takes no newer registration (its token is unknown now): nothing of
        # another's to re-arm, so no read.
        triggers.unschedule(previous.id)
    else:
        _unschedule(store, triggers, previous.id, now)


def _unschedule(store: Store, triggers: Triggers, instance_id: str, now: datetime) -> None:
    """Removes the instance's schedule; one removed may be a newer registration's, armed since
    this request read or wrote the table, so the table is read again (`converge`), also when the
    removal's reply was lost and its retry found nothing (`Triggers.unschedule`).

    That re-read concerns a newer registration, not this request's: when it fails, the newer wake
    is left to the sweeper (once overdue), and the request stands."""
    if not triggers.unschedule(instance_id):
        return
    try:
        converge(store, triggers, instance_id, None, now)
    except (ClientError, BotoCoreError, ScheduleContentionError):
        logger.warning("a removed schedule could not be checked against the table", instance_id=instance_id)


def _likely_scheduled(triggers: Triggers, previous: Instance, now: datetime) -> bool:
    """Whether the registration replaced has a schedule, most likely: one beyond the horizon now was
    beyond it when it was armed, and fires later. (A retried write whose reply was lost is its own
    `previous`: what it replaced is unknown, and either guess costs at most a refused request.)"""
    return previous.pending and previous.due is not None and triggers.route(previous.due, now) is Origin.SCHEDULE


def _may_have_schedule(previous: Instance, now: datetime) -> bool:
    # A schedule exists only for a pending wake that was beyond the horizon when armed; one due
    # already has fired (and deleted itself), so only a wake still ahead can have one.
    return previous.pending and previous.due is not None and previous.due > now


def converge(store: Store, triggers: Triggers, instance_id: str, armed: Trigger | None, now: datetime) -> None:
    """Re-reads after changing the instance's one schedule, and changes it until it matches the table.

    `armed` is what the schedule carries as this request left it (None: it removed it). Two
    requests can write the table in one order and the schedule in the other; the one that sees a
    newer registration than it armed arms that one (or removes the schedule when the newer one
    went through SQS), so the last writer leaves the schedule right. A removal is read again: the
    schedule removed may have been a newer registration's, armed after the read.

    A request whose schedule was new (`Armed.new_schedule`) has nothing to re-read: a request that
    wrote the table after it arms after its own write, so either after this one's create (and its
    schedule is the one left), or before it, and then the create met that schedule, was refused,
    and became an update, which is re-read; a schedule removed in between is read again by its
    remover. A newer registration through SQS needs no schedule: the one left behind finds its
    registration replaced when it fires, calls nothing and arms the one held
    (`wakeup.logic.delivery`). So a far wake's registration is three requests, not four, unless it
    replaced a schedule.
    """
    for _ in range(_CONVERGE_ROUNDS):
        current = store.get_instance(instance_id)
        wanted = _owed_schedule(triggers, current, now)
        if wanted == armed:
            return
        if wanted is None:
            if not triggers.unschedule(instance_id):
                return  # nothing was there: no newer registration's schedule was removed
        else:
            assert current is not None and current.due is not None  # a schedule is owed for a pending wake
            triggers.arm(wanted, current.due, now, replacing=armed is not None)  # none after a removal
        armed = wanted


def _owed_schedule(triggers: Triggers, current: Instance | None, now: datetime) -> Trigger | None:
    """The trigger the instance's schedule should carry: its pending registration's, beyond the
    horizon; None when no schedule is owed (nothing pending, or its writer sent an SQS message)."""
    if current is None or current.due is None or triggers.route(current.due, now) is Origin.QUEUE:
        return None
    return trigger_for(current)
