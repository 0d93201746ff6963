"""Arming a registration: an SQS message for a near wake, a one-time schedule for a far one.

A trigger's wire format is written here, both ways: `message_body` writes what a message or a
schedule carries, `parse_trigger` reads it back in the caller.

A trigger only says "look at this registration now"; the table decides whether a call is owed, so
a trigger that arrives twice, late or for a replaced registration does no harm.
"""

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from wakeup import aws, times
from wakeup.arrival import SCHEDULE_SAFETY_S, SQS_MAX_DELAY_S, queue_delay_s
from wakeup.model import Origin, Trigger
from wakeup.settings import Settings

# Scheduler's own retries of a failed invocation, and for how long, before its dead-letter queue.
SCHEDULE_RETRY = {"MaximumRetryAttempts": 10, "MaximumEventAgeInSeconds": 3600}


class InvalidTriggerError(ValueError):
    """Raised when a message or a schedule's input is not a trigger this service wrote."""


class ScheduleContentionError(RuntimeError):
    """Raised when the instance's schedule was created and removed under us round after round."""


@dataclass(frozen=True)
class Armed:
    """Which way `arm` sent a trigger (`Origin.QUEUE` or `Origin.SCHEDULE`, as `route` tells), and
    whether its schedule was created where the instance had none at that moment: no other request's
    schedule was replaced."""

    way: Origin
    new_schedule: bool = False


def message_body(trigger: Trigger) -> str:
    """A trigger as a message or a schedule carries it (its origin only when it has one)."""
    # Its fields read one by one, not by `asdict`, which deep-copies each value (plain strings and
    # numbers here, nothing to copy) on every message (docs/benchmark.md, "Figures behind the code's choices").
    body: dict[str, Any] = {}
    for field in fields(trigger):
        value = getattr(trigger, field.name)
        if value is not None:
            body[field.name] = value
    return json.dumps(body)


# An origin a trigger may carry, by its name on the wire (another is ignored, as it always was).
_ORIGINS: dict[Any, Origin] = {origin.value: origin for origin in Origin}


def parse_trigger(payload: Any) -> Trigger:
    """The trigger in a message body or a schedule's input (a JSON object already decoded)."""
    if not isinstance(payload, dict):
        raise InvalidTriggerError("a trigger is a JSON object")
    instance_id, reg, attempt = payload.get("instance_id"), payload.get("reg"), payload.get("attempt")
    if not isinstance(instance_id, str) or not instance_id or not isinstance(reg, str) or not reg:
        raise InvalidTriggerError("a trigger names an instance_id and a reg")
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 0:
        raise InvalidTriggerError("a trigger's attempt is a whole number from 0")
    origin = payload.get("origin")
    return Trigger(instance_id=instance_id, reg=reg, attempt=attempt, origin=_ORIGINS.get(origin))


def schedule_name(instance_id: str) -> str:
    """The one schedule an instance can have."""
    return f"wake-{instance_id}"


