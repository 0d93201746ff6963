"""The grid `make simulate` runs and gates: load shapes on a stack idle before and on a warm one.

- All at one second: 1 to 10,000 wakes, near and far, with the planner on, and with it failing
  throughout.
- Steady: one every 10 minutes to 1,000 a second.
- What platforms make: a day (quiet nights, a trickle by day, 5,000 at the top of one hour), a ramp
  from 0 to 100 a second over 10 minutes, 100 at one second every minute for an hour.
- And the scenarios that still earn their place: hosts down, one host failing for two days, bursts
  registered over the minutes before, hosts registering at once, 100,000 with the quotas raised.

"Idle": the event source at rest and no warm environment, Lambda reclaiming an environment idle
`deployment.RECLAIM_IDLE_S` (an assumption: `make simulate --reclaim` runs the other end). "Warm":
already scaled out, with warm environments, which other traffic keeps warm (none reclaimed).

Each cell's bound (`Scenario.bound_s`) is its p99 lateness at most: a second with the planner on; a
burst the planner does not raise pollers for (it fails, or the burst comes with no warning) is held
to what Lambda's default scaling gives (`default_scaling_bound_s`). Lost and called twice are 0
everywhere.

Steady rates run for as long as their figure needs, not an hour: a warm stack's lateness is the
same each minute, and an idle one's first seconds are in every count (docs/scaling.md says which).
"""

import math

from wakeup_awsfacts.sqs_scaling import STANDARD_INITIAL, STANDARD_PER_MINUTE
from wakeup_sim.deployment import INIT_S_AT_ONE_VCPU, RECLAIM_IDLE_S
from wakeup_sim.scenarios import Scenario

ON_TIME_S = 1.0
# The caller's one memory that holds the grid (docs/scaling.md, "The caller's memory"): the smallest
# tried whose worst cell is within its bound. template.yaml's CallerMemorySize is to be set from it.
CALLER_MEMORY_MB = 256
BURSTS = (1, 10, 30, 50, 100, 300, 1000, 10000)
# (a name, wakes a second, wakes run): long enough for its p99 to settle, and a few hundred at least.
STEADY = (
    ("one every 10 minutes", 1 / 600, 36),
    ("0.1/s", 0.1, 360),
    ("0.2/s", 0.2, 360),
    ("1/s", 1.0, 600),
    ("10/s", 10.0, 3000),
    ("100/s", 100.0, 12000),
    # Half a minute: its p99 the same as a minute's (docs/scaling.md, "The grid"), half the CPU.
    ("1,000/s", 1000.0, 30000),
)
QUIET = "steady one every 10 minutes, idle"
HOUR = 3600.0
# How long an invocation holds its batch, at most, when the default scaling is counted: its wakes
# come a second or two early and wait out their second, then call their hosts.
BATCH_HELD_S = 1.0
BATCH_SIZE = 10


def default_scaling_bound_s(wakes: int, batch_size: int = BATCH_SIZE) -> float:
    """The p99 lateness Lambda's default scaling gives `wakes` due at one second, none of them
    seen ahead: five concurrent batches at first, five more each second while messages wait
    ("Configuring scaling behavior for SQS event source mappings"), each batch held
    `BATCH_HELD_S`; the seconds until 99% of the batches have run, and a cold start."""
    batches = math.ceil(0.99 * math.ceil(wakes / batch_size))
    seconds, ran = 0, 0
    while ran < batches:
        ran += STANDARD_INITIAL + round(STANDARD_PER_MINUTE / 60 * seconds)
        seconds += 1
    return seconds * BATCH_HELD_S + INIT_S_AT_ONE_VCPU + ON_TIME_S


def _state(warm: bool) -> str:
    return "warm" if warm else "idle"


def _bursts() -> list[Scenario]:
    return [
        Scenario(
            f"{n:,} at one second, {path}, {_state(warm)}{'' if planner else ', planner failing'}",
            n,
            path=path,
            warm=warm,
            planner=planner,
            reclaimed_after_s=None if warm else RECLAIM_IDLE_S,
            bound_s=ON_TIME_S if planner else default_scaling_bound_s(n),
        )
        for planner in (True, False)
        for n in BURSTS
        for path in ("near", "far")
        for warm in (False, True)
    ]


