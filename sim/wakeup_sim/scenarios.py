"""The scenarios: bursts of wakes due at one second, steady rates, hosts down, a host failing long.

Each runs a fresh `World` from template.yaml's deployment (with a scenario's own levers, if any)
on virtual time, and returns what happened to every wake (`Outcome`).
"""

import gc
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from wakeup_sim.deployment import Deployment
from wakeup_sim.hosts import Call
from wakeup_sim.logs import counted_logs
from wakeup_sim.planner import planned
from wakeup_sim.profile import AWS, Profile
from wakeup_sim.world import Wake, World

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z, a whole minute
NEAR_LEAD_S = (120.0, 600.0)  # registered 2 to 10 minutes ahead: SQS all the way
FAR_LEAD_S = (1800.0, 3600.0)  # 30 to 60 minutes ahead: a one-time schedule, then SQS
SETTLE_S = 900.0  # after the last wake's time, how long the world runs on (retries, sweeps)
QUIET_SCENARIO_WAKES = 36  # a wake every 10 minutes: six hours


@dataclass(frozen=True)
class Scenario:
    name: str
    wakes: int
    path: str = "near"  # near (SQS) or far (Scheduler)
    warm: bool = False  # an event source already scaled out, with warm environments
    rate_per_s: float | None = None  # steady: wakes due per second (else all due at one second)
    down_fraction: float = 0.0  # hosts down (half refuse connections, half hang to the timeout)
    failing_for_s: float = 0.0  # one host answers 503 for this long after its wake's time
    # Every host registers its wake within this many seconds (its wake due `path`'s lead later),
    # rather than ahead of a wake time they share.
    registering_within_s: float | None = None
    # A burst at one second whose hosts register over this many seconds before it (uniformly; a wake
    # registered more than the SQS horizon ahead is far): 1,800 is "every worker stopped over the
    # last half hour", 10 a burst with no warning.
    registered_over_s: float | None = None
    levers: dict[str, Any] = field(default_factory=dict)
    seed: int = 1
    # The planner raises pollers for a burst the schedule shows (template.yaml's PlannerEnabled);
    # False: it fails throughout, and the burst meets Lambda's default scaling.
    planner: bool = True
    # Lambda reclaims a function's environment idle this long (None: never; `lambdas.Function`).
    reclaimed_after_s: float | None = None


@dataclass
class Outcome:
    scenario: Scenario
    world: World
    wakes: list[Wake]
    healthy: set[str]
    first_due: float
    last_due: float
    log_bytes: int
    sweeper_rearmed: int
    # Provisioned pollers' EPU-seconds while it ran: those the deployment keeps (MinimumPollers),
    # for the whole simulated span, and those the planner raised for its burst (`planned`).
    epu_s: float = 0.0


