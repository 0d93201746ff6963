"""The simulated SQS event source: a message wakes the pollers that wait for it in one event, not one each."""

from typing import Any

from wakeup_sim.engine import Engine, Event
from wakeup_sim.event_source import EventSource
from wakeup_sim.sqs import Message, Queue

START = 1_800_000_000.0


class CountingEngine(Engine):
    def __init__(self, start: float) -> None:
        super().__init__(start)
        self.events = 0

    def _push(self, event: Event) -> None:
        self.events += 1
        super()._push(event)


class Caller:
    """The function: takes each batch at once and fails none of it."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def invoke(self, batch: list[Message], hops: int = 0) -> Any:
        self.batches.append([message.id for message in batch])
        return set()


def mapping(engine: Engine, pollers: int, batch_size: int) -> tuple[Queue, Caller]:
    queue, caller = Queue(engine, visibility_timeout_s=180.0), Caller()
    EventSource(
        engine=engine,
        queue=queue,
        function=caller,  # type: ignore[arg-type]
        batch_size=batch_size,
        window_s=1.0,
        cap=pollers,
        start=pollers,
        scale_up_per_s=0.0,
        floor=pollers,
        recursion_allowed=True,
    ).begin()
    return queue, caller


def test_each_message_goes_to_one_batch_of_its_own_after_the_window() -> None:
    engine = Engine(START)
    queue, caller = mapping(engine, pollers=50, batch_size=10)
    for index in range(3):
        engine.at(START + 10 + 2 * index, queue.send, "{}", 0)
    engine.run(START + 20)
    assert caller.batches == [[0], [1], [2]]


def trickle_events(filling: int) -> int:
    """The loop's events while 50 messages come one at a time to `filling` pollers filling batches
    of 100 (10 messages each so far, their window still open) and 100 more pollers idle."""
    engine = CountingEngine(START)
    queue, caller = mapping(engine, pollers=filling + 100, batch_size=100)
    engine.run(START + 5)  # every poller started and waiting
    for _ in range(10 * filling):
        engine.at(START + 10, queue.send, "{}", 0)
    engine.run(START + 10.2)
    before = engine.events
    for index in range(50):
        engine.at(START + 10.3 + index * 0.01, queue.send, "{}", 0)
    engine.run(START + 10.9)
    assert not caller.batches  # none handed over yet: every window is still open
    return engine.events - before


def test_a_message_costs_as_many_events_with_fifty_pollers_filling_as_with_five() -> None:
    assert trickle_events(filling=50) == trickle_events(filling=5)


def test_a_message_is_received_at_once_while_pollers_scaled_in_still_wait() -> None:
    # given a mapping scaled out to 30 pollers for a while, then back to its five (idle 300 s):
    # the 25 scaled in still wait for messages, and end only when woken
    engine = Engine(START)
    queue, caller = Queue(engine, visibility_timeout_s=180.0), Caller()
    source = EventSource(
        engine=engine,
        queue=queue,
        function=caller,  # type: ignore[arg-type]
        batch_size=10,
        window_s=0.0,
        cap=30,
        start=30,
        scale_up_per_s=5.0,
        floor=5,
        recursion_allowed=True,
    )
    source.begin()
    engine.run(START + 400)
    assert source.target == 5 and source.pollers == 30
    # the five kept were the last to finish a batch: the 25 scaled in wait ahead of them in line
    source._idle.rotate(-5)

    # when one message becomes visible, and another only 5 s later
    queue.send("first", 0)
    engine.run(START + 401)
    first_received = len(caller.batches)
    queue.send("second", 0)
    engine.run(START + 410)

    # then the first is received within the second, not when the second wakes the pollers: a
    # poller scaled in, woken for it, ends, and one of the five takes it
    assert first_received == 1 and len(caller.batches) == 2
