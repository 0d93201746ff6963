"""EventBridge Scheduler's one-time schedules, as the service's `Triggers` makes them.

"Schedule types on EventBridge Scheduler": a one-time schedule `at(...)` with the flexible window
off runs once; it is invoked anywhere within its minute (`wakeup_awsfacts.scheduler`, the local
stack's rule too: the scheduled second plus up to 60 s). "Quotas for Amazon EventBridge Scheduler": at most
1,000 target invocations a second; invocations past it wait. CreateSchedule requests past their
rate (5,000 a second in the main Regions) are refused for the rest of that second (a
`ThrottlingException`; UpdateSchedule is taken to share the rate). The service's botocore retries
of a refused request are left out: the request that arms fails at once. Its target, the caller, is invoked
asynchronously (see `wakeup_sim.lambdas`). `ActionAfterCompletion: DELETE` removes it once run.
"""

import json
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from wakeup_awsfacts.quotas import SCHEDULER_CREATE_PER_S
from wakeup_awsfacts.scheduler import fires_at, firing_window_s, parse_at
from wakeup_awsfacts.token_bucket import TokenBucket
from wakeup_sim.engine import Engine
from wakeup_sim.lambdas import Function


class Scheduler:
    def __init__(
        self,
        engine: Engine,
        target: Function,
        invocations_per_s: float,
        rng: random.Random,
        request: Callable[[str], None],
    ) -> None:
        self.engine, self.target, self.rng = engine, target, rng
        self._request = request
        self.schedules: dict[str, tuple[int, str]] = {}  # name -> (version, input)
        self._versions = 0
        self.limit = TokenBucket(invocations_per_s, invocations_per_s, engine.now)
        self.writes_per_s = SCHEDULER_CREATE_PER_S
        self._writes_in_second: tuple[int, int] = (0, 0)  # (the second, creates and updates in it)
        self.throttled = 0
        self.requests: Counter[str] = Counter()
        self.invocations = 0
        self.fired_late_s: list[float] = []

    # -- the client `Triggers` calls ----------------------------------------------------------

    def _within_rate(self, operation: str) -> None:
        second = int(self.engine.now)
        done = self._writes_in_second[1] if self._writes_in_second[0] == second else 0
        if done >= self.writes_per_s:
            self.throttled += 1
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "rate exceeded"}}, operation)
        self._writes_in_second = (second, done + 1)

    def create_schedule(self, **definition: Any) -> None:
        self._request("scheduler:CreateSchedule")
        self.requests["scheduler:CreateSchedule"] += 1
        self._within_rate("CreateSchedule")
        if definition["Name"] in self.schedules:
            raise ClientError({"Error": {"Code": "ConflictException", "Message": "exists"}}, "CreateSchedule")
        self._put(definition)

    def update_schedule(self, **definition: Any) -> None:
        self._request("scheduler:UpdateSchedule")
        self.requests["scheduler:UpdateSchedule"] += 1
        self._within_rate("UpdateSchedule")
        if definition["Name"] not in self.schedules:
            raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "gone"}}, "UpdateSchedule")
        self._put(definition)

    def delete_schedule(self, Name: str, GroupName: str) -> None:  # noqa: N803
        self._request("scheduler:DeleteSchedule")
        self.requests["scheduler:DeleteSchedule"] += 1
        if self.schedules.pop(Name, None) is None:
            raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "gone"}}, "DeleteSchedule")

    # -- firing ---------------------------------------------------------------------------------

    def _put(self, definition: dict[str, Any]) -> None:
        timezone = definition.get("ScheduleExpressionTimezone") or "UTC"
        at = parse_at(definition["ScheduleExpression"], timezone).timestamp()
        if at <= self.engine.now:
            # AWS refuses a time in the past (TOOLING.md); the service never asks for one.
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "past"}}, "CreateSchedule")
        self._versions += 1
        name = definition["Name"]
        self.schedules[name] = (self._versions, definition["Target"]["Input"])
        fire = fires_at(at, self.rng, firing_window_s(definition.get("FlexibleTimeWindow")))
        self.engine.at(fire, self._fire, name, self._versions, at)

    def _fire(self, name: str, version: int, scheduled: float) -> None:
        current = self.schedules.get(name)
        if current is None or current[0] != version:
            return  # replaced or deleted meanwhile
        wait = self.limit.wait_for(1, self.engine.now)
        if wait > 0:
            self.engine.at(self.engine.now + wait, self._fire, name, version, scheduled)
            return
        self.limit.take(1, self.engine.now)
        del self.schedules[name]  # ActionAfterCompletion: DELETE
        self.invocations += 1
        self.fired_late_s.append(self.engine.now - scheduled)
        self.target.invoke_async(json.loads(current[1]))
