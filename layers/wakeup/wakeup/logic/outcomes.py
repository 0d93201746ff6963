"""What the caller writes after a call, within its claim's lease and its invocation's time: the
outcome (tried again while the lease holds: an outcome not written has the host called again),
the call's history item and the retry's trigger (each left out, and left to the sweeper or lost
from the history, when the invocation has no time left for its request)."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from botocore.exceptions import BotoCoreError, ClientError

from wakeup.deadlines import AWS_REQUEST
from wakeup.logic import history
from wakeup.model import CallRecord, Trigger
from wakeup.observability import logger
from wakeup.table import Store
from wakeup.times import epoch_ms
from wakeup.triggers import ScheduleContentionError, Triggers


@dataclass
class Outcomes:
    """Writes what came of a call through the store and the triggers given."""

    store: Store
    triggers: Triggers
    clock: Callable[[], datetime]
    sleep: Callable[[float], None]
    # Seconds the invocation has left; None: no limit.
    time_left_s: Callable[[], float] | None = None

    def has_time(self, seconds: float) -> bool:
        """Whether the invocation has `seconds` left."""
        return self.time_left_s is None or self.time_left_s() >= seconds

    def write(self, write: Callable[[], bool], trigger: Trigger, lease_until_ms: int) -> bool:
        """Writes a call's outcome (`write`, conditional on the registration), sent again after a
        failed request while the lease holds and the invocation has time for a whole request;
        raised when it never could be written.

        A try refused after one that failed may be refused by that one's own write, applied before
        its reply was lost: the instance read then says whether the outcome stands."""
        failures = 0
        while True:
            try:
                written = write()
            except (ClientError, BotoCoreError) as exc:
                if lease_until_ms <= epoch_ms(self.clock()) or not self.has_time(AWS_REQUEST.worst_s):
                    raise
                failures += 1
                logger.warning("outcome not written; trying again", instance_id=trigger.instance_id, error=str(exc))
                self.sleep(min(0.1 * 2**failures, 1.0))
                continue
            if written or not failures:
                return written
            return self._stands(trigger)

    def _stands(self, trigger: Trigger) -> bool:
        """Whether the table holds an outcome for the trigger's attempt: a success, or its failure
        counted."""
        try:
            instance = self.store.get_instance(trigger.instance_id)
        except (ClientError, BotoCoreError):
            logger.warning("outcome written or not: unknown", instance_id=trigger.instance_id)
            return False
        if instance is None or instance.reg != trigger.reg:
            return False
        return instance.called_at is not None or instance.attempts == trigger.attempt + 1

    def remember(self, call: CallRecord | None) -> None:
        """Keeps the call in the instance's history; a failure to is logged, never the call's."""
        if call is None or call.seq < 1:  # no call made, or one not numbered by a claim (an older item)
            return
        if not self.has_time(AWS_REQUEST.worst_s):
            logger.warning("no time left to keep the call in the history", instance_id=call.instance_id)
            return
        try:
            history.record(self.store, call)
        except (ClientError, BotoCoreError):
            logger.warning("call not kept in the history", instance_id=call.instance_id)

    def arm_retry(self, retry: Trigger, due: datetime) -> bool:
        """Arms the retry after a failed call; False when it could not be (the table holds the
        retry's time: the sweeper arms it once it is overdue)."""
        if not self.has_time(AWS_REQUEST.worst_s):
            logger.warning("no time left to arm the retry; the sweeper will", instance_id=retry.instance_id)
            return False
        try:
            self.triggers.arm(retry, due, self.clock())
        except (ClientError, BotoCoreError, ScheduleContentionError):
            logger.exception("retry could not be armed; the sweeper will", instance_id=retry.instance_id)
            return False
        return True
