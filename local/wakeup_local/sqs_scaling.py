"""How many batches an SQS event source mapping works at once, as Lambda scales it.

From "Configuring scaling behavior for SQS event source mappings" (Lambda developer guide,
services-sqs-scaling, the edition with provisioned mode):

- Standard mode: five batches at once when messages appear, "up to 300 more concurrent invokes per
  minute" while they remain. "The maximum number of invokes that an event source mapping can process
  simultaneously is 1,250", but "when your account's concurrency quota is set to the default value
  of 1,000, an Amazon SQS event source mapping can scale to invoke function instances up to this
  value": the mapping stops at the lower of 1,250 and the account's concurrency. A mapping's
  `ScalingConfig.MaximumConcurrency` (2 to 1,000) caps it as well.
- Provisioned mode (`ProvisionedPollerConfig`, exclusive with `MaximumConcurrency`): dedicated
  event pollers, `MinimumPollers` (default 2) always ready and at most `MaximumPollers` (default
  200), each running up to 10 concurrent invokes, "quickly adding up to 1,000 concurrency per
  minute" (the same page).

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

STANDARD_INITIAL = 5
STANDARD_PER_MINUTE = 300
STANDARD_MAXIMUM = 1250
# "Lambda quotas": concurrent executions per account and Region, by default.
ACCOUNT_CONCURRENCY = 1000
PROVISIONED_INVOKES_PER_POLLER = 10
PROVISIONED_PER_MINUTE = 1000
DEFAULT_MINIMUM_POLLERS = 2
DEFAULT_MAXIMUM_POLLERS = 200
# How many changes of concurrency a mapping remembers for its counters.
SAMPLES_KEPT = 100_000


@dataclass(frozen=True)
class Scaling:
    """`initial` batches at once when messages appear, and the floor it scales back to; up to
    `maximum`, growing by `per_minute` while messages remain."""

    initial: int
    maximum: int
    per_minute: float

    @classmethod
    def standard(
        cls,
        maximum_concurrency: int | None = None,
        function_bound: int | None = None,
        account_concurrency: int = ACCOUNT_CONCURRENCY,
    ) -> Scaling:
        maximum = _lowest(STANDARD_MAXIMUM, account_concurrency, maximum_concurrency, function_bound)
        return cls(min(STANDARD_INITIAL, maximum), maximum, STANDARD_PER_MINUTE)

    @classmethod
    def provisioned(
        cls, minimum_pollers: int | None, maximum_pollers: int | None, function_bound: int | None = None
    ) -> Scaling:
        least = (minimum_pollers or DEFAULT_MINIMUM_POLLERS) * PROVISIONED_INVOKES_PER_POLLER
        maximum = _lowest((maximum_pollers or DEFAULT_MAXIMUM_POLLERS) * PROVISIONED_INVOKES_PER_POLLER, function_bound)
        return cls(min(least, maximum), maximum, PROVISIONED_PER_MINUTE)

    def unbounded(self) -> Scaling:
        """The local developer's setting: everything at once, from the start."""
        return Scaling(self.maximum, self.maximum, self.per_minute)


def _lowest(*limits: int | None) -> int:
    return min(limit for limit in limits if limit is not None)


@dataclass(frozen=True)
class Sample:
    """The mapping's concurrency just after a change: `at` on the poller's monotonic clock."""

    at: float
    in_flight: int
    target: int


@dataclass(frozen=True)
class Counters:
    """What a mapping has done so far (`samples`: each change of `in_flight` or `target`)."""

    batches: int
    messages: int
    max_in_flight: int
    in_flight: int
    target: int
    samples: list[Sample] = field(repr=False)


class Concurrency:
    """The slots of one mapping: a poll holds one while it receives, and keeps it for the batch it
    found until the batch is done. Only batches are sampled, not idle polls."""

    def __init__(self, scaling: Scaling, clock: Callable[[], float] = time.monotonic) -> None:
        self.scaling = scaling
        self._clock = clock
        self._target = scaling.initial
        self._in_flight = 0
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
            return True

    def release(self, *, worked: bool) -> None:
        """Gives a slot back: `worked`, after its batch; else after a poll that found nothing."""
        with self._changed:
            self._in_flight -= 1
            if worked:
                self._sample()
            self._changed.notify()

    def messages_remain(self, batch: int) -> None:
        """A receive found a batch (its slot is now working): the mapping grows from now on while
        messages last."""
        with self._changed:
            now = self._clock()
            if self._growing_since is None:
                self._growing_since = now
            self._batches += 1
            self._messages += batch
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            self._sample(now)

    def queue_empty(self) -> None:
        """A receive found none: growth stops, and the slots not in use are given back."""
        with self._changed:
            self._growing_since = None
            target = max(self.scaling.initial, self._in_flight)
            if target != self._target:
                self._target = target
                self._sample()

    def counters(self) -> Counters:
        with self._changed:
            return Counters(
                self._batches, self._messages, self._max_in_flight, self._in_flight, self._target, list(self._samples)
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

    def _sample(self, now: float | None = None) -> None:
        self._samples.append(Sample(self._clock() if now is None else now, self._in_flight, self._target))
