"""The local stack's front for moto (loopback_wsgi.py, moto_shortcut.py) answers as moto's own server.

Both fronts serve one moto in this process: moto's `ThreadedMotoServer` (werkzeug's server, a Flask
app per service) and the local stack's (its server, DynamoDB's and SQS's JSON requests straight to
their handlers). They share moto's state, so a request sent to each must get the same answer.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto.core.request import Request
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.scheduler import urls as scheduler_urls
from moto.scheduler.responses import EventBridgeSchedulerResponse
from werkzeug.test import EnvironBuilder

from wakeup_local.aws.loopback_wsgi import LoopbackWsgiServer
from wakeup_local.aws.moto_shortcut import HANDLERS, REST_HANDLERS, MotoShortcut, raw_url

REGION = "us-east-1"
# Request ids and times differ from one answer to the next, whoever serves them.
VOLATILE_HEADERS = {"date", "server", "x-amzn-requestid", "x-amz-crc32", "x-amz-id-2", "content-length", "connection"}
AUTHORIZATION = (
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"
)


@pytest.fixture(scope="module")
def front(plain_moto: str) -> Iterator[str]:
    server = LoopbackWsgiServer("127.0.0.1", 0, MotoShortcut(DomainDispatcherApplication(create_backend_app)))
    server.serve_in_thread("moto-front")
    yield f"http://127.0.0.1:{server.port}"
    server.shutdown()
    server.server_close()


Reply = tuple[int, dict[str, str], bytes]


def _host_and_port(url: str) -> tuple[str, int]:
    host, _, port = url.removeprefix("http://").partition(":")
    return host, int(port)


def _send(
    address: str, target: str, body: bytes, *, method: str = "POST", path: str = "/", service: str | None = None
) -> Reply:
    connection = http.client.HTTPConnection(*_host_and_port(address), timeout=30)
    service = service or ("dynamodb" if target.startswith("DynamoDB") else "sqs")
    headers = {"Authorization": AUTHORIZATION.format(service=service)}
    if target:  # a JSON protocol's; a REST one's is in its method and path
        headers |= {"X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.0"}
    else:
        headers["Content-Type"] = "application/json"
    try:
        connection.request(method, path, body=body, headers=headers)
        reply = connection.getresponse()
        return reply.status, {name.lower(): value for name, value in reply.getheaders()}, reply.read()
    finally:
        connection.close()


def _comparable(reply: Reply) -> tuple[int, dict[str, str], Any]:
    status, headers, body = reply
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = body
    if isinstance(parsed, dict):  # SQS's errors and some of DynamoDB's carry a request id
        parsed = {key: value for key, value in parsed.items() if key not in ("RequestId", "requestId")}
    return status, {name: value for name, value in headers.items() if name not in VOLATILE_HEADERS}, parsed


OPERATIONS = [
    *(f"DynamoDB_20120810.{name}" for name in ("GetItem", "PutItem", "UpdateItem", "Query", "DescribeTable", "NoSuch")),
    *(f"AmazonSQS.{name}" for name in ("GetQueueUrl", "SendMessage", "ReceiveMessage", "DeleteMessage", "NoSuch")),
]
JSON_BODIES = st.dictionaries(
    st.sampled_from(["TableName", "Key", "Item", "QueueUrl", "QueueName", "MessageBody", "Limit", "x"]),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=6,
    ),
    max_size=4,
).map(lambda body: json.dumps(body).encode())


def test_the_shortcut_covers_the_services_the_handlers_call() -> None:
    assert set(HANDLERS) == {"DynamoDB_20120810", "AmazonSQS"}
    assert set(REST_HANDLERS) == {"scheduler"}
    # the Scheduler's paths are those moto's app routes to its handler
    assert {route.__func__ for route in scheduler_urls.url_paths.values()} == {
        EventBridgeSchedulerResponse.dispatch.__func__
    }


def _schedule_calls(address: str, group: str) -> list[tuple[int, dict[str, str], Any]]:
    """The Scheduler requests a far wake makes and the stack's Scheduler reads, and some refused,
    each reply comparable (the group's name taken out)."""
    target = {"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f", "RoleArn": "arn:aws:iam::1:role/r"}
    schedule = {
        "GroupName": group,
        "ScheduleExpression": "at(2099-01-01T00:00:00)",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "Target": target,
        "ActionAfterCompletion": "DELETE",
    }
    calls = [
        ("POST", f"/schedule-groups/{group}", {}),
        ("POST", "/schedules/s", schedule),
        ("POST", "/schedules/s", schedule),  # refused: it exists (moto answers 400)
        ("GET", f"/schedules/s?groupName={group}", None),
        ("PUT", "/schedules/s", {**schedule, "ScheduleExpression": "at(2099-01-02T00:00:00)"}),
        ("GET", f"/schedules?GroupName={group}", None),
        ("GET", f"/schedules/missing?groupName={group}", None),  # 404
        ("DELETE", f"/schedules/s?groupName={group}", None),
        ("DELETE", f"/schedules/s?groupName={group}", None),  # 404: gone
        ("DELETE", f"/schedule-groups/{group}", None),
    ]
    replies = []
    for method, path, body in calls:
        encoded = b"" if body is None else json.dumps(body).encode()
        reply = _send(address, "", encoded, method=method, path=path, service="scheduler")
        status, headers, parsed = _comparable(reply)
        replies.append((status, headers, json.loads(json.dumps(_timeless(parsed)).replace(group, "GROUP"))))
    return replies


def _timeless(value: Any) -> Any:
    """A reply without its schedules' creation and modification times (each schedule's own)."""
    if isinstance(value, dict):
        return {
            key: _timeless(item) for key, item in value.items() if key not in ("CreationDate", "LastModificationDate")
        }
    if isinstance(value, list):
        return [_timeless(item) for item in value]
    return value


def test_the_schedulers_requests_get_the_answers_moto_s_own_server_gives(plain_moto: str, front: str) -> None:
    through_front = _schedule_calls(front, f"g-{uuid.uuid4().hex[:8]}")
    assert through_front == _schedule_calls(plain_moto, f"g-{uuid.uuid4().hex[:8]}")
    assert [status for status, _, _ in through_front] == [200, 200, 400, 200, 200, 200, 404, 200, 404, 200]


def test_the_schedulers_requests_go_past_moto_s_app() -> None:
    through_app: list[str] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        through_app.append(environ["PATH_INFO"])
        start_response("200 OK", [])
        return [b""]

    server = LoopbackWsgiServer("127.0.0.1", 0, MotoShortcut(app))
    server.serve_in_thread("front-alone")
    try:
        address = f"http://127.0.0.1:{server.port}"
        status, _, _ = _send(address, "", b"", method="GET", path="/schedule-groups/none", service="scheduler")
        assert status == 404  # moto's handler's answer
        _send(address, "", b"", method="GET", path="/other", service="scheduler")
        _send(address, "", b"", method="GET", path="/schedule-groups/none", service="events")
    finally:
        server.shutdown()
        server.server_close()
    # a path moto does not route to the Scheduler, and another service's request, went to the app
    assert through_app == ["/other", "/schedule-groups/none"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(OPERATIONS), body=JSON_BODIES | st.binary(max_size=40))
def test_any_json_request_gets_the_answer_moto_s_own_server_gives(
    plain_moto: str, front: str, target: str, body: bytes
) -> None:
    # given a request that names no table or queue that exists: neither answer changes moto's state
    # when it goes to each front, then
    assert _comparable(_send(front, target, body)) == _comparable(_send(plain_moto, target, body))


def test_a_table_s_items_read_through_either_front_are_the_same(plain_moto: str, front: str) -> None:
    dynamodb = boto3.client("dynamodb", endpoint_url=front, region_name=REGION)
    table = f"t-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    conditional = json.dumps(
        {"TableName": table, "Item": {"pk": {"S": "a"}}, "ConditionExpression": "attribute_not_exists(pk)"}
    ).encode()
    read = json.dumps({"TableName": table, "Key": {"pk": {"S": "a"}}}).encode()
    # when the same reads and a refused write go to each front, then
    for target, body in (("DynamoDB_20120810.GetItem", read), ("DynamoDB_20120810.PutItem", conditional)):
        assert _comparable(_send(front, target, body)) == _comparable(_send(plain_moto, target, body))
    status, _, refused = _send(front, "DynamoDB_20120810.PutItem", conditional)
    assert (status, json.loads(refused)["__type"]) == (
        400,
        "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
    )


