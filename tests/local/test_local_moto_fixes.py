"""The local stack's moto transactions behave as moto's own, and never copy a whole table; its
event source mappings update as Lambda's do.

Each transaction scenario runs on moto as it comes (a server in this process) and on the local
stack's moto (its own process, with `moto_fixes` applied): DynamoDB's rules for
`TransactWriteItems`, all or nothing, with a reason per action when a condition fails, must hold on
both. The mappings' scenarios are what moto does not do (an update applies at once there).
"""

from __future__ import annotations

import functools
import json
import pickle
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import boto3
import moto.dynamodb.models as dynamodb_models
import moto.dynamodb.parsing.validators as dynamodb_validators
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.utils import method_names_from_class, unix_time, unix_time_millis
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing.ast_nodes import (
    DepthFirstTraverser,
    ExpressionAttributeName,
    ExpressionAttributeValue,
    Node,
    UpdateExpressionAddAction,
    UpdateExpressionAddClause,
    UpdateExpressionDeleteAction,
    UpdateExpressionRemoveAction,
    UpdateExpressionRemoveClause,
    UpdateExpressionSetAction,
    UpdateExpressionSetClause,
)
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.dynamodb.parsing.validators import UpdateExpressionValidator
from moto.dynamodb.responses import DynamoHandler
from moto.sqs.exceptions import ReceiptHandleIsInvalid
from moto.sqs.models import Queue, sqs_backends

from support.waiting import wait_until
from wakeup_local.aws import moto_expressions, moto_fixes
from wakeup_local.aws.moto_process import MotoProcess
from wakeup_local.event_sources.mappings import empty_package

# moto's own lexer, parser and walks (this process's moto is not patched: moto_fixes applies in
# moto's process).
LEX_CONDITION = ConditionExpressionParser._lex_condition_expression
PARSE_CONDITION = ConditionExpressionParser.parse
PARSE_UPDATE = UpdateExpressionParser.make
NODE_TYPES = DepthFirstTraverser.nodes_to_be_processed
FIND_CLAUSES = Node.find_clauses


@pytest.fixture(scope="module")
def fixed_moto(moto_endpoint: str) -> str:
    """The local stack's moto (conftest's), named against moto's own (`plain_moto`)."""
    return moto_endpoint


@pytest.fixture(params=["plain_moto", "fixed_moto"])
def dynamodb(request: pytest.FixtureRequest) -> Any:
    return boto3.client("dynamodb", endpoint_url=request.getfixturevalue(request.param), region_name="us-east-1")


def _table(dynamodb: Any, *, range_key: bool = False) -> str:
    name = f"t-{uuid.uuid4().hex[:12]}"
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    attributes = [{"AttributeName": "pk", "AttributeType": "S"}]
    if range_key:
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
        attributes.append({"AttributeName": "sk", "AttributeType": "S"})
    dynamodb.create_table(
        TableName=name, KeySchema=schema, AttributeDefinitions=attributes, BillingMode="PAY_PER_REQUEST"
    )
    return name


def _items(dynamodb: Any, table: str) -> dict[str, dict[str, Any]]:
    return {item["pk"]["S"] + item.get("sk", {}).get("S", ""): item for item in dynamodb.scan(TableName=table)["Items"]}


def _cancellation(dynamodb: Any, actions: list[dict[str, Any]]) -> ClientError:
    with pytest.raises(ClientError) as raised:
        dynamodb.transact_write_items(TransactItems=actions)
    return raised.value


