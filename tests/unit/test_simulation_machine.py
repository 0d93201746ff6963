"""The simulator's one machine (the local profile): processes share its cores as an OS shares them."""

import pytest

from wakeup_sim.engine import Cpu, Engine, Machine


def finish_times(
    cores: int, works: list[tuple[str, float]], speed: float = 1.0, background: float = 0.0
) -> dict[str, float]:
    """Runs each (process, seconds of work) as a task at time 0; returns when each task ended."""
    engine = Engine(0.0)
    machine = Machine(engine, cores, speed, background)
    processes: dict[str, Cpu] = {}
    ended: dict[str, float] = {}
    for index, (process, seconds) in enumerate(works):
        cpu = processes.setdefault(process, Cpu(engine, 1.0, machine))

        def task(cpu: Cpu = cpu, seconds: float = seconds, key: str = f"{process}{index}") -> None:
            cpu.use(seconds)
            ended[key] = engine.now

        engine.spawn(task)
    engine.run(100.0)
    return ended


def test_two_processes_on_one_core_share_it_and_end_together() -> None:
    assert finish_times(1, [("a", 1.0), ("b", 1.0)]) == pytest.approx({"a0": 2.0, "b1": 2.0})


def test_two_processes_on_two_cores_run_side_by_side() -> None:
    assert finish_times(2, [("a", 1.0), ("b", 1.0)]) == pytest.approx({"a0": 1.0, "b1": 1.0})


def test_a_process_runs_one_thing_at_a_time_even_with_cores_free() -> None:
    # One process (one interpreter lock): its second piece of work waits for its first.
    assert finish_times(2, [("a", 1.0), ("a", 1.0)]) == pytest.approx({"a0": 1.0, "a1": 2.0})


def test_a_short_piece_of_work_ends_first_then_the_long_one_has_the_core() -> None:
    ended = finish_times(1, [("a", 1.0), ("b", 3.0)])
    # Both at half a core until a's work is done at 2 s; b's last 2 s then run at a full core.
    assert ended == pytest.approx({"a0": 2.0, "b1": 4.0})


def test_other_work_on_the_machine_slows_every_process() -> None:
    assert finish_times(2, [("a", 1.0), ("b", 1.0)], speed=0.5) == pytest.approx({"a0": 2.0, "b1": 2.0})


def test_other_sessions_with_work_take_their_share_of_the_cores() -> None:
    # Two other sessions busy on two cores: a process of the stack is a third job, at two thirds of
    # a core; with a second one, the four share the two cores, each at half of one.
    assert finish_times(2, [("a", 1.0)], background=2.0) == pytest.approx({"a0": 1.5})
    assert finish_times(2, [("a", 1.0), ("b", 1.0)], background=2.0) == pytest.approx({"a0": 2.0, "b1": 2.0})
