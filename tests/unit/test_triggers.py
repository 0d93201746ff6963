import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from wakeup import aws
from wakeup.model import Origin, Trigger
from wakeup.settings import Settings
from wakeup.triggers import Armed, ScheduleContentionError, Triggers

NOW = datetime(2026, 12, 1, 9, 0, 0, 400000, tzinfo=UTC)
TRIGGER = Trigger("0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10", "reg1", 0)


def make_settings(**changes: str) -> Settings:
    return Settings.model_validate(
        {
            "WAKEUP_TABLE": "t",
            "WAKEUP_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
            "WAKEUP_SCHEDULE_GROUP": "g",
            "WAKEUP_CALLER_ARN": "arn:aws:lambda:us-east-1:123456789012:function:s-caller",
            "WAKEUP_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/r",
            **changes,
        }
    )


@pytest.fixture
def settings() -> Settings:
    return make_settings()


def clients() -> tuple[Any, Any]:
    region = {"region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "x"}
    return boto3.client("sqs", **region), boto3.client("scheduler", **region)


@contextmanager
def stubbed(client: Any) -> Iterator[Stubber]:
    """A Stubber that also fails the test when a response it was given is never asked for: the
    stubbed call must happen, not merely be allowed."""
    with Stubber(client) as stub:
        yield stub
        stub.assert_no_pending_responses()


def test_a_wake_within_the_horizon_goes_to_sqs_delayed_to_a_second_and_a_fraction_before_it(
    settings: Settings,
) -> None:
    # 120.9 s away: delayed 119 s, it arrives 1.9 s early, time enough to claim at a busy second
    sqs, scheduler = clients()
    with stubbed(sqs) as stub:
        stub.add_response(
            "send_message",
            {"MessageId": "m"},
            {"QueueUrl": settings.queue_url, "MessageBody": ANY, "DelaySeconds": 119},
        )
        armed = Triggers(settings, sqs, scheduler, clock=lambda: NOW).arm(TRIGGER, NOW + timedelta(seconds=120.9), NOW)
    assert armed == Armed(Origin.QUEUE)


def test_a_wake_in_the_past_is_sent_without_delay(settings: Settings) -> None:
    sqs, scheduler = clients()
    with stubbed(sqs) as stub:
        stub.add_response("send_message", {"MessageId": "m"}, {"QueueUrl": ANY, "MessageBody": ANY, "DelaySeconds": 0})
        Triggers(settings, sqs, scheduler, clock=lambda: NOW).arm(TRIGGER, NOW - timedelta(hours=1), NOW)


def test_a_far_wake_is_one_schedule_a_lead_early_in_utc_deleted_after_completion(settings: Settings) -> None:
    sqs, scheduler = clients()
    due = NOW + timedelta(hours=5)
    with stubbed(scheduler) as stub:
        stub.add_response(
            "create_schedule",
            {"ScheduleArn": "arn:aws:scheduler:us-east-1:123456789012:schedule/g/x"},
            {
                "Name": f"wake-{TRIGGER.instance_id}",
                "GroupName": "g",
                "ScheduleExpression": "at(2026-12-01T13:58:30)",
                "ScheduleExpressionTimezone": "UTC",
                "FlexibleTimeWindow": {"Mode": "OFF"},
                "Target": ANY,
                "ActionAfterCompletion": "DELETE",
                "State": "ENABLED",
            },
        )
        armed = Triggers(settings, sqs, scheduler, clock=lambda: NOW).arm(TRIGGER, due, NOW)
    assert armed == Armed(Origin.SCHEDULE, new_schedule=True)


def test_an_existing_schedule_is_replaced_whole(settings: Settings) -> None:
    sqs, scheduler = clients()
    with stubbed(scheduler) as stub:
        stub.add_client_error("create_schedule", "ConflictException", http_status_code=409)
        stub.add_response("update_schedule", {"ScheduleArn": "arn:x"}, None)
        armed = Triggers(settings, sqs, scheduler, clock=lambda: NOW).arm(TRIGGER, NOW + timedelta(days=3), NOW)
    assert armed == Armed(Origin.SCHEDULE)  # another request's schedule, replaced: the registration re-reads


def test_a_schedule_being_replaced_is_updated_without_a_create_first(settings: Settings) -> None:
    sqs, scheduler = clients()
    with stubbed(scheduler) as stub:
        stub.add_response("update_schedule", {"ScheduleArn": "arn:x"}, None)
        armed = Triggers(settings, sqs, scheduler, clock=lambda: NOW).arm(
            TRIGGER, NOW + timedelta(days=3), NOW, replacing=True
        )
    assert armed == Armed(Origin.SCHEDULE)


def test_a_schedule_expected_but_gone_is_created(settings: Settings) -> None:
    sqs, scheduler = clients()
    with stubbed(scheduler) as stub:
        stub.add_client_error("update_schedule", "ResourceNotFoundException", http_status_code=404)
        stub.add_response("create_schedule", {"ScheduleArn": "arn:x"}, None)
        armed = Triggers(settings, sqs, scheduler, clock=lambda: NOW).arm(
            TRIGGER, NOW + timedelta(days=3), NOW, replacing=True
        )
    assert armed == Armed(Origin.SCHEDULE, new_schedule=True)


@pytest.mark.parametrize("replacing", [False, True])
def test_a_schedule_changing_under_each_call_is_tried_three_times_each_way(settings: Settings, replacing: bool) -> None:
    sqs, scheduler = clients()
    calls = ["update_schedule", "create_schedule"] * 3
    with stubbed(scheduler) as stub:
        for call in calls if replacing else calls[::-1]:
            code, status = (
                ("ConflictException", 409) if call == "create_schedule" else ("ResourceNotFoundException", 404)
            )
            stub.add_client_error(call, code, http_status_code=status)
        with pytest.raises(ScheduleContentionError):
            Triggers(settings, sqs, scheduler, clock=lambda: NOW).arm(
                TRIGGER, NOW + timedelta(days=3), NOW, replacing=replacing
            )


def test_unschedule_says_whether_there_was_a_schedule_to_remove(settings: Settings) -> None:
    # A removal re-reads the table only when it removed something (`wakeup.logic.wakes._unschedule`).
    sqs, scheduler = clients()
    triggers = Triggers(settings, sqs, scheduler, clock=lambda: NOW)
    with stubbed(scheduler) as stub:
        stub.add_response("delete_schedule", {}, {"Name": f"wake-{TRIGGER.instance_id}", "GroupName": "g"})
        stub.add_client_error("delete_schedule", "ResourceNotFoundException", http_status_code=404)
        assert triggers.unschedule(TRIGGER.instance_id) is True
        assert triggers.unschedule(TRIGGER.instance_id) is False


def test_the_schedule_carries_the_trigger_to_the_caller(settings: Settings) -> None:
    sqs, scheduler = clients()
    seen: dict[str, object] = {}
    scheduler.meta.events.register(
        "provide-client-params.scheduler.CreateSchedule", lambda params, **_: seen.update(params)
    )
    with stubbed(scheduler) as stub:
        stub.add_response("create_schedule", {"ScheduleArn": "arn:x"}, None)
        Triggers(settings, sqs, scheduler, clock=lambda: NOW).arm(TRIGGER, NOW + timedelta(days=3), NOW)
    target = seen["Target"]
    assert isinstance(target, dict)
    assert target["Arn"] == settings.caller_arn and target["RoleArn"] == settings.scheduler_role_arn
    assert json.loads(target["Input"]) == {"instance_id": TRIGGER.instance_id, "reg": "reg1", "attempt": 0}


def arrival(settings: Settings, due: datetime) -> tuple[Origin, datetime]:
    """How `arm()` sends a trigger for `due` at NOW, and when the trigger is set to arrive: the
    schedule's `at()` (whole seconds, UTC), or NOW plus the SQS message's delay."""
    sqs, scheduler = clients()
    sent: dict[str, Any] = {}
    sqs.meta.events.register("provide-client-params.sqs.SendMessage", lambda params, **_: sent.update(params))
    scheduler.meta.events.register(
        "provide-client-params.scheduler.CreateSchedule", lambda params, **_: sent.update(params)
    )
    with stubbed(sqs) as sqs_stub, stubbed(scheduler) as scheduler_stub:
        way = Triggers(settings, sqs, scheduler, clock=lambda: NOW).route(due, NOW)
        if way is Origin.QUEUE:
            sqs_stub.add_response("send_message", {"MessageId": "m"}, None)
        else:
            scheduler_stub.add_response("create_schedule", {"ScheduleArn": "arn:x"}, None)
        armed = Triggers(settings, sqs, scheduler, clock=lambda: NOW).arm(TRIGGER, due, NOW)
        assert armed == Armed(way, new_schedule=way is Origin.SCHEDULE)  # the instance had none
    if way is Origin.QUEUE:
        return way, NOW + timedelta(seconds=sent["DelaySeconds"])
    expression = sent["ScheduleExpression"]
    assert sent["ScheduleExpressionTimezone"] == "UTC"
    return way, datetime.strptime(expression, "at(%Y-%m-%dT%H:%M:%S)").replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("horizon_s", "lead_s"),
    [("840", "60"), ("5", "2"), ("100", "99"), ("900", "1"), ("60", "59")],
)
@pytest.mark.parametrize(
    "seconds_ahead", [-3600, 0, 0.5, 1, 1.9, 2.5, 5.5, 59.5, 60.5, 61.5, 100.5, 101.5, 500, 840.5, 901, 86400 * 400]
)
def test_nothing_is_ever_scheduled_in_the_past(horizon_s: str, lead_s: str, seconds_ahead: float) -> None:
    # given settings where a wake just past the horizon would have its schedule fire at once
    settings = make_settings(WAKEUP_SQS_HORIZON_S=horizon_s, WAKEUP_SCHEDULE_LEAD_S=lead_s)
    due = NOW + timedelta(seconds=seconds_ahead)
    # when the wake is armed
    way, arrives = arrival(settings, due)
    # then a schedule's at() is safely in the future (AWS refuses one in the past), and no trigger
    # is set to arrive after the wake's time
    if way is Origin.SCHEDULE:
        assert arrives > NOW + timedelta(seconds=1)
    assert arrives <= max(due, NOW)


