"""The local EventBridge Scheduler: one-time schedules fired like AWS (or exactly), and the template's
recurring schedules (the sweeper)."""

import functools
import json
import logging
import math
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import boto3
import pytest
from botocore.exceptions import ClientError
from localstack_helpers import (
    StartStack,
    handler_records,
    shared_stack,
    wait_until,
    warm_up,
)

from wakeup_awsfacts.template import Resolver, Template
from wakeup_local.aws.clients import AwsClients, make_clients
from wakeup_local.aws.moto_process import MotoProcess
from wakeup_local.aws.request_counter import scheduler_changes_since
from wakeup_local.event_sources.scheduler import ScheduleWatcher, recurring_schedules
from wakeup_local.lambda_.environment_pool import EnvironmentPool
from wakeup_local.lambda_.functions import Functions, FunctionSpec, LocalFunction
from wakeup_local.stack import LocalStack

EXACT = {"WAKEUP_LOCAL_EXACT_SCHEDULES": "1"}
# How late a schedule's handler may start after the moment the Scheduler planned for it: a loaded
# machine delays the firing thread and the handler's process (1.6 s once, four workers and more on
# two cores). The moment planned is checked exactly, from the Scheduler's own log; a late bound of
# seconds still catches a schedule fired at its minute's end, or at its time instead of 3 s after.
TOLERANCE_S = 3.0
# An event without a marker: it starts the target's environment before a test times a firing (a cold
# start would delay the handler's stamp by its init).
WARM_UP = {"warm-up": True}


