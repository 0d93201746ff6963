"""The planner's logic (wakeup.logic.planner): which pollers a coming burst gets, when they are
raised, and that provisioned mode is off again once the burst has passed."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wakeup.event_source import MappingBusyError, MappingState
from wakeup.logic.planner import (
    SQS_MIN_POLLERS,
    Plan,
    PlannerSettings,
    Watch,
    change,
    invocations_for,
    lands_before,
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
    cfg = DEFAULTS.model_copy(update={"update_delay_s": 120})
    mapping = FakeMapping(delay_s=120)
    run(FakeIndex({NOW + 300: 2_000}), mapping, cfg, NOW)

    # when the next run sees all 10,000
    result = run(FakeIndex({NOW + 300: 10_000}), mapping, cfg, NOW + 60)

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


def test_a_burst_seen_too_late_for_its_update_gets_none():
    # given a burst first seen 30 s before its second, with an update assumed to take 5 minutes
    burst_at = NOW + 30
    mapping = FakeMapping(delay_s=300)

    result = run(FakeIndex({burst_at: 10_000}), mapping, DEFAULTS, NOW)

    # then nothing is sent: it could land during the burst (each poller change in the middle of
    # it), so the burst meets Lambda's default scaling, as an unseen one does
    assert mapping.updates == [] and result.held == "late" and not result.busy


def test_a_burst_just_past_does_not_hold_back_the_raise_for_the_next_one():
    # given a burst 10 s ago, still in the window (its capacity kept a minute after it), another one
    # 400 s ahead, bigger, and an update assumed to take 300 s
    mapping = FakeMapping(delay_s=300)

    result = run(FakeIndex({NOW - 10: 2_000, NOW + 400: 10_000}), mapping, DEFAULTS, NOW)

    # then the raise for the coming burst is sent now: it lands before that burst's second, and the
    # past one's second is not what it must land before
    assert result.sent and result.held == "" and mapping.updates
    assert mapping.updates[0][1] == plan({NOW + 400: 10_000}, NOW, DEFAULTS).pollers


def test_an_update_refused_as_in_use_is_left_to_the_next_run():
    # given a mapping that another run's update has just made busy, after this run read it
    class Refusing(FakeMapping):
        def set_pollers(self, pollers: int | None, maximum: int) -> None:
            raise MappingBusyError("uuid")

    result = run(FakeIndex({NOW + 400: 10_000}), Refusing(), DEFAULTS, NOW)

    assert result.busy and not result.sent


def test_a_disabled_mapping_takes_an_update_and_one_under_way_does_not():
    assert MappingState(state="Disabled", pollers=None).ready
    assert not MappingState(state="Enabling", pollers=None).ready


@pytest.mark.parametrize("code", ["ResourceInUseException", "ResourceConflictException", "TooManyRequestsException"])
def test_a_mapping_or_an_api_that_is_busy_ends_the_run_calmly(code):
    # given Lambda refusing the read for now (its control plane's rate, shared with deploys)
    class Throttled(FakeMapping):
        def read(self) -> MappingState:
            raise MappingBusyError(code)

    # when a run plans a burst, then it ends calmly: busy, nothing sent, the next run tries again
    result = run(FakeIndex({NOW + 400: 10_000}), Throttled(), DEFAULTS, NOW)
    assert result.busy and not result.sent and result.held == "busy"


def test_lands_before_is_the_assumed_delay_ending_before_the_bursts_second():
    cfg = DEFAULTS.model_copy(update={"update_delay_s": 300})

    assert lands_before(NOW + 301, NOW, cfg)
    assert not lands_before(NOW + 300, NOW, cfg)
    assert not lands_before(NOW - 10, NOW, cfg)  # a burst that has begun


@settings(deadline=None, max_examples=200)
@given(
    seen_s=st.lists(st.integers(min_value=-60, max_value=1800), min_size=1, max_size=5),
    delay_s=st.integers(min_value=0, max_value=900),
    margin_s=st.integers(min_value=0, max_value=300),
)
def test_no_change_lands_during_its_burst_or_after_it(seen_s, delay_s, margin_s):
    # given a burst whose wakes are registered in parts, each part `seen_s` before its second (some
    # too late for any update, some after it began), and updates that take `delay_s` to apply
    cfg = DEFAULTS.model_copy(update={"update_delay_s": delay_s, "margin_s": margin_s})
    burst_at = NOW + 3600
    parts = sorted(seen_s, reverse=True)
    mapping, watch = FakeMapping(delay_s=delay_s), Watch()

    # when the planner runs every minute, seeing each part once registered
    for clock in range(NOW, burst_at + 30 * cfg.period_s, cfg.period_s):
        wakes = sum(2_000 for ahead in parts if clock >= burst_at - ahead)
        mapping.tick(clock)
        run(
            FakeIndex({burst_at: wakes} if wakes and clock <= burst_at + cfg.after_s else {}),
            mapping,
            cfg,
            clock,
            watch,
        )

    # then every raise has applied before the burst's second, and the mapping is lowered only once
    # the burst's wakes are out of the window
    for sent_at, pollers, _ in mapping.updates:
        if pollers is not None:
            assert sent_at + delay_s < burst_at, f"a raise sent {burst_at - sent_at} s before the burst"
        else:
            assert sent_at > burst_at, "a lowering before the burst"


def test_after_off_the_mapping_is_read_back_and_pollers_left_are_not_sent_off_again():
    # given a mapping that keeps pollers after an "off" (AWS documents no off value: it might read
    # back as the defaults)
    class Sticky(FakeMapping):
        def tick(self, clock: int) -> None:
            super().tick(clock)
            if self.pollers is None and not self.applying:
                self.pollers = SQS_MIN_POLLERS

    mapping, watch = Sticky(delay_s=60), Watch()
    mapping.pollers = 100
    results = []
    for minute in range(5):
        # when the planner runs each minute with no burst coming
        mapping.tick(60 * minute)
        results.append(run(FakeIndex({}), mapping, DEFAULTS, NOW + 60 * minute, watch))

    # then it sent the "off" once, read the mapping back once Enabled, and from then on reports
    # the pollers left (PlannerPollersLeftAlarm) instead of sending it again
    assert [update[1] for update in mapping.updates] == [None]
    assert results[0].sent and results[0].pollers_left is None
    assert [result.pollers_left for result in results[1:]] == [SQS_MIN_POLLERS] * 4
    assert all(result.held == "left" for result in results[1:])
    # and the update's delay was read back once, a run after it was sent
    assert [result.update_delay_s for result in results] == [None, 60, None, None, None]


def test_an_off_that_took_is_read_back_without_an_alarm():
    mapping, watch = FakeMapping(delay_s=30), Watch()
    mapping.pollers = 100

    run(FakeIndex({}), mapping, DEFAULTS, NOW, watch)
    mapping.tick(60)
    result = run(FakeIndex({}), mapping, DEFAULTS, NOW + 60, watch)

    assert result.pollers_left is None and result.update_delay_s == 60 and not result.sent


class Deploying:
    """`Deploys` with a deploy under way, or not."""

    def __init__(self, under_way: bool) -> None:
        self.under_way = under_way

    def in_progress(self, now: object) -> bool:
        return self.under_way


def test_nothing_is_sent_while_the_stack_is_being_deployed():
    mapping = FakeMapping()

    result = run(FakeIndex({NOW + 400: 10_000}), mapping, DEFAULTS, NOW, Watch(), Deploying(True))
    assert mapping.updates == [] and result.busy and result.held == "deploy"

    # and once the deploy is done, the next run sends it
    assert run(FakeIndex({NOW + 400: 10_000}), mapping, DEFAULTS, NOW + 60, Watch(), Deploying(False)).sent
