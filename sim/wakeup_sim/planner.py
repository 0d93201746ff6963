"""The planner in the simulator: the service's own planning, run every minute through a scenario.

`wakeup.logic.planner.run` runs every `PERIOD_S` over the wakes registered by then (`Pending`, the
pending-wakes index's counts), with its real decisions at each run, against the caller's mapping
as Lambda applies an update (`Mapping`): `UpdateEventSourceMapping` answers at once and the mapping
is `Updating` for the planner's assumed `update_delay_s` (AWS names no time: an assumption, the
template's PlannerUpdateDelaySeconds), taking no other update meanwhile; then the event source
scales as the update says (`EventSource.provision`). The caller keeps one memory throughout
(template.yaml's CallerMemorySize): the planner changes no function's configuration.
"""

from collections import Counter
from dataclasses import dataclass, field

from wakeup.event_source import MappingState
from wakeup.logic.planner import PlannerSettings, run
from wakeup_sim.deployment import Deployment
from wakeup_sim.engine import Engine
from wakeup_sim.event_source import EventSource, scaling_of

PERIOD_S = 60


@dataclass
class Pending:
    """`DueCounts` of the wakes registered so far, all in one shard. A wake called stays counted (the
    service's index drops it): capacity is kept at most the planner's `after_s` longer, and billed."""

    counts: Counter[int] = field(default_factory=Counter)

    def due_per_second(self, shard: int, start: int, end: int) -> Counter[int]:
        if shard:
            return Counter()
        counts = self.counts
        return Counter({second: counts[second] for second in range(start, end) if second in counts})


@dataclass
class Mapping:
    """The caller's mapping in a running world: an update sent is `Updating` for `delay_s`, and then
    the event source scales as it says. `sent`: (sent, applied, pollers) of every update."""

    engine: Engine
    event_source: EventSource
    deployment: Deployment
    delay_s: float
    pollers: int | None = None
    applying: bool = False
    sent: list[tuple[float, float, int | None]] = field(default_factory=list)

    def read(self) -> MappingState:
        return MappingState(state="Updating" if self.applying else "Enabled", pollers=self.pollers)

    def set_pollers(self, pollers: int | None, maximum: int) -> None:
        now = self.engine.now
        self.applying = True
        self.sent.append((now, now + self.delay_s, pollers))
        self.engine.at(now + self.delay_s, self._apply, pollers, maximum)

    def _apply(self, pollers: int | None, maximum: int) -> None:
        self.pollers, self.applying = pollers, False
        self.event_source.provision(*scaling_of(self.deployment, pollers, maximum))


@dataclass
class Planner:
    """The planner function, run every `PERIOD_S` from a whole minute: its runs' results kept."""

    engine: Engine
    pending: Pending
    mapping: Mapping
    settings: PlannerSettings
    runs: int = 0

    def begin(self) -> None:
        first = -(-self.engine.now // PERIOD_S) * PERIOD_S
        self.engine.at(first, self._tick)

    def _tick(self) -> None:
        self.runs += 1
        run(self.pending, self.mapping, self.settings, int(self.engine.now))
        self.engine.at(self.engine.now + PERIOD_S, self._tick)

    def epu_s(self) -> float:
        """EPU-seconds of the pollers the planner raised above the floor (`billed_epu_s`)."""
        return billed_epu_s(self.mapping.sent, self.settings.floor_pollers)


def planner_for(engine: Engine, event_source: EventSource, deployment: Deployment, pending: Pending) -> Planner:
    """The planner as template.yaml deploys it, over `pending`, for the world's caller mapping."""
    settings = settings_for(deployment)
    mapping = Mapping(engine, event_source, deployment, settings.update_delay_s, pollers=deployment.minimum_pollers)
    return Planner(engine, pending, mapping, settings)


def settings_for(deployment: Deployment, **changes: int) -> PlannerSettings:
    """The planner's settings as template.yaml gives them to the planner function."""
    return PlannerSettings(
        batch_size=deployment.batch_size,
        batching_window_s=int(deployment.batching_window_s),
        max_pollers=deployment.maximum_pollers or PlannerSettings().max_pollers,
        floor_pollers=deployment.minimum_pollers or 0,
    ).model_copy(update=changes)


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