@contextmanager
def no_cyclic_collection() -> Iterator[None]:
    """Python's cyclic garbage collector off for a simulation's length.

    A simulation keeps millions of objects alive to its end (items, messages, calls, tasks) and
    makes few reference cycles: the collector's passes, more frequent and longer as the objects
    pile up, took a third of a steady scenario's CPU and freed almost nothing. Reference counting
    still frees everything else at once.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class _Setting:
    """A scenario laid out in a world: its wakes, when each is due and when its host registers it."""

    world: World
    wakes: list[Wake]
    healthy: set[str]
    dues: list[float]
    registered: list[float]
    start_due: float


def _lay_out(scenario: Scenario, deployment: Deployment, profile: Profile) -> _Setting:
    world = World(deployment, start=T0, seed=scenario.seed, warm=scenario.warm, profile=profile)
    wakes = world.instances(scenario.wakes)
    dues, registered, start_due = _times(scenario, world.rng)
    healthy = {w.instance_id for w in wakes}
    down = int(scenario.down_fraction * len(wakes))
    for index, wake in enumerate(wakes[:down]):
        (world.hosts.down if index % 2 else world.hosts.hanging).add(wake.url)
        healthy.discard(wake.instance_id)
    return _Setting(world, wakes, healthy, dues, registered, start_due)


def _times(scenario: Scenario, rng: random.Random) -> tuple[list[float], list[float], float]:
    """When each wake is due and when its host registers it, drawn from `rng` (a world's, after its
    hosts); and when the first is due, at the earliest."""
    lead = FAR_LEAD_S if scenario.path == "far" else NEAR_LEAD_S
    # Every registration after the world's start: a burst's hosts over their whole span before it.
    start_due = T0 + max(lead[1], scenario.registered_over_s or 0.0) + 60
    hosts = range(scenario.wakes)
    registered_at: list[float] | None = None
    if scenario.registering_within_s:
        registered_at = [T0 + 60 + rng.random() * scenario.registering_within_s for _ in hosts]
        dues = [when + lead[0] + rng.random() * (lead[1] - lead[0]) for when in registered_at]
    elif scenario.rate_per_s:
        span = scenario.wakes / scenario.rate_per_s
        dues = [start_due + rng.random() * span for _ in hosts]
    else:
        dues = [start_due] * len(hosts)
    if scenario.registered_over_s:
        registered_at = [due - rng.random() * scenario.registered_over_s for due in dues]
    registered = [
        registered_at[index] if registered_at else due - lead[0] - rng.random() * (lead[1] - lead[0])
        for index, due in enumerate(dues)
    ]
    return dues, registered, start_due


def _planned(scenario: Scenario, deployment: Deployment, profile: Profile) -> tuple[Deployment, float]:
    """With the planner on (`Scenario.planner`), a burst at one second, or a rate on a cold stack,
    runs with the pollers and the caller's memory the planner's runs put in effect by its first wake
    (wakeup_sim.planner), and the EPU-seconds of the pollers it raised; a scenario that sets its own
    pollers (a lever) keeps them. A warm rate's stack was at that rate before: the planner had it
    at rest already (its window busy), as the deployment has it."""
    if not scenario.planner or scenario.rate_per_s and scenario.warm or scenario.registering_within_s:
        return deployment, 0.0
    with counted_logs():  # the planner's log lines are not the scenario's
        # The scenario's times as its run draws them (`_lay_out`), its hosts passed over.
        world = World(deployment, start=T0, seed=scenario.seed, warm=scenario.warm, profile=profile)
        world.pass_over_instances(scenario.wakes)
        dues, registered, _ = _times(scenario, world.rng)
        raised, epu_s = planned(deployment, list(zip(registered, dues, strict=True)), T0)
    if "minimum_pollers" in scenario.levers:
        # Its own pollers kept (a floor the planner keeps too, billed as the scenario's own); the
        # caller's memory is still the planner's.
        return deployment.but(caller_memory_mb=raised.caller_memory_mb), 0.0
    return raised, epu_s


def run(scenario: Scenario, deployment: Deployment, profile: Profile = AWS) -> Outcome:
    deployment = deployment.but(**scenario.levers)
    kept_pollers = deployment.minimum_pollers or 0
    deployment, raised_epu_s = _planned(scenario, deployment, profile)
    with counted_logs() as logs, no_cyclic_collection():
        setting = _lay_out(scenario, deployment, profile)
        world, wakes, dues = setting.world, setting.wakes, setting.dues
        for function in world.functions:
            function.reclaim_idle_s = scenario.reclaimed_after_s
        if scenario.failing_for_s:
            world.hosts.failing_until[wakes[0].url] = setting.start_due + scenario.failing_for_s
        for wake, due, when in zip(wakes, dues, setting.registered, strict=True):
            world.register(wake, due, when)
        world.engine.run(max(dues) + SETTLE_S + scenario.failing_for_s)
    epu_s = kept_pollers * (world.engine.now - world.start) + raised_epu_s
    return Outcome(
        scenario,
        world,
        wakes,
        setting.healthy,
        min(dues),
        max(dues),
        logs.bytes,
        world.sweeper_rearmed,
        epu_s,
    )


def first_calls(outcome: Outcome) -> dict[str, Call]:
    calls = outcome.world.hosts.calls
    return {w.instance_id: calls[w.instance_id][0] for w in outcome.wakes if calls.get(w.instance_id)}


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

SCENARIOS = [
    *(
        Scenario(f"{n:,} at one second, {path}, {'warm' if warm else 'cold'}", n, path=path, warm=warm)
        for n in (1000, 10000)
        for path in ("near", "far")
        for warm in (False, True)
    ),
    *(
        Scenario(
            f"100,000 at one second, {path}, {'warm' if warm else 'cold'}, quotas raised",
            100000,
            path=path,
            warm=warm,
            levers=QUOTAS_RAISED_100K,
        )
        for path in ("near", "far")
        for warm in (False, True)
    ),
    # The planner sees a burst as its hosts register: over the half hour before (far, then near), over
    # the last 10 minutes (near), and in the last 10 s, too late to raise pollers (no warning).
    *(
        Scenario(f"10,000 at one second, registered over the {label} before, cold", 10000, registered_over_s=over)
        for label, over in (("30 minutes", 1800.0), ("10 minutes", 600.0), ("10 s (no warning)", 10.0))
    ),
    # The same at 100,000 with the quotas raised, its pollers the planner's (up to 200, within
    # `maximum_pollers`), not a lever's.
    Scenario(
        "100,000 at one second, registered over the 30 minutes before, cold, quotas raised",
        100000,
        registered_over_s=1800.0,
        levers={k: v for k, v in QUOTAS_RAISED_100K.items() if k != "minimum_pollers"},
    ),
    Scenario("steady 100/s for 10 min, near", 60000, rate_per_s=100, warm=True),
    Scenario("steady 100/s for 10 min, far", 60000, path="far", rate_per_s=100, warm=True),
    Scenario("steady 1,000/s for 10 min, near", 600000, rate_per_s=1000, warm=True),
    Scenario("10,000 at one second, 10% of hosts down", 10000, warm=True, down_fraction=0.1),
    # Every host stopping at once registers its next wake in the same second, on a cold wake function.
    Scenario("10,000 hosts register in one second", 10000, registering_within_s=1.0),
    Scenario("10,000 hosts register far wakes in one second", 10000, path="far", registering_within_s=1.0),
    Scenario("one host failing for two days", 1, failing_for_s=2 * 86400),
    # A quiet stack (a new user's first, a small deployment): each wake mostly meets a cold caller,
    # Lambda having reclaimed its environment (assumed after 5 minutes idle; AWS names no time).
    *(
        Scenario(
            f"a wake every 10 minutes on an idle stack{'' if planner else ', planner off'}",
            QUIET_SCENARIO_WAKES,
            rate_per_s=1 / 600,
            reclaimed_after_s=300.0,
            planner=planner,
        )
        for planner in (True, False)
    ),
]