def _steady() -> list[Scenario]:
    return [
        Scenario(
            f"steady {label}, {_state(warm)}",
            wakes,
            rate_per_s=rate,
            warm=warm,
            reclaimed_after_s=None if warm else RECLAIM_IDLE_S,
            bound_s=ON_TIME_S,
        )
        for label, rate, wakes in STEADY
        for warm in (False, True)
    ]


# A day from midnight: quiet nights (a wake every 10 minutes), a trickle by day (one every 20 s
# from 07:00 to 22:00), and 5,000 at noon's first second.
DAY = ((0.0, 7 * HOUR, 42), (7 * HOUR, 15 * HOUR, 2700), (12 * HOUR, 0.0, 5000), (22 * HOUR, 2 * HOUR, 12))
# From 0 to 100 a second over 10 minutes, a minute at each step (5, 15, ... 95 a second).
RAMP = tuple((60.0 * step, 60.0, (10 * step + 5) * 60) for step in range(10))
# 100 at one second, every minute for an hour.
EVERY_MINUTE = tuple((60.0 * minute, 0.0, 100) for minute in range(60))


def _shapes() -> list[Scenario]:
    def shaped(name: str, segments: tuple[tuple[float, float, int], ...], warm: bool) -> Scenario:
        return Scenario(
            f"{name}, {_state(warm)}",
            sum(count for _, _, count in segments),
            segments=segments,
            warm=warm,
            reclaimed_after_s=None if warm else RECLAIM_IDLE_S,
            bound_s=ON_TIME_S,
        )

    return [
        shaped("a day: quiet nights, a trickle by day, 5,000 at noon", DAY, warm=False),
        *(shaped("a ramp from 0 to 100/s over 10 minutes", RAMP, warm) for warm in (False, True)),
        *(shaped("100 at one second every minute for an hour", EVERY_MINUTE, warm) for warm in (False, True)),
    ]


# template.yaml's defaults are sized for 10,000 wakes at one second; 100,000 need these settings
# and quota raises (docs/operations.md, "Sizing for bursts"): a warmer table, pollers ready for
# 2,000 batches and allowed 3,000 (all of the account's concurrency, raised to 3,000), and for far
# wakes Scheduler's invocations.
QUOTAS_RAISED_100K = {
    "table_write_units_per_s": 200000,
    "table_read_units_per_s": 100000,
    "minimum_pollers": 200,
    "maximum_pollers": 300,
    "account_concurrency": 3000,
    # Far wakes: their schedules fire within the minute before the lead, 100,000 in it.
    "scheduler_invocations_per_s": 20000,
}


def _kept() -> list[Scenario]:
    return [
        # Beyond the template's sizing: reported, not bounded (docs/operations.md, "Sizing for bursts");
        # idle only, the later of idle and warm.
        Scenario(
            "100,000 at one second, near, idle, quotas raised",
            100000,
            levers=QUOTAS_RAISED_100K,
            reclaimed_after_s=RECLAIM_IDLE_S,
        ),
        # The planner sees a burst as its hosts register: over the half hour before (far, then near),
        # over the last 10 minutes (near), and in the last 10 s, too late to raise pollers (no warning).
        *(
            Scenario(
                f"10,000 at one second, registered over the {label} before, idle",
                10000,
                registered_over_s=over,
                reclaimed_after_s=RECLAIM_IDLE_S,
                bound_s=ON_TIME_S if over > 60 else default_scaling_bound_s(10000),
            )
            for label, over in (("30 minutes", 1800.0), ("10 minutes", 600.0), ("10 s (no warning)", 10.0))
        ),
        Scenario("10,000 at one second, 10% of hosts down", 10000, warm=True, down_fraction=0.1, bound_s=ON_TIME_S),
        # Every host stopping at once registers its next wake in the same second, on a cold wake function.
        Scenario("10,000 hosts register in one second", 10000, registering_within_s=1.0, bound_s=ON_TIME_S),
        Scenario(
            "10,000 hosts register far wakes in one second",
            10000,
            path="far",
            registering_within_s=1.0,
            bound_s=ON_TIME_S,
        ),
        Scenario("one host failing for two days", 1, failing_for_s=2 * 86400, bound_s=ON_TIME_S),
    ]


SCENARIOS = [*_bursts(), *_steady(), *_shapes(), *_kept()]
