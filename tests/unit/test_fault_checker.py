"""The fault matrix's checker (sim/wakeup_sim/faults.py, fault_matrix.py) sees what a host and a
client would: a host busy past the lease, a reverted registration, a duplicate no fault explains,
a Lambda timeout no row injected, each environment's own clock; and its rows replay by seed."""

from datetime import datetime
from typing import Any

import pytest
from greenlet import getcurrent

from wakeup.host_call import CallOutcome
from wakeup_sim import fault_matrix, faults
from wakeup_sim.dynamodb import MemoryStore
from wakeup_sim.engine import Cpu, Engine
from wakeup_sim.fault_matrix import CLASSES, Row, jobs, run_row, summary, swept
from wakeup_sim.faults import CLOCK_SKEW_S, HOST, Fault, FaultClass, FaultInjector, FaultyHosts, Kind, skewed_clock

LEASE_S = 30.0


def _hosts(answer_after_s: dict[str, float]) -> tuple[Engine, FaultInjector, FaultyHosts]:
    """Hosts that answer 2xx after the time given for each registration, on a fresh engine."""
    engine = Engine(0.0)
    injector = FaultInjector(engine, FaultClass("none", ()), 0.0, 1, lambda: None)

    def host(url: str, instance_id: str, timeout_s: float, headers: Any) -> CallOutcome:
        engine.sleep(answer_after_s[headers["webhook-id"].split("_")[2]])
        return CallOutcome(200, None)

    return engine, injector, FaultyHosts(host, injector)


def _call(hosts: FaultyHosts, reg: str) -> None:
    hosts.call("https://host.example", "i1", 10.0, {"webhook-id": f"wake_i1_{reg}_0"})


def test_a_host_still_answering_past_the_lease_makes_a_second_call_concurrent() -> None:
    # given: a host that answers its call only past the claim's lease
    engine, injector, hosts = _hosts({"r1": LEASE_S + 10.0})
    # when: the same registration is called again once the lease has ended
    engine.spawn(_call, hosts, "r1", when=0.0)
    engine.spawn(_call, hosts, "r1", when=LEASE_S + 1.0)
    engine.run(200.0)
    # then: the host was busy with it: two calls at once
    assert injector.watch.concurrent == 1


def test_a_call_after_the_host_answered_is_not_concurrent_and_another_registration_overlaps_apart() -> None:
    # given: a host that answers in a second
    engine, injector, hosts = _hosts({"r1": 1.0, "r2": 1.0})
    # when: a call after its answer, and one for another registration during a call
    engine.spawn(_call, hosts, "r1", when=0.0)
    engine.spawn(_call, hosts, "r1", when=2.0)
    engine.spawn(_call, hosts, "r2", when=2.5)
    engine.run(10.0)
    # then: no concurrent call; the other registration's is counted apart
    assert injector.watch.concurrent == 0
    assert injector.watch.overlapping == 1


def test_a_reverted_registration_counts_as_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    # given: a table that, five seconds after each registration, puts back the one before it (as
    # a late write would), though the client got its 2xx for the new one
    real = MemoryStore.register_wake
    before: dict[str, tuple[datetime, str]] = {}

    def reverting(self: MemoryStore, instance_id: str, at: datetime, reg: str, window: Any = None) -> Any:
        previous = before.get(instance_id)
        before[instance_id] = (at, reg)
        if previous is not None:
            engine = self.memory.io.faults.engine  # type: ignore[attr-defined]  # the row's FaultyIo
            engine.spawn(real, self, instance_id, *previous, when=engine.now + 5.0)
        return real(self, instance_id, at, reg, window)

    monkeypatch.setattr(MemoryStore, "register_wake", reverting)
    monkeypatch.setattr(faults, "CLOCK_SKEW_S", 0.0)
    # when
    row = run_row(FaultClass("no fault", ()), 0.0, wakes=100)
    # then: the moved wakes are owed at their new time, and never called for it
    assert row.lost > 0 and not row.ok


def test_a_duplicate_no_fault_explains_fails_its_row(monkeypatch: pytest.MonkeyPatch) -> None:
    # given: a table that answers a success's record without writing it (so the sweeper re-arms
    # a wake whose 2xx the caller saw and recorded)
    monkeypatch.setattr(MemoryStore, "record_success", lambda self, trigger, called_at: True)
    monkeypatch.setattr(faults, "CLOCK_SKEW_S", 0.0)
    # when
    row = run_row(FaultClass("no fault", ()), 0.0, wakes=5)  # each called again and again: a few suffice
    # then
    assert row.unexplained > 0 and row.duplicates == 0 and not row.ok
    assert dict(row.unexplained_causes).keys() == {"no fault"}


def test_a_duplicate_after_a_2xx_the_caller_could_not_see_is_allowed() -> None:
    # when: hosts whose 2xx the caller never sees
    row = run_row(next(c for c in CLASSES if c.name == "host answers 2xx after the timeout"), 0.1, wakes=200)
    # then: each call after such a 2xx is allowed, and counted
    assert row.duplicates > 0 and row.unexplained == 0
    assert dict(row.causes) == {faults.UNSEEN: row.duplicates}


def _row(**changes: Any) -> Row:
    fields: dict[str, Any] = dict.fromkeys(("wakes", "injected", "lost", "concurrent", "early", "duplicates"), 0)
    fields |= {"over_bound": 0, "inconsistent": 0, "lambda_timeouts": 0, "calls": 1, "cpu_s": 0.0}
    fields |= {"name": "r", "rate": 0.1, "causes": (), "recovery_s": 0.0, "bound_s": 1.0}
    return Row(**{**fields, **changes})


