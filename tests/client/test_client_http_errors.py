"""The clients against servers that are not a well-behaved wakeup service, all on loopback: other
servers' pages, redirects, silence, a closed port, and the service's own error statuses. Also the
settings the clients refuse before sending anything."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from wakeup_client import ErrorCode, InstanceClient, WakeupClient, WakeupError, mint_instance_token

ACCOUNT_TOKEN = "swa_" + "a" * 43
INSTANCE_TOKEN = "swi_" + "b" * 43
INSTANCE_ID = "0b8e5f6c-2d7a-4f1e-9c3b-5a6d7e8f9a0b"
HTML = (200, {"Content-Type": "text/html"}, b"<!doctype html><title>Welcome to nginx!</title>")


def answering(status: int, body: object = None, content_type: str = "application/json") -> Any:
    """An answer function for ``loopback_server``: the same reply to every request."""
    data = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
    return lambda _request: (status, {"Content-Type": content_type} if data else {}, data)


def fails(call: Callable[[], object]) -> WakeupError:
    with pytest.raises(WakeupError) as raised:
        call()
    return raised.value


# --- a server that is not the wakeup service --------------------------------------------------------


def test_an_html_page_is_named_as_not_the_service(loopback_server: Any) -> None:
    server = loopback_server(lambda _request: HTML)
    client = WakeupClient(server.url, ACCOUNT_TOKEN)

    error = fails(lambda: client.get(INSTANCE_ID))

    assert (error.code, error.status, error.retryable) == (ErrorCode.NOT_WAKEUP, 200, False)
    assert "not a wakeup service" in error.message and "WAKEUP_URL" in error.message


@pytest.mark.parametrize(
    "body, content_type",
    [
        (b"<html><body>Not Found</body></html>", "text/html"),
        (b"", "text/plain"),
        (b'{"message": "Not Found"}', "application/json"),
    ],
)
def test_a_404_without_the_services_error_body_is_not_no_such_instance(
    loopback_server: Any, body: bytes, content_type: str
) -> None:
    server = loopback_server(answering(404, body, content_type))
    client = WakeupClient(server.url, ACCOUNT_TOKEN)

    get_error = fails(lambda: client.get(INSTANCE_ID))
    delete_error = fails(lambda: client.delete(INSTANCE_ID))

    for error in (get_error, delete_error):
        assert (error.code, error.status, error.retryable) == (ErrorCode.NOT_WAKEUP, 404, False)
        assert "WAKEUP_URL" in error.message


def test_the_services_own_404_is_no_such_instance(loopback_server: Any) -> None:
    server = loopback_server(answering(404, {"error": "no such instance"}))
    client = WakeupClient(server.url, ACCOUNT_TOKEN)

    assert client.get(INSTANCE_ID) is None
    assert client.delete(INSTANCE_ID) is False


@pytest.mark.parametrize(
    "body",
    [
        {"instance": {"id": INSTANCE_ID}},
        {"id": INSTANCE_ID, "url": "http://h", "at": "tomorrow", "calledAt": None, "attempts": 0, "lastError": None},
        {"id": INSTANCE_ID, "url": "http://h", "at": None, "calledAt": None, "attempts": "0", "lastError": None},
        {
            "id": INSTANCE_ID,
            "url": "http://h",
            "at": "2026-12-01T09:30:00",
            "calledAt": None,
            "attempts": 0,
            "lastError": None,
        },
        [1, 2, 3],
    ],
    ids=["other-object", "bad-time", "attempts-as-text", "time-without-zone", "array"],
)
def test_json_of_the_wrong_shape_is_named_as_not_the_service(loopback_server: Any, body: object) -> None:
    server = loopback_server(answering(200, body))
    client = WakeupClient(server.url, ACCOUNT_TOKEN)

    error = fails(lambda: client.get(INSTANCE_ID))

    assert (error.code, error.retryable) == (ErrorCode.NOT_WAKEUP, False)


def test_a_register_reply_of_the_wrong_shape_is_named_as_not_the_service(loopback_server: Any) -> None:
    server = loopback_server(answering(201, {"id": 42}))
    client = WakeupClient(server.url, ACCOUNT_TOKEN)

    error = fails(lambda: client.register("http://127.0.0.1:9/host", mint_instance_token()))

    assert (error.code, error.status) == (ErrorCode.NOT_WAKEUP, 201)


def test_a_list_page_of_the_wrong_shape_is_named_as_not_the_service(loopback_server: Any) -> None:
    server = loopback_server(answering(200, {"items": []}))
    client = WakeupClient(server.url, ACCOUNT_TOKEN)

    error = fails(lambda: list(client.list()))

    assert error.code == ErrorCode.NOT_WAKEUP


def test_a_wake_answered_with_a_page_instead_of_204_is_named_as_not_the_service(loopback_server: Any) -> None:
    server = loopback_server(lambda _request: HTML)
    host = InstanceClient(server.url, INSTANCE_TOKEN)

    error = fails(lambda: host.wake_in(60))

    assert (error.code, error.status) == (ErrorCode.NOT_WAKEUP, 200)


def test_a_gateway_error_page_is_retryable_and_says_it_is_not_the_services(loopback_server: Any) -> None:
    server = loopback_server(answering(502, b"<html>502 Bad Gateway</html>", "text/html"))
    client = WakeupClient(server.url, ACCOUNT_TOKEN)

    error = fails(lambda: client.get(INSTANCE_ID))

    assert (error.code, error.status, error.retryable) == (ErrorCode.SERVER_ERROR, 502, True)
    assert "not a wakeup service" in error.message


# --- API Gateway's own replies, before the service sees the request ------------------------------


@pytest.mark.parametrize(
    "status, message, code",
    [
        (429, "Too Many Requests", ErrorCode.THROTTLED),
        (500, "Internal Server Error", ErrorCode.SERVER_ERROR),
        (502, "Bad Gateway", ErrorCode.SERVER_ERROR),
        (503, "Service Unavailable", ErrorCode.SERVER_ERROR),
        (504, "Endpoint request timed out", ErrorCode.SERVER_ERROR),
    ],
)
def test_api_gateways_own_reply_is_retryable_and_named_as_the_gateways(
    loopback_server: Any, status: int, message: str, code: ErrorCode
) -> None:
    server = loopback_server(answering(status, {"message": message}))
    account, host = WakeupClient(server.url, ACCOUNT_TOKEN), InstanceClient(server.url, INSTANCE_TOKEN)

    for error in (fails(lambda: account.get(INSTANCE_ID)), fails(lambda: host.wake_in(60))):
        assert (error.code, error.status, error.retryable) == (code, status, True)
        assert f"API Gateway answered HTTP {status} ({message}) before the service could" in error.message
        assert "not a wakeup service" not in error.message


@pytest.mark.parametrize("body", [{"message": "Forbidden"}, {"message": "Not Found"}, {"message": "x", "other": 1}])
@pytest.mark.parametrize("status", [403, 404])
def test_a_gateway_shaped_4xx_is_not_the_service_and_not_retryable(
    loopback_server: Any, status: int, body: Any
) -> None:
    server = loopback_server(answering(status, body))

    error = fails(lambda: WakeupClient(server.url, ACCOUNT_TOKEN).get(INSTANCE_ID))

    assert (error.code, error.status, error.retryable) == (ErrorCode.NOT_WAKEUP, status, False)


def test_a_429_that_is_neither_the_services_nor_the_gateways_is_still_retryable(loopback_server: Any) -> None:
    server = loopback_server(answering(429, b"slow down", "text/plain"))

    error = fails(lambda: WakeupClient(server.url, ACCOUNT_TOKEN).get(INSTANCE_ID))

    assert (error.code, error.status, error.retryable) == (ErrorCode.THROTTLED, 429, True)
    assert "not a wakeup service" in error.message


# --- the service's own refusals --------------------------------------------------------------------


@pytest.mark.parametrize(
    "status, code, retryable",
    [
        (400, ErrorCode.BAD_REQUEST, False),
        (403, ErrorCode.FORBIDDEN, False),
        (408, ErrorCode.TIMEOUT, True),
        (413, ErrorCode.BAD_REQUEST, False),
        (429, ErrorCode.THROTTLED, True),
        (500, ErrorCode.SERVER_ERROR, True),
        (503, ErrorCode.SERVER_ERROR, True),
    ],
)
def test_the_services_error_statuses_say_whether_a_retry_can_help(
    loopback_server: Any, status: int, code: ErrorCode, retryable: bool
) -> None:
    server = loopback_server(answering(status, {"error": "the service's own sentence"}))
    client = WakeupClient(server.url, ACCOUNT_TOKEN)

    error = fails(lambda: client.get(INSTANCE_ID))

    assert (error.code, error.status, error.retryable) == (code, status, retryable)
    assert "the service's own sentence" in error.message


def test_a_refused_account_token_names_the_setting_to_check(loopback_server: Any) -> None:
    server = loopback_server(answering(401, {"error": "this account token is unknown or revoked"}))

    error = fails(lambda: WakeupClient(server.url, ACCOUNT_TOKEN).get(INSTANCE_ID))

    assert (error.code, error.status, error.retryable) == (ErrorCode.UNAUTHORIZED, 401, False)
    assert "WAKEUP_ACCOUNT_TOKEN" in error.message


def test_a_refused_instance_token_names_the_setting_to_check(loopback_server: Any) -> None:
    server = loopback_server(answering(401, {"error": "this instance token is unknown or revoked"}))

    error = fails(lambda: InstanceClient(server.url, INSTANCE_TOKEN).wake_in(60))

    assert (error.code, error.status) == (ErrorCode.UNAUTHORIZED, 401)
    assert "WAKEUP_TOKEN" in error.message


def test_a_conflict_on_register_explains_another_account_holds_the_token(loopback_server: Any) -> None:
    server = loopback_server(answering(409, {"error": "this instance token is registered by another account"}))

    error = fails(lambda: WakeupClient(server.url, ACCOUNT_TOKEN).register("http://127.0.0.1:9/h", INSTANCE_TOKEN))

    assert (error.code, error.status, error.retryable) == (ErrorCode.CONFLICT, 409, False)
    assert "mint_instance_token()" in error.message


# --- redirects, silence, a closed port ---------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_and_the_token_goes_nowhere_else(loopback_server: Any, status: int) -> None:
    elsewhere = loopback_server(answering(200, {"id": INSTANCE_ID}))
    redirecting = loopback_server(lambda request: (status, {"Location": elsewhere.url + request.path}, b""))
    client = WakeupClient(redirecting.url, ACCOUNT_TOKEN)

    error = fails(lambda: client.register("http://127.0.0.1:9/host", INSTANCE_TOKEN))

    assert (error.code, error.status, error.retryable) == (ErrorCode.REDIRECT, status, False)
    assert elsewhere.url in error.message and ACCOUNT_TOKEN not in error.message
    assert len(redirecting.received) == 1
    assert elsewhere.received == []


def test_a_server_that_never_answers_times_out_retryably(silent_server: str) -> None:
    client = WakeupClient(silent_server, ACCOUNT_TOKEN, timeout=0.3)
    started = time.monotonic()

    error = fails(lambda: client.get(INSTANCE_ID))

    assert (error.code, error.status, error.retryable) == (ErrorCode.TIMEOUT, None, True)
    assert "0.3 s" in error.message
    assert time.monotonic() - started < 5


def test_a_closed_port_is_a_retryable_connection_failure(closed_port_url: str) -> None:
    host = InstanceClient(closed_port_url, INSTANCE_TOKEN)

    error = fails(lambda: host.wake_at(datetime.now(UTC) + timedelta(minutes=5)))

    assert (error.code, error.status, error.retryable) == (ErrorCode.CONNECTION_FAILED, None, True)
    assert "connection refused" in error.message


# --- what the clients send, and what they refuse to send ----------------------------------------------


def test_requests_carry_the_token_and_ask_for_json(loopback_server: Any) -> None:
    server = loopback_server(answering(404, {"error": "no such instance"}))

    WakeupClient(server.url + "/", ACCOUNT_TOKEN).get("a b/c")

    (request,) = server.received
    assert (request.method, request.path) == ("GET", "/wakeup/instances/a%20b%2Fc")
    assert request.headers["Authorization"] == f"Bearer {ACCOUNT_TOKEN}"
    assert request.headers["Accept"] == "application/json"
    assert request.headers["User-Agent"].startswith("wakeup-client/")


def test_a_wake_is_sent_in_utc_to_the_millisecond(loopback_server: Any) -> None:
    server = loopback_server(answering(204))
    at = datetime(2030, 1, 2, 3, 4, 5, 6_000, tzinfo=UTC)

    registered = InstanceClient(server.url, INSTANCE_TOKEN).wake_at(at)

    (request,) = server.received
    assert (request.method, request.path) == ("PUT", "/wakeup/wake")
    assert request.headers["Authorization"] == f"Bearer {INSTANCE_TOKEN}"
    assert json.loads(request.body) == {"at": "2030-01-02T03:04:05.006Z"}
    assert registered == at


def test_the_settings_come_from_the_environment(loopback_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = loopback_server(answering(200, {"instances": [], "next": None}))
    monkeypatch.setenv("WAKEUP_URL", server.url)
    monkeypatch.setenv("WAKEUP_ACCOUNT_TOKEN", ACCOUNT_TOKEN)

    assert list(WakeupClient().list()) == []

    (request,) = server.received
    assert request.path == "/wakeup/instances?limit=100"
    assert request.headers["Authorization"] == f"Bearer {ACCOUNT_TOKEN}"


@pytest.mark.parametrize("missing", ["WAKEUP_URL", "WAKEUP_ACCOUNT_TOKEN"])
def test_a_missing_account_setting_is_named_before_any_request(
    loopback_server: Any, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    server = loopback_server(answering(200, {"instances": [], "next": None}))
    monkeypatch.setenv("WAKEUP_URL", server.url)
    monkeypatch.setenv("WAKEUP_ACCOUNT_TOKEN", ACCOUNT_TOKEN)
    monkeypatch.delenv(missing)

    error = fails(lambda: list(WakeupClient().list()))

    assert (error.code, error.retryable, error.status) == (ErrorCode.MISSING_SETTING, False, None)
    assert missing in error.message
    assert server.received == []


def test_a_missing_instance_token_is_named_before_any_request(
    loopback_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = loopback_server(answering(204))
    monkeypatch.delenv("WAKEUP_TOKEN", raising=False)

    error = fails(lambda: InstanceClient(server.url).wake_in(60))

    assert error.code == ErrorCode.MISSING_SETTING and "WAKEUP_TOKEN" in error.message
    assert server.received == []


@pytest.mark.parametrize(
    "make",
    [
        lambda url: WakeupClient(url, INSTANCE_TOKEN),
        lambda url: InstanceClient(url, ACCOUNT_TOKEN),
        lambda url: WakeupClient(url.replace("http://", ""), ACCOUNT_TOKEN),
        lambda url: WakeupClient(url + "/?x=1", ACCOUNT_TOKEN),
    ],
    ids=["instance-token-for-account", "account-token-for-instance", "url-without-scheme", "url-with-query"],
)
def test_a_setting_of_the_wrong_kind_is_refused_before_any_request(loopback_server: Any, make: Any) -> None:
    server = loopback_server(answering(204))

    error = fails(lambda: make(server.url))

    assert (error.code, error.retryable) == (ErrorCode.INVALID_SETTING, False)
    assert server.received == []
