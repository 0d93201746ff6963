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
- The planner changes nothing but the mapping's provisioned mode: the caller runs at the one
  memory the template gives it (CallerMemorySize). A function's configuration change gives every
  execution environment a cold start and is refused while another applies ("Lambda function
  states": https://docs.aws.amazon.com/lambda/latest/dg/functions-states.html), and CloudFormation
  would not revert it (drift). An on-demand function's init runs unthrottled at any memory, which
  AWS does not document but others measured (cebert/aws-lambda-performance-benchmarks; AWS
  Serverless Land, "Effectively running Java on Serverless"): docs/operations.md, "If the caller's
  init were throttled".
- No change is sent that could land during its burst or after it: a raise goes out only while
  `update_delay_s` still ends before the burst's second (`lands_before`), and a lowering only
  once no burst is in the window. A burst seen too late meets Lambda's default scaling, as an
  unseen one does.
- Each update's delay (sent to `Enabled` again, to within a run's period) is published
  (`PlannerUpdateDelay`): docs/operations.md says how to set PlannerUpdateDelaySeconds from it.
- After an "off" (`wakeup.event_source`: no documented off value), the mapping is read back once
  it is `Enabled`: pollers that remain are published (`PollersLeftAfterOff`, which
  PlannerPollersLeftAlarm watches) and the "off" is not sent again by this environment.
- The planner keeps out of its stack's deploys: it sends nothing while the stack has a deploy under
  way or a change set awaiting execution (`wakeup.event_source.StackDeploys`; docs/operations.md,
  "The planner and deploys", for an update of its still applying when a deploy starts).
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Protocol

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field

from wakeup.event_source import MappingBusyError, MappingState
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
# returns, which in a burst falls short of full (docs/scaling.md, "Batches fill only with a
# batching window"): without a window a batch is counted as half the batch size.
UNWINDOWED_BATCH_SHARE = 0.5


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
    # `max_pollers`: a burst registered over the minutes before its second is only partly seen in
    # time, and the default is what the simulator found keeps it on time (docs/operations.md).
    headroom: float = Field(4.0, alias="WAKEUP_PLANNER_HEADROOM", ge=1, le=100)
    # How late Lambda's default scaling may leave a second's wakes before it counts as a burst.
    tolerance_s: float = Field(1.0, alias="WAKEUP_PLANNER_TOLERANCE_S", ge=0, le=60)
    # The planner's own stack (AWS::StackName): it sends nothing while a deploy of it is under way.
    # Empty: no stack to watch (the local stack, the simulator).
    stack_name: str = Field("", alias="WAKEUP_STACK_NAME")

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
    # The first burst second still to come (None: every one in the window has passed): what a raise
    # must land before. A burst just past keeps its pollers (`change`), and must not hold back the
    # raise for the next one.
    coming_at: int | None = field(default=None, compare=False)


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
    coming_at: int | None = None
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
        if coming_at is None and second >= now_s:
            coming_at = second
        peak = max(peak, wakes)
    floor = settings.floor_pollers or None
    if burst_at is None:
        return Plan(pollers=floor, burst_at=None, peak_wakes=0)
    wanted = math.ceil(invocations_for(peak, settings) * settings.headroom)
    pollers = max(pollers_for(wanted, settings), floor or 0)
    return Plan(pollers=pollers, burst_at=burst_at, peak_wakes=peak, coming_at=coming_at)


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


class Deploys(Protocol):
    """The planner's stack's deploys (`wakeup.event_source.StackDeploys`)."""

    def in_progress(self, now: datetime) -> bool: ...


@dataclass
class Watch:
    """What one planner environment remembers between its runs: the update it sent last, until the
    mapping is read back `Enabled` after it, and the pollers an "off" of its left in place.

    An environment's memory is all it has (the planner keeps no state of its own): a new one sends
    an "off" that did not take once more, then keeps to this rule."""

    sent_pollers: int | None = None
    sent_at_s: int | None = None  # None: no update of this environment's awaits its read-back
    pollers_left: int | None = None  # pollers read back after this environment's "off"


def lands_before(burst_at: int, now_s: int, settings: PlannerSettings) -> bool:
    """Whether a change sent at `now_s` has applied by the burst's second, on the delay assumed.

    Lambda applies an update asynchronously and AWS gives no time for it
    (https://docs.aws.amazon.com/lambda/latest/api/API_UpdateEventSourceMapping.html): a change
    that may still be applying at the burst's second could land during it, so it is not sent."""
    return now_s + settings.update_delay_s < burst_at


@dataclass(frozen=True)
class Run:
    """What one run saw and did."""

    plan: Plan
    before: int | None  # the mapping's provisioned pollers when read (None: off)
    sent: bool  # an update was sent
    busy: bool  # nothing sent for now: the mapping, Lambda's API or a deploy was busy
    # Why a change the plan wanted was not sent: "busy", "deploy" (the stack is being deployed),
    # "late" (it could land during the burst or after it), "left" (an "off" already left pollers).
    held: str = ""
    update_delay_s: int | None = None  # an earlier update's delay, read back by this run
    pollers_left: int | None = None  # pollers in place after this environment's "off"