def test_a_lambda_timeout_fails_a_row_that_does_not_inject_one() -> None:
    assert not _row(lambda_timeouts=1).ok
    assert _row(lambda_timeouts=1, injects_timeouts=True).ok


def test_the_last_line_counts_timeouts_of_the_rows_that_inject_them_only() -> None:
    rows = [_row(lambda_timeouts=3, injects_timeouts=True), _row(lambda_timeouts=2), _row(duplicates=4)]
    assert summary(rows) == ("faults: 3 rows, lost 0, concurrent 0, early 0, duplicates 4, unexplained 0, timeouts 3")


def test_each_environment_reads_a_clock_of_its_own_within_the_bound() -> None:
    # given: two execution environments and the true clock
    import random

    engine = Engine(1000.0)
    environments = [Cpu(engine, 1.0), Cpu(engine, 1.0)]
    current: list[Cpu | None] = [None]
    injector = FaultInjector(engine, FaultClass("none", ()), 0.0, 1, lambda: current[0])
    clock = skewed_clock(injector, engine.clock, random.Random(3))
    # when
    true = clock()
    read = []
    for environment in environments:
        current[0] = environment
        read.append((clock() - true).total_seconds())
    # then: the true time outside them, each its own skew inside, within the stated bound
    assert true == engine.clock()
    assert read[0] != read[1]
    assert all(abs(skew) <= CLOCK_SKEW_S for skew in read)


def test_every_row_has_a_seed_of_its_own_from_the_runs() -> None:
    made = jobs(None, 10, 1234, settings=True)
    seeds = [job[3] for job in made]
    assert seeds == list(range(1234, 1234 + len(made)))


def test_the_settings_sweep_runs_only_what_settings_accept_and_the_shortest_lease() -> None:
    combinations = swept()
    leases = {(d.settings.call_timeout_s, d.settings.claim_lease_s) for _, d in combinations}
    assert all(lease > call for call, lease in leases)
    assert (10.0, 15.0) in leases  # the accepted lease that is shorter than the AWS requests
    assert {d.batch_size for _, d in combinations} == set(fault_matrix.SWEEP_BATCH_SIZES)


def _slow_hosts(where: dict[Any, Cpu]) -> tuple[Engine, FaultInjector, FaultyHosts]:
    """Hosts that all answer past the lease, on a fresh engine; `where` is each task's environment."""
    engine = Engine(0.0)
    injector = FaultInjector(engine, FaultClass("slow", (Fault(HOST, Kind.SLOW),)), 1.0, 1, lambda: where[getcurrent()])
    return engine, injector, FaultyHosts(lambda *_: CallOutcome(200, None), injector)


def _call_from(where: dict[Any, Cpu], environment: Cpu, hosts: FaultyHosts, reg: str) -> None:
    where[getcurrent()] = environment
    _call(hosts, reg)


@pytest.mark.parametrize("ended_by", ["a batch-mate's death", "Lambda's timeout"])
def test_a_host_answering_past_the_lease_is_free_once_lambda_ended_its_callers_environment(ended_by: str) -> None:
    # given: every host answers past the lease; the first caller's environment ends at +3 s, during
    # its call (10 s timeout): its runtime is ended, and its sockets closed with it
    where: dict[Any, Cpu] = {}
    engine, injector, hosts = _slow_hosts(where)
    first, second = Cpu(engine, 1.0), Cpu(engine, 1.0)
    if ended_by == "Lambda's timeout":
        injector._deadline[first] = 3.0
    else:
        engine.at(3.0, injector.environment_ends, first)
    # when: another environment calls the same registration at +5 s, within the first call's timeout
    engine.spawn(_call_from, where, first, hosts, "r1", when=0.0)
    engine.spawn(_call_from, where, second, hosts, "r1", when=5.0)
    engine.run(200.0)
    # then: the host's connection was gone: one call at a time
    assert injector.watch.concurrent == 0


def test_a_second_call_while_a_live_callers_connection_is_open_is_concurrent() -> None:
    # given: every host answers past the lease; the first caller's environment lives on
    where: dict[Any, Cpu] = {}
    engine, injector, hosts = _slow_hosts(where)
    first, second = Cpu(engine, 1.0), Cpu(engine, 1.0)
    # when: another environment calls the same registration at +5 s, within the first call's timeout
    engine.spawn(_call_from, where, first, hosts, "r1", when=0.0)
    engine.spawn(_call_from, where, second, hosts, "r1", when=5.0)
    engine.run(200.0)
    # then: the host was still busy with the first: two calls at once
    assert injector.watch.concurrent == 1


def test_the_wake_owed_is_any_of_the_overlapping_registrations_a_client_got_2xx_for() -> None:
    # A sent at 10, B sent at 12; A's 2xx came last (13), after B's (12.5): the two overlapped, the
    # table may have applied either last, and both answers are true. C was sent and answered
    # before either was sent: over.
    watch = faults.Watch()
    for sent, answered, reg in ((1.0, 2.0, "C"), (12.0, 12.5, "B"), (10.0, 13.0, "A")):
        watch.acked["i"] = (answered, reg)
        watch.acks["i"].append((sent, answered, reg))

    assert faults.owed(watch, "i") == {"A", "B"}


def test_a_registration_answered_before_the_next_was_sent_is_no_longer_owed() -> None:
    watch = faults.Watch()
    for sent, answered, reg in ((10.0, 11.0, "A"), (12.0, 12.5, "B")):
        watch.acked["i"] = (answered, reg)
        watch.acks["i"].append((sent, answered, reg))

    assert faults.owed(watch, "i") == {"B"}
