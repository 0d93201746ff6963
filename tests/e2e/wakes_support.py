"""What the delivery and far-wake end-to-end tests share: instances made and removed over the
stack's HTTP API, times as the service writes them, and a look into the stack's moto."""

import json
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import boto3

from support.api import Api, past_busy
from support.host import Answer, running_host
from support.stack_process import StackProcess
from support.waiting import wait_until
from wakeup.arrival import EARLY_REARM_S
from wakeup.times import format_time, parse_stored
from wakeup.tokens import TokenKind, mint
from wakeup_local.lambda_.functions import DEFAULT_CONCURRENCY


def iso(ts: float) -> str:
    """A wall-clock time (`time.time()`) as the service writes it."""
    return format_time(datetime.fromtimestamp(ts, UTC))


def as_registered(at: str) -> float:
    """The moment the service holds for `at` (to the millisecond), in wall-clock seconds."""
    return parse_stored(at).timestamp()


class Instances:
    """Registers instances for one test over the API, and deletes them afterwards, so that no
    failing wake of a test keeps being retried in a shared stack."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.ids: list[str] = []

    def new(self, url: str) -> tuple[str, str]:
        token = mint(TokenKind.INSTANCE)
        reply = past_busy(lambda: self.api.register(url, token))
        assert reply.status_code == 201, reply.text
        self.ids.append(reply.json()["id"])
        return reply.json()["id"], token

    def new_many(self, urls: list[str]) -> list[tuple[str, str]]:
        """`new` for each of `urls`, in their order, four at a time: one after the other, 260 took
        12 s of a test that waits for them; ten at a time, the instances function started ten
        environments for them, a cold start's CPU (0.7 s here) each that the tests beside it wait for."""
        with ThreadPoolExecutor(max_workers=4) as pool:
            return list(pool.map(self.new, urls))

    def wake(self, token: str, at: str) -> None:
        reply = past_busy(lambda: self.api.wake(token, at))
        assert reply.status_code == 204, reply.text

    def get(self, instance_id: str) -> dict[str, Any]:
        reply = self.api.instance(instance_id)
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        return body

    def wait_for(self, instance_id: str, check: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        def satisfied() -> dict[str, Any] | None:
            body = self.get(instance_id)
            return body if check(body) else None

        return wait_until(satisfied, timeout=15, message=what)

    def remove_all(self) -> None:
        for instance_id in self.ids:
            self.api.delete(f"/wakeup/instances/{instance_id}")


def warm_caller(instances: Instances, wakes: int, lead_s: float = 10) -> None:
    """Has the caller deliver `wakes` wakes due at one second (to a host of their own), so that as
    many of its environments are warm as such wakes take, before a test times one.

    The local stack starts a function's environments as Lambda does, on demand; but here their cold
    starts share this machine's few cores, so a wake that meets one is late where AWS would start
    environments side by side. The wakes go through the caller's queue, ten to a batch: every
    environment the stack allows takes `start_caller_environments`. They are due far enough ahead
    that every message is in a batch, held, before the first is called (`lead_s`); wakes already due
    are called as their batches come, by fewer environments.
    """
    with running_host() as host:
        tokens = [token for _, token in instances.new_many([host.url_for(f"warm{n}") for n in range(wakes)])]
        at = iso(time.time() + (2 if wakes == 1 else lead_s))
        with ThreadPoolExecutor(max_workers=10) as pool:
            list(pool.map(lambda token: instances.wake(token, at), tokens))
        host.wait_for_calls(wakes, timeout=60)


# The caller's execution environments the local stack allows at once (`WAKEUP_LOCAL_CONCURRENCY`).
EVERY_CALLER_ENVIRONMENT = DEFAULT_CONCURRENCY
# How long the host of `start_caller_environments` holds each call before it answers: the invocations
# it holds stay under way together even where the schedules' firing is slowed by a loaded machine
# (within the test stacks' call timeout of 2 s).
HELD_CALL_S = 1.0
# How far beyond its stack's SQS horizon a far wake of `start_caller_environments` is due: still beyond
# it when the wake function reads the clock after a cold start on a loaded machine (over 3 s in CI).
BEYOND_HORIZON_S = 5
# Rounds of calls at once that `start_caller_environments` makes at most: on a machine loaded enough
# that the schedules of one round fire too far apart for all its invocations to overlap, some reuse
# an environment another left, and the next round's overlap starts the rest.
WARM_UP_ROUNDS = 3


def far_wake_settings(horizon_s: int) -> dict[str, str]:
    """A stack's settings (for `make_stack`) under which `start_caller_environments` can start its
    caller's environments: wakes further ahead than `horizon_s` go by schedule, and a schedule fires
    (exactly on time, as the test stacks' do) no more than EARLY_REARM_S before its wake, so that the
    caller claims its wake and waits for its time rather than arming it again through SQS."""
    return {"WAKEUP_SQS_HORIZON_S": str(horizon_s), "WAKEUP_SCHEDULE_LEAD_S": str(int(EARLY_REARM_S))}


def start_caller_environments(
    stack: StackProcess, instances: Instances, horizon_s: int, environments: int = EVERY_CALLER_ENVIRONMENT
) -> None:
    """Starts `environments` execution environments of the caller (every one the stack allows, by
    default) on a stack whose caller has none yet, and counts them, before a test times a burst: a
    burst's messages go to as many environments as the event source's pollers make batches of them,
    up to the stack's bound.

    They are started as Lambda starts them: an invocation that finds no environment free gets a new
    one ("Understanding Lambda function scaling",
    https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html). Each of `environments`
    far wakes (the stack's horizon is `horizon_s`, its settings `far_wake_settings`) is armed as a
    one-time schedule of its own; due at one second, the schedules fire together, each invoking the
    caller asynchronously with its one trigger, and each invocation claims its wake and waits for
    its time before it calls, and the host holds each call a while (`HELD_CALL_S`): all are under
    way at once, each in an environment of its own. Through the caller's queue the same would take
    ten wakes an environment (its batches hold ten messages). The count is Powertools' own: the
    first invocation of each environment logs `cold_start` true. Where a loaded machine fires one
    round's schedules too far apart for all its invocations to overlap, a round more starts the rest
    (`WARM_UP_ROUNDS`).
    """
    log = StackLog(stack)
    for _ in range(WARM_UP_ROUNDS):
        _calls_at_once(instances, log, horizon_s, environments)
        if log.cold_starts("CallerFunction") >= environments:
            break
    started = log.cold_starts("CallerFunction")
    assert started == environments, f"{started} caller environments started, not {environments}"


def _calls_at_once(instances: Instances, log: "StackLog", horizon_s: int, environments: int) -> None:
    """One round of `start_caller_environments`: `environments` far wakes due at one second, each
    call held, until every call is answered and logged (the host closed under a call would fail it
    and arm a retry)."""
    with running_host() as host:
        host.script(*[Answer(delay_s=HELD_CALL_S)] * environments)
        made = instances.new_many([host.url_for(f"warm{n}") for n in range(environments)])
        # A whole second, so that each schedule, at a whole second too, fires exactly its lead before.
        due = float(math.ceil(time.time() + horizon_s + BEYOND_HORIZON_S))
        with ThreadPoolExecutor(max_workers=10) as pool:
            list(pool.map(lambda one: instances.wake(one[1], iso(due)), made))
        wait_until(
            lambda: all(log.count("wake called", instance_id) for instance_id, _ in made),
            timeout=due - time.time() + 30,
            interval=0.05,
            message=f"{environments} warm-up calls logged",
        )


class StackLog:
    """What the stack's functions log from now on: a test waits for the caller to have handled each
    trigger of an instance, which proves that no call can follow, instead of watching for seconds."""

    def __init__(self, stack: StackProcess) -> None:
        self.path = stack.log_path
        self.start = self.path.stat().st_size

    def count(self, message: str, instance_id: str) -> int:
        with self.path.open("rb") as log:
            log.seek(self.start)
            lines = log.read().decode("utf-8", errors="replace").splitlines()
        return sum(1 for line in lines if f'"message":"{message}"' in line and instance_id in line)

    def cold_starts(self, logical_id: str) -> int:
        """The function's invocations that were the first of their environment: its execution
        environments started since, as Powertools' Logger marks them."""
        prefix = f"[{logical_id}] {{"
        with self.path.open("rb") as log:
            log.seek(self.start)
            lines = log.read().decode("utf-8", errors="replace").splitlines()
        firsts = set()
        for line in lines:
            if line.startswith(prefix) and '"cold_start":true' in line:
                firsts.add(json.loads(line[len(prefix) - 1 :]).get("function_request_id"))
        firsts.discard(None)
        return len(firsts)

    def wait_for(self, message: str, instance_id: str, count: int = 1) -> None:
        wait_until(
            lambda: self.count(message, instance_id) >= count,
            timeout=20,
            interval=0.05,
            message=f"{count} x {message!r} for {instance_id}",
        )


class StackAws:
    """The stack's moto, as AWS clients see it."""

    def __init__(self, stack: StackProcess) -> None:
        self.stack = stack
        options = {
            "endpoint_url": stack.endpoint_url,
            "region_name": stack.region,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        self.dynamodb = boto3.client("dynamodb", **options)
        self.sqs = boto3.client("sqs", **options)
        self.scheduler = boto3.client("scheduler", **options)

    def caller_queue_url(self) -> str:
        [url] = [u for u in self.sqs.list_queues()["QueueUrls"] if "CallerQueue" in u and "DeadLetter" not in u]
        return str(url)

    def triggers_left(self) -> int:
        """The triggers in the caller's queue: waiting, delayed, or received and not yet deleted
        (the local event source deletes a batch once the caller has returned from it, its calls
        made). Every trigger of a near wake is a message there (its first, an early one re-armed,
        one re-sent while a claim holds, a retry): at none, no call of a near wake can follow."""
        counts = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        counts.append("ApproximateNumberOfMessagesDelayed")
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.caller_queue_url(), AttributeNames=counts)
        return sum(int(attributes["Attributes"][name]) for name in counts)

    def schedule_group(self) -> str:
        groups = self.scheduler.list_schedule_groups()["ScheduleGroups"]
        [name] = [group["Name"] for group in groups if group["Name"] != "default"]
        return str(name)

    def stored_instance(self, instance_id: str) -> dict[str, Any]:
        item = self.dynamodb.get_item(
            TableName=self.stack.table_name, Key={"pk": {"S": f"INSTANCE#{instance_id}"}}, ConsistentRead=True
        )["Item"]
        return dict(item)

    def trigger_body(self, instance_id: str) -> str:
        """The message the caller gets for the instance's current registration, first attempt."""
        reg = self.stored_instance(instance_id)["reg"]["S"]
        return json.dumps({"instance_id": instance_id, "reg": reg, "attempt": 0})

    def schedule(self, instance_id: str, group: str) -> dict[str, Any] | None:
        """The instance's one schedule, None when it has none."""
        try:
            found: dict[str, Any] = self.scheduler.get_schedule(Name=f"wake-{instance_id}", GroupName=group)
        except self.scheduler.exceptions.ResourceNotFoundException:
            return None
        return found

    def schedules(self, group: str, instance_id: str) -> list[dict[str, Any]]:
        found = self.scheduler.list_schedules(GroupName=group, NamePrefix=f"wake-{instance_id}")["Schedules"]
        return list(found)


def schedule_time(schedule: dict[str, Any]) -> float:
    """When an `at(...)` schedule (in UTC) is set to fire, in wall-clock seconds."""
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    expression = str(schedule["ScheduleExpression"])
    assert expression.startswith("at(") and expression.endswith(")"), expression
    return datetime.fromisoformat(expression[3:-1]).replace(tzinfo=UTC).timestamp()