class Triggers:
    """Sends triggers through SQS and EventBridge Scheduler, with clients given or made on first use.

    Made when first needed, not with the triggers: most requests and invocations need one of the
    two or neither (an instance's registration, a near wake's, a delivered wake), and making a
    client is a cold start's CPU, the first one more than the next. Made once: a caller's threads may all
    need one at once (`aws.client` makes one at a time, as boto3 needs).
    """

    def __init__(
        self,
        settings: Settings,
        sqs: Any = None,
        scheduler: Any = None,
        clock: Callable[[], datetime] = times.now,
    ) -> None:
        self.settings = settings
        self._clients: dict[str, Any] = {"sqs": sqs, "scheduler": scheduler}
        self._making = threading.Lock()
        self.clock = clock

    @property
    def sqs(self) -> Any:
        return self._client("sqs")

    @sqs.setter
    def sqs(self, client: Any) -> None:
        self._clients["sqs"] = client

    @property
    def scheduler(self) -> Any:
        return self._client("scheduler")

    @scheduler.setter
    def scheduler(self, client: Any) -> None:
        self._clients["scheduler"] = client

    def _client(self, service: str) -> Any:
        client = self._clients[service]
        if client is None:
            with self._making:
                client = self._clients[service]
                if client is None:
                    client = self._clients[service] = aws.client(service)
        return client

    def route(self, due: datetime, now: datetime) -> Origin:
        """Which way a trigger for `due` goes: SQS within the horizon, Scheduler beyond it."""
        wait = (due - now).total_seconds()
        fire = wait - self.settings.schedule_lead_s
        if wait <= self.settings.sqs_horizon_s or (wait <= SQS_MAX_DELAY_S and fire < SCHEDULE_SAFETY_S):
            return Origin.QUEUE
        return Origin.SCHEDULE

    def arm(self, trigger: Trigger, due: datetime, now: datetime, *, replacing: bool = False) -> Armed:
        """Arms `trigger` to arrive just before `due` (never after it, when AWS keeps time);
        `replacing`: the instance has a schedule already, most likely (`schedule`)."""
        way = self.route(due, now)
        if way is Origin.QUEUE:
            # The delay counts from the moment of sending: a request slowed under load must not
            # add its own lateness to the wake's.
            self.send(trigger, delay_s=(due - self.clock()).total_seconds())
            return Armed(way)
        created = self.schedule(trigger, due - timedelta(seconds=self.settings.schedule_lead_s), replacing=replacing)
        return Armed(way, new_schedule=created)

    def send(self, trigger: Trigger, delay_s: float) -> None:
        """An SQS message delayed by whole seconds, so it arrives one to two seconds before its time."""
        self.sqs.send_message(
            QueueUrl=self.settings.queue_url, MessageBody=message_body(trigger), DelaySeconds=queue_delay_s(delay_s)
        )

    def schedule(self, trigger: Trigger, fire_at: datetime, *, replacing: bool = False) -> bool:
        """Creates or replaces the instance's one-time schedule (an update replaces every field);
        `replacing`: it exists, most likely (a far wake registered again), so it is updated first.
        True when it created the schedule, False when it replaced one."""
        target: dict[str, Any] = {
            "Arn": self.settings.caller_arn,
            "RoleArn": self.settings.scheduler_role_arn,
            "Input": message_body(trigger),
            "RetryPolicy": SCHEDULE_RETRY,
        }
        if self.settings.schedules_dlq_arn:
            target["DeadLetterConfig"] = {"Arn": self.settings.schedules_dlq_arn}
        definition = {
            "Name": schedule_name(trigger.instance_id),
            "GroupName": self.settings.schedule_group,
            "ScheduleExpression": f"at({fire_at.strftime('%Y-%m-%dT%H:%M:%S')})",
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "Target": target,
            "ActionAfterCompletion": "DELETE",
            "State": "ENABLED",
        }

        def create() -> bool:
            self.scheduler.create_schedule(**definition)
            return True

        def update() -> bool:
            self.scheduler.update_schedule(**definition)
            return False

        # Created first (most far wakes are new), or updated first when it is there already: the
        # other way round costs a refused request. A schedule made or removed meanwhile by another
        # request for the same instance (the call refused as such) turns the call into the other one.
        ways = [(update, "ResourceNotFoundException"), (create, "ConflictException")]
        if not replacing:
            ways.reverse()
        for _ in range(3):
            for call, other_way_round in ways:
                try:
                    return call()
                except ClientError as exc:
                    if aws.error_code(exc) != other_way_round:
                        raise
        raise ScheduleContentionError("the schedule kept changing under concurrent requests")

    def unschedule(self, instance_id: str) -> bool:
        """Removes the instance's schedule, if it has one; True when there was one to remove, or
        may have been.

        botocore retries a request whose reply was lost; a DeleteSchedule that removed the schedule
        before its reply was lost is then answered ResourceNotFound by its retry. A not-found after
        a retry (`RetryAttempts` in the reply's metadata: "Retries", Boto3 guide,
        https://boto3.amazonaws.com/v1/documentation/api/latest/guide/retries.html) may be this
        very request's removal, so it counts as one: the caller reads the table again.
        """
        try:
            self.scheduler.delete_schedule(Name=schedule_name(instance_id), GroupName=self.settings.schedule_group)
        except ClientError as exc:
            if aws.error_code(exc) != "ResourceNotFoundException":
                raise
            return aws.retried(exc)
        return True
