"""moto's request counter: the functions' AWS requests by operation, the local stack's own left out."""

import json
import urllib.request
from collections.abc import Iterator

import boto3
import pytest

from wakeup_local.aws import make_clients
from wakeup_local.moto_process import MotoProcess
from wakeup_local.request_counter import COUNTS_PATH


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
