"""Virtual time: an event heap, and greenlets so that the service's synchronous code runs as if at once.

The service's code calls `sleep`, the host and AWS as blocking functions. Each of those, here,
parks the greenlet that called it and resumes it when virtual time reaches the end of the wait, so
a hundred thousand wakes take seconds of real time and interleave as concurrent calls would.
"""

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from greenlet import getcurrent, greenlet

Event = tuple[float, int, Callable[..., Any], tuple[Any, ...]]  # when, order, action, its arguments
# Slices of virtual time the engine files later events by: a power of two, so that a time's slice
# (`when * SLICES_PER_S`, rounded down) and a slice's start are exact in floating point.
SLICES_PER_S = 64
# Greenlets kept for the next tasks: a burst's 100,000 registrations end together, and keeping all
# their greenlets (and stacks) grew a worker by a gigabyte; a steady scenario needs a few thousand.
MAX_IDLE_TASKS = 10_000


class Engine:
    """The simulation's clock and its one loop; every task and model runs from `run`.

    Events run in order of time, and of scheduling at one time. Those due before the end of the
    clock's current slice of time (1/64 s) are in a heap; later ones wait in a list per slice,
    made a heap when the clock reaches it. A scenario schedules hundreds of thousands of events
    minutes ahead (its registrations, SQS's delays), and one heap of them all made every event's
    push and pop walk some 20 levels of memory the processor's caches do not hold.
    """

    def __init__(self, start: float) -> None:
        self.now = start
        # A task's greenlet runs the next task once its own ends. Python gives each greenlet a stack
        # of its own for its frames, allocated when it starts and unmapped when it ends, a cost per
        # task that reusing the greenlet saves. False for a world that keeps state by
        # greenlet (`getcurrent()`) beyond a task's end, as the fault injector does.
        self.reuse_tasks = True
        self._idle_tasks: list[greenlet] = []
        self._heap: list[Event] = []
        self._horizon = (math.floor(start * SLICES_PER_S) + 1) / SLICES_PER_S  # the heap: every event before it
        self._later: dict[int, list[Event]] = {}  # a slice from the horizon on -> its events
        self._slices: list[int] = []  # the slices in `_later`, as a heap
        self._order = itertools.count()
        self._hub = getcurrent()
        self._clock: tuple[float, datetime] = (start, datetime.fromtimestamp(start, UTC))

    def _push(self, event: Event) -> None:
        when = event[0]
        if when < self._horizon:
            heapq.heappush(self._heap, event)
            return
        slice_ = math.floor(when * SLICES_PER_S)
        later = self._later.get(slice_)
        if later is None:
            self._later[slice_] = [event]
            heapq.heappush(self._slices, slice_)
        else:
            later.append(event)

    def at(self, when: float, action: Callable[..., Any], *args: Any) -> None:
        """Runs `action(*args)` at `when` (now at the earliest), in the loop: it must not wait."""
        now = self.now
        self._push((when if when > now else now, next(self._order), action, args))

    def spawn(self, task: Callable[..., Any], *args: Any, when: float | None = None) -> None:
        """Runs `task(*args)` as a task of its own, which may wait (`sleep`, `park`)."""
        now = self.now
        start = now if when is None or when < now else when
        # Its greenlet is made when it starts: a scenario spawns every host's registration at once.
        self._push((start, next(self._order), self._start, (task, args)))

    def _start(self, task: Callable[..., Any], args: tuple[Any, ...]) -> None:
        if not self.reuse_tasks:
            greenlet(task, parent=self._hub).switch(*args)
        elif self._idle_tasks:
            self._idle_tasks.pop().switch(task, args)
        else:
            greenlet(self._run_tasks, parent=self._hub).switch(task, args)

    def _run_tasks(self, task: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """A greenlet's life: runs its task, then each task it is handed while idle. A task that
        raises ends it, as it would end a greenlet of its own (the loop raises it)."""
        while True:
            task(*args)
            del task, args  # idle, it keeps nothing of its last task
            if not self.reuse_tasks or len(self._idle_tasks) >= MAX_IDLE_TASKS:
                return
            self._idle_tasks.append(getcurrent())
            task, args = self._hub.switch()

    def _end_idle_tasks(self) -> None:
        """Ends the idle greenlets: a suspended greenlet is not collected with what it refers to
        (this engine, through its frame), so the last `run` of a world would keep them all."""
        idle, self._idle_tasks = self._idle_tasks, []
        for task in idle:
            task.throw()  # GreenletExit, where it waits to be handed a task: it ends

    def sleep(self, seconds: float) -> None:
        """Waits `seconds` of virtual time (from a task)."""
        current = getcurrent()
        if current is self._hub:
            raise RuntimeError("only a task can wait; the loop itself never does")
        now = self.now
        self._push((now + seconds if seconds > 0 else now, next(self._order), current.switch, ()))
        self._hub.switch()

    def park(self) -> Callable[[], None]:
        """Parks the calling task until the returned function is called (by anyone, once)."""
        current = getcurrent()
        resumed = False

        def resume() -> None:
            nonlocal resumed
            if not resumed:
                resumed = True
                self._push((self.now, next(self._order), current.switch, ()))

        return resume

    def wait_parked(self) -> Any:
        """Waits (from a task) until resumed; returns what the loop hands it, if anything."""
        return self._hub.switch()

    def clock(self) -> datetime:
        """The time now as the service's code reads it (made once a moment: a `datetime` never changes)."""
        at, value = self._clock
        if at != self.now:
            value = datetime.fromtimestamp(self.now, UTC)
            self._clock = (self.now, value)
        return value

    def run(self, until: float) -> None:
        """Runs every event due up to `until`, in order of time (and of scheduling, at one time)."""
        heap, pop, slices = self._heap, heapq.heappop, self._slices
        while True:
            if not heap:
                # The heap is done with: the next slice that has events, if it is not past `until`.
                if not slices or slices[0] / SLICES_PER_S > until:
                    break
                slice_ = pop(slices)
                heap.extend(self._later.pop(slice_))
                heapq.heapify(heap)
                self._horizon = (slice_ + 1) / SLICES_PER_S
            if heap[0][0] > until:
                break
            when, _, action, args = pop(heap)
            self.now = when
            action(*args)
        self.now = max(self.now, until)
        self._end_idle_tasks()

    def idle(self) -> bool:
        return not self._heap and not self._slices


class Machine:
    """One computer's cores, shared by every process on it (the local stack: moto, the stack's own
    process and every execution environment), as an operating system shares them: every piece of
    work under way progresses at once, each at most on one core, at an equal share of the cores
    (processor sharing). `speed` is the share of a core the machine's other work leaves; or
    `background`, the other work as that many jobs always under way, taking their equal shares (as
    Linux shares the cores among sessions that have work, with autogroups)."""

    def __init__(self, engine: Engine, cores: int, speed: float = 1.0, background: float = 0.0) -> None:
        self.engine = engine
        self.speed = speed
        self.capacity = max(cores, 1) * speed
        self.background = background
        self.background_s = 0.0  # the CPU time the background jobs have had so far
        self._jobs: dict[int, list[Any]] = {}  # id -> [work left in core-seconds, resume]
        self._ids = itertools.count()
        self._updated = engine.now
        self._version = 0

    def run(self, seconds: float) -> None:
        """Does `seconds` of one core's work (from a task), sharing the cores with the rest."""
        self._advance()
        self._jobs[next(self._ids)] = [seconds, self.engine.park()]
        self._reschedule()
        self.engine.wait_parked()

    def _rate(self) -> float:
        return min(self.speed, self.capacity / (len(self._jobs) + self.background)) if self._jobs else 0.0

    def _advance(self) -> None:
        if self.background:
            share = min(self.speed, self.capacity / (len(self._jobs) + self.background))
            self.background_s += (self.engine.now - self._updated) * self.background * share
        done = (self.engine.now - self._updated) * self._rate()
        if done:
            for job in self._jobs.values():
                job[0] -= done
        self._updated = self.engine.now

    def _reschedule(self) -> None:
        self._version += 1
        if self._jobs:
            least = min(job[0] for job in self._jobs.values())
            self.engine.at(self.engine.now + max(least, 0.0) / self._rate(), self._finish, self._version)

    def _finish(self, version: int) -> None:
        if version != self._version:
            return  # the work under way changed since: another finish is scheduled
        self._advance()
        # Done within a microsecond's work: the clock (epoch seconds in a float) resolves no finer.
        threshold = self._rate() * 1e-6
        for key in [key for key, job in self._jobs.items() if job[0] <= threshold]:
            self._jobs.pop(key)[1]()
        self._reschedule()


class Cpu:
    """One process's processor, first come first served, at a fraction of a vCPU.

    Lambda gives a function CPU in proportion to its memory, a full vCPU at 1,769 MB ("Configure
    Lambda function memory", Lambda developer guide); Python runs one thread at a time, so more
    than one vCPU does not help the caller. On one `machine` (the local stack), the process's work
    also shares the machine's cores with every other process's.
    """

    def __init__(self, engine: Engine, speed: float, machine: Machine | None = None) -> None:
        self.engine = engine
        self.speed = speed
        self.machine = machine
        self.free_at = 0.0
        self.busy_s = 0.0
        self._busy = False
        self._waiting: deque[Callable[[], None]] = deque()

    def use(self, seconds_at_one_vcpu: float, then_s: float = 0.0) -> None:
        """Runs the work (from a task) once the work before it is done, then waits `then_s` more
        (a round trip after it): one wait for both."""
        took = seconds_at_one_vcpu / self.speed
        if self.machine is not None:
            self._share(took)
            if then_s:
                self.engine.sleep(then_s)
            return
        now = self.engine.now
        start = self.free_at if self.free_at > now else now
        self.free_at = start + took
        self.busy_s += took
        self.engine.sleep(self.free_at - now + then_s)

    def _share(self, took: float) -> None:
        """One thread at a time in this process: after the work before it, on the machine's cores."""
        if self._busy:
            self._waiting.append(self.engine.park())
            self.engine.wait_parked()
        else:
            self._busy = True
        assert self.machine is not None
        self.machine.run(took)
        self.busy_s += took
        if self._waiting:
            self._waiting.popleft()()  # the next one runs: the process stays busy
        else:
            self._busy = False
