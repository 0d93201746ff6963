"""moto's request counter: the functions' AWS requests by operation, the local stack's own left out."""

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest

from wakeup_cost.cost import HISTORY_PUT, HISTORY_PUT_ITEMS
from wakeup_local.aws.clients import AwsClients, make_clients
from wakeup_local.aws.moto_process import MotoProcess
from wakeup_local.aws.request_counter import CHANGE_LOG_SIZE, COUNTS_PATH, scheduler_changes, scheduler_changes_since


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoProcess]:
    process = MotoProcess()
    process.start()
    yield process
    process.stop()


def counts(moto: MotoProcess) -> dict[str, int]:
    with urllib.request.urlopen(moto.endpoint_url + COUNTS_PATH, timeout=10) as reply:
        return json.load(reply)  # type: ignore[no-any-return]


def test_a_functions_requests_are_counted_by_operation_and_the_stacks_own_are_not(moto: MotoProcess) -> None:
    # given a client as a function makes it, and the local stack's own
    function = boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="us-east-1")
    own = make_clients(moto.endpoint_url, "us-east-1")
    before = counts(moto)
    # when
    function.client("dynamodb", endpoint_url=moto.endpoint_url).list_tables()
    function.client("sqs", endpoint_url=moto.endpoint_url).list_queues()
    function.client("scheduler", endpoint_url=moto.endpoint_url).list_schedules()
    own.dynamodb.list_tables()
    own.sqs.list_queues()
    own.close()
    # then
    after = counts(moto)
    counted = {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)}
    assert counted == {"dynamodb:ListTables": 1, "sqs:ListQueues": 1, "scheduler:ListSchedules": 1}


def test_a_batch_write_is_counted_once_and_by_its_puts_as_the_cost_model_prices_them(moto: MotoProcess) -> None:
    # given a table, and a function's client
    function = boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="us-east-1")
    dynamodb = function.client("dynamodb", endpoint_url=moto.endpoint_url)
    table = f"t-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "gone"}})
    before = counts(moto)
    # when one BatchWriteItem puts seven items and deletes one
    puts = [{"PutRequest": {"Item": {"pk": {"S": f"k{n}"}}}} for n in range(7)]
    dynamodb.batch_write_item(RequestItems={table: [*puts, {"DeleteRequest": {"Key": {"pk": {"S": "gone"}}}}]})
    # then it is one request, of seven puts, under the name the cost model prices the history by
    after = counts(moto)
    counted = {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)}
    assert counted == {HISTORY_PUT: 1, HISTORY_PUT_ITEMS: 7}
    assert len(dynamodb.scan(TableName=table)["Items"]) == 7  # moto read the body the counter read


def test_changes_to_schedules_are_counted_whoever_makes_them_and_reads_are_not(moto: MotoProcess) -> None:
    # given the stack's own Scheduler client, and a group
    own = make_clients(moto.endpoint_url, "us-east-1")
    group = f"g-{uuid.uuid4().hex[:8]}"
    own.scheduler.create_schedule_group(Name=group)
    target = {"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f", "RoleArn": "arn:aws:iam::123456789012:role/r"}
    schedule = {"GroupName": group, "Name": "s", "FlexibleTimeWindow": {"Mode": "OFF"}, "Target": target}
    before = scheduler_changes(moto.endpoint_url)
    # when a schedule is created, read, listed, updated and deleted
    own.scheduler.create_schedule(**schedule, ScheduleExpression="at(2099-01-01T00:00:00)")
    after_create = scheduler_changes(moto.endpoint_url)
    own.scheduler.get_schedule(GroupName=group, Name="s")
    own.scheduler.list_schedules(GroupName=group)
    after_reads = scheduler_changes(moto.endpoint_url)
    own.scheduler.update_schedule(**schedule, ScheduleExpression="at(2099-01-02T00:00:00)")
    own.scheduler.delete_schedule(GroupName=group, Name="s")
    own.close()
    # then each change moved the count, and the reads did not
    assert before is not None
    assert after_create == after_reads == before + 1
    assert scheduler_changes(moto.endpoint_url) == before + 3


def test_without_a_counting_moto_the_changes_are_unknown() -> None:
    # a port nothing answers on (the discard port): the local Scheduler then lists at each poll
    assert scheduler_changes("http://127.0.0.1:9") is None


