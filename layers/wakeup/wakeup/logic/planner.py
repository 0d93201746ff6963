"""The planner's logic: capacity follows the schedule (DESIGN.md section 4).

Every pending wake is in the `PendingWakes` index with its time, so the service sees a burst
before it comes. Each minute the planner counts the wakes due in each second of the coming
minutes and decides the caller's event source: provisioned pollers ready for a burst's second,
raised early enough for the change to take effect, and provisioned mode off again once the burst
has passed, so that at rest no poller is paid for.

What AWS says, and what it does not (each page named where its figure is used):

- Provisioned mode for an SQS event source keeps 2 to 200 pollers at least (`MinimumPollers`,
  "ProvisionedPollerConfig" in the Lambda API reference:
  https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html), each running up
  to 10 concurrent invocations ("Lambda parameters for Amazon SQS event source mappings":
  https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-parameters.html). It is billed per
  event poller unit (one per poller) and hour on the minimum: $0.00925 an EPU-hour in us-east-1
  (AWS Lambda pricing, "Provisioned Mode for Event Source Mapping (ESM) Pricing":
  https://aws.amazon.com/lambda/pricing/), $0.000154 a poller-minute. At rest the planner turns
  provisioned mode off rather than keep the 2 ($13.50 a month).
- Without it, Lambda's default scaling starts with five concurrent batches and adds up to 300 a
  minute ("Configuring scaling behavior for SQS event source mappings":
  https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html).
- How long an `UpdateEventSourceMapping` takes to apply, and how fast provisioned pollers come up
  after it, AWS does not say: the call answers 202 with the mapping `Updating`
  (https://docs.aws.amazon.com/lambda/latest/api/API_UpdateEventSourceMapping.html). So the
  planner assumes conservatively (`update_delay_s`, 5 minutes by default) and adds a margin on
  top (`margin_s`); both are template parameters.
- The caller's memory is its CPU (a whole vCPU at 1,769 MB, "Configure Lambda function memory":
  https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html), and a burst's cold starts
  and calls need it where a steady rate's waiting does not: the planner gives the caller its burst
  memory with the pollers, and also while the stack is quiet (its wakes meet cold starts): its
  resting memory only while a steady rate keeps its environments warm (`UpdateFunctionConfiguration`,
  which applies asynchronously, `LastUpdateStatus` InProgress, and refuses another update meanwhile:
  https://docs.aws.amazon.com/lambda/latest/dg/functions-states.html). Each environment started
  after the update has the new size.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field

from wakeup.event_source import FunctionBusyError, MappingBusyError, MappingState
from wakeup.observability import Metric, logger, metrics
from wakeup.table.pending import DueCounts, due_per_second

# "ProvisionedPollerConfig": an SQS mapping's MinimumPollers is 2 to 200, MaximumPollers 2 to 2,000.
SQS_MIN_POLLERS = 2
SQS_MAX_MIN_POLLERS = 200
# Each poller runs up to 10 concurrent invocations ("Lambda parameters for Amazon SQS event source
# mappings", ProvisionedPollerConfig's row).
INVOCATIONS_PER_POLLER = 10
# Lambda's default scaling for an SQS event source: five concurrent batches at first, then up to
# 300 more a minute, five a second ("Configuring scaling behavior for SQS event source mappings").
DEFAULT_START_INVOCATIONS = 5
DEFAULT_GROWTH_PER_S = 300 / 60
# A receive returns at most 10 messages; without a batching window a batch is whatever one receive
# returns, which the simulator measured at 5.7 a batch in a burst (docs/scaling.md, "Batches fill
# only with a batching window"): without a window a batch is counted as half the batch size.
UNWINDOWED_BATCH_SHARE = 0.5
# Below this many wakes in a run's window (541 s by default, about one a minute) the caller keeps
# its burst memory, which then costs under a dollar a month more (docs/operations.md, "The
# planner"); above it Lambda keeps its environments warm and the resting memory is right.
QUIET_WAKES = 10


class PlannerSettings(BaseModel):
    """The planner's environment (template.yaml's Planner* and Caller* parameters)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    # The caller's SQS event source mapping (its UUID), the one mapping the planner changes.
    mapping_uuid: str = Field("", alias="WAKEUP_CALLER_MAPPING_UUID")
    batch_size: int = Field(10, alias="WAKEUP_CALLER_BATCH_SIZE", ge=1, le=10)
    batching_window_s: int = Field(1, alias="WAKEUP_CALLER_BATCHING_WINDOW_S", ge=0, le=1)
    # Pollers kept at rest (CallerMinimumPollers; 0: provisioned mode off): the least the planner sets.
    floor_pollers: int = Field(0, alias="WAKEUP_CALLER_MINIMUM_POLLERS", ge=0, le=SQS_MAX_MIN_POLLERS)
    # Pollers the mapping may scale to (CallerMaximumPollers): the most the planner ever asks for.
    max_pollers: int = Field(100, alias="WAKEUP_CALLER_MAXIMUM_POLLERS", ge=SQS_MIN_POLLERS, le=2000)
    # AWS says nothing of an update's delay or of pollers' start (module docstring): assumed.
    update_delay_s: int = Field(300, alias="WAKEUP_PLANNER_UPDATE_DELAY_S", ge=0, le=3600)
    margin_s: int = Field(120, alias="WAKEUP_PLANNER_MARGIN_S", ge=0, le=3600)
    # How often the planner runs (its schedule's rate).
    period_s: int = Field(60, alias="WAKEUP_PLANNER_PERIOD_S", ge=1, le=3600)
    # How long after a burst's second its capacity stays while its wakes are still pending (a
    # burst's retries, a slow host): wakes called are gone from the index, so this only keeps
    # capacity for wakes not yet called.
    after_s: int = Field(60, alias="WAKEUP_PLANNER_AFTER_S", ge=0, le=3600)
    # A burst's hosts may still be registering when its pollers must be raised (an update applies
    # only after `update_delay_s`): it gets the pollers for this many times the wakes seen, within
    # `max_pollers`. The simulator: 10,000 near wakes registered over the 10 minutes before their
    # second, a quarter of them seen in time, p99 1.27 s with 1, 0.07 s with 4 (docs/operations.md).
    headroom: float = Field(4.0, alias="WAKEUP_PLANNER_HEADROOM", ge=1, le=100)
    # How late Lambda's default scaling may leave a second's wakes before it counts as a burst.
    tolerance_s: float = Field(1.0, alias="WAKEUP_PLANNER_TOLERANCE_S", ge=0, le=60)
    # The caller's memory at rest (CallerMemorySize) and for a burst (CallerBurstMemorySize): the
    # planner sets the one or the other with the pollers. 0: it leaves the caller's memory alone.
    rest_memory_mb: int = Field(0, alias="WAKEUP_CALLER_MEMORY_MB", ge=0, le=10240)
    burst_memory_mb: int = Field(0, alias="WAKEUP_CALLER_BURST_MEMORY_MB", ge=0, le=10240)

    @property
    def lead_s(self) -> int:
        """How far ahead a run must look: a burst any nearer than the next run plus the update's
        delay and the margin must be raised for now, or it is raised late."""
        return self.period_s + self.update_delay_s + self.margin_s


