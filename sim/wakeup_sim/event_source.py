"""Lambda's SQS event source mapping: pollers, batches, the batching window, and scaling.

It scales by Lambda's rule (`wakeup_awsfacts.sqs_scaling`): in the default mode five concurrent
batches at first, more while messages are available; in provisioned mode `MinimumPollers` pollers
ready, each long-polling the queue and running up to 10 concurrent invocations. A batch is handed
over when it holds `BatchSize` messages or the batching window ends ("Using Lambda with Amazon SQS");
records reported in `batchItemFailures` stay on the queue, the rest are deleted.
"Use Lambda recursive loop detection": after about 16 hops of SQS -> function -> same SQS, Lambda
stops invoking for the message unless the function's RecursiveLoop is Allow.
"""

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from greenlet import getcurrent, greenlet

from wakeup_awsfacts.quotas import RECURSION_LIMIT, SQS_MAX_RECEIVE
from wakeup_awsfacts.sqs_scaling import STANDARD_INITIAL, Scaling
from wakeup_sim import deployment as aws
from wakeup_sim.engine import Engine
from wakeup_sim.lambdas import Function, Throttled
from wakeup_sim.sqs import Message, Queue

THROTTLED_RETRY_S = 1.0
LONG_POLL_S = 20.0
IDLE_BEFORE_SCALING_DOWN_S = 300.0


class _Poller:
    """One poller: its task (which runs its batches' invocations) and the batch it is filling."""

    __slots__ = ("batch", "deadline", "index", "task", "turn", "waiting")

    def __init__(self, index: int, task: greenlet) -> None:
        self.index = index
        self.task = task
        self.batch: list[Message] = []
        self.deadline = 0.0
        self.turn = 0  # its batch's number: an entry of `_filling` or a window's end from an earlier one is stale
        self.waiting = False


