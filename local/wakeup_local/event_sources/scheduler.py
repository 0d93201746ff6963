"""EventBridge Scheduler's firing, which moto stores but never does.

`ScheduleWatcher` follows the schedules in the stack's schedule groups in moto and fires each
one-time `at(...)` schedule at a random moment within its minute, as AWS does (the rule, and the
expressions, are `wakeup_awsfacts.scheduler`'s, which the simulator follows too), or exactly on
time when asked (`WAKEUP_LOCAL_EXACT_SCHEDULES=1`). Just before firing it reads the schedule again (it may
have been updated or deleted), deletes it when its `ActionAfterCompletion` is `DELETE`, and invokes
the target function asynchronously with the schedule's `Input`, as Scheduler does: through Lambda's
asynchronous invocation (async_invoke.py), which retries a function error and sends what still
fails to the function's `EventInvokeConfig` destination.

`RecurringRunner` runs the template's own scheduled functions (`Schedule`/`ScheduleV2` events,
`AWS::Scheduler::Schedule` and `AWS::Events::Rule` resources with `rate(...)`) every period, or every
`WAKEUP_LOCAL_SWEEP_S` seconds when set, asynchronously as well; and at once, synchronously, on
`run_now()`.
"""

from __future__ import annotations

import enum
import functools
import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError, create_parser

from wakeup_awsfacts.scheduler import ExpressionError, fires_at, firing_window_s, parse_at, parse_rate
from wakeup_awsfacts.template import Resolver, Template
from wakeup_local.aws.request_counter import ScheduleKey, SchedulerChanges
from wakeup_local.lambda_.functions import Functions, LocalFunction

if TYPE_CHECKING:
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_scheduler.type_defs import GetScheduleOutputTypeDef

log = logging.getLogger(__name__)

# Queues an asynchronous invocation of a function with an event (AsyncInvoker.invoke).
InvokeAsync = Callable[[LocalFunction, Any], Any]

POLL_INTERVAL_S = 0.2
# How long one read of the changes waits for a change (request_counter.py), when nothing is due
# sooner: stopping waits for at most this.
CHANGES_WAIT_S = 1.0


class _Missing(enum.Enum):
    """Why a schedule could not be read."""

    GONE = "gone"  # deleted
    UNREADABLE = "unreadable"  # an error: it may still be there


# --- one-time schedules in moto ------------------------------------------------------------------


@dataclass
class _Watched:
    """What the watcher knows of one schedule."""

    group: str
    name: str
    modified: Any
    expression: str = ""
    timezone: str = "UTC"
    due: float | None = None  # epoch seconds; None: nothing to fire (fired, disabled, unreadable)
    period_s: float | None = None  # for a rate() schedule


