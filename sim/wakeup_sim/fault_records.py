"""A call's record (the caller's outcome write after a 2xx it saw), attempt by attempt, as the table
met it: what tells a duplicate that the promise allows, because no attempt of its record could be
written within its claim's lease, from one whose record the service could have written
(docs/faults.md, "duplicates").

The floor: a caller that saw its host's 2xx writes the outcome, and tries again while its lease
holds (`wakeup.logic.outcomes`). When every attempt within the lease fails before it applies (or
applies only after the lease's end, as a write that lands late), the table holds no sign of the
2xx when the lease ends, and the next trigger claims and calls again, as after a caller that died
between the reply and its record.
"""

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from weakref import WeakKeyDictionary

from greenlet import getcurrent

from wakeup.deadlines import AWS_REQUEST
from wakeup_sim.engine import Engine

# The duplicate's cause, beside `faults.UNSEEN` and `faults.DIED`.
UNRECORDED = "its record could not be written within the lease"
# The request that writes a call's outcome (`record_success`, `record_failure`).
RECORD_OPERATION = "UpdateItem"


@dataclass
class RecordAttempt:
    """One attempt of a record, on the true clock."""

    sent: float
    ended: float | None = None  # None: still under way
    failed: bool = False  # a fault met it before it applied: a 5xx, a throttle, its client's timeout
    applied: float | None = None  # when it applied (one its client timed out on may land later)
    left_s: float = math.inf  # the invocation's time left when it ended


@dataclass
class RecordLog:
    """A call's record: its claim's lease's end and every attempt of its outcome write."""

    lease_end: float = math.inf  # on the true clock; unknown: never ended
    attempts: list[RecordAttempt] = field(default_factory=list)
    out_of_time: bool = False  # a request of it not sent: the invocation's time left could not hold it

    def lapsed(self, now: float) -> bool:
        """Whether, at `now` (a second call's start), the record could not be written within the
        lease: the lease has ended; the record was tried; no attempt applied before the lease's
        end; each attempt sent within it failed, applied after its end, or is still under way (a
        refusal is no fault: a record refused in its lease is the service's to explain); and the
        caller went on trying until the lease ended, or until its invocation had no time left."""
        in_lease = [attempt for attempt in self.attempts if attempt.sent < self.lease_end]
        if now < self.lease_end or not in_lease:
            return False
        if any(attempt.applied is not None and attempt.applied < self.lease_end for attempt in self.attempts):
            return False
        if not all(a.failed or a.applied is not None or a.ended is None for a in in_lease):
            return False
        last = self.attempts[-1]
        return (
            last.ended is None or last.ended >= self.lease_end or last.left_s < AWS_REQUEST.worst_s or self.out_of_time
        )


class Note(Protocol):
    """What the records read of a call's `faults.CallNote`."""

    seen: bool
    record: RecordLog


class Injector(Protocol):
    """What the records read of the row's `faults.FaultInjector` (named here, not imported: that
    module keeps these records)."""

    engine: Engine

    @property
    def call_note(self) -> Mapping[Any, Note]: ...  # each call's task -> its note

    def time_left_s(self) -> float: ...


class Records:
    """Keeps each call's `RecordLog` (its `CallNote.record`) from the seams the row's faults use:
    `FaultyIo` at each attempt, `LateWrites` for an attempt that lands late, `TimedClient` for a
    request not sent, and the store's `claim_if_due` for the lease (`watch_claims`)."""

    def __init__(self, faults: Injector) -> None:
        self.faults = faults
        self._leases: WeakKeyDictionary[Any, float] = WeakKeyDictionary()  # task -> its lease's end
        self._attempts: WeakKeyDictionary[Any, RecordAttempt] = WeakKeyDictionary()  # task -> its attempt

    def _log(self, operation: str) -> RecordLog | None:
        """The running task's record: its requests of `RECORD_OPERATION` after a 2xx it saw."""
        note = self.faults.call_note.get(getcurrent())
        if operation != RECORD_OPERATION or note is None or not note.seen:
            return None
        return note.record

    def begin(self, operation: str) -> RecordAttempt | None:
        """An attempt of the running task's request starts: kept when it is one of its record's."""
        task = getcurrent()
        log = self._log(operation)
        if log is None:
            self._attempts.pop(task, None)
            return None
        log.lease_end = self._leases.get(task, math.inf)
        attempt = self._attempts[task] = RecordAttempt(sent=self.faults.engine.now)
        log.attempts.append(attempt)
        return attempt

    def end(self, failed: bool = False) -> None:
        """The running task's record attempt came this far now (`failed`: a fault met it)."""
        attempt = self._attempts.get(getcurrent())
        if attempt is None:
            return
        attempt.failed = attempt.failed or failed
        attempt.ended = self.faults.engine.now
        attempt.left_s = self.faults.time_left_s()

    def applied(self, attempt: RecordAttempt | None = None) -> None:
        """`attempt` (the running task's when not given) applied now."""
        attempt = attempt or self._attempts.get(getcurrent())
        if attempt is not None and attempt.applied is None:
            attempt.applied = self.faults.engine.now

    def landed(self, attempt: RecordAttempt | None) -> Callable[[], None]:
        """What a late attempt calls when it lands and applies."""
        return lambda: self.applied(attempt) if attempt is not None else None

    def not_sent(self, operation: str) -> None:
        """A request of the running task not sent, for its invocation's time left."""
        log = self._log(operation)
        if log is not None:
            log.out_of_time = True

    def watch_claims(self, store: Any) -> None:
        """The store's `claim_if_due`, as the caller calls it: a claim taken keeps its lease's end,
        on the true clock (the caller's `now_ms` is read on its own clock, at this very moment)."""
        claim_if_due = store.claim_if_due

        def watched(trigger: Any, now_ms: int, due_by: Any, lease_ms: int) -> Any:
            started = self.faults.engine.now
            claim = claim_if_due(trigger, now_ms=now_ms, due_by=due_by, lease_ms=lease_ms)
            if claim.claimed:
                self._leases[getcurrent()] = started + lease_ms / 1000
            return claim

        store.claim_if_due = watched