@dataclass
class EventSource:
    engine: Engine
    queue: Queue
    function: Function
    batch_size: int
    window_s: float
    cap: int
    start: int
    scale_up_per_s: float
    floor: int
    recursion_allowed: bool
    resting: int = STANDARD_INITIAL  # pollers of a mapping with nothing to do
    target: float = 0.0
    pollers: int = 0
    batches: int = 0
    stopped_loops: int = 0
    batch_sizes: list[int] = field(default_factory=list)
    _idle: deque[tuple[float, _Poller]] = field(default_factory=deque)  # since when, in the order they began
    # Pollers waiting to fill a batch, each with its batch's turn (one woken since by its window's end is passed over).
    _filling: list[tuple[_Poller, int]] = field(default_factory=list)
    _idle_since: float = 0.0
    idle_poll_s: float = 0.0
    _began: float = 0.0
    on_stopped_loop: Callable[[Message], None] = lambda message: None
    receive_latency_s: float = aws.RECEIVE_LATENCY_S
    # A poller that found the queue empty looks again this often (0: it learns of messages at once).
    poll_interval_s: float = 0.0
    # The CPU a batch costs the event source (receive and delete), given the batch's size.
    batch_work: Callable[[int], None] = lambda size: None
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    # Already scaled out for the scenario's length (a warm mapping, `for_deployment`).
    kept_out: bool = False
    # Empty long polls of the resting pollers before the last change of mode (`provision`).
    _rested_polls: float = 0.0
    _rested_since: float = 0.0

    def begin(self) -> None:
        self.target = float(self.start)
        self._idle_since = self._began = self._rested_since = self.engine.now
        self.queue.on_visible = self._wake_pollers
        self._grow()
        self.engine.at(self.engine.now + 1, self._scale)

    def _wake_pollers(self) -> None:
        """Messages became visible: pollers filling a batch look, and enough idle ones to take them.

        They look in one event and receive in one more, in the order they were woken, as the events
        of each poller would have run back to back: most find the message taken by one before them,
        and two events each were half of a wake's events."""
        now = self.engine.now
        woken = [poller for poller, turn in self._filling if poller.waiting and poller.turn == turn]
        for poller in woken:
            poller.waiting = False
        self._filling.clear()
        idle = len(woken)
        wanted = -(-self.queue.visible() // SQS_MAX_RECEIVE)
        while wanted > 0 and self._idle:
            since, poller = self._idle.popleft()
            self.idle_poll_s += now - since
            woken.append(poller)
            # A poller scaled in since it began waiting ends when woken (`_again`): it is not one
            # of those the messages need, or they would wait for the next message to be woken for.
            if poller.index <= int(self.target):
                wanted -= 1
        if self.poll_interval_s:
            for poller in woken[:idle]:
                self.engine.at(now, self._fill, poller)
            for poller in woken[idle:]:
                self.engine.at(now, self._woken, poller)
        elif woken:
            self.engine.at(now, self._look_all, woken, idle)

    def _look_all(self, woken: list[_Poller], idle: int) -> None:
        """The woken pollers look at the queue, in order: those filling a batch (before `idle`), then idle ones."""
        receiving: list[_Poller] = []
        for poller in woken[:idle]:
            if self.queue.visible():
                receiving.append(poller)
            else:
                self._fill(poller)
        filling = len(receiving)
        for poller in woken[idle:]:
            if poller.index <= int(self.target) and self.queue.visible():
                receiving.append(poller)
            else:
                self._again(poller)
        if receiving:
            self.engine.at(self.engine.now + self.receive_latency_s, self._receive_all, receiving, filling)

    def _receive_all(self, receiving: list[_Poller], filling: int) -> None:
        for poller in receiving[:filling]:
            self._receive_more(poller)
        for poller in receiving[filling:]:
            self._receive(poller)

    def long_polls(self) -> float:
        """Empty receives so far: the mapping's resting pollers each end a long poll every 20 s (a
        poller scaled out for a burst is counted by its receives only)."""
        return self._rested_polls + (self.engine.now - self._rested_since) * self.resting / LONG_POLL_S

    def provision(self, scaling: Scaling, resting: int) -> None:
        """An update of the mapping applied (`UpdateEventSourceMapping`, its ProvisionedPollerConfig
        set or removed): it scales by `scaling` from now, `resting` pollers long-polling at rest.
        Pollers already out stay until they are idle (`_scale`), as in either mode."""
        now = self.engine.now
        self._rested_polls = self.long_polls()
        self._rested_since, self.resting = now, resting
        self.cap, self.scale_up_per_s = scaling.maximum, scaling.per_minute / 60
        self.floor = self.cap if self.kept_out else scaling.initial
        self.target = min(float(self.cap), max(self.target, float(self.floor)))
        self._grow()

    def _grow(self) -> None:
        while self.pollers < int(self.target):
            self.pollers += 1
            self.engine.spawn(self._poll, self.pollers)

    def _scale(self) -> None:
        now = self.engine.now
        if self.queue.visible() > 0:
            self._idle_since = now
            self.target = min(self.cap, self.target + self.scale_up_per_s)
            self._grow()
        elif now - self._idle_since > IDLE_BEFORE_SCALING_DOWN_S:
            self.target = float(self.floor)
        self.engine.at(now + 1, self._scale)

    # A poller waits and receives in the loop's events, not in its task: most pollers woken by a
    # message find it taken by another, and a task's switches in and out cost more than the event.
    # The task runs only to invoke the function with a batch (and ends when it is given none).

    def _poll(self, index: int) -> None:
        poller = _Poller(index, getcurrent())
        while index <= int(self.target):
            self._look(poller)
            batch: list[Message] | None = self.engine.wait_parked()
            if batch is None:
                break
            self.batch_work(len(batch))
            self._invoke(batch)
        self.pollers -= 1

    def _look(self, poller: _Poller) -> None:
        """A poller looks at the queue: receives if messages are visible, else waits for them."""
        if self.queue.visible() == 0:
            self._idle.append((self.engine.now, poller))
        else:
            self.engine.at(self.engine.now + self.receive_latency_s, self._receive, poller)

    def _woken(self, poller: _Poller) -> None:
        # Its next look, somewhere within its polling interval.
        self.engine.at(self.engine.now + self.rng.random() * self.poll_interval_s, self._again, poller)

    def _again(self, poller: _Poller) -> None:
        if poller.index > int(self.target):
            poller.task.switch(None)  # scaled in: the poller ends
        else:
            self._look(poller)

    def _receive(self, poller: _Poller) -> None:
        batch = self.queue.receive(min(self.batch_size, SQS_MAX_RECEIVE))
        if not batch:
            self._again(poller)
            return
        poller.batch = batch
        poller.deadline = self.engine.now + self.window_s
        if len(batch) < self.batch_size:
            poller.turn += 1  # a new batch: its window's end (one event) wakes only this wait
            self.engine.at(poller.deadline, self._window_ends, poller, poller.turn)
        self._fill(poller)

    def _fill(self, poller: _Poller) -> None:
        """Gathers the batch until it is full or the batching window ends, then hands it over."""
        batch, now = poller.batch, self.engine.now
        if len(batch) < self.batch_size:
            if self.queue.visible():
                self.engine.at(now + self.receive_latency_s, self._receive_more, poller)
                return
            if now < poller.deadline:
                # Waits until messages become visible or the window ends, whichever comes first.
                poller.waiting = True
                self._filling.append((poller, poller.turn))
                return
            # The long poll that waited out the batching window ends empty.
            self.queue.requests["sqs:ReceiveMessage"] += 1
        poller.batch = []
        poller.task.switch(batch)

    def _receive_more(self, poller: _Poller) -> None:
        poller.batch += self.queue.receive(min(self.batch_size - len(poller.batch), SQS_MAX_RECEIVE))
        self._fill(poller)

    def _window_ends(self, poller: _Poller, turn: int) -> None:
        if poller.waiting and poller.turn == turn:
            poller.waiting = False
            self.engine.at(self.engine.now, self._fill, poller)

    def _invoke(self, batch: list[Message]) -> None:
        hops = max(message.hops for message in batch)
        if hops >= RECURSION_LIMIT and not self.recursion_allowed:
            # Lambda stops the loop: the messages go to the dead-letter queue, or are dropped.
            self.stopped_loops += len(batch)
            for message in batch:
                self.on_stopped_loop(message)
            self.queue.delete(batch)
            return
        while True:
            try:
                failed: set[int] = self.function.invoke(batch, hops)
                break
            except Throttled:
                self.engine.sleep(THROTTLED_RETRY_S)
            except Exception:
                return  # the whole batch comes back after the visibility timeout
        self.batches += 1
        self.batch_sizes.append(len(batch))
        self.queue.delete([message for message in batch if message.id not in failed])


def scaling_of(deployment: Any, minimum_pollers: int | None, maximum_pollers: int | None) -> tuple[Scaling, int]:
    """How the caller's mapping scales with `minimum_pollers` provisioned (None: provisioned mode
    off, Lambda's default scaling), and its pollers at rest (each of the minimum long-polls)."""
    if minimum_pollers is not None:
        return Scaling.provisioned(minimum_pollers, maximum_pollers), minimum_pollers
    standard = Scaling.standard(deployment.maximum_concurrency, account_concurrency=deployment.account_concurrency)
    return standard, STANDARD_INITIAL


def for_deployment(
    engine: Engine,
    queue: Queue,
    function: Function,
    deployment: Any,
    warm: bool,
    scaling: Scaling | None = None,
) -> EventSource:
    """The caller's mapping as the template configures it, cold (five batches) or already scaled;
    or with `scaling`: the local stack's poller, as it scales on this machine."""
    resting = STANDARD_INITIAL
    if scaling is None:
        scaling, resting = scaling_of(deployment, deployment.minimum_pollers, deployment.maximum_pollers)
    floor, cap, scale = scaling.initial, scaling.maximum, scaling.per_minute / 60
    return EventSource(
        engine=engine,
        queue=queue,
        function=function,
        batch_size=deployment.batch_size,
        window_s=deployment.batching_window_s,
        cap=cap,
        start=cap if warm else floor,
        scale_up_per_s=scale,
        # A warm mapping has been busy: it stays scaled out for the scenario's length.
        floor=cap if warm else floor,
        kept_out=warm,
        resting=resting,
        recursion_allowed=deployment.recursive_loop_allowed,
    )