def test_every_other_request_still_goes_through_moto_s_server(front: str) -> None:
    secrets = boto3.client("secretsmanager", endpoint_url=front, region_name=REGION)
    name = f"s-{uuid.uuid4().hex[:8]}"
    secrets.create_secret(Name=name, SecretString="x")
    assert secrets.get_secret_value(SecretId=name)["SecretString"] == "x"
    status, _, body = _send(front, "", b"", method="GET", path="/moto-api/data.json")
    assert status == 200 and "scheduler" in json.loads(body)


def test_many_clients_at_once_each_get_their_own_answers(front: str) -> None:
    sqs = boto3.client("sqs", endpoint_url=front, region_name=REGION)
    queues = [sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"] for _ in range(24)]

    def round_trip(queue: str) -> tuple[str, list[str]]:
        client = boto3.session.Session().client("sqs", endpoint_url=front, region_name=REGION)
        sent = [f"{queue}#{number}" for number in range(5)]
        for body in sent:
            client.send_message(QueueUrl=queue, MessageBody=body)
        received: list[str] = []
        while len(received) < len(sent):
            messages = client.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                "Messages", []
            )
            received += [message["Body"] for message in messages]
        return queue, sorted(received)

    with ThreadPoolExecutor(len(queues)) as pool:
        answers = list(pool.map(round_trip, queues))
    assert answers == [(queue, sorted(f"{queue}#{number}" for number in range(5))) for queue in queues]


