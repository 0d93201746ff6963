"""The planner's logic (wakeup.logic.planner): which pollers a coming burst gets, when they are
raised, and that provisioned mode is off again once the burst has passed."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wakeup.event_source import FunctionBusyError, MappingBusyError, MappingState
from wakeup.logic.planner import (
    QUIET_WAKES,
    SQS_MIN_POLLERS,
    Plan,
    PlannerSettings,
    change,
    invocations_for,
    memory_for,
    plan,
    pollers_for,
    run,
    window,
)

DEFAULTS = PlannerSettings()
# A run's time: any epoch second; the planner only counts seconds from it.
NOW = 1_800_000_000


class FakeIndex:
    """`DueCounts` over wakes kept in memory, all in shard 0."""

    def __init__(self, due: dict[int, int]) -> None:
        self.due = due
        self.reads: list[tuple[int, int, int]] = []

    def due_per_second(self, shard: int, start: int, end: int) -> Counter[int]:
        self.reads.append((shard, start, end))
        if shard:
            return Counter()
        return Counter({second: n for second, n in self.due.items() if start <= second < end})


class FakeMapping:
    """`EventSource` as Lambda's API behaves: an update applies `delay_s` after it is sent, and the
    mapping refuses none while it is applying (the planner must not send one then)."""

    def __init__(self, delay_s: int = 0) -> None:
        self.delay_s = delay_s
        self.clock = 0
        self.pollers: int | None = None
        self.applying: tuple[int, int | None] | None = None  # (applied at, pollers)
        self.updates: list[tuple[int, int | None, int]] = []

    def tick(self, clock: int) -> None:
        self.clock = clock
        if self.applying and self.applying[0] <= clock:
            self.pollers = self.applying[1]
            self.applying = None

    def read(self) -> MappingState:
        return MappingState(state="Updating" if self.applying else "Enabled", pollers=self.pollers)

    def set_pollers(self, pollers: int | None, maximum: int) -> None:
        assert self.applying is None, "an update sent while the last one applies is refused"
        assert pollers is None or SQS_MIN_POLLERS <= pollers <= maximum
        self.updates.append((self.clock, pollers, maximum))
        self.applying = (self.clock + self.delay_s, pollers)


def test_ten_thousand_wakes_at_one_second_get_the_hundred_pollers_the_simulator_showed():
    # given 10,000 wakes due at one second, batches of 10 with a one-second window
    due = {NOW + 300: 10_000}

    # when
    planned = plan(due, NOW, DEFAULTS)

    # then: 1,000 invocations of 10, 10 per poller (docs/scaling.md: MinimumPollers 100), the
    # headroom for hosts still registering capped at what the deployment allows
    assert planned == Plan(pollers=100, burst_at=NOW + 300, peak_wakes=10_000)


def test_a_burst_gets_headroom_for_hosts_still_registering():
    exact = DEFAULTS.model_copy(update={"headroom": 1.0})

    # 1,000 at one second: 100 invocations, 10 pollers; four times that while hosts may register
    assert plan({NOW + 300: 1_000}, NOW, exact).pollers == 10
    assert plan({NOW + 300: 1_000}, NOW, DEFAULTS).pollers == 40


def test_without_a_batching_window_a_burst_needs_twice_the_invocations():
    windowed = invocations_for(1_000, DEFAULTS)
    unwindowed = invocations_for(1_000, DEFAULTS.model_copy(update={"batching_window_s": 0}))

    assert (windowed, unwindowed) == (100, 200)


def test_pollers_stay_within_what_an_sqs_mapping_takes_and_the_deployment_allows():
    assert pollers_for(1, DEFAULTS) == SQS_MIN_POLLERS
    assert pollers_for(100_000, DEFAULTS) == DEFAULTS.max_pollers
    assert pollers_for(100_000, DEFAULTS.model_copy(update={"max_pollers": 2000})) == 200


def test_nothing_due_is_provisioned_mode_off():
    assert plan({}, NOW, DEFAULTS) == Plan(pollers=None, burst_at=None, peak_wakes=0)


def test_the_operators_floor_is_kept_at_rest_and_under_a_burst():
    floor = DEFAULTS.model_copy(update={"floor_pollers": 50})

    assert plan({}, NOW, floor).pollers == 50
    assert plan({NOW + 300: 1_000}, NOW, floor).pollers == 50
    assert plan({NOW + 300: 10_000}, NOW, floor).pollers == 100


def test_a_steady_rate_is_no_burst():
    # given 100 wakes every second (10 invocations: Lambda's default scaling has them within a second)
    due = dict.fromkeys(range(NOW, NOW + 3600), 100)

    assert plan(due, NOW, DEFAULTS).pollers is None


def test_a_rate_that_outgrows_lambdas_default_scaling_is_a_burst():
    # given wakes that go from none to 1,000 a second: the default scaling adds five batches a second
    due = dict.fromkeys(range(NOW + 120, NOW + 3600), 1000)

    assert plan(due, NOW, DEFAULTS.model_copy(update={"headroom": 1.0})).pollers == 10


def test_a_burst_beyond_the_lead_is_left_to_a_later_run():
    # given a burst just past what this run must raise for
    due = {NOW + DEFAULTS.lead_s + 1: 10_000}

    assert plan(due, NOW, DEFAULTS).pollers is None


def test_a_run_reads_each_shard_once_for_the_whole_window():
    index = FakeIndex({})

    run(index, FakeMapping(), DEFAULTS, NOW)

    start, end = window(NOW, DEFAULTS)
    assert index.reads == [(shard, start, end) for shard in range(64)]


def test_provisioned_mode_is_turned_off_when_no_burst_is_coming():
    mapping = FakeMapping()
    mapping.pollers = 100

    result = run(FakeIndex({}), mapping, DEFAULTS, NOW)

    assert result.sent
    assert mapping.updates == [(0, None, DEFAULTS.max_pollers)]


def test_a_mapping_still_applying_an_update_is_left_to_the_next_run():
    # given a burst seen first with 2,000 of its wakes registered, its update still applying
    mapping = FakeMapping(delay_s=600)
    run(FakeIndex({NOW + 300: 2_000}), mapping, DEFAULTS, NOW)

    # when the next run sees all 10,000
    result = run(FakeIndex({NOW + 300: 10_000}), mapping, DEFAULTS, NOW + 60)

    # then it sends nothing (Lambda would refuse it) and leaves the raise to the run after

    assert result.busy and not result.sent
    assert len(mapping.updates) == 1


def test_after_a_burst_the_mapping_goes_back_to_the_operators_floor():
    floor = DEFAULTS.model_copy(update={"floor_pollers": 50})
    mapping = FakeMapping()
    mapping.pollers = 100

    run(FakeIndex({}), mapping, floor, NOW)

    assert mapping.updates == [(0, 50, DEFAULTS.max_pollers)]


def test_pollers_are_raised_when_a_burst_grows_and_never_lowered_while_it_is_coming():
    assert change(20, Plan(pollers=100, burst_at=NOW, peak_wakes=10_000)).pollers == 100
    kept = change(100, Plan(pollers=20, burst_at=NOW, peak_wakes=2_000))
    assert (kept.pollers, kept.needed) == (100, False)


def _first_ready(burst_at: int, wakes: int, delay_s: int, margin_s: int, start: int) -> tuple[int | None, FakeMapping]:
    """Runs the planner every minute from `start` (the burst registered before it) past the
    burst; the time its pollers took effect, or None."""
    cfg = DEFAULTS.model_copy(update={"update_delay_s": delay_s, "margin_s": margin_s})
    index = FakeIndex({burst_at: wakes})
    mapping = FakeMapping(delay_s=delay_s)
    needed = plan({burst_at: wakes}, burst_at, cfg).pollers
    ready_at = None
    for clock in range(start, burst_at + 10 * cfg.period_s, cfg.period_s):
        mapping.tick(clock)
        if ready_at is None and needed is not None and (mapping.pollers or 0) >= needed:
            ready_at = clock
        run(index, mapping, cfg, clock)
        # the update's own moment of effect, between runs
        if ready_at is None and mapping.applying and (mapping.applying[1] or 0) >= (needed or 1):
            ready_at = mapping.applying[0]
    return ready_at, mapping


@settings(deadline=None, max_examples=200)
@given(
    ahead_s=st.integers(min_value=0, max_value=3 * 3600),
    wakes=st.integers(min_value=200, max_value=100_000),
    delay_s=st.integers(min_value=0, max_value=900),
    margin_s=st.integers(min_value=0, max_value=300),
)
def test_a_burst_the_schedule_shows_has_its_pollers_before_its_second(ahead_s, wakes, delay_s, margin_s):
    # given a burst registered before the planner's lead, `ahead_s` beyond it, and an update that
    # takes `delay_s` to apply
    cfg = DEFAULTS.model_copy(update={"update_delay_s": delay_s, "margin_s": margin_s})
    start = NOW
    burst_at = start + cfg.lead_s + ahead_s

    # when the planner runs every minute
    ready_at, mapping = _first_ready(burst_at, wakes, delay_s, margin_s, start)

    # then the pollers are in effect, with the margin to spare, before the burst's second
    assert ready_at is not None, "the burst's pollers were never raised"
    assert ready_at <= burst_at - margin_s, f"raised at {ready_at - burst_at} s of the burst's second"
    # and not paid for much earlier than needed: raised within one run of the latest moment
    raised_at = mapping.updates[0][0]
    assert raised_at >= burst_at - cfg.lead_s - cfg.period_s
    # and provisioned mode is off again once the burst has passed
    assert mapping.updates[-1][1] is None


def test_a_burst_with_no_warning_gets_its_pollers_as_soon_as_it_is_seen():
    # given a burst first seen 30 s before its second, with an update that takes 5 minutes
    burst_at = NOW + 30
    mapping = FakeMapping(delay_s=300)

    run(FakeIndex({burst_at: 10_000}), mapping, DEFAULTS, NOW)

    # then the planner still asks at once (late: Lambda's default scaling has the burst until then)
    assert mapping.updates == [(0, 100, DEFAULTS.max_pollers)]


def test_an_update_refused_as_in_use_is_left_to_the_next_run():
    # given a mapping that another run's update has just made busy, after this run read it
    class Refusing(FakeMapping):
        def set_pollers(self, pollers: int | None, maximum: int) -> None:
            raise MappingBusyError("uuid")

    result = run(FakeIndex({NOW + 300: 10_000}), Refusing(), DEFAULTS, NOW)

    assert result.busy and not result.sent


def test_a_disabled_mapping_takes_an_update_and_one_under_way_does_not():
    assert MappingState(state="Disabled", pollers=None).ready
    assert not MappingState(state="Enabling", pollers=None).ready


# The caller's memory at rest and for a burst, as template.yaml sets them (CallerMemorySize,
# CallerBurstMemorySize).
SIZED = DEFAULTS.model_copy(update={"rest_memory_mb": 128, "burst_memory_mb": 1024})


class FakeCaller:
    """`CallerMemory` as Lambda's API behaves: an update applies `delay_s` after it is sent, and
    another is refused while it applies."""

    def __init__(self, memory_mb: int = 128, delay_s: int = 0) -> None:
        self.memory_mb = memory_mb
        self.delay_s = delay_s
        self.clock = 0
        self.applying: tuple[int, int] | None = None
        self.updates: list[tuple[int, int]] = []

    def tick(self, clock: int) -> None:
        self.clock = clock
        if self.applying and self.applying[0] <= clock:
            self.memory_mb = self.applying[1]
            self.applying = None

    def read_memory(self) -> int:
        # GetFunctionConfiguration answers the new size at once, LastUpdateStatus InProgress.
        return self.applying[1] if self.applying else self.memory_mb

    def set_memory(self, memory_mb: int) -> None:
        if self.applying:
            raise FunctionBusyError("caller")
        self.updates.append((self.clock, memory_mb))
        self.applying = (self.clock + self.delay_s, memory_mb)


def test_a_coming_burst_gives_the_caller_its_burst_memory_with_its_pollers():
    caller = FakeCaller()

    result = run(FakeIndex({NOW + 300: 10_000}), FakeMapping(), SIZED, NOW, caller)

    assert result.sent and result.memory_mb == 1024
    assert caller.updates == [(0, 1024)]


def steady(wakes: int, now: int = NOW) -> dict[int, int]:
    """`wakes` due one at a time, evenly over the five minutes from `now`: a rate, no burst."""
    return {now + 300 * i // wakes: 1 for i in range(wakes)}


def test_once_the_burst_has_passed_a_steady_rate_gets_the_callers_resting_memory_back():
    caller = FakeCaller(memory_mb=1024)
    mapping = FakeMapping()
    mapping.pollers = 100

    result = run(FakeIndex(steady(2 * QUIET_WAKES + 1)), mapping, SIZED, NOW, caller)

    assert result.memory_mb == 128 and caller.updates == [(0, 128)]


def test_a_quiet_stack_gives_the_caller_its_burst_memory():
    # given the caller at rest and a wake every 10 minutes: each meets a cold start, ~5 s at 128 MB
    caller = FakeCaller(memory_mb=128)

    result = run(FakeIndex({NOW + 200: 1, NOW + 800: 1}), FakeMapping(), SIZED, NOW, caller)

    assert result.plan.burst_at is None and result.memory_mb == 1024
    assert caller.updates == [(0, 1024)]


def test_a_caller_already_at_the_planned_memory_is_left_alone():
    caller = FakeCaller(memory_mb=128)

    result = run(FakeIndex(steady(2 * QUIET_WAKES + 1)), FakeMapping(), SIZED, NOW, caller)

    assert result.memory_mb is None and caller.updates == []


@pytest.mark.parametrize(
    ("current_mb", "wakes", "memory_mb"),
    [
        (128, QUIET_WAKES - 1, 1024),  # at rest, below the threshold: up
        (128, QUIET_WAKES, 128),  # at rest, between the threshold and twice it: stays
        (128, 2 * QUIET_WAKES, 128),
        (1024, QUIET_WAKES, 1024),  # raised, between: stays
        (1024, 2 * QUIET_WAKES, 1024),
        (1024, 2 * QUIET_WAKES + 1, 128),  # raised, above twice the threshold: down
        (512, 2 * QUIET_WAKES, 1024),  # neither size (someone's update): counted as raised
    ],
)
def test_the_callers_memory_changes_only_past_the_thresholds_band(current_mb, wakes, memory_mb):
    # a rate near the threshold must not flip the memory (each change cold-starts every environment)
    no_burst = Plan(pollers=None, burst_at=None, peak_wakes=0)

    assert memory_for(no_burst, steady(wakes), current_mb, SIZED) == memory_mb


def test_a_rate_wandering_about_the_threshold_changes_the_callers_memory_only_at_its_bands_edges():
    # given a caller at rest and a window's wakes going up and down about the threshold
    caller, mapping = FakeCaller(memory_mb=128), FakeMapping()
    counts = [QUIET_WAKES, QUIET_WAKES - 1, QUIET_WAKES + 5, 2 * QUIET_WAKES, 2 * QUIET_WAKES + 1, QUIET_WAKES]
    for minute, wakes in enumerate(counts):
        # when the planner runs each minute
        caller.tick(60 * minute)
        run(FakeIndex(steady(wakes, NOW + 60 * minute)), mapping, SIZED, NOW + 60 * minute, caller)

    # then it went up below the threshold and down only above twice it, no more
    assert caller.updates == [(60, 1024), (240, 128)]


def test_a_burst_gets_the_burst_memory_however_busy_the_window():
    burst = Plan(pollers=100, burst_at=NOW, peak_wakes=10_000)

    assert memory_for(burst, {NOW: 10_000, **steady(100)}, 128, SIZED) == 1024


def test_a_caller_still_applying_an_update_is_left_to_the_next_run_and_the_pollers_are_still_raised():
    # given a caller whose last update (someone's deploy, say) is still applying
    caller = FakeCaller(memory_mb=512, delay_s=60)
    caller.set_memory(300)
    mapping = FakeMapping()

    # when a run plans a burst
    result = run(FakeIndex({NOW + 300: 10_000}), mapping, SIZED, NOW, caller)

    # then the pollers go up all the same, and the memory waits for the next run
    assert result.sent and mapping.updates and result.memory_mb is None
    caller.tick(60)
    assert run(FakeIndex({NOW + 300: 10_000}), mapping, SIZED, NOW + 60, caller).memory_mb == 1024


def test_without_both_sizes_the_planner_leaves_the_callers_memory_alone():
    assert memory_for(Plan(pollers=100, burst_at=NOW, peak_wakes=10_000), {}, 128, DEFAULTS) is None
    caller = FakeCaller(memory_mb=999)

    run(FakeIndex({NOW + 300: 10_000}), FakeMapping(), DEFAULTS, NOW, caller)

    assert caller.updates == []


@settings(deadline=None, max_examples=100)
@given(
    ahead_s=st.integers(min_value=0, max_value=3600),
    delay_s=st.integers(min_value=0, max_value=900),
    margin_s=st.integers(min_value=0, max_value=300),
)
def test_a_burst_the_schedule_shows_has_its_burst_memory_before_its_second(ahead_s, delay_s, margin_s):
    # given a burst registered before the planner's lead on a stack busy enough for the caller to
    # rest (a wake every 10 s), and a memory update taking `delay_s`
    cfg = SIZED.model_copy(update={"update_delay_s": delay_s, "margin_s": margin_s})
    burst_at = NOW + cfg.lead_s + ahead_s
    due = dict.fromkeys(range(NOW - cfg.after_s, burst_at + cfg.lead_s, 10), 1) | {burst_at: 10_000}
    index, mapping, caller = FakeIndex(due), FakeMapping(delay_s=delay_s), FakeCaller(delay_s=delay_s)

    # when the planner runs every minute up to the burst's second
    for clock in range(NOW, burst_at + 1, cfg.period_s):
        mapping.tick(clock)
        caller.tick(clock)
        run(index, mapping, cfg, clock, caller)
    caller.tick(burst_at)

    # then the caller has its burst memory at the second, and got it no sooner than one run early
    assert caller.memory_mb == 1024
    assert caller.updates[0][0] >= burst_at - cfg.lead_s - cfg.period_s