def run(
    index: DueCounts,
    source: EventSource,
    settings: PlannerSettings,
    now_s: int,
    watch: Watch | None = None,
    deploys: Deploys | None = None,
) -> Run:
    """One run: count the coming seconds' wakes, plan, and change the mapping where it differs from
    the plan, when the change may be sent (the module's docstring).

    It reads the index and changes the event source, nothing else: it never touches a wake or a
    trigger, so a planner that fails leaves every wake to Lambda's default scaling, later.
    """
    watch = watch if watch is not None else Watch()
    start, end = window(now_s, settings)
    wanted = plan(due_per_second(index, start, end), now_s, settings)
    try:
        mapping = source.read()
    except MappingBusyError:
        logger.info("event source busy, change left to the next run", state="throttled")
        return Run(plan=wanted, before=None, sent=False, busy=True, held="busy")
    delay_s = _read_back(watch, mapping, now_s)
    seen = Run(
        plan=wanted,
        before=mapping.pollers,
        sent=False,
        busy=False,
        update_delay_s=delay_s,
        pollers_left=watch.pollers_left,
    )
    step = change(mapping.pollers, wanted)
    if not step.needed:
        return seen
    held = _held(step, mapping, wanted, watch, now_s, settings, deploys)
    if held:
        logger.info("event source change held", held=held, state=mapping.state, pollers=step.pollers)
        return replace(seen, busy=held in ("busy", "deploy"), held=held)
    try:
        source.set_pollers(step.pollers, maximum_for(step, wanted, settings))
    except MappingBusyError:
        logger.info("event source busy, change left to the next run", state="refused")
        return replace(seen, busy=True, held="busy")
    watch.sent_pollers, watch.sent_at_s, watch.pollers_left = step.pollers, now_s, None
    logger.info(
        "event source changed",
        pollers_before=mapping.pollers,
        pollers=step.pollers,
        burst_at=wanted.burst_at,
        peak_wakes=wanted.peak_wakes,
    )
    return replace(seen, sent=True)


def maximum_for(step: Change, wanted: Plan, settings: PlannerSettings) -> int:
    """The MaximumPollers sent with `step`: a burst's own pollers, so that autoscaling adds none
    above them (each added poller is billed: "Provisioned Mode for Event Source Mapping (ESM)
    Pricing", https://aws.amazon.com/lambda/pricing/, bills the minimum and what autoscaling adds;
    bench.bill prices the raise); back at the floor, the deployment's (CallerMaximumPollers), as
    the template has it."""
    if wanted.burst_at is not None and step.pollers is not None:
        return step.pollers
    return max(settings.max_pollers, step.pollers or 0)


def _read_back(watch: Watch, mapping: MappingState, now_s: int) -> int | None:
    """Once the mapping is settled after this environment's update: the update's delay (to within
    a run's period), and the pollers an "off" left in place."""
    if watch.sent_at_s is None or not mapping.ready:
        return None
    delay_s = now_s - watch.sent_at_s
    watch.pollers_left = mapping.pollers if watch.sent_pollers is None else None
    watch.sent_at_s = None
    if watch.pollers_left is not None:
        logger.warning(
            "provisioned mode still on after the planner turned it off: not sent again, see "
            "docs/operations.md, PlannerPollersLeftAlarm",
            pollers=watch.pollers_left,
        )
    return delay_s


def _held(
    step: Change,
    mapping: MappingState,
    wanted: Plan,
    watch: Watch,
    now_s: int,
    settings: PlannerSettings,
    deploys: Deploys | None,
) -> str:
    """Why the change `step` is not to be sent now ("": it is)."""
    if step.pollers is None and watch.pollers_left is not None and watch.pollers_left == mapping.pollers:
        return "left"
    if not mapping.ready:
        # An earlier update still applying (GetEventSourceMapping's State): the next run sends it.
        return "busy"
    if wanted.burst_at is not None and (
        wanted.coming_at is None or not lands_before(wanted.coming_at, now_s, settings)
    ):
        return "late"
    if deploys is not None and deploys.in_progress(datetime.fromtimestamp(now_s, UTC)):
        return "deploy"
    return ""


def publish(result: Run) -> None:
    """The pollers the run asked for (0: provisioned mode off), every run: the planner's heartbeat;
    an update's delay once read back; and pollers left after an "off", while they are."""
    metrics.add_metric(name=Metric.PLANNED_POLLERS, unit=MetricUnit.Count, value=result.plan.pollers or 0)
    if result.update_delay_s is not None:
        metrics.add_metric(name=Metric.PLANNER_UPDATE_DELAY, unit=MetricUnit.Seconds, value=result.update_delay_s)
    if result.pollers_left is not None:
        metrics.add_metric(name=Metric.POLLERS_LEFT_AFTER_OFF, unit=MetricUnit.Count, value=result.pollers_left)


def publish_idle() -> None:
    """No pollers planned: a planner with no mapping to plan for (the local stack's)."""
    metrics.add_metric(name=Metric.PLANNED_POLLERS, unit=MetricUnit.Count, value=0)
