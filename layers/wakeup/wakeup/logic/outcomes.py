"""What the caller writes after a call, within its claim's lease and its invocation's time: the
outcome (tried again while the lease holds: an outcome not written has the host called again),
the retry's trigger (left to the sweeper when the invocation has no time left for its request),
and, once the invocation's calls are all made, their history items together (each left out of the
history, and logged, when it cannot be written in the time left)."""

from collections.abc import Callable, Sequence
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

    def keep(self, calls: Sequence[CallRecord | None]) -> None:
        """Keeps the calls in their instances' history, after every call of the invocation (so no
        call waits for it), each written once; a failure to keep one is logged, never the call's.
        Unprocessed ones are sent again after a backoff while the invocation has the time for the
        wait and a whole request."""
        # No call made, or one not numbered by a claim (an older item): nothing to keep.
        numbered = [call for call in calls if call is not None and call.seq >= 1]
        if not numbered:
            return
        if not self.has_time(AWS_REQUEST.worst_s):
            for call in numbered:
                logger.warning("no time left to keep the call in the history", instance_id=call.instance_id)
            return
        for call in history.record(self.store, numbered, lambda wait_s: self.has_time(wait_s + AWS_REQUEST.worst_s)):
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
