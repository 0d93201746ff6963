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