def test_a_read_of_the_changes_waits_for_a_change_and_answers_as_one_is_made(moto: MotoProcess) -> None:
    own = make_clients(moto.endpoint_url, "us-east-1")
    group = f"g-{uuid.uuid4().hex[:8]}"
    own.scheduler.create_schedule_group(Name=group)
    seen = scheduler_changes(moto.endpoint_url)
    assert seen is not None
    # given nothing changes, then a read that waits for a change answers the same count after its wait
    started = time.monotonic()
    assert scheduler_changes(moto.endpoint_url, seen, wait_s=1.0) == seen
    assert time.monotonic() - started >= 1.0
    # and when a change is made while a read waits, it answers the new count before its wait ends
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        waiting = pool.submit(scheduler_changes, moto.endpoint_url, seen, 5.0)
        own.scheduler.delete_schedule_group(Name=group)
        assert waiting.result(timeout=10) == seen + 1
    assert time.monotonic() - started < 4.0
    own.close()


TARGET = {"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f", "RoleArn": "arn:aws:iam::123456789012:role/r"}
AT = {"ScheduleExpression": "at(2099-01-01T00:00:00)", "FlexibleTimeWindow": {"Mode": "OFF"}, "Target": TARGET}


def changed_since(moto: MotoProcess, seen: int) -> list[tuple[str, str]] | None:
    changes = scheduler_changes_since(moto.endpoint_url, seen)
    assert changes is not None
    return changes.schedules


def a_group_and_the_count(moto: MotoProcess) -> tuple[AwsClients, str, int]:
    """The stack's own clients, a new schedule group, and the count of changes once it is made."""
    own = make_clients(moto.endpoint_url, "us-east-1")
    group = f"g-{uuid.uuid4().hex[:8]}"
    own.scheduler.create_schedule_group(Name=group)
    seen = scheduler_changes(moto.endpoint_url)
    assert seen is not None
    return own, group, seen


def test_the_schedules_created_updated_and_deleted_since_a_count_are_named(moto: MotoProcess) -> None:
    # given a group
    own, group, seen = a_group_and_the_count(moto)
    # when schedules are created, updated and deleted, in it and in the default group (no GroupName),
    # one of them under a name sent percent-encoded
    own.scheduler.create_schedule(GroupName=group, Name="a", **AT)
    own.scheduler.create_schedule(Name="d b%41", **AT)
    own.scheduler.update_schedule(GroupName=group, Name="a", **AT)
    own.scheduler.create_schedule(GroupName=group, Name="b", **AT)
    own.scheduler.delete_schedule(GroupName=group, Name="a")
    own.scheduler.delete_schedule(Name="d b%41")
    # then those are named, each once, as the client named them; and none since the last count
    changes = scheduler_changes_since(moto.endpoint_url, seen)
    assert changes is not None
    assert changes.total == seen + 6
    assert changes.schedules == [(group, "a"), ("default", "d b%41"), (group, "b")]
    assert changed_since(moto, changes.total) == []
    # and moto still read the bodies handed on: the schedule was created in its group
    assert own.scheduler.get_schedule(GroupName=group, Name="b")["GroupName"] == group
    own.close()


def test_a_change_to_a_group_or_a_reset_names_no_schedules(moto: MotoProcess) -> None:
    # a group deleted (its schedules with it) may have changed any schedule
    own, group, seen = a_group_and_the_count(moto)
    own.scheduler.create_schedule(GroupName=group, Name="s", **AT)
    assert changed_since(moto, seen) == [(group, "s")]
    own.scheduler.delete_schedule_group(Name=group)
    assert changed_since(moto, seen) is None
    # and so may moto's reset
    seen = scheduler_changes(moto.endpoint_url)
    assert seen is not None
    urllib.request.urlopen(urllib.request.Request(moto.endpoint_url + "/moto-api/reset", method="POST"), timeout=10)
    assert changed_since(moto, seen) is None
    own.close()


def test_a_count_older_than_the_log_or_none_names_no_schedules(moto: MotoProcess) -> None:
    # given more changes since a count than the log keeps (a deletion of no schedule is one)
    own = make_clients(moto.endpoint_url, "us-east-1")
    seen = scheduler_changes(moto.endpoint_url)
    assert seen is not None
    for index in range(CHANGE_LOG_SIZE + 1):
        with pytest.raises(own.scheduler.exceptions.ResourceNotFoundException):
            own.scheduler.delete_schedule(Name=f"none-{index}")
    # then a reader at that count is told none, while one a change later is told all of them
    assert changed_since(moto, seen) is None
    assert len(changed_since(moto, seen + 1) or []) == CHANGE_LOG_SIZE
    # and a reader without a count, or with one from the future, is told none
    current = scheduler_changes_since(moto.endpoint_url, None)
    assert current is not None and current.schedules is None
    assert changed_since(moto, current.total + 1) is None
    own.close()