@dataclass(frozen=True)
class Plan:
    """What the caller's event source should be now."""

    pollers: int | None  # provisioned MinimumPollers, or None: provisioned mode off
    burst_at: int | None  # the epoch second of the burst it is for (the first, if several)
    peak_wakes: int  # the wakes due at that burst's busiest second


def invocations_for(wakes: int, settings: PlannerSettings) -> int:
    """Concurrent invocations one second's `wakes` need: each invocation holds one batch and waits
    out its wakes' second (the messages come a second or two early, wakeup.triggers)."""
    batch = settings.batch_size if settings.batching_window_s else settings.batch_size * UNWINDOWED_BATCH_SHARE
    return math.ceil(wakes / max(1.0, batch))


def pollers_for(invocations: int, settings: PlannerSettings) -> int:
    """Provisioned pollers that have `invocations` ready at once, within what an SQS mapping takes
    and what the deployment allows (CallerMaximumPollers)."""
    wanted = math.ceil(invocations / INVOCATIONS_PER_POLLER)
    ceiling = min(SQS_MAX_MIN_POLLERS, settings.max_pollers)
    return max(SQS_MIN_POLLERS, min(wanted, ceiling))


def window(now_s: int, settings: PlannerSettings) -> tuple[int, int]:
    """The epoch seconds [start, end) a run at `now_s` reads: from `after_s` back, to the lead ahead."""
    return now_s - settings.after_s, now_s + settings.lead_s + 1