def _raw(front: str, data: bytes) -> bytes:
    with socket.create_connection(_host_and_port(front), timeout=30) as connection:
        connection.sendall(data)
        connection.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


LIST_TABLES = (
    b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n"
    b"Authorization: " + AUTHORIZATION.format(service="dynamodb").encode() + b"\r\n"
)


def test_one_connection_carries_requests_one_after_another(front: str) -> None:
    # given two requests written at once on one connection, the second asking to close it
    body = b"{}"
    request = LIST_TABLES + b"Content-Length: 2\r\n\r\n" + body
    closing = LIST_TABLES + b"Content-Length: 2\r\nConnection: close\r\n\r\n" + body
    # when
    replies = _raw(front, request + closing)
    # then both are answered, in order, each with its length
    assert replies.count(b"HTTP/1.1 200 OK\r\n") == 2
    assert replies.count(b'"TableNames"') == 2
    assert b"Connection: close" in replies.split(b"HTTP/1.1 200 OK")[2]


def test_a_chunked_body_and_an_expected_continue_are_read_as_http_says(front: str) -> None:
    headers = b"Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
    chunked = LIST_TABLES + headers + b"1\r\n{\r\n1\r\n}\r\n0\r\n\r\n"
    reply = _raw(front, chunked)
    assert reply.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert b'"TableNames"' in reply


def test_a_request_it_cannot_read_is_refused_with_400_and_the_server_keeps_serving(front: str) -> None:
    assert _raw(front, b"NONSENSE\r\n\r\n").startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert _raw(front, LIST_TABLES + b"Content-Length: x\r\n\r\n").startswith(b"HTTP/1.1 400 Bad Request\r\n")
    status, _, _ = _send(front, "DynamoDB_20120810.ListTables", b"{}")
    assert status == 200


def test_a_client_gone_half_way_through_its_body_leaves_the_server_serving(front: str) -> None:
    _raw(front, LIST_TABLES + b"Content-Length: 100\r\n\r\n{")
    status, _, _ = _send(front, "DynamoDB_20120810.ListTables", b"{}")
    assert status == 200


def test_an_application_that_raises_answers_500_and_the_server_keeps_serving() -> None:
    calls = threading.Event()

    def broken(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        calls.set()
        raise RuntimeError("boom")

    server = LoopbackWsgiServer("127.0.0.1", 0, broken)
    server.serve_in_thread("broken")
    try:
        for _ in range(2):
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            connection.request("GET", "/")
            reply = connection.getresponse()
            assert (reply.status, reply.read()) == (500, b"Internal Server Error")
            connection.close()
        assert calls.is_set()
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("host", "raw_uri", "query", "script"),
    [
        ("127.0.0.1:4566", "/", "", ""),
        ("localhost:4566", "/", "", ""),
        ("127.0.0.1:80", "/", "", ""),  # HTTP's own port, which werkzeug leaves out
        ("localhost:80", "/", "", ""),
        ("LOCALHOST:4566", "/", "", ""),
        ("xn--bcher-kva.example:4566", "/", "", ""),
        ("[::1]:4566", "/", "", ""),
        ("127.0.0.1:4566", "/?Action=x", "Action=x", ""),
        ("127.0.0.1:4566", "/a%2Fb", "", ""),
        ("127.0.0.1:4566", "//", "", ""),
        ("127.0.0.1:4566", "/", "", "/root"),
        ("", "/", "", ""),
    ],
)
def test_a_request_s_url_is_the_one_moto_reads_from_werkzeug(host: str, raw_uri: str, query: str, script: str) -> None:
    environ = EnvironBuilder(path=raw_uri.partition("?")[0], query_string=query, method="POST").get_environ()
    environ.update(
        RAW_URI=raw_uri, REQUEST_URI=raw_uri, SCRIPT_NAME=script, SERVER_NAME="127.0.0.1", SERVER_PORT="4566"
    )
    if host:
        environ["HTTP_HOST"] = host
    else:
        environ.pop("HTTP_HOST", None)
    request = Request(environ)
    assert raw_url(request) == request.raw_url
