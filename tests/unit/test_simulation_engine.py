"""The simulator's clock runs every event in order of time, then of scheduling, however far ahead
it was scheduled (the engine keeps far events apart from the near ones, a list per 1/64 s slice)."""

import random

from wakeup_sim.engine import Engine


def test_events_run_in_order_of_time_then_of_scheduling_near_and_far_alike() -> None:
    engine = Engine(100.25)
    ran: list[tuple[float, int]] = []
    rng = random.Random(7)
    scheduled: list[tuple[float, int]] = []

    def record(key: int) -> None:
        ran.append((engine.now, key))
        # Events scheduled while running, some within this second, some seconds ahead, some at
        # the very time of an event already waiting (they run after it).
        if key < 2000:
            for offset in (0.0, rng.random() * 0.5, rng.random() * 30, float(rng.randrange(5))):
                new_key = len(scheduled)
                scheduled.append((engine.now + offset, new_key))
                engine.at(engine.now + offset, record, new_key)

    for when in [100.25, 100.5, 101.0, 101.0, 99.0, 3600.0, 105.75, 102.0, 100.25]:
        key = len(scheduled)
        scheduled.append((max(when, engine.now), key))
        engine.at(when, record, key)
    engine.run(until=200.0)
    # Up to `until` and no further: what is later still waits, and runs on the next `run`.
    assert all(when <= 200.0 for when, _ in ran) and engine.now == 200.0 and not engine.idle()
    engine.run(until=10_000.0)
    assert engine.idle()
    assert ran == sorted(scheduled)


def test_a_task_sleeps_across_seconds_and_wakes_in_order_with_events() -> None:
    engine = Engine(0.0)
    seen: list[str] = []

    def task(name: str, naps: list[float]) -> None:
        for nap in naps:
            engine.sleep(nap)
            seen.append(f"{name}@{engine.now:g}")

    engine.spawn(task, "a", [0.5, 2.0, 0.25])  # 0.5; 2.5, its wait from 0.5; 2.75, from 2.5 after b's
    engine.spawn(task, "b", [2.5, 0.25], when=0.0)  # 2.5, its wait from 0: before a's; 2.75
    engine.at(2.75, seen.append, "event@2.75")  # scheduled before either task's 2.75: first
    engine.run(until=10.0)
    assert seen == ["a@0.5", "b@2.5", "a@2.5", "event@2.75", "b@2.75", "a@2.75"]


def test_the_clock_reads_the_time_now_each_moment() -> None:
    from datetime import UTC, datetime

    engine = Engine(1_800_000_000.0)
    seen: list[datetime] = []
    for when in (1_800_000_000.0, 1_800_000_000.001, 1_800_000_000.001, 1_800_000_007.5):
        engine.at(when, lambda: seen.append(engine.clock()))
    engine.run(until=1_800_000_010.0)
    assert seen == [
        datetime.fromtimestamp(t, UTC) for t in (1_800_000_000.0, 1_800_000_000.001, 1_800_000_000.001, 1_800_000_007.5)
    ]
    assert engine.clock() == datetime.fromtimestamp(1_800_000_010.0, UTC)


def test_a_task_that_ends_hands_its_greenlet_to_the_next_and_each_runs_whole() -> None:
    from greenlet import getcurrent

    engine = Engine(0.0)
    ran: list[tuple[str, float, object]] = []

    def task(name: str, nap: float) -> None:
        engine.sleep(nap)
        ran.append((name, engine.now, getcurrent()))

    engine.spawn(task, "a", 1.0)
    engine.spawn(task, "b", 2.0)
    engine.spawn(task, "c", 0.5, when=1.5)  # starts after a has ended: a's greenlet runs it
    engine.run(until=10.0)
    assert [(name, when) for name, when, _ in ran] == [("a", 1.0), ("b", 2.0), ("c", 2.0)]
    greenlets = {name: runner for name, _, runner in ran}
    assert greenlets["c"] is greenlets["a"] and greenlets["b"] is not greenlets["a"]


def test_a_world_that_keeps_state_by_greenlet_gets_a_greenlet_a_task() -> None:
    from greenlet import getcurrent

    engine = Engine(0.0)
    engine.reuse_tasks = False
    runners: list[object] = []
    for when in (0.0, 1.0, 2.0):
        engine.spawn(lambda: runners.append(getcurrent()), when=when)
    engine.run(until=5.0)
    assert len(runners) == 3 and len({id(runner) for runner in runners}) == 3


def test_a_task_that_raises_ends_the_loop_with_its_error_and_the_next_task_still_runs() -> None:
    import pytest

    engine = Engine(0.0)
    ran: list[str] = []

    def failing() -> None:
        engine.sleep(1.0)
        raise ValueError("the task's own")

    engine.spawn(failing)
    engine.spawn(ran.append, "after", when=2.0)
    with pytest.raises(ValueError, match="the task's own"):
        engine.run(until=5.0)
    engine.run(until=5.0)
    assert ran == ["after"]


def test_the_greenlets_left_idle_end_when_the_run_does_and_keep_nothing() -> None:
    import weakref

    from greenlet import getcurrent, greenlet

    engine = Engine(0.0)
    runners: list[weakref.ref[greenlet]] = []
    payload = bytearray(1 << 20)  # what a task's arguments hold

    def task(_: bytearray) -> None:
        runners.append(weakref.ref(getcurrent()))
        engine.sleep(1.0)

    for when in (0.0, 0.5, 2.0, 3.0):
        engine.spawn(task, payload, when=when)
    engine.run(until=10.0)
    assert len(runners) == 4
    # A suspended greenlet is never collected with its engine: idle ones are ended, not kept.
    assert all(runner() is None or runner().dead for runner in runners)  # type: ignore[union-attr]


def test_a_fault_injectors_world_gets_a_greenlet_a_task() -> None:
    from wakeup_sim.faults import FaultClass, FaultInjector

    engine = Engine(0.0)
    FaultInjector(engine, FaultClass("none", ()), 0.0, 1, lambda: None)
    assert engine.reuse_tasks is False
