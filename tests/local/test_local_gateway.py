"""The local API Gateway: HTTP API payload 2.0 events, route selection, responses, crashes."""

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests

from wakeup_local.gateway.gateway import Gateway, Route, response_from, select_route
from wakeup_local.lambda_.environment_pool import EnvironmentPool
from wakeup_local.lambda_.functions import FunctionSpec, LocalFunction
from wakeup_local.stack import LocalStack


def get_echo(stack: LocalStack, target: str, **kwargs: Any) -> dict[str, Any]:
    reply = requests.get(f"{stack.url}{target}", timeout=10, **kwargs)
    assert reply.status_code == 201, reply.text
    return reply.json()["event"]  # type: ignore[no-any-return]


def test_a_request_becomes_a_payload_2_event_with_path_parameters(module_stack: LocalStack) -> None:
    before = int(datetime.now(UTC).timestamp() * 1000)  # timeEpoch is whole milliseconds
    event = get_echo(module_stack, "/items/abc%20d", headers={"X-Custom-Header": "Value", "User-Agent": "tester/1"})
    assert event["version"] == "2.0"
    assert event["routeKey"] == "GET /items/{id}"
    assert event["rawPath"] == "/items/abc d"  # HTTP APIs decode the path
    assert event["pathParameters"] == {"id": "abc d"}
    assert event["headers"]["x-custom-header"] == "Value"
    assert all(name == name.lower() for name in event["headers"])
    assert event["isBase64Encoded"] is False
    assert "body" not in event and "queryStringParameters" not in event
    context = event["requestContext"]
    assert context["http"]["method"] == "GET"
    assert context["http"]["path"] == "/items/abc d"
    assert context["http"]["sourceIp"] == "127.0.0.1"
    assert context["http"]["userAgent"] == "tester/1"
    assert context["routeKey"] == "GET /items/{id}"
    assert context["stage"] == "$default"
    assert context["requestId"]
    assert before <= context["timeEpoch"] <= datetime.now(UTC).timestamp() * 1000


def test_the_query_string_comes_raw_and_parsed_with_repeated_values_joined(module_stack: LocalStack) -> None:
    event = get_echo(module_stack, "/items/x?limit=5&tag=a&tag=b&empty=&cursor=a%2Bb")
    assert event["rawQueryString"] == "limit=5&tag=a&tag=b&empty=&cursor=a%2Bb"
    assert event["queryStringParameters"] == {"limit": "5", "tag": "a,b", "empty": "", "cursor": "a+b"}


def test_cookies_move_from_the_headers_to_their_own_list(module_stack: LocalStack) -> None:
    event = get_echo(module_stack, "/items/x", headers={"Cookie": "a=1; b=2"})
    assert event["cookies"] == ["a=1", "b=2"]
    assert "cookie" not in event["headers"]


def test_a_body_is_passed_as_text_and_a_binary_body_base64_encoded(module_stack: LocalStack) -> None:
    text = requests.post(f"{module_stack.url}/items", json={"name": "é"}, timeout=10).json()["event"]
    assert json.loads(text["body"]) == {"name": "é"}
    assert text["isBase64Encoded"] is False
    binary = requests.post(f"{module_stack.url}/items", data=b"\xff\x00", timeout=10).json()["event"]
    assert base64.b64decode(binary["body"]) == b"\xff\x00"
    assert binary["isBase64Encoded"] is True


def test_the_handlers_status_headers_and_base64_body_make_the_response(module_stack: LocalStack) -> None:
    reply = requests.get(f"{module_stack.url}/items/x", timeout=10)
    assert (reply.status_code, reply.headers["x-test"]) == (201, "yes")
    files = requests.get(f"{module_stack.url}/files/a/b.bin", timeout=10)
    assert files.content == b"\x00\xffbinary"
    assert files.headers["content-type"] == "application/octet-stream"


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/nowhere"), ("DELETE", "/items/x"), ("PUT", "/items"), ("GET", "/items"), ("GET", "/items/x/y")],
)
def test_unknown_paths_and_known_paths_with_other_methods_go_to_the_default_route(
    module_stack: LocalStack, method: str, path: str
) -> None:
    reply = requests.request(method, f"{module_stack.url}{path}", timeout=10)
    assert reply.status_code == 404
    assert reply.json() == {"error": "not found", "routeKey": "$default", "method": method}