def plan(due: Mapping[int, int], now_s: int, settings: PlannerSettings) -> Plan:
    """The event source a run at `now_s` sets, from the wakes due per epoch second (`due`).

    A second is a burst when its wakes need more concurrent invocations than Lambda's default
    scaling would have within `tolerance_s`: five at first, five more for each second the wakes
    before it kept coming. A steady rate grows the default scaling with it and is no burst. Every
    burst within the window (`window`) gets provisioned pollers for the busiest one, with
    `headroom` for hosts still registering; none: the operator's floor (CallerMinimumPollers), by
    default provisioned mode off.
    """
    start, end = window(now_s, settings)
    run = 0  # seconds in a row with wakes due, up to the one looked at
    burst_at: int | None = None
    peak = 0
    for second in range(start, end):
        wakes = due.get(second, 0)
        if not wakes:
            run = 0
            continue
        default_ready = DEFAULT_START_INVOCATIONS + DEFAULT_GROWTH_PER_S * (run + settings.tolerance_s)
        run += 1
        if invocations_for(wakes, settings) <= default_ready:
            continue
        burst_at = second if burst_at is None else burst_at
        peak = max(peak, wakes)
    floor = settings.floor_pollers or None
    if burst_at is None:
        return Plan(pollers=floor, burst_at=None, peak_wakes=0)
    wanted = math.ceil(invocations_for(peak, settings) * settings.headroom)
    pollers = max(pollers_for(wanted, settings), floor or 0)
    return Plan(pollers=pollers, burst_at=burst_at, peak_wakes=peak)


@dataclass(frozen=True)
class Change:
    """What a run does to the mapping: `pollers` to set (None: provisioned mode off), or nothing."""

    pollers: int | None
    needed: bool


def change(current: int | None, wanted: Plan) -> Change:
    """From the mapping's provisioned MinimumPollers now (None: off) to the plan's.

    A burst being registered grows between runs: pollers are raised again when it needs more, and
    never lowered while a burst is in the window (a run that sees fewer of its wakes, some of them
    called already, must not take capacity from the rest). With none coming, the mapping goes back
    to the floor, or off.
    """
    if wanted.burst_at is None:
        return Change(pollers=wanted.pollers, needed=current != wanted.pollers)
    if current is not None and wanted.pollers is not None and current >= wanted.pollers:
        return Change(pollers=current, needed=False)
    return Change(pollers=wanted.pollers, needed=True)


class EventSource(Protocol):
    """The caller's event source mapping as the planner sees it (`wakeup.event_source.CallerMapping`)."""

    def read(self) -> MappingState: ...
    def set_pollers(self, pollers: int | None, maximum: int) -> None: ...


class CallerMemory(Protocol):
    """The caller function's memory as the planner sees it (`wakeup.event_source.CallerFunction`)."""

    def read_memory(self) -> int: ...
    def set_memory(self, memory_mb: int) -> None: ...


