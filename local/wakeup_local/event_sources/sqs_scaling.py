"""The local stack's event source mapping concurrency: slots that its SQS poller takes and gives back.

How many slots there are, and how fast they grow, is Lambda's rule (`wakeup_awsfacts.sqs_scaling`).
The growth is spread evenly (300 a minute is one more batch every 0.2 s), and it accrues only while
the last receive found messages. The function's own concurrency bound caps the mapping as well.
Left out: the optimisation down to 2 pollers, and the backing off when the function is throttled.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from wakeup_awsfacts.sqs_scaling import Scaling

# How many changes of concurrency a mapping remembers for its counters.
SAMPLES_KEPT = 100_000


@dataclass(frozen=True)
class Sample:
    """The mapping's concurrency just after a change: `at` on the poller's monotonic clock."""

    at: float
    in_flight: int
    target: int


@dataclass(frozen=True)
class Counters:
    """What a mapping has done so far (`samples`: each change of `in_flight` or `target`), and the
    scaling it follows now."""

    batches: int
    messages: int
    max_in_flight: int
    in_flight: int
    target: int
    samples: list[Sample] = field(repr=False)
    scaling: Scaling | None = None


class Concurrency:
    """The slots of one mapping: a poll holds one while it receives, and keeps it for the batch it
    found until the batch is done. Only batches are sampled and counted in flight, not idle polls
    (the receiver's long poll holds its slot most of the time while the queue is empty)."""

    def __init__(self, scaling: Scaling, clock: Callable[[], float] = time.monotonic) -> None:
        self.scaling = scaling
        self._clock = clock
        self._target = scaling.initial
        self._in_flight = 0
        self._receiving = 0  # slots held by a poll that has found nothing yet
        self._growing_since: float | None = None  # set while messages remain
        self._changed = threading.Condition()
        self._batches = 0
        self._messages = 0
        self._max_in_flight = 0
        self._samples: deque[Sample] = deque(maxlen=SAMPLES_KEPT)

    def acquire(self, timeout: float) -> bool:
        """Takes a slot, waiting up to `timeout` for one: whether it got one."""
        with self._changed:
            self._grow()
            if self._in_flight >= self._target:
                self._changed.wait(timeout)
                self._grow()
                if self._in_flight >= self._target:
                    return False
            self._in_flight += 1
            self._receiving += 1
            return True

    def release(self, *, worked: bool) -> None:
        """Gives a slot back: `worked`, after its batch; else after a poll that found nothing."""
        with self._changed:
            self._in_flight -= 1
            if not worked:
                self._receiving -= 1
            if worked:
                self._sample()
            self._changed.notify()

    def received(self, batch: int) -> None:
        """The poll that took a slot (`acquire`) found a batch: the slot is now working."""
        with self._changed:
            self._receiving -= 1
            self.messages_remain(batch)

    def messages_remain(self, batch: int) -> None:
        """A receive found a batch (its slot is now working): the mapping grows from now on while
        messages last."""
        with self._changed:
            now = self._clock()
            if self._growing_since is None:
                self._growing_since = now
            self._batches += 1
            self._messages += batch
            self._max_in_flight = max(self._max_in_flight, self._working())
            self._sample(now)

    def queue_empty(self) -> None:
        """A receive found none: growth stops, and the slots not in use are given back."""
        with self._changed:
            self._growing_since = None
            target = max(self.scaling.initial, self._in_flight)
            if target != self._target:
                self._target = target
                self._sample()

    def rescale(self, scaling: Scaling) -> None:
        """The mapping's configuration changed (provisioned mode on or off, mappings.py): from now
        on it scales by `scaling`, the batches at work now kept within its bounds (a floor raised at
        once; a lower ceiling reached as batches finish, and the floor once the queue is empty)."""
        with self._changed:
            self.scaling = scaling
            target = min(max(self._target, scaling.initial), scaling.maximum)
            if target != self._target:
                self._target = target
                self._sample()
            self._changed.notify_all()

    def counters(self) -> Counters:
        with self._changed:
            return Counters(
                self._batches,
                self._messages,
                self._max_in_flight,
                self._working(),
                self._target,
                list(self._samples),
                self.scaling,
            )

    def _grow(self) -> None:
        if self._growing_since is None:
            return
        now = self._clock()
        if self._target >= self.scaling.maximum:
            self._growing_since = now  # nothing accrues at the maximum
            return
        interval = 60.0 / self.scaling.per_minute
        added = int((now - self._growing_since) / interval)
        if added:
            self._target = min(self.scaling.maximum, self._target + added)
            self._growing_since += added * interval
            self._sample()

    def _working(self) -> int:
        return self._in_flight - self._receiving

    def _sample(self, now: float | None = None) -> None:
        self._samples.append(Sample(self._clock() if now is None else now, self._working(), self._target))
