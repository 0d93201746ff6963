"""The planner in the simulator (wakeup_sim.planner): a burst the schedule shows has its pollers by
its second; with the planner failing throughout, every wake of the burst is still called, late."""

import pytest

from wakeup_sim import report
from wakeup_sim.deployment import from_template
from wakeup_sim.planner import capacity_at, planned, pollers_at, settings_for
from wakeup_sim.scenarios import Scenario, run

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


def test_a_burst_registered_before_the_planners_lead_has_its_pollers_at_its_second() -> None:
    settings = settings_for(from_template())
    registered = [(START + 60, BURST_AT)] * 10_000

    assert pollers_at(BURST_AT, registered, settings, START) == 100


def test_a_burst_registered_inside_the_updates_delay_is_late_for_its_pollers() -> None:
    # given a burst whose hosts all register 60 s before its second, an update applying in 300 s
    settings = settings_for(from_template())
    registered = [(BURST_AT - 60, BURST_AT)] * 10_000

    # then its pollers come after its second: Lambda's default scaling has it (a burst with no warning)
    assert pollers_at(BURST_AT, registered, settings, START) is None
    assert pollers_at(BURST_AT + 300, registered, settings, START) == 100


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
    figures = report.figures(run(Scenario("registered over", 1000, registered_over_s=over_s), from_template()))

    assert figures.p99_s <= 1.0
    assert figures.lost == 0 and figures.called_twice == 0 and figures.overlapping_calls == 0


def test_a_burst_registered_before_the_planners_lead_has_the_callers_burst_memory_at_its_second() -> None:
    # given the template's caller: 128 MB at rest, 1,024 for a burst (CallerBurstMemorySize)
    deployment = from_template()
    settings = settings_for(deployment)
    registered = [(START + 60, BURST_AT)] * 10_000

    # then the planner's runs have given it its burst memory by the burst's second
    capacity = capacity_at(BURST_AT, registered, settings, START, deployment.caller_memory_mb)
    assert (deployment.caller_memory_mb, capacity.memory_mb) == (128, 1024)
    assert planned(deployment, registered, START).caller_memory_mb == 1024


def test_a_burst_with_no_warning_meets_the_callers_resting_memory() -> None:
    # given a burst whose hosts all register 60 s before its second, an update applying in 300 s
    deployment = from_template()
    registered = [(BURST_AT - 60, BURST_AT)] * 10_000

    # then the caller still has its resting memory at the second (the burst is late, as unplanned)
    assert planned(deployment, registered, START).caller_memory_mb == 128
