"""Scheduler's invocations are asynchronous, as on AWS: a function error is retried as Lambda retries
asynchronous invocations (twice, one then two minutes later), and what still fails lands in the
function's `EventInvokeConfig` on-failure destination as Lambda's invocation record.

The stack runs with `WAKEUP_LOCAL_ASYNC_TIME_SCALE`, so the one- and two-minute waits (and the
maximum event age) take a fiftieth of that.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from localstack_helpers import FIXTURE_TEMPLATE, fake_minter, wait_until

from wakeup_local.stack import LocalStack

SCALE = 0.02
FIRST_RETRY_WAIT_S = 60 * SCALE
SECOND_RETRY_WAIT_S = 120 * SCALE


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    env = {"WAKEUP_LOCAL_EXACT_SCHEDULES": "1", "WAKEUP_LOCAL_ASYNC_TIME_SCALE": str(SCALE)}
    name = f"a-{uuid.uuid4().hex[:8]}"
    with LocalStack(FIXTURE_TEMPLATE, account_minter=fake_minter, stack_name=name, env=env) as started:
        yield started


def schedule_now(stack: LocalStack, logical_id: str, payload: dict[str, Any]) -> None:
    """A one-time schedule of the function a second from now, as the service makes them."""
    at = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S")
    stack.clients.scheduler.create_schedule(
        Name=f"s-{uuid.uuid4().hex[:8]}",
        GroupName=next(iter(stack.resources.schedule_groups.values())),
        ScheduleExpression=f"at({at})",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={
            "Arn": stack.functions.by_logical_id(logical_id).arn,
            "RoleArn": "arn:aws:iam::123456789012:role/scheduler",
            "Input": json.dumps(payload),
        },
    )


def records_in(stack: LocalStack, queue: str) -> list[dict[str, Any]]:
    messages = stack.clients.sqs.receive_message(
        QueueUrl=stack.resources.queues[queue].url, MaxNumberOfMessages=10, VisibilityTimeout=0
    ).get("Messages", [])
    return [json.loads(message["Body"]) for message in messages]


def test_a_failing_scheduled_invocation_is_retried_twice_then_lands_in_the_on_failure_queue(
    stack: LocalStack,
) -> None:
    # given a function that always fails, with Lambda's default two retries and an SQS destination
    payload = {"instance_id": "i-1", "reg": "r-1", "attempt": 0}
    # when Scheduler invokes it
    schedule_now(stack, "FailingFunction", payload)
    [record] = wait_until(lambda: records_in(stack, "FailedEventsQueue"), timeout=30, message="the failure record")
    # then it ran three times, one (scaled) minute and then two apart
    attempts = stack.async_attempts("FailingFunction")
    assert [attempt.attempt for attempt in attempts] == [1, 2, 3]
    assert all(attempt.error and "cannot handle" in attempt.error for attempt in attempts)
    assert len({attempt.request_id for attempt in attempts}) == 1
    assert attempts[1].at - attempts[0].at >= FIRST_RETRY_WAIT_S
    assert attempts[2].at - attempts[1].at >= SECOND_RETRY_WAIT_S
    # and its record is Lambda's
    function_arn = stack.functions.by_logical_id("FailingFunction").arn
    assert record["version"] == "1.0"
    assert record["requestContext"] == {
        "requestId": attempts[0].request_id,
        "functionArn": f"{function_arn}:$LATEST",
        "condition": "RetriesExhausted",
        "approximateInvokeCount": 3,
    }
    assert record["requestPayload"] == payload
    assert record["responseContext"] == {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"}
    assert "cannot handle" in record["responsePayload"]["errorMessage"]
    assert datetime.fromisoformat(record["timestamp"]) <= datetime.now(UTC)


def test_an_event_past_its_maximum_age_is_given_up_before_its_next_attempt(stack: LocalStack) -> None:
    # given a function whose events may be 170 (scaled) seconds old: the second attempt comes at 60
    # and a first run (a cold start's slack), the third would come at 180 and more
    schedule_now(stack, "AgingFunction", {"aged": True})
    # when it has failed twice
    [record] = wait_until(lambda: records_in(stack, "AgedEventsQueue"), timeout=30, message="the aged record")
    # then the event is not run a third time, and goes to the destination as too old
    attempts = stack.async_attempts("AgingFunction")
    assert [attempt.attempt for attempt in attempts] == [1, 2]
    assert record["requestContext"]["condition"] == "EventAgeExceeded"
    assert record["requestContext"]["approximateInvokeCount"] == 2
    assert record["requestPayload"] == {"aged": True}
    assert "responseContext" not in record
