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
from wakeup_sim.planner import Planner, planner_for
from wakeup_sim.profile import AWS, Profile
from wakeup_sim.world import Wake, World

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z, a whole minute
NEAR_LEAD_S = (120.0, 600.0)  # registered 2 to 10 minutes ahead: SQS all the way
FAR_LEAD_S = (1800.0, 3600.0)  # 30 to 60 minutes ahead: a one-time schedule, then SQS
SETTLE_S = 900.0  # after the last wake's time, how long the world runs on (retries, sweeps)


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
    # A load's shape (else `rate_per_s` or all at one second): (from the first wake's second, over
    # how many seconds, how many wakes) each, due at random within its span (0: all at that second).
    segments: tuple[tuple[float, float, int], ...] = ()
    # The p99 lateness the scenario is held to (`make simulate` fails past it); None: reported only.
    bound_s: float | None = None


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
    # for the whole simulated span, and those the planner raised (`wakeup_sim.planner`).
    epu_s: float = 0.0
    # The planner that ran every minute through it (None: failing throughout).
    planner: Planner | None = None


@contextmanager
def no_cyclic_collection() -> Iterator[None]:
    """Python's cyclic garbage collector off for a simulation's length.

    A simulation keeps millions of objects alive to its end (items, messages, calls, tasks) and
    makes few reference cycles: the collector's passes, more frequent and longer as the objects
    pile up, cost much of a steady scenario's CPU and freed almost nothing. Reference counting
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
    elif scenario.segments:
        segments = scenario.segments
        dues = [start_due + begin + rng.random() * span for begin, span, count in segments for _ in range(count)]
        assert len(dues) == scenario.wakes, "a shaped scenario's wakes are its segments'"
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


def run(scenario: Scenario, deployment: Deployment, profile: Profile = AWS) -> Outcome:
    deployment = deployment.but(**scenario.levers)
    kept_pollers = deployment.minimum_pollers or 0
    with counted_logs() as logs, no_cyclic_collection():
        setting = _lay_out(scenario, deployment, profile)
        world, wakes, dues = setting.world, setting.wakes, setting.dues
        # The planner runs every minute through the scenario (`Scenario.planner`), or fails throughout.
        planner = planner_for(world.engine, world.event_source, deployment, world.pending) if scenario.planner else None
        if planner is not None:
            planner.begin()
        for function in world.functions:
            function.reclaim_idle_s = scenario.reclaimed_after_s
        if scenario.failing_for_s:
            world.hosts.failing_until[wakes[0].url] = setting.start_due + scenario.failing_for_s
        for wake, due, when in zip(wakes, dues, setting.registered, strict=True):
            world.register(wake, due, when)
        world.engine.run(max(dues) + SETTLE_S + scenario.failing_for_s)
    epu_s = kept_pollers * (world.engine.now - world.start) + (planner.epu_s() if planner else 0.0)
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
        planner,
    )


def first_calls(outcome: Outcome) -> dict[str, Call]:
    calls = outcome.world.hosts.calls
    return {w.instance_id: calls[w.instance_id][0] for w in outcome.wakes if calls.get(w.instance_id)}