def memory_for(wanted: Plan, due: Mapping[int, int], current_mb: int, settings: PlannerSettings) -> int | None:
    """The caller's memory for the plan and the window's wakes (`due`, per second), the caller at
    `current_mb` now; None: the planner leaves it alone (not configured).

    A burst gets the burst size. Otherwise the resting size only while the window holds a steady
    rate (`QUIET_WAKES`) that keeps the caller's environments warm: a quiet stack's wake mostly
    meets a cold start, about 5 s longer at 128 MB than at 1,024 (docs/operations.md), later than
    the near wake's message is early. Each change gives every environment a cold start, so the
    caller goes down to rest only above twice the threshold and back up only below it.
    """
    if not settings.rest_memory_mb or not settings.burst_memory_mb:
        return None
    if wanted.burst_at is not None:
        return settings.burst_memory_mb
    wakes = sum(due.values())
    at_rest = current_mb == settings.rest_memory_mb
    busy = wakes >= QUIET_WAKES if at_rest else wakes > 2 * QUIET_WAKES
    return settings.rest_memory_mb if busy else settings.burst_memory_mb


@dataclass(frozen=True)
class Run:
    """What one run saw and did."""

    plan: Plan
    before: int | None  # the mapping's provisioned pollers when read (None: off)
    sent: bool  # an update was sent
    busy: bool  # the mapping was still applying an earlier update: nothing sent
    memory_mb: int | None = None  # the caller's memory the run set (None: left as it was)


def run(
    index: DueCounts, source: EventSource, settings: PlannerSettings, now_s: int, caller: CallerMemory | None = None
) -> Run:
    """One run: count the coming seconds' wakes, plan, and change the mapping (and the caller's
    memory, when `caller` is given) where they differ from the plan.

    It reads the index and changes the event source and the caller's memory, nothing else: it never
    touches a wake or a trigger, so a planner that fails leaves every wake to Lambda's default
    scaling and the caller's memory as it was, later.
    """
    start, end = window(now_s, settings)
    due = due_per_second(index, start, end)
    wanted = plan(due, now_s, settings)
    result = _set_pollers(source, wanted, settings)
    if caller is None or not settings.rest_memory_mb or not settings.burst_memory_mb:
        return result
    before = caller.read_memory()
    memory = memory_for(wanted, due, before, settings)
    return result if memory is None else replace(result, memory_mb=_set_memory(caller, before, memory))


def _set_memory(caller: CallerMemory, before: int, memory_mb: int) -> int | None:
    """Sets the caller's memory when it differs from `before`: the size set, or None (already so,
    or busy)."""
    if before == memory_mb:
        return None
    try:
        caller.set_memory(memory_mb)
    except FunctionBusyError:
        logger.info("caller busy, memory left to the next run", memory_mb=memory_mb)
        return None
    logger.info("caller memory changed", memory_before_mb=before, memory_mb=memory_mb)
    return memory_mb


def _set_pollers(source: EventSource, wanted: Plan, settings: PlannerSettings) -> Run:
    mapping = source.read()
    step = change(mapping.pollers, wanted)
    if not step.needed:
        return Run(plan=wanted, before=mapping.pollers, sent=False, busy=False)
    if not mapping.ready:
        # An earlier update still applying: the next run sends this one (the margin covers it).
        logger.info("event source busy, change left to the next run", state=mapping.state)
        return Run(plan=wanted, before=mapping.pollers, sent=False, busy=True)
    try:
        source.set_pollers(step.pollers, max(settings.max_pollers, step.pollers or 0))
    except MappingBusyError:
        logger.info("event source busy, change left to the next run", state="ResourceInUse")
        return Run(plan=wanted, before=mapping.pollers, sent=False, busy=True)
    logger.info(
        "event source changed",
        pollers_before=mapping.pollers,
        pollers=step.pollers,
        burst_at=wanted.burst_at,
        peak_wakes=wanted.peak_wakes,
    )
    return Run(plan=wanted, before=mapping.pollers, sent=True, busy=False)


def publish(result: Run) -> None:
    """The pollers the run asked for (0: provisioned mode off), every run: the planner's heartbeat."""
    metrics.add_metric(name=Metric.PLANNED_POLLERS, unit=MetricUnit.Count, value=result.plan.pollers or 0)


def publish_idle() -> None:
    """No pollers planned: a planner with no mapping to plan for (the local stack's)."""
    metrics.add_metric(name=Metric.PLANNED_POLLERS, unit=MetricUnit.Count, value=0)
