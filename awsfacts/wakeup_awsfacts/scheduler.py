"""EventBridge Scheduler's schedules: what their expressions name, and when a one-time one fires.

"Schedule types on EventBridge Scheduler" (EventBridge Scheduler user guide): a one-time schedule
is `at(yyyy-mm-ddThh:mm:ss)` in its `ScheduleExpressionTimezone` (UTC when it names none), a
rate-based one `rate(value unit)` in minutes, hours or days. "All schedule types on EventBridge
Scheduler invoke their targets with 60 second precision": one set to run at 1:00 runs between
1:00:00 and 1:00:59 when no flexible time window is set; a `FLEXIBLE` window of
`MaximumWindowInMinutes` lets it run as many minutes later ("Configuring flexible time windows in
EventBridge Scheduler").

The local stack's Scheduler (`wakeup_local.event_sources.scheduler`, on real time) and the
simulator's (`wakeup_sim.scheduler`, on virtual time) fire by this rule, each drawing the moment
with the random source it is given.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from wakeup_awsfacts.quotas import SCHEDULER_WINDOW_S

_AT = re.compile(r"at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)")
_RATE = re.compile(r"rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)")
_RATE_UNITS = {"minute": 60, "hour": 3600, "day": 86400}


class ExpressionError(ValueError):
    """Raised for a schedule expression that is not `at(...)` or `rate(...)` as Scheduler reads them."""


def parse_at(expression: str, timezone: str = "UTC") -> datetime:
    """The moment an `at(yyyy-mm-ddThh:mm:ss)` expression names, in the given IANA time zone."""
    match = _AT.fullmatch(expression.strip())
    if not match:
        raise ExpressionError(f"{expression!r} is not at(yyyy-mm-ddThh:mm:ss)")
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ExpressionError(f"{timezone!r} is not a time zone") from exc
    try:
        local = datetime.fromisoformat(match.group(1))
    except ValueError as exc:
        raise ExpressionError(f"{expression!r} names no real moment") from exc
    return local.replace(tzinfo=zone).astimezone(UTC)


def parse_rate(expression: str) -> float:
    """The period of a `rate(n unit)` expression, in seconds."""
    match = _RATE.fullmatch(expression.strip())
    if not match or int(match.group(1)) < 1:
        raise ExpressionError(f"{expression!r} is not rate(n minutes|hours|days)")
    return int(match.group(1)) * _RATE_UNITS[match.group(2).rstrip("s")]


def firing_window_s(flexible_time_window: Mapping[str, Any] | None) -> float:
    """How long after its moment a one-time schedule with this `FlexibleTimeWindow` may fire."""
    flexible = flexible_time_window or {}
    if flexible.get("Mode") == "FLEXIBLE":
        return SCHEDULER_WINDOW_S + 60.0 * float(flexible.get("MaximumWindowInMinutes", 0))
    return SCHEDULER_WINDOW_S


def fires_at(scheduled: float, rng: random.Random, window_s: float = SCHEDULER_WINDOW_S) -> float:
    """When a one-time schedule due at `scheduled` (epoch seconds) fires: a moment within its window."""
    return scheduled + rng.random() * window_s