def test_the_sqs_delay_counts_from_the_moment_of_sending(settings: Settings) -> None:
    # given a request that took 1.5 s between reading the clock and sending
    sqs, scheduler = clients()
    sent_at = NOW + timedelta(seconds=1.5)
    with stubbed(sqs) as stub:
        stub.add_response("send_message", {"MessageId": "m"}, {"QueueUrl": ANY, "MessageBody": ANY, "DelaySeconds": 7})
        # when it arms a wake 10 s after the request began
        Triggers(settings, sqs, scheduler, clock=lambda: sent_at).arm(TRIGGER, NOW + timedelta(seconds=10), NOW)
    # then the message is delayed by the 8.5 s left, less the lead (whole seconds, never past the time)


def test_a_client_is_made_on_first_use_once_however_many_threads_need_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given triggers whose clients are made by the layer (as each function's are)
    made: list[str] = []
    sqs, scheduler = clients()

    def making(service: str) -> Any:
        made.append(service)
        time.sleep(0.01)  # a slow make, so that threads asking at once would each make one
        return {"sqs": sqs, "scheduler": scheduler}[service]

    monkeypatch.setattr(aws, "client", making)
    triggers = Triggers(settings, clock=lambda: NOW)
    # then none is made with them
    assert made == []
    # and sixteen threads sending at once make one SQS client, and no Scheduler one
    with stubbed(sqs) as stub:
        for _ in range(16):
            stub.add_response("send_message", {"MessageId": "m"})
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda _: triggers.arm(TRIGGER, NOW + timedelta(seconds=30), NOW), range(16)))
    assert made == ["sqs"]
    # and a far wake makes the Scheduler's
    with stubbed(scheduler) as stub:
        stub.add_response("create_schedule", {"ScheduleArn": "arn:aws:scheduler:us-east-1:1:schedule/g/x"})
        assert triggers.arm(TRIGGER, NOW + timedelta(days=1), NOW) == Armed(Origin.SCHEDULE, new_schedule=True)
    assert made == ["sqs", "scheduler"]


def test_clients_given_are_used_and_can_be_replaced(settings: Settings) -> None:
    sqs, scheduler = clients()
    triggers = Triggers(settings, sqs, scheduler)
    assert (triggers.sqs, triggers.scheduler) == (sqs, scheduler)
    other_sqs, other_scheduler = clients()
    triggers.sqs, triggers.scheduler = other_sqs, other_scheduler
    assert (triggers.sqs, triggers.scheduler) == (other_sqs, other_scheduler)