def test_a_failed_condition_undoes_the_updates_puts_and_deletes_before_it(dynamodb: Any) -> None:
    # given
    table = _table(dynamodb)
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "c"}, "n": {"N": "3"}})
    before = _items(dynamodb, table)
    # when
    error = _cancellation(
        dynamodb,
        [
            {
                "Update": {
                    "TableName": table,
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET n = :n, extra = :n",
                    "ExpressionAttributeValues": {":n": {"N": "2"}},
                }
            },
            {"Put": {"TableName": table, "Item": {"pk": {"S": "b"}}}},
            {"Delete": {"TableName": table, "Key": {"pk": {"S": "c"}}}},
            {
                "ConditionCheck": {
                    "TableName": table,
                    "Key": {"pk": {"S": "missing"}},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
        ],
    )
    # then
    assert error.response["Error"]["Code"] == "TransactionCanceledException"
    reasons = [reason["Code"] for reason in error.response["CancellationReasons"]]
    assert reasons == ["None", "None", "None", "ConditionalCheckFailed"]
    assert _items(dynamodb, table) == before


def test_a_cancellation_reason_carries_the_old_item_when_asked(dynamodb: Any) -> None:
    table = _table(dynamodb)
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}, "owner": {"S": "first"}})
    error = _cancellation(
        dynamodb,
        [
            {"Put": {"TableName": table, "Item": {"pk": {"S": "b"}}}},
            {
                "Put": {
                    "TableName": table,
                    "Item": {"pk": {"S": "a"}, "owner": {"S": "second"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ],
    )
    first, second = error.response["CancellationReasons"]
    assert first["Code"] == "None"
    assert second["Code"] == "ConditionalCheckFailed"
    assert second["Item"] == {"pk": {"S": "a"}, "owner": {"S": "first"}}
    assert set(_items(dynamodb, table)) == {"a"}


def test_two_actions_on_one_item_are_refused_and_nothing_is_written(dynamodb: Any) -> None:
    table = _table(dynamodb)
    error = _cancellation(
        dynamodb,
        [
            {"Put": {"TableName": table, "Item": {"pk": {"S": "a"}}}},
            {"Delete": {"TableName": table, "Key": {"pk": {"S": "a"}}}},
        ],
    )
    assert error.response["Error"]["Code"] == "ValidationException"
    assert _items(dynamodb, table) == {}


def test_items_with_a_range_key_are_restored_too(dynamodb: Any) -> None:
    table = _table(dynamodb, range_key=True)
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "h"}, "sk": {"S": "1"}, "n": {"N": "1"}})
    before = _items(dynamodb, table)
    _cancellation(
        dynamodb,
        [
            {
                "Update": {
                    "TableName": table,
                    "Key": {"pk": {"S": "h"}, "sk": {"S": "1"}},
                    "UpdateExpression": "SET n = :n",
                    "ExpressionAttributeValues": {":n": {"N": "2"}},
                }
            },
            {"Put": {"TableName": table, "Item": {"pk": {"S": "h"}, "sk": {"S": "2"}}}},
            {
                "ConditionCheck": {
                    "TableName": table,
                    "Key": {"pk": {"S": "h"}, "sk": {"S": "3"}},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
        ],
    )
    assert _items(dynamodb, table) == before


def test_a_transaction_whose_conditions_hold_writes_everything(dynamodb: Any) -> None:
    table = _table(dynamodb)
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "old"}})
    dynamodb.transact_write_items(
        TransactItems=[
            {
                "Put": {
                    "TableName": table,
                    "Item": {"pk": {"S": "new"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {"Delete": {"TableName": table, "Key": {"pk": {"S": "old"}}}},
        ]
    )
    assert set(_items(dynamodb, table)) == {"new"}


def _count_once(table: str) -> list[dict[str, Any]]:
    return [
        {
            "Update": {
                "TableName": table,
                "Key": {"pk": {"S": "counter"}},
                "UpdateExpression": "SET n = if_not_exists(n, :zero) + :one",
                "ExpressionAttributeValues": {":zero": {"N": "0"}, ":one": {"N": "1"}},
            }
        }
    ]


def test_a_transaction_sent_again_with_its_client_token_is_not_applied_twice(fixed_moto: str) -> None:
    # given the local stack's moto, and a transaction applied with a token: as botocore's retry
    # sends it again when the first reply came too late ("TransactWriteItems", DynamoDB API
    # reference: the same ClientRequestToken within ten minutes is not applied again)
    dynamodb = boto3.client("dynamodb", endpoint_url=fixed_moto, region_name="us-east-1")
    table = _table(dynamodb)
    token = uuid.uuid4().hex
    dynamodb.transact_write_items(TransactItems=_count_once(table), ClientRequestToken=token)
    # when it is sent again with the same token
    again = dynamodb.transact_write_items(TransactItems=_count_once(table), ClientRequestToken=token)
    # then it succeeds as the first did, and the count went up once
    assert again["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert _items(dynamodb, table)["counter"]["n"] == {"N": "1"}
    # and a request of other parameters with that token is refused, with nothing written
    with pytest.raises(ClientError) as raised:
        dynamodb.transact_write_items(
            TransactItems=[{"Put": {"TableName": table, "Item": {"pk": {"S": "other"}}}}], ClientRequestToken=token
        )
    assert raised.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"
    assert set(_items(dynamodb, table)) == {"counter"}
    # while another token applies again
    dynamodb.transact_write_items(TransactItems=_count_once(table), ClientRequestToken=uuid.uuid4().hex)
    assert _items(dynamodb, table)["counter"]["n"] == {"N": "2"}


def test_updates_racing_on_one_item_each_apply_whole_and_none_fails(fixed_moto: str) -> None:
    # given the local stack's moto and one item of many attributes, as DynamoDB's writes are atomic
    dynamodb = boto3.client(
        "dynamodb", endpoint_url=fixed_moto, region_name="us-east-1", config=Config(retries={"total_max_attempts": 1})
    )
    table = _table(dynamodb)
    many = {f"a{n}": {"S": "x" * 20} for n in range(RACING_ATTRIBUTES)}
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "one"}, **many})

    # when clients at once each add an attribute of their own and take it away again, over and over,
    # asking for the item's old attributes (which moto copies before it updates)
    def add_and_remove(client: int) -> list[str]:
        failures = []
        for _ in range(RACING_ROUNDS):
            added = {"UpdateExpression": f"SET c{client} = :v", "ExpressionAttributeValues": {":v": {"S": "v"}}}
            for update in (added, {"UpdateExpression": f"REMOVE c{client}"}):
                try:
                    dynamodb.update_item(TableName=table, Key={"pk": {"S": "one"}}, ReturnValues="ALL_OLD", **update)
                except ClientError as error:
                    failures.append(error.response["Error"]["Code"])
        return failures

    with ThreadPoolExecutor(RACING_CLIENTS) as pool:
        failures = [code for part in pool.map(add_and_remove, range(RACING_CLIENTS)) for code in part]
    # then none failed, and the item is as it began
    assert failures == []
    assert _items(dynamodb, table)["one"] == {"pk": {"S": "one"}, **many}


RACING_ATTRIBUTES = 200
RACING_CLIENTS = 8
RACING_ROUNDS = 60


def test_a_transaction_copies_only_the_items_it_names(plain_moto: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # given moto with the fix, and tables that may not be copied
    monkeypatch.setattr(dynamodb_models, "copy", moto_fixes.COPY_WITHOUT_TABLES)
    monkeypatch.setattr(
        DynamoDBBackend,
        "transact_write_items",
        moto_fixes.snapshotting_touched_items(DynamoDBBackend.transact_write_items),
    )

    def refuse(table: Table, memo: Any) -> Table:
        raise AssertionError("a whole table was copied")

    monkeypatch.setattr(Table, "__deepcopy__", refuse, raising=False)
    dynamodb = boto3.client("dynamodb", endpoint_url=plain_moto, region_name="us-east-1")
    table = _table(dynamodb)
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    # when a transaction is cancelled after an update
    error = _cancellation(
        dynamodb,
        [
            {
                "Update": {
                    "TableName": table,
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET n = :n",
                    "ExpressionAttributeValues": {":n": {"N": "2"}},
                }
            },
            {"Put": {"TableName": table, "Item": {"pk": {"S": "b"}}, "ConditionExpression": "attribute_exists(pk)"}},
        ],
    )
    # then it was undone from the items' own snapshots
    assert error.response["Error"]["Code"] == "TransactionCanceledException"
    assert _items(dynamodb, table) == {"a": {"pk": {"S": "a"}, "n": {"N": "1"}}}


# --- SQS queue attributes, computed when read ---------------------------------------------------------


@pytest.mark.parametrize(
    "attributes",
    [
        {},
        {"FifoQueue": "true", "ContentBasedDeduplication": "true"},
        {"KmsMasterKeyId": "alias/aws/sqs", "MessageRetentionPeriod": "600"},
        {"Policy": '{"Version": "2012-10-17", "Statement": []}', "VisibilityTimeout": "180"},
    ],
    ids=["standard", "fifo", "kms", "policy"],
)
def test_queue_attributes_are_moto_s_own_names_order_and_values(attributes: dict[str, str]) -> None:
    # given a queue holding visible, delayed and in-flight messages, with a redrive policy
    backend = sqs_backends["123456789012"]["us-east-1"]
    fifo = attributes.get("FifoQueue") == "true"
    dead = backend.create_queue(f"dead-{uuid.uuid4().hex[:8]}{'.fifo' if fifo else ''}", **attributes)
    redrive = json.dumps({"deadLetterTargetArn": dead.queue_arn, "maxReceiveCount": "3"})
    queue = backend.create_queue(
        f"q-{uuid.uuid4().hex[:8]}{'.fifo' if fifo else ''}", **attributes, RedrivePolicy=redrive
    )
    group = {"group_id": "g"} if fifo else {}
    for index in range(3):
        backend.send_message(queue.name, f"now {index}", deduplication_id=f"n{index}" if fifo else None, **group)
    if not fifo:
        backend.send_message(queue.name, "later", delay_seconds=600)
    backend.receive_message(queue.name, 1, wait_seconds_timeout=0, visibility_timeout=30)
    # when both are read, then they are the same mapping, key by key and in order
    mine = moto_fixes.QueueAttributes(queue)
    own = moto_fixes.MOTO_QUEUE_ATTRIBUTES.fget(queue)
    assert list(mine.items()) == list(own.items())
    assert mine.get("ApproximateNumberOfMessagesNotVisible") == 1
    assert "NoSuchAttribute" not in mine and mine.get("NoSuchAttribute") is None


def test_sqs_clock_reads_what_moto_s_own_reads() -> None:
    # given a moment, then both give its epoch seconds and milliseconds alike
    moment = datetime(2026, 3, 4, 5, 6, 7, 891_234)
    assert moto_fixes.fast_unix_time(moment) == unix_time(moment)
    assert moto_fixes.fast_unix_time_millis(moment) == unix_time_millis(moment)
    # and now, read between two readings of moto's own clock, falls between them
    before = unix_time_millis()
    now = moto_fixes.fast_unix_time_millis()
    assert before - 1 <= now <= unix_time_millis() + 1


MOTO_VISIBLE_MESSAGES = Queue.messages.fget  # moto's own: this process's moto is not patched
MOTO_DELETE_MESSAGE = Queue.delete_message


def _queue_received_twice() -> tuple[Any, list[str], list[str]]:
    """A queue holding two visible, one delayed and two in-flight messages, the in-flight ones each
    received twice (the first made visible again at once); their current and first handles."""
    backend = sqs_backends["123456789012"]["us-east-1"]
    queue = backend.create_queue(f"q-{uuid.uuid4().hex[:8]}")
    for body in ("a", "b"):
        backend.send_message(queue.name, body)
    first = [message.receipt_handle for message in backend.receive_message(queue.name, 2, 0, visibility_timeout=0)]
    current = [message.receipt_handle for message in backend.receive_message(queue.name, 2, 0, visibility_timeout=60)]
    for body in ("c", "d"):
        backend.send_message(queue.name, body)
    backend.send_message(queue.name, "later", delay_seconds=600)
    return queue, current, first


def test_a_queue_s_visible_messages_are_moto_s_own() -> None:
    queue, _, _ = _queue_received_twice()
    mine = moto_fixes.visible_messages(queue)
    assert [message.body for message in mine] == ["c", "d"]
    assert mine == MOTO_VISIBLE_MESSAGES(queue)


@pytest.mark.parametrize("delete", [MOTO_DELETE_MESSAGE, moto_fixes.delete_message_by_handle], ids=["moto", "fixed"])
def test_a_message_is_deleted_by_any_handle_it_had_as_moto_deletes_it(delete: Callable[[Any, str], None]) -> None:
    queue, current, first = _queue_received_twice()
    in_flight = {message.receipt_handle: message.body for message in queue._messages if message.receipt_handle}
    # a message deleted by its current handle, the other by the handle of its first receive
    delete(queue, current[0])
    delete(queue, first[1])
    assert sorted(message.body for message in queue._messages) == ["c", "d", "later"]
    assert not queue.pending_messages
    # a handle of a deleted message is let be, one no message had is refused
    for handle in (*current, *first):
        delete(queue, handle)
    with pytest.raises(ReceiptHandleIsInvalid):
        delete(queue, "no-message-had-this-handle")
    assert set(in_flight) | set(first) <= queue.deleted_messages
    assert sorted(message.body for message in queue._messages) == ["c", "d", "later"]


def _sqs(endpoint: str) -> Any:
    return boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")


def test_a_long_poll_returns_a_delayed_message_as_it_comes_due(fixed_moto: str) -> None:
    # given a long poll waiting on an empty queue (moto's own wakes only once a second, so it hands
    # over a message coming due just after one of those moments most of a second late)
    sqs = _sqs(fixed_moto)
    queue = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    with ThreadPoolExecutor(1) as pool:
        poll = pool.submit(sqs.receive_message, QueueUrl=queue, WaitTimeSeconds=5, MessageSystemAttributeNames=["All"])
        # The poll must be waiting before the send: the send's delay is what is timed.
        time.sleep(0.2)
        # when a message is sent with a 1 s delay
        sqs.send_message(QueueUrl=queue, MessageBody="due", DelaySeconds=1)
        (message,) = poll.result(timeout=10)["Messages"]
    # then the poll returns it as it comes due (SQS's long poll returns once a message is available),
    # not when its 5 s are out (4 s after it came due); within 2 s on a loaded machine
    attributes = message["Attributes"]
    due = int(attributes["SentTimestamp"]) / 1000 + 1
    received = int(attributes["ApproximateFirstReceiveTimestamp"]) / 1000
    assert due <= received < due + 2


def test_a_long_poll_on_an_empty_queue_waits_its_time_and_returns_a_message_sent_meanwhile(fixed_moto: str) -> None:
    sqs = _sqs(fixed_moto)
    queue = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    # given an empty queue, then a long poll waits its WaitTimeSeconds and returns nothing
    started = time.monotonic()
    assert "Messages" not in sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1)
    assert time.monotonic() - started >= 1.0
    # and a message sent while one waits is returned long before its WaitTimeSeconds
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        poll = pool.submit(sqs.receive_message, QueueUrl=queue, WaitTimeSeconds=20)
        sqs.send_message(QueueUrl=queue, MessageBody="now")
        assert [message["Body"] for message in poll.result(timeout=30)["Messages"]] == ["now"]
    assert time.monotonic() - started < 10


def test_a_response_class_s_methods_are_moto_s_own_list() -> None:
    # given moto's DynamoDB responses, then the cached names are the ones moto lists
    assert moto_fixes.method_names_of(DynamoHandler) == set(method_names_from_class(DynamoHandler))
    assert "get_item" in moto_fixes.method_names_of(DynamoHandler)


# An item {pk, n: 5, s: "abc", l: [1, 2]} and conditions on it, true, false and malformed (moto
# refuses some with ValidationException and answers others with a 500: as moto's own, here).
CONDITIONS = [
    "attribute_exists(pk)",
    "attribute_not_exists(pk)",
    "n = :five",
    "n <> :five AND s = :abc",
    "(n < :five OR begins_with(s, :ab)) AND NOT attribute_exists(missing)",
    "n BETWEEN :one AND :five",
    "n IN (:one, :five)",
    "size(l) > :one",
    "#n >= :five",
    "n = :five AND",
    "n == :five",
    "(n = :five",
]


# The item the conditions and updates below meet, and the values they may name.
ITEM = {"pk": {"S": "a"}, "n": {"N": "5"}, "s": {"S": "abc"}, "l": {"L": [{"N": "1"}, {"N": "2"}]}}
VALUES = {
    ":five": {"N": "5"},
    ":one": {"N": "1"},
    ":abc": {"S": "abc"},
    ":ab": {"S": "ab"},
    ":list": {"L": [{"S": "x"}]},
    ":tags": {"SS": ["a", "b"]},
}


def _conditional_writes(dynamodb: Any) -> list[str]:
    """Each condition's outcome, twice over: null (written), or the error's code and message."""
    table = _table(dynamodb)
    item, values = ITEM, VALUES
    dynamodb.put_item(TableName=table, Item=item)
    outcomes = []
    for condition in CONDITIONS * 2:
        used = {name: value for name, value in values.items() if name in condition}
        names = {"#n": "n"} if "#n" in condition else {}
        written = functools.partial(
            dynamodb.put_item,
            TableName=table,
            Item=item,
            ConditionExpression=condition,
            ExpressionAttributeValues=used,
            **({"ExpressionAttributeNames": names} if names else {}),
        )
        outcomes.append(_outcome(written))
    return outcomes


def _outcome(write: Callable[[], Any]) -> str:
    """What a write answered: the attributes its reply returned (as JSON; null for none), or the
    error's code and message."""
    try:
        return json.dumps(write().get("Attributes"), sort_keys=True)
    except ClientError as error:
        return f"{error.response['Error']['Code']}: {error.response['Error']['Message']}"


def test_conditions_lexed_once_hold_fail_and_are_refused_as_moto_s_own(plain_moto: str, fixed_moto: str) -> None:
    once = Config(retries={"total_max_attempts": 1})  # a 500 is moto's answer here, not to be retried
    plain, fixed = (
        boto3.client("dynamodb", endpoint_url=url, region_name="us-east-1", config=once)
        for url in (plain_moto, fixed_moto)
    )
    outcomes = _conditional_writes(fixed)
    assert outcomes == _conditional_writes(plain)
    codes = {outcome.split(":")[0] for outcome in outcomes}
    assert codes == {"null", "ConditionalCheckFailedException", "ValidationException", "500"}


def test_a_condition_s_text_is_lexed_once_and_its_tokens_are_moto_s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    lexed: list[str] = []

    def counting(self: Any) -> Any:
        lexed.append(self.condition_expression)
        return LEX_CONDITION(self)

    monkeypatch.setattr(moto_expressions, "_lexed", {})
    once = moto_expressions.lexing_each_text_once(counting)
    text = f"attribute_exists(pk) AND n{uuid.uuid4().hex[:6]} < :max"
    parsers = [ConditionExpressionParser(text, {}, {":max": {"N": "1"}}) for _ in range(3)]
    assert [list(once(parser)) for parser in parsers] == [list(LEX_CONDITION(parsers[0]))] * 3
    assert lexed == [text]


def test_a_condition_parsed_again_in_a_thread_with_the_very_same_names_and_values_is_not_parsed_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[str] = []

    def counting(self: Any) -> Any:
        parsed.append(self.condition_expression)
        return PARSE_CONDITION(self)

    monkeypatch.setattr(moto_expressions, "_last_condition", threading.local())
    once = moto_expressions.parsing_each_condition_once(counting)
    text = "attribute_exists(pk) AND #n < :max"
    names, values = {"#n": "n"}, {":max": {"N": "1"}}
    # given a condition parsed, as moto's handler parses it before its backend does
    first_parser = ConditionExpressionParser(text, names, values)
    first = once(first_parser)
    # when it is parsed again in the thread with the very same names and values, then its tree and
    # what it found are the first's
    again = ConditionExpressionParser(text, names, values)
    assert once(again) is first
    found = (first_parser.expr_attr_names_found, first_parser.expr_attr_values_found)
    assert (again.expr_attr_names_found, again.expr_attr_values_found) == found
    assert ":max" in found[1]
    assert parsed == [text]
    # and equal names and values of another request, or another thread, parse it anew
    once(ConditionExpressionParser(text, dict(names), {":max": {"N": "1"}}))
    with ThreadPoolExecutor(1) as other:
        other.submit(once, ConditionExpressionParser(text, names, values)).result()
    assert parsed == [text] * 3


def _writes_after_a_set_changed_in_place(endpoint_url: str) -> list[str]:
    """A write whose condition names a set it stores; another, from another client (another of
    moto's threads), that adds to the stored set (moto changes the stored list in place); then the
    first again, from the first client: each outcome."""
    guarding, adding = (boto3.client("dynamodb", endpoint_url=endpoint_url, region_name="us-east-1") for _ in "ab")
    table = _table(guarding)
    guarding.put_item(TableName=table, Item={"pk": {"S": "a"}, "s": {"SS": ["a", "b"]}})
    guarded = {
        "TableName": table,
        "Key": {"pk": {"S": "a"}},
        "UpdateExpression": "SET s = :ss",
        "ConditionExpression": "s = :ss",
        "ExpressionAttributeValues": {":ss": {"SS": ["a", "b"]}},
    }
    added = {**guarded, "UpdateExpression": "ADD s :x", "ExpressionAttributeValues": {":x": {"SS": ["x"]}}}
    del added["ConditionExpression"]
    outcomes = []
    for client, update in ((guarding, guarded), (adding, added), (guarding, guarded)):
        try:
            client.update_item(**update)
            outcomes.append("OK")
        except ClientError as error:
            outcomes.append(error.response["Error"]["Code"])
    return outcomes


def test_a_condition_is_parsed_anew_for_each_request_as_moto_parses_it(plain_moto: str, fixed_moto: str) -> None:
    outcomes = _writes_after_a_set_changed_in_place(fixed_moto)
    assert (
        outcomes == _writes_after_a_set_changed_in_place(plain_moto) == ["OK", "OK", "ConditionalCheckFailedException"]
    )


def test_a_refused_condition_is_refused_each_time_as_moto_refuses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(moto_expressions, "_last_condition", threading.local())
    once = moto_expressions.parsing_each_condition_once(PARSE_CONDITION)
    names: dict[str, str] = {}
    values = {":five": {"N": "5"}}
    with pytest.raises(Exception) as moto_s:
        PARSE_CONDITION(ConditionExpressionParser("n = :five AND", names, values))
    for _ in range(2):
        with pytest.raises(type(moto_s.value)) as refused:
            once(ConditionExpressionParser("n = :five AND", names, values))
        assert str(refused.value) == str(moto_s.value)


# Update expressions of each kind moto parses and validates, and some it refuses: each runs on an
# item that exists and on one that does not.
UPDATES = [
    "SET n = :five",
    "SET n = n + :one, s = :abc REMOVE missing",
    "SET c = if_not_exists(c, :one) + :one, #n = :five",
    "SET l = list_append(l, :list)",
    "SET l[0] = :five",
    "ADD n :one, tags :tags",
    "DELETE tags :tags",
    "REMOVE s, l[1]",
    "SET s = :abc, s = :ab",
    "SET n = missing + :one",
    "SET n = :unknown",
    "SET #unknown = :one",
    "SET",
    "SET n = :five REMOVE n",
]


def _updates(dynamodb: Any) -> list[str]:
    """Each update's outcome, twice over: the item it leaves, or the error's code and message."""
    table = _table(dynamodb)
    item, values = ITEM, VALUES
    outcomes = []
    for update in UPDATES * 2:
        for key in ("a", "new"):
            dynamodb.put_item(TableName=table, Item=item)
            dynamodb.delete_item(TableName=table, Key={"pk": {"S": "new"}})
            used = {name: value for name, value in values.items() if name in update}
            names = {name: name[1:] for name in ("#n", "#unknown") if name in update}
            updated = functools.partial(
                dynamodb.update_item,
                TableName=table,
                Key={"pk": {"S": key}},
                UpdateExpression=update,
                ReturnValues="ALL_NEW",
                **({"ExpressionAttributeValues": used} if used else {}),
                **({"ExpressionAttributeNames": names} if names else {}),
            )
            outcomes.append(_outcome(updated))
    return outcomes


def test_updates_parsed_once_apply_and_are_refused_as_moto_s_own(plain_moto: str, fixed_moto: str) -> None:
    once = Config(retries={"total_max_attempts": 1})
    plain, fixed = (
        boto3.client("dynamodb", endpoint_url=url, region_name="us-east-1", config=once)
        for url in (plain_moto, fixed_moto)
    )
    outcomes = _updates(fixed)
    assert outcomes == _updates(plain)
    assert sum(outcome.startswith("{") for outcome in outcomes) > len(outcomes) / 3
    assert {outcome.split(":")[0] for outcome in outcomes if not outcome.startswith("{")} == {"ValidationException"}


def test_an_update_s_text_is_parsed_once_into_one_tree_moto_s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []

    def counting(text: str) -> Any:
        parsed.append(text)
        return PARSE_UPDATE(text)

    monkeypatch.setattr(moto_expressions, "_parsed", {})
    monkeypatch.setattr(moto_expressions, "_pickled", {})
    once = moto_expressions.parsing_each_text_once(counting)
    text = f"SET n{uuid.uuid4().hex[:6]} = if_not_exists(c, :one) + :one REMOVE s"
    trees = [once(text) for _ in range(3)]
    assert parsed == [text]
    assert len({id(tree) for tree in trees}) == 1
    assert _shape(trees[0]) == _shape(PARSE_UPDATE(text))
    # and the validator's copy of it is a tree of its own, of the same shape
    copy_ = moto_expressions.copied(trees[0])
    assert copy_ is not trees[0] and _shape(copy_) == _shape(trees[0])
    assert not {id(node) for node in _nodes(copy_)} & {id(node) for node in _nodes(trees[0])}


def test_moto_s_update_leaves_the_one_tree_of_its_text_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    # given moto in this process with each text parsed into one tree, as the local stack's moto has it
    monkeypatch.setattr(moto_expressions, "_parsed", {})
    monkeypatch.setattr(moto_expressions, "_pickled", {})
    monkeypatch.setattr(
        UpdateExpressionParser, "make", staticmethod(moto_expressions.parsing_each_text_once(PARSE_UPDATE))
    )
    monkeypatch.setattr(dynamodb_validators, "deepcopy", moto_expressions.copied)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        # when every update is applied twice to an item that exists and to one that does not
        outcomes = _updates(dynamodb)
    # then some applied, and each text's one tree is as its parse left it
    assert sum(outcome.startswith("{") for outcome in outcomes) > len(outcomes) / 3
    kept = moto_expressions._pickled.values()
    assert len(kept) >= len([text for text in UPDATES if text != "SET"]) - 1
    for tree, pickled in kept:
        assert pickle.dumps(tree, pickle.HIGHEST_PROTOCOL) == pickled, _shape(tree)


@pytest.fixture
def moto_parsing_once(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto in this process with the local stack's update expression fixes, a client of it, and
    how many times each of the validator's text-only walks was made."""
    monkeypatch.setattr(moto_expressions, "_parsed", {})
    monkeypatch.setattr(moto_expressions, "_pickled", {})
    monkeypatch.setattr(moto_expressions, "_text_checked", set())
    monkeypatch.setattr(
        UpdateExpressionParser, "make", staticmethod(moto_expressions.parsing_each_text_once(PARSE_UPDATE))
    )
    monkeypatch.setattr(dynamodb_validators, "deepcopy", moto_expressions.copied)
    text_only = tuple(getattr(dynamodb_validators, name) for name in moto_fixes.TEXT_ONLY_WALKS)
    validator = dynamodb_validators.Validator
    monkeypatch.setattr(validator, "__init__", moto_expressions.keeping_the_source_tree(validator.__init__))
    monkeypatch.setattr(validator, "validate", moto_expressions.text_walks_once(text_only)(validator.validate))
    made: list[str] = []
    for walk in text_only:
        traverse = walk.traverse
        monkeypatch.setattr(
            walk, "traverse", lambda self, node, _t=traverse: made.append(type(self).__name__) or _t(self, node)
        )
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1"), made


def test_the_validators_text_only_walks_are_made_until_they_pass_once_with_the_names(moto_parsing_once: Any) -> None:
    dynamodb, made = moto_parsing_once
    table = _table(dynamodb)
    update = functools.partial(
        dynamodb.update_item,
        TableName=table,
        Key={"pk": {"S": "a"}},
        UpdateExpression="SET #a = :one, #b = :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    # given a text that passed once with its names
    update(ExpressionAttributeNames={"#a": "x", "#b": "y"})
    assert sorted(made) == ["ActionCountValidator", "OverlappingPathsValidator", "UpdateHashRangeKeyValidator"]
    # then with the same names its text-only walks are not made again, and the update applies
    made.clear()
    update(ExpressionAttributeNames={"#b": "z", "#a": "x"} | {"#b": "y"})
    assert made == []
    # but with other names they are: two names for one attribute are refused, each time, as moto's
    for _ in range(2):
        with pytest.raises(ClientError, match="Two document paths overlap") as refused:
            update(ExpressionAttributeNames={"#a": "x", "#b": "x"})
        assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert made.count("OverlappingPathsValidator") == 2
    assert dynamodb.get_item(TableName=table, Key={"pk": {"S": "a"}})["Item"] == {
        "pk": {"S": "a"},
        "x": {"N": "1"},
        "y": {"N": "1"},
    }


def test_the_validators_key_walk_is_made_again_for_a_table_with_another_key(moto_parsing_once: Any) -> None:
    dynamodb, made = moto_parsing_once
    hash_only, with_range = _table(dynamodb), _table(dynamodb, range_key=True)
    item = {"pk": {"S": "a"}, "sk": {"S": "b"}}
    for table in (hash_only, with_range):
        dynamodb.put_item(TableName=table, Item=item)

    def update(table: str) -> Any:
        return dynamodb.update_item(
            TableName=table,
            Key={name: item[name] for name in (("pk",) if table == hash_only else ("pk", "sk"))},
            UpdateExpression="SET #a = :one",
            ExpressionAttributeNames={"#a": "sk"},
            ExpressionAttributeValues={":one": {"S": "c"}},
        )

    # given a text and names that passed once on a table whose key is `pk` (`sk` a plain attribute)
    update(hash_only)
    made.clear()
    # then on a table whose key holds `sk` the walks are made again, and it is refused, each time
    for _ in range(2):
        with pytest.raises(ClientError, match="Cannot update attribute sk. This attribute is part of the key"):
            update(with_range)
    assert made.count("UpdateHashRangeKeyValidator") == 2
    assert _items(dynamodb, with_range) == {"ab": item}


def _shape(node: Any) -> str:
    """A tree's node types and leaves, depth first, with each node's parent checked."""
    children = getattr(node, "children", None)
    if children is None or not hasattr(node, "type"):
        return repr(node)
    for child in children:
        assert getattr(child, "parent", node) is node
    return f"{node.type}({', '.join(_shape(child) for child in children)})"


def test_a_tree_copied_by_pickle_is_a_deep_copy() -> None:
    tree = PARSE_UPDATE("SET a = :one, b = list_append(b, :l) REMOVE c")
    copy_ = moto_expressions.copied(tree)
    assert copy_ is not tree
    assert _shape(copy_) == _shape(tree)
    assert len(_nodes(tree)) > 10
    assert not {id(node) for node in _nodes(copy_)} & {id(node) for node in _nodes(tree)}


def _nodes(node: Any) -> list[Any]:
    """The tree's nodes (its leaves, strings, are shared by any copy)."""
    if not hasattr(node, "children"):
        return []
    return [node, *(found for child in node.children or [] for found in _nodes(child))]


def test_a_walk_s_node_types_are_moto_s_own_and_asked_once_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(moto_expressions, "_node_types", {})
    asked: list[type] = []

    def counting(self: Any) -> tuple[type, ...]:
        asked.append(type(self))
        return NODE_TYPES(self)

    node_types = moto_expressions.node_types_once(counting)
    # given the ten walks of moto's update validator (a table's and an item's parts are not read)
    validator = SimpleNamespace(
        expression_attribute_names={},
        expression_attribute_values={},
        item=None,
        table=SimpleNamespace(table_key_attrs=["pk"], attr=[], attribute_keys=["pk"]),
    )
    walks = UpdateExpressionValidator.get_ast_processors(validator)
    assert len({type(walk) for walk in walks}) == 10
    for walk in walks * 2:
        assert node_types(walk) == NODE_TYPES(walk)
    assert sorted(map(str, asked)) == sorted({str(type(walk)) for walk in walks})


ACTIONS = [
    UpdateExpressionSetAction,
    UpdateExpressionRemoveAction,
    UpdateExpressionAddAction,
    UpdateExpressionDeleteAction,
]


@pytest.mark.parametrize("update", [text for text in UPDATES if text != "SET"])
def test_clauses_are_found_as_moto_finds_them(update: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = PARSE_UPDATE(update)
    kinds = [
        [UpdateExpressionSetClause],
        [UpdateExpressionRemoveClause, UpdateExpressionAddClause],
        [ExpressionAttributeName],
        [ExpressionAttributeValue],
        ACTIONS,
    ]
    # given what moto's own search finds, then the local stack's finds the same nodes in order,
    # its recursion through the tree's nodes its own too
    expected = [[id(node) for node in FIND_CLAUSES(tree, clause_types)] for clause_types in kinds]
    monkeypatch.setattr(Node, "find_clauses", moto_expressions.find_clauses)
    assert [[id(node) for node in tree.find_clauses(clause_types)] for clause_types in kinds] == expected
    assert tree.find_clauses(ACTIONS)  # every update has an action


def test_every_fix_applies_to_this_moto_without_a_warning() -> None:
    # a moto that changed would be logged, and that fix left out (the replies' items among them)
    script = (
        "from wakeup_local.aws import moto_fixes; moto_fixes.apply();"
        "from moto.core.serialize import BaseJSONSerializer as s;"
        "print(s._serialize_type_map.__module__, s._serialize_type_structure.__module__)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert "moto changed" not in result.stderr, result.stderr
    assert result.stdout.split() == ["wakeup_local.aws.moto_attribute_values"] * 2


# --- event source mappings ---------------------------------------------------------------------------

MAPPING_UPDATE_S = 1.0


@pytest.fixture(scope="module")
def mapping_moto() -> Iterator[str]:
    """The local stack's moto, a mapping `Updating` for a second after each update."""
    process = MotoProcess(mapping_update_s=MAPPING_UPDATE_S)
    process.start()
    yield process.endpoint_url
    process.stop()


@pytest.fixture
def mapping(mapping_moto: str) -> tuple[Any, Any, str, str]:
    """(a Lambda client, an SQS client, a queue's URL, the UUID of the queue's mapping) on the local
    stack's moto, as the stack makes the caller's (wakeup_local.event_sources.mappings)."""
    options = {"endpoint_url": mapping_moto, "region_name": "us-east-1"}
    name = f"f-{uuid.uuid4().hex[:8]}"
    awslambda, sqs, iam = (boto3.client(service, **options) for service in ("lambda", "sqs", "iam"))
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    awslambda.create_function(
        FunctionName=name, Runtime="python3.13", Role=role, Handler="h.h", Code={"ZipFile": empty_package()}
    )
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    created = awslambda.create_event_source_mapping(EventSourceArn=arn, FunctionName=name, BatchSize=10)
    return awslambda, sqs, queue, created["UUID"]


def test_an_updated_mapping_is_updating_and_refuses_updates_until_its_change_applies(
    mapping: tuple[Any, Any, str, str],
) -> None:
    awslambda, _, _, mapping_uuid = mapping
    assert awslambda.get_event_source_mapping(UUID=mapping_uuid)["State"] == "Enabled"
    # when provisioned mode is turned on
    updated = awslambda.update_event_source_mapping(
        UUID=mapping_uuid, ProvisionedPollerConfig={"MinimumPollers": 5, "MaximumPollers": 50}
    )
    # then the mapping is Updating, and another update meanwhile is refused
    assert updated["State"] == "Updating"
    assert updated["ProvisionedPollerConfig"] == {"MinimumPollers": 5, "MaximumPollers": 50}
    with pytest.raises(ClientError) as refused:
        awslambda.update_event_source_mapping(UUID=mapping_uuid, ProvisionedPollerConfig={})
    assert refused.value.response["Error"]["Code"] == "ResourceInUseException"
    # and once the change has applied, the mapping is Enabled and takes updates again
    wait_until(
        lambda: awslambda.get_event_source_mapping(UUID=mapping_uuid)["State"] == "Enabled",
        timeout=MAPPING_UPDATE_S + 5,
        interval=0.05,
        message="the mapping Enabled again",
    )
    assert awslambda.update_event_source_mapping(UUID=mapping_uuid, BatchSize=5)["State"] == "Updating"


def test_an_empty_provisioned_poller_config_turns_provisioned_mode_off(mapping: tuple[Any, Any, str, str]) -> None:
    awslambda, _, _, mapping_uuid = mapping
    awslambda.update_event_source_mapping(UUID=mapping_uuid, ProvisionedPollerConfig={"MinimumPollers": 2})
    wait_until(
        lambda: awslambda.get_event_source_mapping(UUID=mapping_uuid)["State"] == "Enabled",
        timeout=MAPPING_UPDATE_S + 5,
        interval=0.05,
    )
    # when the planner's "off" is sent
    awslambda.update_event_source_mapping(UUID=mapping_uuid, ProvisionedPollerConfig={})
    # then the mapping shows no provisioned pollers
    assert "ProvisionedPollerConfig" not in awslambda.get_event_source_mapping(UUID=mapping_uuid)


@pytest.mark.parametrize(
    "config",
    [
        {"MinimumPollers": 1},
        {"MinimumPollers": 201},
        {"MaximumPollers": 2001},
        {"MinimumPollers": 9, "MaximumPollers": 8},
    ],
)
def test_provisioned_pollers_lambda_refuses_for_sqs_are_refused(
    mapping: tuple[Any, Any, str, str], config: dict[str, int]
) -> None:
    awslambda, _, _, mapping_uuid = mapping
    with pytest.raises(ClientError) as refused:
        awslambda.update_event_source_mapping(UUID=mapping_uuid, ProvisionedPollerConfig=config)
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValueException"
    # and the mapping is as it was, free to take a valid update
    described = awslambda.get_event_source_mapping(UUID=mapping_uuid)
    assert described["State"] == "Enabled" and "ProvisionedPollerConfig" not in described


def test_a_mapped_queues_messages_stay_for_the_stacks_own_poller(mapping: tuple[Any, Any, str, str]) -> None:
    # moto's own SQS would hand them to moto's Lambda (Docker) as they are sent
    _, sqs, queue, _ = mapping
    sqs.send_message(QueueUrl=queue, MessageBody="wake")
    assert [message["Body"] for message in sqs.receive_message(QueueUrl=queue).get("Messages", [])] == ["wake"]
