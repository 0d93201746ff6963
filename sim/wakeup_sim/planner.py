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
    sent: list[tuple[float, float, int | None]] = field(default_factory=list)  # (sent, applied, pollers)

    def settle(self) -> None:
        while self.applying and self.applying[0][0] <= self.now:
            self.pollers = self.applying.pop(0)[1]

    def read(self) -> MappingState:
        self.settle()
        return MappingState(state="Updating" if self.applying else "Enabled", pollers=self.pollers)

    def set_pollers(self, pollers: int | None, maximum: int) -> None:
        self.applying.append((self.now + self.delay_s, pollers))
        self.sent.append((self.now, self.now + self.delay_s, pollers))


@dataclass
class _Caller:
    """The caller's memory: an update applies `delay_s` after it is sent."""

    delay_s: float
    memory_mb: int
    now: float = 0.0
    applying: list[tuple[float, int]] = field(default_factory=list)
    sent: list[tuple[float, int]] = field(default_factory=list)  # (applied, memory)

    def settle(self) -> None:
        while self.applying and self.applying[0][0] <= self.now:
            self.memory_mb = self.applying.pop(0)[1]

    def read_memory(self) -> int:
        self.settle()
        return self.applying[-1][1] if self.applying else self.memory_mb

    def set_memory(self, memory_mb: int) -> None:
        self.applying.append((self.now + self.delay_s, memory_mb))
        self.sent.append((self.now + self.delay_s, memory_mb))


def settings_for(deployment: Deployment, **changes: int) -> PlannerSettings:
    """The planner's settings as template.yaml gives them to the planner function."""
    return PlannerSettings(
        batch_size=deployment.batch_size,
        batching_window_s=int(deployment.batching_window_s),
        max_pollers=deployment.maximum_pollers or PlannerSettings().max_pollers,
        floor_pollers=deployment.minimum_pollers or 0,
    ).model_copy(update=changes)


@dataclass(frozen=True)
class Raised:
    """What the planner's runs did for a burst: the provisioned pollers in effect at its second
    (None: none, Lambda's default scaling), the caller's memory then, and the EPU-seconds billed
    for those raised above the floor (CallerMinimumPollers), from the burst's first raise to
    provisioned mode off again."""

    pollers: int | None
    epu_s: float
    memory_mb: int


# "Provisioned Mode for Event Source Mapping (ESM) Pricing" (AWS Lambda pricing, wakeup_cost.cost's
# PRICE_EPU_HOUR): EPU-hours counted by the second, a minute at least.
EPU_MINIMUM_S = 60.0


def billed_epu_s(sent: list[tuple[float, float, int | None]], floor: int) -> float:
    """EPU-seconds of the updates `sent` (when sent, when applied, pollers), above `floor`.

    AWS does not say when, within an update's delay, pollers start or stop being billed (the
    planner's docstring): each level is counted from its update's sending to the applying of the
    next, the higher of the two while one applies, so that neither a raise nor a lowering is
    billed short."""
    if not sent:
        return 0.0
    edges = sorted({t for at, applied, _ in sent for t in (at, applied)})
    total, peak = 0.0, 0
    for begin, end in zip(edges, edges[1:], strict=False):
        applied_by = [pollers or 0 for _, applied, pollers in sent if applied <= begin]
        in_effect = applied_by[-1] if applied_by else 0
        applying = [pollers or 0 for at, applied, pollers in sent if at <= begin < applied]
        level = max([in_effect, *applying]) - floor
        if level > 0:
            total += level * (end - begin)
            peak = max(peak, level)
    return max(total, EPU_MINIMUM_S * peak) if peak else 0.0


def raised_for(
    burst_at: float, registered: list[tuple[float, float]], settings: PlannerSettings, start: float, memory_mb: int
) -> Raised:
    """The planner's runs every minute from `start` (a whole minute) over the wakes `registered`
    (when, and due when), the caller at `memory_mb` before: the pollers and the caller's memory in
    effect at `burst_at`, and, the runs going on past the
    last wake until provisioned mode is back at the floor, what the raised pollers were billed."""
    index = _Index(registered)
    mapping = _Mapping(settings.update_delay_s)
    caller = _Caller(settings.update_delay_s, memory_mb)
    floor = settings.floor_pollers or None
    last_due = max(due for _, due in registered)
    clock = start
    # A day past the last wake at most: the planner lowers capacity within minutes of a burst.
    while clock <= last_due + 86400 and (
        clock <= burst_at or clock <= last_due + settings.after_s or mapping.applying or mapping.pollers != floor
    ):
        index.now = mapping.now = caller.now = clock
        # The planner no longer changes the caller's memory (issue 36): `caller` keeps `memory_mb`.
        run(index, mapping, settings, int(clock))
        clock += PERIOD_S
    # The pollers at the burst's second: the last update applied by then (as `_Mapping.settle`).
    pollers = None
    for _, applied, level in mapping.sent:
        if applied <= burst_at:
            pollers = level
    memory = memory_mb
    for applied, level_mb in caller.sent:
        if applied <= burst_at:
            memory = level_mb
    return Raised(pollers, billed_epu_s(mapping.sent, settings.floor_pollers), memory)


def pollers_at(
    burst_at: float, registered: list[tuple[float, float]], settings: PlannerSettings, start: float
) -> int | None:
    """The provisioned pollers in effect at `burst_at` after the planner's runs every minute from
    `start` (a whole minute) over the wakes `registered` (when, and due when)."""
    return raised_for(burst_at, registered, settings, start, 0).pollers


def planned(deployment: Deployment, registered: list[tuple[float, float]], start: float) -> tuple[Deployment, float]:
    """`deployment` with the pollers and the caller's memory the planner has in effect at the first
    wake's second, and the EPU-seconds the raised pollers were billed (`raised_for`)."""
    settings = settings_for(deployment)
    burst_at = min(due for _, due in registered)
    raised = raised_for(burst_at, registered, settings, start, deployment.caller_memory_mb)
    deployment = deployment.but(caller_memory_mb=raised.memory_mb)
    if raised.pollers is None:
        return deployment, raised.epu_s
    pollers = raised.pollers
    return deployment.but(minimum_pollers=pollers, maximum_pollers=max(pollers, settings.max_pollers)), raised.epu_s
