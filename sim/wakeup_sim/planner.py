"""The planner in the simulator: which provisioned pollers, and which caller memory, are in effect
at a burst's second.

The service's own planning (`wakeup.logic.planner.run`) runs every minute over the wakes
registered by then, against an event source whose updates apply `update_delay_s` after they are
sent and which takes no update while one applies (`wakeup.logic.planner`'s docstring says what AWS
does and does not document). The simulator's event source keeps one `MinimumPollers` for a
scenario, so a burst's scenario runs with the pollers in effect at its first second: those the
planner's runs got there in time, or none (Lambda's default scaling) when they did not; likewise
the caller's memory, its burst size or its resting one. A memory update is assumed to apply after
the same delay as the mapping's (AWS documents neither; the function's is seconds in practice).
"""

from collections import Counter
from dataclasses import dataclass, field

from wakeup.event_source import MappingState
from wakeup.logic.planner import PlannerSettings, run
from wakeup_sim.deployment import Deployment

PERIOD_S = 60


@dataclass
class _Index:
    """`DueCounts` of the wakes registered by the planner's run, all in one shard."""

    registered: list[tuple[float, float]]  # (registered at, due)
    now: float = 0.0

    def due_per_second(self, shard: int, start: int, end: int) -> Counter[int]:
        if shard:
            return Counter()
        return Counter(int(due) for at, due in self.registered if at <= self.now and start <= due < end)


@dataclass
class _Mapping:
    """The caller's mapping: an update applies `delay_s` after it is sent."""

    delay_s: float
    now: float = 0.0
    pollers: int | None = None
    applying: list[tuple[float, int | None]] = field(default_factory=list)

    def settle(self) -> None:
        while self.applying and self.applying[0][0] <= self.now:
            self.pollers = self.applying.pop(0)[1]

    def read(self) -> MappingState:
        self.settle()
        return MappingState(state="Updating" if self.applying else "Enabled", pollers=self.pollers)

    def set_pollers(self, pollers: int | None, maximum: int) -> None:
        self.applying.append((self.now + self.delay_s, pollers))


@dataclass
class _Caller:
    """The caller's memory: an update applies `delay_s` after it is sent."""

    delay_s: float
    memory_mb: int
    now: float = 0.0
    applying: list[tuple[float, int]] = field(default_factory=list)

    def settle(self) -> None:
        while self.applying and self.applying[0][0] <= self.now:
            self.memory_mb = self.applying.pop(0)[1]

    def read_memory(self) -> int:
        self.settle()
        return self.applying[-1][1] if self.applying else self.memory_mb

    def set_memory(self, memory_mb: int) -> None:
        self.applying.append((self.now + self.delay_s, memory_mb))


def settings_for(deployment: Deployment, **changes: int) -> PlannerSettings:
    """The planner's settings as template.yaml gives them to the planner function."""
    return PlannerSettings(
        batch_size=deployment.batch_size,
        batching_window_s=int(deployment.batching_window_s),
        max_pollers=deployment.maximum_pollers or PlannerSettings().max_pollers,
        floor_pollers=deployment.minimum_pollers or 0,
        rest_memory_mb=deployment.caller_memory_mb if deployment.caller_burst_memory_mb else 0,
        burst_memory_mb=deployment.caller_burst_memory_mb or 0,
    ).model_copy(update=changes)


@dataclass(frozen=True)
class Capacity:
    """What the planner's runs have in effect at a moment: provisioned pollers (None: off), and
    the caller's memory."""

    pollers: int | None
    memory_mb: int


def capacity_at(
    burst_at: float, registered: list[tuple[float, float]], settings: PlannerSettings, start: float, memory_mb: int
) -> Capacity:
    """The capacity in effect at `burst_at` after the planner's runs every minute from `start` (a
    whole minute) over the wakes `registered` (when, and due when), the caller at `memory_mb` before."""
    index = _Index(registered)
    mapping = _Mapping(settings.update_delay_s)
    caller = _Caller(settings.update_delay_s, memory_mb)
    clock = start
    while clock <= burst_at:
        index.now = mapping.now = caller.now = clock
        run(index, mapping, settings, int(clock), caller)
        clock += PERIOD_S
    mapping.now = caller.now = burst_at
    mapping.settle()
    caller.settle()
    return Capacity(mapping.pollers, caller.memory_mb)


def pollers_at(
    burst_at: float, registered: list[tuple[float, float]], settings: PlannerSettings, start: float
) -> int | None:
    """The provisioned pollers in effect at `burst_at` (`capacity_at`)."""
    return capacity_at(burst_at, registered, settings, start, settings.rest_memory_mb).pollers


def planned(deployment: Deployment, registered: list[tuple[float, float]], start: float) -> Deployment:
    """`deployment` with the pollers and the caller's memory the planner has in effect at the first
    wake's second."""
    settings = settings_for(deployment)
    burst_at = min(due for _, due in registered)
    capacity = capacity_at(burst_at, registered, settings, start, deployment.caller_memory_mb)
    deployment = deployment.but(caller_memory_mb=capacity.memory_mb)
    if capacity.pollers is None:
        return deployment
    return deployment.but(minimum_pollers=capacity.pollers, maximum_pollers=max(capacity.pollers, settings.max_pollers))
