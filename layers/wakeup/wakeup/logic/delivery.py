"""The caller's logic for one trigger: drop it, re-arm it, or claim the registration and call.

A trigger only says "look at this registration now" (see `wakeup.triggers`); the table decides.
The steps (DESIGN section 4):

1. claim the registration, in one conditional write that also reads the instance: it succeeds
   only while the trigger's registration and attempt stand, the call is due within the moment
   left to wait out, and no other call holds a live claim, so at most one call is in flight;
2. when refused, the instance read says why: a trigger whose registration or attempt no longer
   stands is dropped (one from the instance's one schedule re-arms what the instance holds now,
   since that schedule is spent); one that came early is armed again for the time due; one whose
   registration another call holds is looked at again when that claim's lease ends (a caller that
   died mid-call is replaced then, never sooner). A schedule's trigger, which almost always fires
   early, is first looked at by a read, so that step 1's write is made only when it is due;
3. the last sub-second before the time is waited out here, after the claim, so a host is never
   called early and, at a busy second, only the calls themselves are left to make;
4. call the host and record the outcome, conditionally on the registration; after a failure arm
   the retry at the time `wakeup.logic.retry` sets, or give the wake up when it is too old.
   A call that cannot be signed (the keys unreadable) is not made, and counts as a failed one.
   A registration replaced in the last moment before its call may still be called once: a host
   treats a wake after a replacement as harmless (DESIGN section 1);
5. once every trigger of the invocation is delivered, keep their calls in the history together
   (`Caller.keep_history`): one request for the batch, and no call waits for it.

Within the lease and the invocation's time (`wakeup.deadlines`): the claim is taken only when the
invocation has time left for it, the call and the outcome's write; the call is made only when the
lease left and the time left still cover the call and the outcome's write (the AWS requests since
the claim may have been slow), or the trigger is sent again for when the lease ends; a failed
outcome write is tried again while the lease lasts; and no step starts that the invocation's time
cannot hold, so a slow request of one record never takes its batch-mates down with a timeout.

Metrics are counted by the caller from the returned `Delivery` (`publish`), in one thread, because
Powertools' metric set is not safe to write from the threads that deliver a batch.
"""

import functools
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from wakeup import times
from wakeup.arrival import CLOCK_ERROR_S, EARLY_REARM_S, QUEUE_LEAD_S
from wakeup.deadlines import AWS_REQUEST, lease_needed_s, time_to_claim_s
from wakeup.errors import UnavailableError
from wakeup.host_call import CallOutcome, call_wake
from wakeup.logic import retry
from wakeup.logic.outcomes import Outcomes
from wakeup.logic.wakes import stands, trigger_for
from wakeup.model import CallRecord, Instance, Origin, Trigger
from wakeup.observability import Metric, logger, metrics
from wakeup.settings import Settings
from wakeup.signing import SigningKeys, SigningVersions, WakeId, signed_headers
from wakeup.table import Store
from wakeup.times import epoch_ms
from wakeup.triggers import Triggers

# `lastError` of an attempt not made because its call could not be signed (the account reads it).
NOT_SIGNED = "not called: the service could not sign the call"


class Result(StrEnum):
    CALLED = "called"  # the host answered 2xx
    FAILED = "failed"  # the host failed; a retry is owed
    GIVEN_UP = "given up"  # the host failed and the wake is older than the operator allows
    STALE = "stale"  # the registration or attempt no longer stands: nothing to do
    EARLY = "early"  # armed again for its time
    BUSY = "busy"  # another call holds the claim: looked at again when its lease ends
    # Not called: too little time or lease left to call and record; looked at again later.
    DEFERRED = "deferred"


