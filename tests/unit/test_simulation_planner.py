"""The planner in the simulator (wakeup_sim.planner): the service's runs every minute through a
scenario, its updates applying after their delay; a burst the schedule shows has its pollers by its
second; with the planner failing throughout, every wake of the burst is still called, late."""

import pytest

from wakeup_cost import cost
from wakeup_sim import report
from wakeup_sim.deployment import from_template
from wakeup_sim.grid import CALLER_MEMORY_MB
from wakeup_sim.planner import EPU_MINIMUM_S, billed_epu_s
from wakeup_sim.scenarios import T0, Outcome, Scenario, run

BURST_AT = 1_800_000_660.0
START = 1_800_000_000.0


@pytest.mark.parametrize("path", ["near", "far"])
def test_with_the_planner_failing_throughout_every_wake_of_a_burst_is_still_called(path: str) -> None:
    # given a burst on an idle stack whose planner never raised a poller (its runs all failed)
    figures = report.figures(run(Scenario("cold burst", 1000, path=path, planner=False), from_template()))

    # then none is lost or called twice: Lambda's default scaling delivers them all
    assert figures.lost == 0 and figures.called_twice == 0 and figures.overlapping_calls == 0
    # late, which is what the planner is for (PlannerHeartbeatAlarm says it stopped)
    assert figures.p99_s > 1.0


def sent(outcome: Outcome) -> list[tuple[float, float, int | None]]:
    """The planner's updates of the mapping in the scenario's run: (sent, applied, pollers)."""
    assert outcome.planner is not None
    return outcome.planner.mapping.sent


@pytest.fixture(scope="module")
def burst_of_10000() -> Outcome:
    """10,000 wakes due at one second, registered 2 to 10 minutes ahead: one run, which the tests
    below read (the simulation is deterministic, and a read changes nothing)."""
    return run(Scenario("burst", 10_000), from_template())


def test_a_burst_registered_before_the_planners_lead_has_its_pollers_at_its_second(burst_of_10000: Outcome) -> None:
    # given 10,000 wakes due at one second, registered 2 to 10 minutes ahead
    outcome = burst_of_10000

    # then one run raises 100 pollers, applied (its delay: 300 s) before the burst's second
    raise_sent, raise_applied, pollers = sent(outcome)[0]
    assert pollers == 100 and raise_applied == raise_sent + 300 <= outcome.first_due
    # and the event source scaled as the update said: far beyond default scaling's five batches, on time
    figures = report.figures(outcome)
    assert figures.peak_concurrency > 500 and figures.p99_s <= 1.0


def test_the_pollers_raised_for_a_burst_are_billed_from_the_raise_sent_to_provisioned_mode_off(
    burst_of_10000: Outcome,
) -> None:
    # given a burst of 10,000 registered well ahead, the template's planner (a run a minute, updates
    # applying 300 s after they are sent, capacity kept 60 s past the burst)
    outcome = burst_of_10000

    # then the raise is sent within the lead (480 s) of the burst, provisioned mode is turned off
    # by the first run that no longer sees it (within 120 s after it), and off applies 300 s later
    (raise_sent, _, pollers), (off_sent, off_applied, off) = sent(outcome)
    assert pollers == 100 and off is None
    assert outcome.first_due - 480 <= raise_sent and off_sent <= outcome.first_due + 120 + 60
    assert outcome.epu_s == 100 * (off_applied - raise_sent)


def test_an_update_applying_is_billed_at_the_higher_of_the_two_levels_and_a_minute_at_least() -> None:
    # given a raise to 10 sent at 0 (applied at 300), to 20 sent at 300 (applied at 600), and off
    # sent at 600 (applied at 900)
    sent = [(0.0, 300.0, 10), (300.0, 600.0, 20), (600.0, 900.0, None)]

    # then 10 pollers from 0 to 300, 20 from 300 to 900 (until off applies)
    assert billed_epu_s(sent, floor=0) == 10 * 300 + 20 * 600
    # pollers the operator keeps anyway (the floor) are not the planner's
    assert billed_epu_s(sent, floor=5) == 5 * 300 + 15 * 600
    # and a raise off again within seconds is billed a minute
    assert billed_epu_s([(0.0, 0.0, 10), (10.0, 10.0, None)], floor=0) == 10 * EPU_MINIMUM_S


def test_a_planned_bursts_price_counts_its_raised_pollers() -> None:
    # given a burst of 300 registered over the 10 minutes before it: the planner raises pollers
    outcome = run(Scenario("registered over", 300, registered_over_s=600.0), from_template())
    figures = report.figures(outcome)

    # then the scenario's price is its wakes' and the raised pollers' EPU-hours
    assert outcome.epu_s > 0
    pollers_usd = outcome.epu_s / 3600 * cost.PRICE_EPU_HOUR
    assert figures.usd_scenario == figures.usd_per_million * 300 / 1e6 + pollers_usd


def test_a_burst_registered_inside_the_updates_delay_is_late_for_its_pollers() -> None:
    # given a burst whose hosts all register in the 60 s before its second, an update applying in 300 s
    outcome = run(Scenario("no warning", 1000, registered_over_s=60.0), from_template())

    # then its pollers come after its second: Lambda's default scaling has it (a burst with no warning)
    assert all(applied > outcome.first_due for _, applied, pollers in sent(outcome) if pollers)


def test_a_burst_with_no_warning_loses_no_wake_and_is_late() -> None:
    # given a burst whose hosts all register in the 10 s before its second: the planner sees it too
    # late for its pollers, and Lambda's default scaling has it
    figures = report.figures(run(Scenario("no warning", 1000, registered_over_s=10.0), from_template()))

    assert figures.lost == 0 and figures.called_twice == 0 and figures.overlapping_calls == 0
    assert figures.p99_s > 1.0


@pytest.mark.parametrize("over_s", [1800.0, 600.0])
def test_a_burst_registered_over_the_minutes_before_it_is_on_time_with_the_planner(over_s: float) -> None:
    # given an idle stack and hosts registering over the half hour (far, then near) or the 10
    # minutes (near) before their second: the planner raises pollers as it sees them register
    # (the caller at the one memory that holds the grid: docs/scaling.md)
    deployment = from_template(parameters={"CallerMemorySize": str(CALLER_MEMORY_MB)})
    figures = report.figures(run(Scenario("registered over", 1000, registered_over_s=over_s), deployment))

    assert figures.p99_s <= 1.0
    assert figures.lost == 0 and figures.called_twice == 0 and figures.overlapping_calls == 0


def test_the_caller_keeps_its_one_memory_through_a_burst_and_a_quiet_stack() -> None:
    # given the template's caller, a burst the planner raises pollers for, and a quiet stack
    deployment = from_template()
    burst = run(Scenario("burst", 1000), deployment)
    quiet = run(Scenario("quiet", 12, rate_per_s=1 / 600, reclaimed_after_s=300.0), deployment)

    # then the planner changed no configuration of the caller: one memory, the template's, throughout
    for outcome in (burst, quiet):
        caller = outcome.world.caller_function
        assert (caller.memory_mb, caller.configuration) == (deployment.caller_memory_mb, 0)
    assert any(pollers for _, _, pollers in sent(burst))


def test_the_planner_runs_every_minute_through_a_scenario_and_fails_throughout_when_off() -> None:
    on = run(Scenario("burst", 100), from_template())
    off = run(Scenario("burst", 100, planner=False), from_template())

    assert on.planner is not None and off.planner is None
    span = on.world.engine.now - T0
    assert on.planner.runs == int(span // 60) + 1