class FixedRandom(random.Random):
    """Draws the same number every time: the moment within the minute becomes predictable."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


def whole_second(seconds_ahead: float) -> datetime:
    """A whole second at least `seconds_ahead` from now (at() has a resolution of one second)."""
    return datetime.fromtimestamp(math.ceil(time.time() + seconds_ahead), UTC)


def at(when: datetime, timezone: str = "UTC") -> str:
    return f"at({when.astimezone(ZoneInfo(timezone)).strftime('%Y-%m-%dT%H:%M:%S')})"


def schedule(stack: LocalStack, marker: str, when: datetime, *, update: bool = False, **overrides: Any) -> str:
    """Creates (or updates, with the whole definition) a schedule targeting TargetFunction."""
    name = overrides.pop("name", f"s-{marker}")
    definition: dict[str, Any] = {
        "Name": name,
        "GroupName": stack.resources.schedule_groups["ScheduleGroup"],
        "ScheduleExpression": at(when, overrides.get("ScheduleExpressionTimezone", "UTC")),
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "Target": {
            "Arn": stack.functions.by_logical_id("TargetFunction").arn,
            "RoleArn": "arn:aws:iam::123456789012:role/scheduler",
            "Input": json.dumps({"marker": marker}),
        },
        "ActionAfterCompletion": "DELETE",
        **overrides,
    }
    if update:
        definition.pop("ActionAfterCompletion")  # moto's update_schedule does not take it
        stack.clients.scheduler.update_schedule(**definition)
    else:
        stack.clients.scheduler.create_schedule(**definition)
    return name


def fired(stack: LocalStack, marker: str) -> list[dict[str, Any]]:
    events = handler_records(stack, "TargetFunction")
    return [event for event in events if isinstance(event["event"], dict) and event["event"].get("marker") == marker]


def wait_fired(stack: LocalStack, marker: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    return wait_until(lambda: fired(stack, marker), timeout=timeout, message=f"schedule {marker} firing")  # type: ignore[no-any-return]


def planned(caplog: pytest.LogCaptureFixture, name: str) -> float:
    """The moment the Scheduler planned to fire the schedule (its last plan), by its own log."""
    moments = [
        datetime.fromisoformat(str(record.args[2])).timestamp()
        for record in caplog.records
        if record.msg == "schedule %s/%s fires at %s" and isinstance(record.args, tuple) and record.args[1] == name
    ]
    assert moments, f"the Scheduler planned no firing of {name}"
    return moments[-1]


@pytest.fixture(scope="module")
def exact_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """One stack firing exactly on time, for the tests that each schedule under names of their own."""
    with shared_stack(tmp_path_factory, **EXACT) as stack:
        yield stack


def exists(stack: LocalStack, name: str) -> bool:
    try:
        stack.clients.scheduler.get_schedule(GroupName=stack.resources.schedule_groups["ScheduleGroup"], Name=name)
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "ResourceNotFoundException"
        return False
    return True


def test_with_the_flag_a_schedule_fires_exactly_on_time_and_is_deleted_after(
    exact_stack: LocalStack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="wakeup_local.event_sources.scheduler")
    stack = exact_stack
    warm_up(stack, "TargetFunction", 1, WARM_UP)
    when = whole_second(2)
    name = schedule(stack, "exact", when)
    assert exists(stack, name)
    (event,) = wait_fired(stack, "exact")
    assert planned(caplog, name) == when.timestamp()
    assert when.timestamp() <= event["at"] < when.timestamp() + TOLERANCE_S
    assert event["function_name"] == f"{stack.stack_name}-target"
    wait_until(lambda: not exists(stack, name), message="the schedule deleted after completion")


def test_by_default_a_schedule_fires_at_a_random_moment_within_its_minute(
    start_stack: StartStack, caplog: pytest.LogCaptureFixture
) -> None:
    # given a Scheduler whose draw within the minute is 0.05 of it: 3 s after the scheduled time
    caplog.set_level(logging.INFO, logger="wakeup_local.event_sources.scheduler")
    stack = start_stack(rng=FixedRandom(0.05))
    warm_up(stack, "TargetFunction", 1, WARM_UP)
    when = whole_second(1)
    name = schedule(stack, "default", when)
    (event,) = wait_fired(stack, "default")
    assert planned(caplog, name) == pytest.approx(when.timestamp() + 3, abs=0.001)
    assert when.timestamp() + 3 <= event["at"] < when.timestamp() + 3 + TOLERANCE_S


def test_an_updated_schedule_fires_at_its_new_time_with_its_new_input(
    exact_stack: LocalStack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="wakeup_local.event_sources.scheduler")
    stack = exact_stack
    warm_up(stack, "TargetFunction", 1, WARM_UP)
    first, later = whole_second(2), whole_second(4)
    name = schedule(stack, "first", first)
    schedule(stack, "moved", later, update=True, name=name)
    (event,) = wait_fired(stack, "moved")
    assert planned(caplog, name) == later.timestamp()
    assert later.timestamp() <= event["at"] < later.timestamp() + TOLERANCE_S
    assert fired(stack, "first") == []
    wait_until(lambda: not exists(stack, name), message="the updated schedule deleted after completion")


def test_a_schedule_deleted_or_disabled_before_its_time_never_fires(exact_stack: LocalStack) -> None:
    stack = exact_stack
    when = whole_second(2)
    deleted = schedule(stack, "deleted", when)
    schedule(stack, "disabled", when, State="DISABLED")
    stack.clients.scheduler.delete_schedule(GroupName=stack.resources.schedule_groups["ScheduleGroup"], Name=deleted)
    # Schedules fire in time order: once a later one has fired, the earlier ones would have.
    schedule(stack, "sentinel-deleted", whole_second(3))
    wait_fired(stack, "sentinel-deleted")
    assert fired(stack, "deleted") == [] and fired(stack, "disabled") == []


def test_a_schedule_without_delete_after_completion_fires_once_and_stays(exact_stack: LocalStack) -> None:
    stack = exact_stack
    name = schedule(stack, "kept", whole_second(2), ActionAfterCompletion="NONE")
    wait_fired(stack, "kept")
    schedule(stack, "sentinel-kept", whole_second(1.5))
    wait_fired(stack, "sentinel-kept")
    assert len(fired(stack, "kept")) == 1
    assert exists(stack, name)


def test_the_expression_is_read_in_the_schedules_time_zone(
    exact_stack: LocalStack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="wakeup_local.event_sources.scheduler")
    stack = exact_stack
    warm_up(stack, "TargetFunction", 1, WARM_UP)
    when = whole_second(2)
    name = schedule(stack, "new-york", when, ScheduleExpressionTimezone="America/New_York")
    (event,) = wait_fired(stack, "new-york")
    assert planned(caplog, name) == when.timestamp()
    assert when.timestamp() <= event["at"] < when.timestamp() + TOLERANCE_S


def test_a_schedule_in_the_past_fires_at_once_with_a_warning(
    exact_stack: LocalStack, caplog: pytest.LogCaptureFixture
) -> None:
    stack = exact_stack
    caplog.set_level(logging.WARNING, logger="wakeup_local.event_sources.scheduler")
    schedule(stack, "past", datetime.fromtimestamp(math.floor(time.time()) - 30, UTC))
    wait_fired(stack, "past", timeout=2)
    assert any("in the past" in record.getMessage() for record in caplog.records)


def test_the_templates_recurring_schedule_runs_every_sweep_period(start_stack: StartStack) -> None:
    stack = start_stack(env={"WAKEUP_LOCAL_SWEEP_S": "0.3"})
    runs = wait_until(
        lambda: fired_sweeps(stack)[1:5] if len(fired_sweeps(stack)) >= 5 else None,
        timeout=10,
        message="five sweeps",
    )
    # Each run is stamped when its handler starts, a moment after it was due: one gap can stretch
    # or shrink by what a loaded machine delays a start, their sum far less. Three periods of 0.3 s,
    # then, not the template's minute nor runs back to back. (The first run's stamp comes after its
    # environment's cold start: left out.)
    span = runs[-1]["at"] - runs[0]["at"]
    assert 0.45 <= span < 3.0, [run["at"] for run in runs]


def fired_sweeps(stack: LocalStack) -> list[dict[str, Any]]:
    return [event for event in handler_records(stack, "SweepFunction") if event["event"] == {"sweep": True}]


def test_run_sweeper_runs_the_scheduled_functions_now(start_stack: StartStack) -> None:
    stack = start_stack()  # the sweep's own period is a minute: nothing runs by itself during the test
    assert fired_sweeps(stack) == []
    assert stack.run_sweeper() == [None]
    assert len(fired_sweeps(stack)) == 1


# --- the template's schedules, without a stack ----------------------------------------------------


def test_a_schedule_event_gets_eventbridges_scheduled_event_and_schedulev2_its_input() -> None:
    def function(name: str, events: dict[str, Any]) -> LocalFunction:
        arn = f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
        spec = FunctionSpec(name, name, arn, Path("."), "m.f", 128, 3.0, {}, events)
        return LocalFunction(spec, EnvironmentPool(lambda: None, 0, reserved=False, idle_s=60))  # never invoked

    rule = {"Type": "Schedule", "Properties": {"Schedule": "rate(5 minutes)"}}
    v2 = {"Type": "ScheduleV2", "Properties": {"ScheduleExpression": "rate(1 hour)", "Input": '{"a": 1}'}}
    off = {"Type": "Schedule", "Properties": {"Schedule": "rate(1 minute)", "Enabled": False}}
    events = {"Rule": rule, "V2": v2, "Off": off}
    functions = Functions([function(name, {"Tick": event}) for name, event in events.items()])
    resolver = Resolver(Template({"Resources": {}}, Path(".")), f"s-{uuid.uuid4().hex[:6]}")
    every_five_minutes, hourly = recurring_schedules(resolver.template, resolver, functions)
    assert (every_five_minutes.period_s, hourly.period_s) == (300, 3600)
    event = every_five_minutes.event()
    assert event["detail-type"] == "Scheduled Event"
    assert event["source"] == "aws.events"
    assert event["resources"] == ["arn:aws:events:us-east-1:123456789012:rule/Rule.Tick"]
    assert hourly.event() == {"a": 1}


class _ListingCounted:
    """A Scheduler client that counts how often the schedules are listed, and which are read."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.listings = 0
        self.reads: list[str] = []

    def get_paginator(self, name: str) -> Any:
        self.listings += name == "list_schedules"
        return self._client.get_paginator(name)

    def get_schedule(self, **kwargs: Any) -> Any:
        self.reads.append(kwargs["Name"])
        return self._client.get_schedule(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@dataclass
class WatchedGroup:
    """A schedule group in the local stack's moto and a watcher of it that counts its listings and reads."""

    clients: AwsClients
    group: str
    scheduler: _ListingCounted
    watcher: ScheduleWatcher
    endpoint_url: str


@pytest.fixture
def watched_group() -> Iterator[WatchedGroup]:
    moto = MotoProcess()
    moto.start()
    clients = make_clients(moto.endpoint_url, "us-east-1")
    try:
        group = f"g-{uuid.uuid4().hex[:8]}"
        clients.scheduler.create_schedule_group(Name=group)
        scheduler = _ListingCounted(clients.scheduler)
        changes = functools.partial(scheduler_changes_since, moto.endpoint_url, region="us-east-1")
        watcher = ScheduleWatcher(scheduler, [group], Functions([]), lambda function, event: None, changes=changes)
        yield WatchedGroup(clients, group, scheduler, watcher, moto.endpoint_url)
    finally:
        clients.close()
        moto.stop()


def test_the_schedules_are_read_again_only_after_a_change(watched_group: WatchedGroup) -> None:
    # given a watcher of a group in the local stack's moto, which counts the schedules' changes
    watcher, scheduler = watched_group.watcher, watched_group.scheduler
    # when it polls three times with nothing changed
    for _ in range(3):
        watcher._round(0.0)
    # then it listed once
    assert scheduler.listings == 1
    # and when a schedule is created, the next poll plans it from what the changes' answer holds
    # of it, with no read of its own, and the one after does nothing
    create(watched_group, "s")
    watcher._round(0.0)
    watcher._round(0.0)
    assert (scheduler.listings, scheduler.reads) == (1, [])
    assert watcher._watched[(watched_group.group, "s")].expression == "at(2099-01-01T00:00:00)"


def create(watched_group: WatchedGroup, name: str, group: str | None = None) -> None:
    watched_group.clients.scheduler.create_schedule(
        GroupName=group or watched_group.group,
        Name=name,
        ScheduleExpression="at(2099-01-01T00:00:00)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f", "RoleArn": "arn:aws:iam::1:role/r"},
    )


