"""The sweeper's logic: re-arm pending wakes whose trigger was lost.

The table is the truth and triggers are hints. A wake written to the table whose message or
schedule was never made (a crash, or AWS failing between the two writes) stays pending with its
time in the past; every minute the sweeper looks for those, through the sharded pending-wakes
index, and arms them again. A wake whose call is in flight (a live claim) is left alone.

A sweep stops when the invocation's time left no longer holds a request (`wakeup.deadlines`): the
shards it did not reach, and the wake it was re-arming, are the next sweep's, rather than Lambda's
timeout ending it in the middle.
"""

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from wakeup.deadlines import NoTimeForRequestError
from wakeup.errors import UnavailableError
from wakeup.logic.wakes import trigger_for
from wakeup.model import Instance, Origin
from wakeup.observability import Metric, logger, metrics
from wakeup.settings import Settings
from wakeup.table import Store
from wakeup.table.items import PENDING_SHARDS
from wakeup.times import epoch_ms, format_time
from wakeup.triggers import Triggers


@dataclass(frozen=True)
class Sweep:
    """What one sweep found and did."""

    overdue: int
    rearmed: int
    failed: int  # wakes that could not be re-armed, and shards that could not be read


class UnreadShardsError(Exception):
    """Raised after a sweep that could not read some shards: the sweep still fails (its alarm
    watches function errors), but only once the other shards are swept; `result` says what it did."""

    def __init__(self, result: Sweep, shards: list[int]) -> None:
        super().__init__(f"shards of the pending-wakes index not read: {shards}")
        self.result = result


def sweep(store: Store, triggers: Triggers, settings: Settings, now: datetime) -> Sweep:
    """Re-arms every pending wake overdue by more than the grace, shard by shard."""
    before = now - timedelta(seconds=settings.sweep_grace_s)
    overdue = rearmed = failed = 0
    unread: list[int] = []
    for shard in range(PENDING_SHARDS):
        try:
            found = store.overdue(shard, before)
            for instance in found:
                overdue += 1
                try:
                    if _rearm(store, triggers, instance, now):
                        rearmed += 1
                except NoTimeForRequestError:
                    raise
                except (ClientError, BotoCoreError):
                    # One wake that cannot be armed now must not keep the others waiting; it is
                    # still overdue, so the next sweep tries it again.
                    failed += 1
                    logger.exception("overdue wake could not be re-armed", instance_id=instance.id)
        except NoTimeForRequestError:
            # This shard's wakes not yet re-armed, and the shards after it, are the next sweep's.
            unread.extend(range(shard, PENDING_SHARDS))
            logger.warning("sweep stopped: no time left for its requests", shards_left=PENDING_SHARDS - shard)
            break
        except (ClientError, BotoCoreError, UnavailableError):
            # A shard the table will not read now (a throttled query, keys BatchGetItem leaves
            # unprocessed) must not leave the shards after it unswept; the next sweep reads it again.
            unread.append(shard)
            logger.exception("a shard of the pending-wakes index could not be read", shard=shard)
    result = Sweep(overdue=overdue, rearmed=rearmed, failed=failed + len(unread))
    if unread:
        raise UnreadShardsError(result, unread)
    return result


def _rearm(store: Store, triggers: Triggers, instance: Instance, now: datetime) -> bool:
    """Re-arms one overdue wake unless a call holds it or it changed since it was listed."""
    trigger = trigger_for(instance)
    now_ms = epoch_ms(now)
    if trigger is None or (instance.claim_until is not None and instance.claim_until >= now_ms):
        return False
    # Moving its time to now first makes the wake overdue again only after another grace period,
    # and the write's condition (same registration and attempt, no live claim) loses any race
    # with the caller or a new registration.
    if not store.postpone(trigger, now, now_ms):
        return False
    triggers.arm(replace(trigger, origin=Origin.SWEEPER), now, now)
    logger.warning(
        "overdue wake re-armed",
        instance_id=instance.id,
        due=format_time(instance.due) if instance.due else None,
        attempts=instance.attempts,
    )
    return True


def publish(result: Sweep) -> None:
    """Counts the recoveries, zero included, so the sweeper's alarm always has data."""
    metrics.add_metric(name=Metric.OVERDUE_WAKES_REARMED, unit=MetricUnit.Count, value=result.rearmed)