@dataclass(frozen=True)
class Delivery:
    """What one trigger came to, with what the metrics need to know about it."""

    result: Result
    # Milliseconds between the wake's time and its first call (first attempts only).
    lateness_ms: float | None = None
    # Whether this call's outcome was written (False: the registration changed during the call).
    recorded: bool = False
    retry_armed: bool = False
    # The call was not made: the host's address is in a range the operator does not call.
    refused: bool = False
    # The call made, for the history (`Caller.keep_history`); None: no call was made.
    call: CallRecord | None = None


class OutOfTimeError(RuntimeError):
    """Raised when the invocation has no time left even to send a trigger again: the record fails,
    so its message comes back (or Lambda retries the schedule's event)."""


def host_of(url: str) -> str:
    """The host and port of an instance's URL: what logs name (its path may be private)."""
    return urlsplit(url).netloc


@dataclass
class Caller:
    """Delivers triggers with the store, the triggers and the host call it is given."""

    store: Store
    triggers: Triggers
    settings: Settings
    call: Callable[[str, str, float, Mapping[str, str]], CallOutcome] = call_wake
    clock: Callable[[], datetime] = times.now
    sleep: Callable[[float], None] = time.sleep
    # None: calls go unsigned (no master key configured).
    signing: SigningKeys | None = None
    # The accounts' signing versions as this caller read them, each once per batch (caller_handler
    # makes a caller per invocation; a rotation's overlap keeps them right). None: read every call.
    versions: dict[str, SigningVersions | None] | None = None
    # Held while an account's versions are read, so that a batch's threads, all signing at once,
    # wait for the first read rather than each making its own.
    versions_lock: AbstractContextManager[Any] = field(default_factory=threading.Lock)
    # Seconds the invocation has left (Lambda's `context.get_remaining_time_in_millis`); None: no limit.
    time_left_s: Callable[[], float] | None = None

    def deliver(self, trigger: Trigger, source: Origin) -> Delivery:
        """Does what `trigger` asks for now; see the module's docstring for the steps."""
        now = self.clock()
        if source is Origin.SCHEDULE:
            early = self._early_schedule(trigger, now)
            if early is not None:
                return early
            now = self.clock()  # the claim's lease runs from the claim, not from before the read
        call_s = self.settings.call_timeout_s
        if not self._outcomes.has_time(time_to_claim_s(call_s)):
            return self._defer(trigger, delay_s=0, why="no time left to claim, call and record")
        # One write claims the call when it is due within the moment left to wait out, and returns
        # the instance either way. The lease runs from the call's start, hence the moment added.
        lease_ms = round((self.settings.claim_lease_s + EARLY_REARM_S) * 1000)
        lease_until_ms = epoch_ms(now) + lease_ms
        claim = self.store.claim_if_due(
            trigger, now_ms=epoch_ms(now), due_by=now + timedelta(seconds=EARLY_REARM_S), lease_ms=lease_ms
        )
        instance = claim.instance
        if instance is None or not stands(instance, trigger) or instance.due is None:
            return self._drop(trigger, source, instance)
        if not claim.claimed:
            # Measured from now, not from before the write: a slow write may have let the claim
            # that refused it start after our `now`, and its lease would then look longer.
            return self._refused(trigger, instance, self.clock())
        # The keys before the wait: the sub-second left before the call's time covers their read.
        try:
            keys = self._signing_keys(instance, instance.due)
        except (UnavailableError, ClientError, BotoCoreError):
            # Never unsigned: a failed attempt (frees the claim, arms the retry), failed at its time
            # at the earliest (the keys are read before the wait), or the retry would come early.
            logger.exception("wake not called: its call could not be signed", instance_id=instance.id)
            failed_at = max(self.clock(), instance.due)
            return self._failed(trigger, instance, CallOutcome(None, NOT_SIGNED), failed_at, None, lease_until_ms)
        # From now, not from before the requests: the read and the claim took their time already;
        # past the due time by the clocks' error, so that a clock ahead does not call early.
        self._wait_until(instance.due + timedelta(seconds=CLOCK_ERROR_S), self.clock())
        # The lease outlives the call whatever the requests since the claim took (DESIGN section 3).
        lease_left_s = (lease_until_ms - epoch_ms(self.clock())) / 1000
        if lease_left_s < lease_needed_s(call_s):
            return self._defer(trigger, delay_s=lease_left_s, why="too little of the lease left to call")
        if not self._outcomes.has_time(call_s + AWS_REQUEST.worst_s):
            return self._defer(trigger, delay_s=lease_left_s, why="no time left to call")
        origin = Origin.SWEEPER if trigger.origin is Origin.SWEEPER else source
        return self._call(trigger, instance, instance.due, keys, origin, lease_until_ms)

    def keep_history(self, deliveries: Sequence[Delivery]) -> None:
        """Keeps the calls the deliveries made in their instances' history, together, once all are
        made (every invocation calls it once, after its last delivery): a failure to is logged."""
        self._outcomes.keep([delivery.call for delivery in deliveries])

    def _early_schedule(self, trigger: Trigger, now: datetime) -> Delivery | None:
        """A schedule's trigger, looked at by a read (cheaper than a refused claim: docs/architecture.md,
        "Triggers"): dropped, or armed again through SQS when it fired before the last moment; None
        when it is due now, for the claim to take."""
        instance = self.store.get_instance(trigger.instance_id)
        if instance is None or not stands(instance, trigger) or instance.due is None:
            return self._drop(trigger, Origin.SCHEDULE, instance)
        if (instance.due - now).total_seconds() <= EARLY_REARM_S:
            return None
        return self._rearm_early(trigger, instance, now)

    def _signing_keys(self, instance: Instance, moment: datetime) -> list[bytes]:
        """The account's keys that sign a call at `moment` (two during a rotation's overlap)."""
        if self.signing is None:
            return []
        versions = self._signing_versions(instance.account_id)
        if versions is None:  # accounts are never deleted; an unknown one signs with its first version
            versions = SigningVersions(current=1)
        return self.signing.keys_at(instance.account_id, versions, moment)

    def _signing_versions(self, account_id: str) -> SigningVersions | None:
        if self.versions is None:
            return self.store.signing_versions(account_id)
        if account_id not in self.versions:
            with self.versions_lock:
                if account_id not in self.versions:
                    # A read that fails keeps nothing: the next call of the batch reads again.
                    self.versions[account_id] = self.store.signing_versions(account_id)
        return self.versions[account_id]

    @functools.cached_property
    def _outcomes(self) -> Outcomes:  # what is written after a call, within the lease and the time
        return Outcomes(self.store, self.triggers, self.clock, self.sleep, self.time_left_s)

    def _defer(self, trigger: Trigger, delay_s: float, why: str) -> Delivery:
        """Sends the trigger again for after `delay_s` (0, or the end of this caller's lease);
        `OutOfTimeError` when the invocation has not even the time to send it."""
        if not self._outcomes.has_time(AWS_REQUEST.worst_s):
            raise OutOfTimeError(why)
        # A message arrives up to QUEUE_LEAD_S early: it must not come while the lease still holds.
        delay = math.ceil(delay_s) + QUEUE_LEAD_S if delay_s > 0 else 0
        self.triggers.send(trigger, delay_s=delay)
        logger.warning("wake not called now; trigger re-sent", instance_id=trigger.instance_id, reason=why)
        return Delivery(Result.DEFERRED)

    def _wait_until(self, due: datetime, now: datetime) -> None:
        """Sleeps out the last moment before `due` (never more than `EARLY_REARM_S`)."""
        while now < due:
            self.sleep(max((due - now).total_seconds(), 0.001))
            now = self.clock()

    def _drop(self, trigger: Trigger, source: Origin, current: Instance | None) -> Delivery:
        logger.info("stale trigger dropped", instance_id=trigger.instance_id, source=source.value)
        # The instance's one schedule fired with an older registration's trigger, so the schedule
        # that the newer one set (an update of the same schedule) may be spent with it: arm again.
        if source is Origin.SCHEDULE and current is not None:
            wanted = trigger_for(current)
            if wanted is not None and current.due is not None:
                self.triggers.arm(wanted, current.due, self.clock())
                logger.info("pending wake re-armed after a stale schedule", instance_id=trigger.instance_id)
        return Delivery(Result.STALE)

    def _refused(self, trigger: Trigger, instance: Instance, now: datetime) -> Delivery:
        """The registration stands but was not claimed: it is not due yet, or a call holds it."""
        assert instance.due is not None  # a pending registration has its next call's time
        if (instance.due - now).total_seconds() > EARLY_REARM_S:
            return self._rearm_early(trigger, instance, now)
        # Another call holds the claim (a duplicate message, or a caller that may have died):
        # look again once its lease ends; by then its outcome is recorded, or it is gone.
        lease_left_ms = max((instance.claim_until or 0) - epoch_ms(now), 0)
        self.triggers.send(trigger, delay_s=math.ceil(lease_left_ms / 1000))
        logger.info("claim held by another call; trigger re-sent", instance_id=trigger.instance_id)
        return Delivery(Result.BUSY)

    def _rearm_early(self, trigger: Trigger, instance: Instance, now: datetime) -> Delivery:
        """Arms the trigger again for its time: it came before the last moment before it."""
        assert instance.due is not None  # a pending registration has its next call's time
        self.triggers.arm(trigger, instance.due, now)
        ahead_s = (instance.due - now).total_seconds()
        # A far wake's schedule fires early and comes here once: DEBUG, so its logs are its "wake called" alone.
        logger.debug("early trigger re-armed", instance_id=trigger.instance_id, due_in_s=round(ahead_s, 3))
        return Delivery(Result.EARLY)

    def _call(
        self,
        trigger: Trigger,
        instance: Instance,
        due: datetime,
        keys: list[bytes],
        origin: Origin,
        lease_until_ms: int,
    ) -> Delivery:
        host = host_of(instance.url)
        started = self.clock()
        wake_id = WakeId(instance.id, trigger.reg)
        headers = signed_headers(keys, wake_id, started) if keys else {}
        outcome = self.call(instance.url, instance.id, self.settings.call_timeout_s, headers)
        finished = self.clock()
        # From the wake's time, not from `due`, which the sweeper moves when it re-arms a lost wake:
        # those are the latest wakes, and their lateness must not read as a second or two.
        at = instance.at or due
        lateness_ms = max((started - at).total_seconds() * 1000, 0.0) if trigger.attempt == 0 else None
        call = call_record(instance, trigger, at, (started, finished), outcome, origin, wake_id, lateness_ms)
        # The outcome now, the history item with the invocation's other calls' once all are made
        # (`keep_history`): a caller that dies between the two then loses only the item (a host
        # called again after its 2xx costs more). Not one transaction: that would double both
        # writes' units.
        if outcome.error is None:
            recorded = self._outcomes.write(
                lambda: self.store.record_success(trigger, finished), trigger, lease_until_ms
            )
            logger.info(
                "wake called",
                instance_id=instance.id,
                host=host,
                status=outcome.status,
                attempts=trigger.attempt,
                lateness_ms=lateness_ms,
                recorded=recorded,
            )
            return Delivery(Result.CALLED, lateness_ms=lateness_ms, recorded=recorded, call=call)

        logger.warning(
            "wake call failed",
            instance_id=instance.id,
            host=host,
            error=outcome.error,
            attempts=trigger.attempt + 1,
            refused_address=outcome.refused_address,
        )
        return self._failed(trigger, instance, outcome, finished, lateness_ms, lease_until_ms, call)

    def _failed(
        self,
        trigger: Trigger,
        instance: Instance,
        outcome: CallOutcome,
        finished: datetime,
        lateness_ms: float | None,
        lease_until_ms: int,
        call: CallRecord | None = None,
    ) -> Delivery:
        """Records a failed attempt (`call` its history item, None when no call was made) and
        arms its retry, or gives the wake up when it is too old."""
        assert outcome.error is not None  # a failure says why
        host = host_of(instance.url)
        failures = trigger.attempt + 1
        next_due = retry.next_due(finished, failures, instance.at, self.settings.max_wake_age_s)
        if next_due is None:
            recorded = self._outcomes.write(
                lambda: self.store.record_failure(trigger, outcome.error or "", None), trigger, lease_until_ms
            )
            if recorded:
                logger.warning(
                    "wake given up",
                    instance_id=instance.id,
                    host=host,
                    error=outcome.error,
                    attempts=failures,
                    max_wake_age_s=self.settings.max_wake_age_s,
                )
            return Delivery(
                Result.GIVEN_UP, lateness_ms=lateness_ms, recorded=recorded, refused=outcome.refused, call=call
            )

        recorded = self._outcomes.write(
            lambda: self.store.record_failure(trigger, outcome.error or "", next_due), trigger, lease_until_ms
        )
        retry_armed = recorded and self._outcomes.arm_retry(Trigger(instance.id, trigger.reg, failures), next_due)
        return Delivery(
            Result.FAILED,
            lateness_ms=lateness_ms,
            recorded=recorded,
            retry_armed=retry_armed,
            refused=outcome.refused,
            call=call,
        )