class ScheduleWatcher:
    """Fires the schedules of the given groups as EventBridge Scheduler would."""

    def __init__(
        self,
        scheduler: EventBridgeSchedulerClient,
        groups: list[str],
        functions: Functions,
        invoke_async: InvokeAsync,
        *,
        exact: bool = False,
        rng: random.Random | None = None,
        poll_interval_s: float = POLL_INTERVAL_S,
        changes: Callable[[int | None, float], SchedulerChanges | None] | None = None,
    ) -> None:
        """`changes(seen, wait_s)`: how many changes the schedules have had so far, and which
        schedules changed since the count `seen` when it can tell (None: unknown), waiting up to
        `wait_s` for a count other than `seen`. The schedules are read again only when it moved
        (those named, or all listed), and the watcher waits in it instead of polling. Without it
        they are listed at each poll."""
        self._scheduler = scheduler
        self._get_schedule_parser: Callable[[dict[str, Any]], Any] | None = None
        self._changes = changes
        self._seen_changes: int | None = None
        self._groups = groups
        self._functions = functions
        self._invoke_async = invoke_async
        self._exact = exact
        self._rng = rng or random.Random()
        self._poll_interval_s = poll_interval_s
        self._watched: dict[tuple[str, str], _Watched] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="scheduler", daemon=True)
        self._thread.start()
        mode = "exactly on time" if self._exact else "within their minute"
        log.info("firing schedules of %s %s", ", ".join(self._groups), mode)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        next_poll = 0.0
        while not self._stopping.is_set():
            upcoming = [item.due for item in self._watched.values() if item.due is not None]
            wait_s = max(0.0, min([time.time() + CHANGES_WAIT_S, *upcoming]) - time.time())
            try:
                next_poll = self._round(next_poll, wait_s)
            except Exception:
                # A schedule moto accepted but this code did not foresee must not stop the others.
                log.exception("the local Scheduler failed a round; it goes on")
                next_poll = time.time() + 1.0
            upcoming = [item.due for item in self._watched.values() if item.due is not None]
            self._stopping.wait(max(0.0, min([next_poll, *upcoming]) - time.time()))

    def _round(self, next_poll: float, wait_s: float = 0.0) -> float:
        """Reads moto when it is time to (waiting up to `wait_s` for a change, when it counts
        them), fires what is due; returns when to read moto next."""
        if time.time() >= next_poll:
            changes = self._changes(self._seen_changes, wait_s) if self._changes is not None else None
            if changes is None or changes.total != self._seen_changes:
                # Read before the schedules: a change made while they are read moves the count again.
                if changes is not None and changes.schedules is not None and self._seen_changes is not None:
                    complete = self._reread(changes.schedules, changes.read or {})
                else:
                    complete = self._refresh()
                self._seen_changes = changes.total if changes is not None and complete else None
            # Having waited in moto for a change, read again at once; else poll.
            waited = self._seen_changes is not None and wait_s > 0
            next_poll = time.time() + (0.0 if waited else self._poll_interval_s)
        for watched in sorted(self._due(time.time()), key=lambda item: item.due or 0.0):
            self._fire(watched)
        return next_poll

    def _due(self, now: float) -> list[_Watched]:
        return [item for item in self._watched.values() if item.due is not None and item.due <= now]

    def _refresh(self) -> bool:
        """Notes new, updated and deleted schedules (`list_schedules` names them, `get_schedule` says
        more); False when something could not be read, to be read again at the next poll."""
        complete = True
        seen = set()
        for group in self._groups:
            try:
                summaries = self._list(group)
            except (BotoCoreError, ClientError):
                log.exception("listing the schedules of %s failed", group)
                return False
            for summary in summaries:
                key = (group, summary["Name"])
                seen.add(key)
                known = self._watched.get(key)
                if known is not None and known.modified == summary.get("LastModificationDate"):
                    continue
                complete = self._read(key) and complete
        for key in set(self._watched) - seen:
            del self._watched[key]
        return complete

    def _reread(self, changed: list[ScheduleKey], read: dict[ScheduleKey, str | None]) -> bool:
        """Notes the changes to the schedules named (those of other groups left out), from what moto's
        process read of them with the changes (`read`) or else by reading them; False when one could
        not be read, to be listed again at the next poll."""
        complete = True
        for key in changed:
            if key[0] in self._groups:
                complete = self._read(key, self._as_got(read[key]) if key in read else None) and complete
        return complete

    def _as_got(self, body: str | None) -> GetScheduleOutputTypeDef | _Missing | None:
        """A `GetSchedule` reply's body (None: the schedule is gone) as the client's `get_schedule`
        gives it, parsed by botocore's own parser for the operation; None when it cannot be parsed
        (the schedule is then read)."""
        if body is None:
            return _Missing.GONE
        if self._get_schedule_parser is None:
            model = self._scheduler.meta.service_model
            shape = model.operation_model("GetSchedule").output_shape
            assert shape is not None  # GetSchedule answers a structure
            self._get_schedule_parser = functools.partial(create_parser(model.protocol).parse, shape=shape)
        reply = {"body": str(body).encode(), "headers": {}, "status_code": 200}
        try:
            got = self._get_schedule_parser(reply)
        except (ResponseParserError, ValueError, TypeError, AttributeError):
            got = None
        # botocore's parser gives an unreadable body as an empty reply, not an error
        if not isinstance(got, dict) or not got.get("Name"):
            log.warning("the changes' answer held a schedule that cannot be read; it is read again")
            return None
        return got  # type: ignore[return-value]

    def _read(self, key: ScheduleKey, detail: GetScheduleOutputTypeDef | _Missing | None = None) -> bool:
        """Reads one schedule again (unless given what it holds): plans it, or forgets it when it is
        gone; False when it could not be read."""
        if detail is None:
            detail = self._get(*key)
        if detail is _Missing.UNREADABLE:
            return False
        if detail is _Missing.GONE:
            self._watched.pop(key, None)
            return True
        known = self._watched.get(key)
        if known is None or known.modified != detail.get("LastModificationDate"):
            self._watched[key] = self._plan(key[0], detail, known)
        return True

    def _list(self, group: str) -> list[Any]:
        summaries: list[Any] = []
        paginator = self._scheduler.get_paginator("list_schedules")
        for page in paginator.paginate(GroupName=group, PaginationConfig={"PageSize": 100}):
            summaries.extend(item for item in page.get("Schedules", []) if item.get("GroupName") == group)
        return summaries

    def _get(self, group: str, name: str) -> GetScheduleOutputTypeDef | _Missing:
        try:
            return self._scheduler.get_schedule(GroupName=group, Name=name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return _Missing.GONE
            log.exception("reading the schedule %s/%s failed", group, name)
            return _Missing.UNREADABLE
        except BotoCoreError:
            log.exception("reading the schedule %s/%s failed", group, name)
            return _Missing.UNREADABLE

    def _plan(self, group: str, detail: GetScheduleOutputTypeDef, known: _Watched | None) -> _Watched:
        expression = detail.get("ScheduleExpression", "")
        timezone = detail.get("ScheduleExpressionTimezone") or "UTC"
        watched = _Watched(group, detail["Name"], detail.get("LastModificationDate"), expression, timezone)
        # moto drops State on an update: a schedule without one is enabled, as it was.
        if (detail.get("State") or "ENABLED") == "DISABLED":
            return watched
        unchanged = known is not None and (known.expression, known.timezone) == (expression, timezone)
        try:
            if expression.startswith("at("):
                if unchanged and known is not None:
                    # Same time as before (only the target changed, say): keep the moment drawn,
                    # or its having fired.
                    watched.due = known.due
                    return watched
                scheduled = parse_at(expression, timezone).timestamp()
                window_s = firing_window_s(detail.get("FlexibleTimeWindow"))
                watched.due = scheduled if self._exact else fires_at(scheduled, self._rng, window_s)
                modified = detail.get("LastModificationDate")
                if isinstance(modified, datetime) and scheduled < modified.timestamp() - 1:
                    log.warning("schedule %s/%s is in the past: AWS refuses that", group, watched.name)
                log.info("schedule %s/%s fires at %s", group, watched.name, _iso(watched.due))
            elif expression.startswith("rate("):
                watched.period_s = parse_rate(expression)
                watched.due = known.due if unchanged and known is not None else time.time() + watched.period_s
            else:
                raise ExpressionError(f"{expression!r} (only at() and rate() fire locally)")
        except ExpressionError as exc:
            log.warning("schedule %s/%s will not fire: %s", group, watched.name, exc)
        return watched

    def _fire(self, watched: _Watched) -> None:
        key = (watched.group, watched.name)
        detail = self._get(watched.group, watched.name)
        if isinstance(detail, _Missing):  # deleted meanwhile, or to be listed again
            self._watched.pop(key, None)
            if detail is _Missing.UNREADABLE:
                # The count of changes will not move for it: list them all at the next poll.
                self._seen_changes = None
            return
        if detail.get("LastModificationDate") != watched.modified:
            # Updated since it was planned: plan again, and fire now only if it is still due.
            replanned = self._plan(watched.group, detail, watched)
            self._watched[key] = replanned
            if replanned.due is None or replanned.due > time.time():
                return
            watched = replanned
        if watched.period_s is not None:
            watched.due = max((watched.due or 0.0) + watched.period_s, time.time())
        else:
            watched.due = None  # a one-time schedule fires once
            if detail.get("ActionAfterCompletion") == "DELETE":
                self._delete(watched)
        target = detail.get("Target") or {}
        function = self._functions.find(str(target.get("Arn", "")))
        if function is None:
            log.warning("schedule %s/%s targets %s, not a function of this stack", *key, target.get("Arn"))
            return
        log.info("schedule %s/%s fired (%s)", watched.group, watched.name, detail.get("ScheduleExpression"))
        self._invoke_async(function, _payload(target.get("Input")))

    def _delete(self, watched: _Watched) -> None:
        try:
            self._scheduler.delete_schedule(GroupName=watched.group, Name=watched.name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                log.exception("deleting the schedule %s/%s failed", watched.group, watched.name)
            return
        except BotoCoreError:
            log.exception("deleting the schedule %s/%s failed", watched.group, watched.name)
            return
        self._watched.pop((watched.group, watched.name), None)


def _payload(raw_input: Any) -> Any:
    if raw_input is None:
        return {}
    try:
        return json.loads(raw_input)
    except (TypeError, ValueError):
        return raw_input


def _iso(epoch: float | None) -> str:
    return "never" if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


# --- the template's recurring schedules -----------------------------------------------------------


@dataclass
class RecurringSchedule:
    """A function the template runs on a `rate(...)`, and the event each run gets."""

    name: str
    function: LocalFunction
    period_s: float
    # The target's `Input`; None for the event Scheduler (`{}`) or an EventBridge rule sends.
    input: Any = None
    rule_arn: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def event(self) -> Any:
        if self.input is not None:
            return _payload(self.input)
        if self.rule_arn is None:
            return {}
        region, account = self.rule_arn.split(":")[3:5]
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": account,
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": region,
            "resources": [self.rule_arn],
            "detail": {},
        }


def recurring_schedules(template: Template, resolver: Resolver, functions: Functions) -> list[RecurringSchedule]:
    """The template's rate() schedules of its functions, by SAM event or by resource."""
    found: list[RecurringSchedule | None] = []
    rule_arn_prefix = f"arn:aws:events:{resolver.region}:{resolver.account_id}:rule/"
    for function in functions:
        for event_name, event in function.spec.events.items():
            kind = event.get("Type")
            if kind not in ("Schedule", "ScheduleV2"):
                continue
            properties = event.get("Properties") or {}
            if str(properties.get("Enabled", True)).lower() == "false" or properties.get("State") == "DISABLED":
                continue
            name = f"{function.spec.logical_id}.{event_name}"
            found.append(
                _recurring(
                    name,
                    function,
                    properties.get("Schedule") or properties.get("ScheduleExpression") or "",
                    properties.get("Input"),
                    rule_arn_prefix + name if kind == "Schedule" else None,
                )
            )
    for logical_id, definition in template.resources.items():
        kind = definition.get("Type")
        if kind not in ("AWS::Scheduler::Schedule", "AWS::Events::Rule") or not resolver.is_created(logical_id):
            continue
        properties = resolver.resolve(definition.get("Properties") or {})
        if properties.get("State") in ("DISABLED", "DISABLE"):
            continue
        is_rule = kind == "AWS::Events::Rule"
        targets = properties.get("Targets") or [] if is_rule else [properties.get("Target") or {}]
        for target in targets:
            target_function = functions.find(str(target.get("Arn", "")))
            if target_function is not None:
                found.append(
                    _recurring(
                        logical_id,
                        target_function,
                        properties.get("ScheduleExpression", ""),
                        target.get("Input"),
                        rule_arn_prefix + logical_id if is_rule else None,
                    )
                )
    return [schedule for schedule in found if schedule is not None]


def _recurring(
    name: str, function: LocalFunction, expression: Any, raw_input: Any, rule_arn: str | None
) -> RecurringSchedule | None:
    try:
        period = parse_rate(str(expression))
    except ExpressionError as exc:
        log.warning("%s will not run locally: %s", name, exc)
        return None
    return RecurringSchedule(name, function, period, raw_input, rule_arn)


class RecurringRunner:
    """Runs the recurring schedules every period (or `period_override_s`), each run an asynchronous
    invocation as Scheduler's (they may overlap, as on AWS)."""

    def __init__(
        self, schedules: list[RecurringSchedule], invoke_async: InvokeAsync, period_override_s: float | None = None
    ) -> None:
        self.schedules = schedules
        self._invoke_async = invoke_async
        self._period_override_s = period_override_s
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def period(self, schedule: RecurringSchedule) -> float:
        return self._period_override_s or schedule.period_s

    def start(self) -> None:
        if not self.schedules:
            return
        self._thread = threading.Thread(target=self._run, name="recurring", daemon=True)
        self._thread.start()
        for schedule in self.schedules:
            log.info("running %s every %.1f s", schedule.function.name, self.period(schedule))

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def run_now(self) -> list[Any]:
        """Runs every recurring schedule now, synchronously (one such run of each at a time), and
        returns their results; a failure raises."""
        results = []
        for schedule in self.schedules:
            with schedule.lock:
                results.append(schedule.function.invoke(schedule.event()))
        return results

    def _run(self) -> None:
        next_runs = {schedule.name: time.monotonic() + self.period(schedule) for schedule in self.schedules}
        while not self._stopping.is_set():
            now = time.monotonic()
            for schedule in self.schedules:
                if next_runs[schedule.name] <= now:
                    next_runs[schedule.name] = now + self.period(schedule)
                    self._invoke_async(schedule.function, schedule.event())
            self._stopping.wait(max(0.0, min(next_runs.values()) - time.monotonic()))