def test_a_crashing_handler_is_api_gateways_500_without_its_trace(module_stack: LocalStack) -> None:
    reply = requests.get(f"{module_stack.url}/crash", timeout=10)
    assert reply.status_code == 500
    assert reply.json() == {"message": "Internal Server Error"}
    assert "secret-internal-detail" not in reply.text and "Traceback" not in reply.text


def test_keep_alive_connections_serve_several_requests(module_stack: LocalStack) -> None:
    with requests.Session() as session:
        statuses = [session.get(f"{module_stack.url}/items/{n}", timeout=10).status_code for n in range(3)]
    assert statuses == [201, 201, 201]


# --- route selection and responses, without a stack -----------------------------------------------


def function(name: str) -> LocalFunction:
    arn = f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
    spec = FunctionSpec(name, name, arn, Path("."), "m.f", 128, 3.0, {}, {})
    return LocalFunction(spec, EnvironmentPool(lambda: None, 0, reserved=False, idle_s=60))  # never invoked


ROUTES = [
    Route("GET", "/pets/dog/1", function("exact")),
    Route("GET", "/pets/dog/{id}", function("variable")),
    Route("GET", "/pets/{proxy+}", function("greedy")),
    Route("ANY", "/pets/dog/{id}", function("any-method")),
    Route("ANY", "$default", function("default")),
]


@pytest.mark.parametrize(
    ("method", "path", "chosen", "parameters"),
    [
        ("GET", "/pets/dog/1", "exact", {}),
        ("GET", "/pets/dog/2", "variable", {"id": "2"}),
        ("POST", "/pets/dog/2", "any-method", {"id": "2"}),
        ("GET", "/pets/cat/2/toys", "greedy", {"proxy": "cat/2/toys"}),
        ("GET", "/pets", "default", {}),
        ("POST", "/pets/cat", "default", {}),
    ],
)
def test_the_most_specific_route_wins_and_the_default_takes_the_rest(
    method: str, path: str, chosen: str, parameters: dict[str, str]
) -> None:
    selected = select_route(ROUTES, method, path)
    assert selected is not None
    route, found = selected
    assert (route.function.name, found) == (chosen, parameters)


def test_without_a_default_route_an_unmatched_request_gets_api_gateways_own_404() -> None:
    gateway = Gateway([Route("GET", "/only", function("only"))])
    try:
        response = gateway.handle(method="GET", target="/other", headers=[], body=b"", source_ip="127.0.0.1")
    finally:
        gateway.stop()
    assert response.status == 404
    assert json.loads(response.body) == {"message": "Not Found"}


def test_a_result_without_status_code_is_a_200_with_the_result_as_json() -> None:
    response = response_from({"hello": "world"})
    assert (response.status, json.loads(response.body)) == (200, {"hello": "world"})
    assert ("content-type", "application/json") in response.headers


def test_cookies_of_the_result_become_set_cookie_headers() -> None:
    response = response_from({"statusCode": 204, "cookies": ["a=1", "b=2"]})
    assert (response.status, response.body) == (204, b"")
    assert [value for name, value in response.headers if name == "set-cookie"] == ["a=1", "b=2"]


@pytest.mark.parametrize("status", ["200", 99, 600, True, None])
def test_a_result_with_an_impossible_status_is_refused(status: Any) -> None:
    with pytest.raises(ValueError, match="not an HTTP status"):
        response_from({"statusCode": status})


def test_a_client_asking_to_close_is_told_the_connection_closes(module_stack: LocalStack) -> None:
    reply = requests.get(f"{module_stack.url}/items/x", headers={"Connection": "close"}, timeout=10)
    assert reply.headers.get("Connection") == "close"