def test_after_a_change_the_watcher_reads_the_schedule_changed_and_lists_none(watched_group: WatchedGroup) -> None:
    # given a watcher that has listed a group of 150 schedules, and another group it does not watch
    watcher, scheduler, group = watched_group.watcher, watched_group.scheduler, watched_group.group
    watched_group.clients.scheduler.create_schedule_group(Name=f"{group}-other")
    for index in range(150):
        create(watched_group, f"held-{index}")
    watcher._round(0.0)
    assert (scheduler.listings, len(watcher._watched)) == (1, 150)
    # when one more is created in its group, and one in the other group
    scheduler.reads.clear()
    create(watched_group, "new")
    create(watched_group, "elsewhere", group=f"{group}-other")
    # then the next poll plans the new one alone (from the changes' answer), and lists nothing
    watcher._round(0.0)
    assert (scheduler.listings, scheduler.reads) == (1, [])
    assert (group, "new") in watcher._watched and (f"{group}-other", "elsewhere") not in watcher._watched
    # and when one is created, then one updated, the next poll plans those two again alone
    create(watched_group, "newer")
    watched_group.clients.scheduler.update_schedule(
        GroupName=group,
        Name="held-7",
        ScheduleExpression="at(2099-01-02T00:00:00)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f", "RoleArn": "arn:aws:iam::1:role/r"},
    )
    planned = dict(watcher._watched)
    watcher._round(0.0)
    assert (scheduler.listings, scheduler.reads) == (1, [])
    assert (group, "newer") in watcher._watched
    assert watcher._watched[(group, "held-7")].expression == "at(2099-01-02T00:00:00)"
    assert watcher._watched[(group, "held-7")].modified != planned[(group, "held-7")].modified
    # and when one is deleted, the next poll lists nothing, and watches it no more
    watched_group.clients.scheduler.delete_schedule(GroupName=group, Name="held-3")
    watcher._round(0.0)
    assert (scheduler.listings, scheduler.reads) == (1, [])
    assert (group, "held-3") not in watcher._watched
    assert len(watcher._watched) == 151


