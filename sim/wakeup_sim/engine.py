"""Virtual time: an event heap, and greenlets so that the service's synchronous code runs as if at once.

The service's code calls `sleep`, the host and AWS as blocking functions. Each of those, here,
parks the greenlet that called it and resumes it when virtual time reaches the end of the wait, so
a hundred thousand wakes take seconds of real time and interleave as concurrent calls would.
"""

import heapq
import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from greenlet import getcurrent, greenlet


class Engine:
    """The simulation's clock and its one loop; every task and model runs from `run`."""

    def __init__(self, start: float) -> None:
        self.now = start
        self._heap: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._order = itertools.count()
        self._hub = getcurrent()

    def at(self, when: float, action: Callable[..., Any], *args: Any) -> None:
        """Runs `action(*args)` at `when` (now at the earliest), in the loop: it must not wait."""
        heapq.heappush(self._heap, (max(when, self.now), next(self._order), action, args))

    def spawn(self, task: Callable[..., Any], *args: Any, when: float | None = None) -> None:
        """Runs `task(*args)` as a task of its own, which may wait (`sleep`, `Signal.wait`)."""
        runner = greenlet(lambda: task(*args), parent=self._hub)
        self.at(self.now if when is None else when, runner.switch)

    def sleep(self, seconds: float) -> None:
        """Waits `seconds` of virtual time (from a task)."""
        current = getcurrent()
        if current is self._hub:
            raise RuntimeError("only a task can wait; the loop itself never does")
        self.at(self.now + max(seconds, 0.0), current.switch)
        self._hub.switch()

    def park(self) -> Callable[[], None]:
        """Parks the calling task until the returned function is called (by anyone, once)."""
        current = getcurrent()
        resumed = False

        def resume() -> None:
            nonlocal resumed
            if not resumed:
                resumed = True
                self.at(self.now, current.switch)

        return resume

    def wait_parked(self) -> None:
        self._hub.switch()

    def clock(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)

    def run(self, until: float) -> None:
        """Runs every event due up to `until`, in order of time (and of scheduling, at one time)."""
        while self._heap and self._heap[0][0] <= until:
            when, _, action, args = heapq.heappop(self._heap)
            self.now = when
            action(*args)
        self.now = max(self.now, until)

    def idle(self) -> bool:
        return not self._heap


class Signal:
    """Tasks wait on it until it is set; setting it again does nothing."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.is_set = False
        self._waiters: list[Callable[[], None]] = []

    def set(self) -> None:
        if self.is_set:
            return
        self.is_set = True
        for resume in self._waiters:
            resume()
        self._waiters.clear()

    def wait(self) -> None:
        if self.is_set:
            return
        self._waiters.append(self.engine.park())
        self.engine.wait_parked()


class Cpu:
    """One execution environment's processor, first come first served, at a fraction of a vCPU.

    Lambda gives a function CPU in proportion to its memory, a full vCPU at 1,769 MB ("Configure
    Lambda function memory", Lambda developer guide); Python runs one thread at a time, so more
    than one vCPU does not help the caller.
    """

    def __init__(self, engine: Engine, speed: float) -> None:
        self.engine = engine
        self.speed = speed
        self.free_at = 0.0
        self.busy_s = 0.0

    def use(self, seconds_at_one_vcpu: float) -> None:
        start = max(self.engine.now, self.free_at)
        took = seconds_at_one_vcpu / self.speed
        self.free_at = start + took
        self.busy_s += took
        self.engine.sleep(self.free_at - self.engine.now)