def call_record(
    instance: Instance,
    trigger: Trigger,
    at: datetime,
    span: tuple[datetime, datetime],
    outcome: CallOutcome,
    origin: Origin,
    wake_id: WakeId,
    lateness_ms: float | None,
) -> CallRecord:
    """The history's item of a call made from `span[0]` to `span[1]`."""
    started, finished = span
    return CallRecord(
        instance_id=instance.id,
        seq=instance.history_seq,
        started_at=started,
        at=at,
        attempt=trigger.attempt,
        lateness_ms=round(lateness_ms) if lateness_ms is not None else None,
        duration_ms=round((finished - started).total_seconds() * 1000),
        status=outcome.status,
        error=outcome.error,
        trigger=origin,
        webhook_id=str(wake_id),
    )


def publish(delivery: Delivery) -> None:
    """Counts one delivery in the metrics (call from one thread: the metric set is shared)."""
    if delivery.result is Result.CALLED:
        metrics.add_metric(name=Metric.WAKES_CALLED, unit=MetricUnit.Count, value=1)
    elif delivery.result in (Result.FAILED, Result.GIVEN_UP):
        metrics.add_metric(name=Metric.CALLS_FAILED, unit=MetricUnit.Count, value=1)
    if delivery.refused:
        metrics.add_metric(name=Metric.CALLS_REFUSED, unit=MetricUnit.Count, value=1)
    elif delivery.result is Result.STALE:
        metrics.add_metric(name=Metric.STALE_TRIGGERS_DROPPED, unit=MetricUnit.Count, value=1)
    if delivery.lateness_ms is not None:
        metrics.add_metric(name=Metric.WAKE_LATENESS, unit=MetricUnit.Milliseconds, value=delivery.lateness_ms)
    if delivery.retry_armed:
        metrics.add_metric(name=Metric.RETRIES_SCHEDULED, unit=MetricUnit.Count, value=1)
    if delivery.result is Result.GIVEN_UP and delivery.recorded:
        metrics.add_metric(name=Metric.WAKES_GIVEN_UP, unit=MetricUnit.Count, value=1)


def publish_baseline() -> None:
    """Zero counts of calls made and failed, so every invocation reports and no alarm sees a gap."""
    metrics.add_metric(name=Metric.WAKES_CALLED, unit=MetricUnit.Count, value=0)
    metrics.add_metric(name=Metric.CALLS_FAILED, unit=MetricUnit.Count, value=0)