def test_what_the_changes_answer_holds_of_a_schedule_is_what_the_client_reads(watched_group: WatchedGroup) -> None:
    # given a watcher that has listed its group, and a schedule created in it
    watcher, group = watched_group.watcher, watched_group.group
    watcher._round(0.0)
    create(watched_group, "s")
    # when the changes are read, then what they hold of it is GetSchedule's answer, parsed alike
    changes = scheduler_changes_since(watched_group.endpoint_url, watcher._seen_changes, region="us-east-1")
    assert changes is not None and changes.read is not None
    held = watcher._as_got(changes.read[(group, "s")])
    got = watched_group.clients.scheduler.get_schedule(GroupName=group, Name="s")
    got.pop("ResponseMetadata")
    assert isinstance(held, dict)
    held.pop("ResponseMetadata")
    assert held == got
    assert isinstance(held["LastModificationDate"], datetime)


def test_a_schedule_of_another_region_s_group_of_the_same_name_is_not_the_watcher_s(
    watched_group: WatchedGroup,
) -> None:
    # given a watcher in us-east-1 that has listed its group, and a group of the same name in eu-west-1
    watcher, scheduler, group = watched_group.watcher, watched_group.scheduler, watched_group.group
    watcher._round(0.0)
    elsewhere = make_clients(watched_group.endpoint_url, "eu-west-1")
    try:
        elsewhere.scheduler.create_schedule_group(Name=group)
        there = WatchedGroup(elsewhere, group, scheduler, watcher, watched_group.endpoint_url)
        # when a schedule is created there only, then the watcher does not plan it
        create(there, "there")
        watcher._round(0.0)
        assert (group, "there") not in watcher._watched
        # and when one held in both is deleted in the watcher's Region, it watches it no more
        create(watched_group, "both")
        create(there, "both")
        watcher._round(0.0)
        assert (group, "both") in watcher._watched
        watched_group.clients.scheduler.delete_schedule(GroupName=group, Name="both")
        watcher._round(0.0)
        assert (group, "both") not in watcher._watched
    finally:
        elsewhere.close()
    # (all from the changes' answers: the watcher read none itself)
    assert scheduler.reads == []


def test_a_schedule_whose_group_two_accounts_have_in_the_region_is_read(watched_group: WatchedGroup) -> None:
    # given a watcher that has listed its group, and another account with a group of that name
    watcher, scheduler, group = watched_group.watcher, watched_group.scheduler, watched_group.group
    watcher._round(0.0)
    other = boto3.client("scheduler", endpoint_url=watched_group.endpoint_url, region_name="us-east-1")
    other.meta.events.register(
        "before-sign.scheduler.*", lambda request, **_: request.headers.add_header("x-moto-account-id", "111111111111")
    )
    other.create_schedule_group(Name=group)
    # when a schedule is created in the watcher's group
    create(watched_group, "mine")
    watcher._round(0.0)
    # then moto's process cannot tell whose group the watcher's is, and the watcher reads it
    assert scheduler.reads == ["mine"]
    assert (group, "mine") in watcher._watched


def test_a_read_the_watcher_cannot_parse_is_read_again(watched_group: WatchedGroup) -> None:
    watcher, scheduler, group = watched_group.watcher, watched_group.scheduler, watched_group.group
    create(watched_group, "s")
    assert watcher._as_got("{not json") is None
    assert watcher._read((group, "s"), watcher._as_got("{not json"))
    assert scheduler.reads == ["s"]


def test_after_a_change_it_cannot_name_the_watcher_lists_its_groups_again(watched_group: WatchedGroup) -> None:
    # given a watcher that has listed its group of one schedule
    watcher, scheduler, group = watched_group.watcher, watched_group.scheduler, watched_group.group
    create(watched_group, "kept")
    watcher._round(0.0)
    # when a schedule is created, and a group deleted (which deletes its schedules)
    create(watched_group, "new")
    watched_group.clients.scheduler.create_schedule_group(Name=f"{group}-gone")
    watched_group.clients.scheduler.delete_schedule_group(Name=f"{group}-gone")
    watcher._round(0.0)
    # then the next poll lists the group again
    assert scheduler.listings == 2
    assert set(watcher._watched) == {(group, "kept"), (group, "new")}


def test_between_changes_the_watcher_waits_in_moto_and_then_reads_again_at_once(
    watched_group: WatchedGroup,
) -> None:
    # given a watcher that has listed its group once
    watcher, scheduler = watched_group.watcher, watched_group.scheduler
    watcher._round(0.0)
    # when a round may wait a second for a change and none comes
    started = time.time()
    next_poll = watcher._round(0.0, wait_s=1.0)
    # then it waited that second in one read, listed nothing more, and reads again at once
    assert time.time() - started >= 1.0
    assert scheduler.listings == 1
    assert next_poll <= time.time()
