"""The instances function's real handler, given API Gateway events from `events/`, over moto.

What the handler does with an event: bodies (base64 too), headers whatever their case, the id in
the path, the query string, the `$default` route's 404 and 405, and failures underneath. The whole
contract, route by route, is tested over HTTP in `tests/e2e/test_api_contract.py`.
"""

import json
from typing import Any

import pytest
from api_reply import Reply
from botocore.stub import Stubber
from moto_env import Deployed, LambdaContext, imported_handler
from sample_events import (
    DELETE_INSTANCE,
    GET_INSTANCE,
    LIST_INSTANCES,
    REGISTER_INSTANCE,
    UNKNOWN_PATH,
    api_event,
    load_event,
)

from wakeup import factories
from wakeup.addresses import HTTPS_ONLY, REFUSED_URL
from wakeup.errors import WakeupError
from wakeup.logic.accounts import mint_account
from wakeup.tokens import TokenKind, hash_token, mint

instances_handler = imported_handler("instances")

UNKNOWN_ID = "0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10"
URL = "https://host.example.com/app"
INSTANCE_FIELDS = {"id", "url", "at", "calledAt", "attempts", "lastError"}


@pytest.fixture
def account(env: Deployed) -> str:
    return mint_account(env.store, "functional")[1]


@pytest.fixture
def other_account(env: Deployed) -> str:
    return mint_account(env.store, "another")[1]


def invoke(event: dict[str, Any]) -> Reply:
    result = instances_handler.lambda_handler(event, LambdaContext(function_name="instances"))
    assert not result.get("isBase64Encoded")
    return Reply.of(result)


def register(account: str, token: str | None = None, url: str = URL, **changes: Any) -> Reply:
    body = {"url": url, "token": token or mint(TokenKind.INSTANCE)}
    return invoke(api_event(REGISTER_INSTANCE, token=account, body=body, **changes))


def registered_id(account: str, url: str = URL) -> str:
    reply = register(account, url=url)
    assert reply.status == 201, reply.body
    return str(reply.body["id"])


# -- POST /wakeup/instances ---------------------------------------------------------------------


def test_the_sample_registers_a_new_instance_201(env: Deployed, account: str) -> None:
    # given the sample with a minted account token and instance token in place of its placeholders
    token = mint(TokenKind.INSTANCE)
    event = api_event(
        REGISTER_INSTANCE, token=account, body={"url": "HTTPS://Host.Example.COM:443/app/", "token": token}
    )
    # when
    reply = invoke(event)
    # then
    assert reply.status == 201
    assert reply.headers["Content-Type"] == "application/json"
    assert set(reply.body) == {"id"}
    instance = env.store.get_instance(reply.body["id"])
    assert instance is not None and instance.url == URL
    assert env.store.owner_of(hash_token(token)) is not None


def test_the_same_token_again_is_200_with_the_same_id(account: str) -> None:
    token = mint(TokenKind.INSTANCE)
    first = register(account, token)

    again = register(account, token)

    assert (first.status, again.status) == (201, 200)
    assert again.body == first.body


def test_a_token_another_account_registered_is_409(account: str, other_account: str) -> None:
    token = mint(TokenKind.INSTANCE)
    assert register(other_account, token).status == 201

    reply = register(account, token)

    assert reply.status == 409
    assert token not in reply.error


def test_a_base64_encoded_body_is_decoded(env: Deployed, account: str) -> None:
    reply = register(account, base64_body=True)

    assert reply.status == 201
    assert env.store.get_instance(reply.body["id"]) is not None


@pytest.mark.parametrize(
    "header",
    [
        pytest.param({"Authorization": "Bearer {token}"}, id="capitalised-name"),
        pytest.param({"AUTHORIZATION": "bearer {token}"}, id="upper-name-lower-scheme"),
    ],
)
def test_the_authorization_header_is_read_whatever_its_case(account: str, header: dict[str, str]) -> None:
    headers = {name: value.format(token=account) for name, value in header.items()}
    body = {"url": URL, "token": mint(TokenKind.INSTANCE)}

    reply = invoke(api_event(REGISTER_INSTANCE, token=None, body=body, headers=headers))

    assert reply.status == 201


@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param(None, id="none"),
        pytest.param("Basic dXNlcjpwYXNz", id="not-bearer"),
        pytest.param("Bearer swa_short", id="malformed"),
        pytest.param("Bearer " + mint(TokenKind.ACCOUNT), id="unknown"),
        pytest.param("Bearer " + mint(TokenKind.INSTANCE), id="instance-token"),
    ],
)
def test_without_a_live_account_token_it_is_401(env: Deployed, authorization: str | None) -> None:
    event = api_event(REGISTER_INSTANCE, token=None, body={"url": URL, "token": mint(TokenKind.INSTANCE)})
    if authorization is not None:
        event["headers"]["authorization"] = authorization

    reply = invoke(event)

    assert reply.status == 401
    assert "token" in reply.error


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("not json", id="not-json"),
        pytest.param("[]", id="a-list"),
        pytest.param(None, id="no-body"),
        pytest.param({"url": URL}, id="no-token"),
        pytest.param({"url": 7, "token": "swi_" + "a" * 43}, id="url-a-number"),
        pytest.param({"url": "ftp://host.test", "token": "swi_" + "a" * 43}, id="url-not-http"),
        pytest.param({"url": URL, "token": "swa_" + "a" * 43}, id="an-account-token"),
    ],
)
def test_a_body_that_breaks_the_contract_is_400(account: str, body: Any) -> None:
    reply = invoke(api_event(REGISTER_INSTANCE, token=account, body=body))

    assert reply.status == 400
    assert reply.error


def test_a_body_over_16_kib_is_413(account: str) -> None:
    body = {"url": URL, "token": mint(TokenKind.INSTANCE), "padding": "x" * 16 * 1024}

    reply = invoke(api_event(REGISTER_INSTANCE, token=account, body=body))

    assert (reply.status, reply.error) == (413, "the body is larger than 16 KiB")


# -- GET and DELETE /wakeup/instances/{id} ------------------------------------------------------


def test_the_instance_named_in_the_path_reads_back(account: str) -> None:
    instance_id = registered_id(account)

    reply = invoke(api_event(GET_INSTANCE, token=account, instance_id=instance_id))

    assert reply.status == 200
    assert reply.body == {"id": instance_id, "url": URL, "at": None, "calledAt": None, "attempts": 0, "lastError": None}


@pytest.mark.parametrize("instance_id", [UNKNOWN_ID, "not-an-id", UNKNOWN_ID.upper(), "%2e%2e"])
@pytest.mark.parametrize("sample", [GET_INSTANCE, DELETE_INSTANCE])
def test_an_unknown_or_malformed_id_in_the_path_is_404(account: str, sample: str, instance_id: str) -> None:
    reply = invoke(api_event(sample, token=account, instance_id=instance_id))

    assert reply.status == 404
    assert reply.error


@pytest.mark.parametrize("sample", [GET_INSTANCE, DELETE_INSTANCE])
def test_another_accounts_instance_is_403(env: Deployed, account: str, other_account: str, sample: str) -> None:
    theirs = registered_id(other_account)

    reply = invoke(api_event(sample, token=account, instance_id=theirs))

    assert reply.status == 403
    assert reply.error
    assert env.store.get_instance(theirs) is not None


def test_delete_is_204_without_a_body_and_frees_the_token(env: Deployed, account: str, other_account: str) -> None:
    token = mint(TokenKind.INSTANCE)
    instance_id = register(account, token).body["id"]

    reply = invoke(api_event(DELETE_INSTANCE, token=account, instance_id=instance_id))

    assert (reply.status, reply.body) == (204, None)
    assert env.store.get_instance(instance_id) is None
    assert register(other_account, token).status == 201


# -- GET /wakeup/instances ----------------------------------------------------------------------


def test_the_list_pages_by_the_limit_and_cursor_in_the_query(account: str, other_account: str) -> None:
    # given three instances of this account and one of another
    mine = {registered_id(account, f"https://host{n}.example.com") for n in range(3)}
    registered_id(other_account)
    # when the list is read two at a time
    first = invoke(api_event(LIST_INSTANCES, token=account, query={"limit": "2"}))
    second = invoke(api_event(LIST_INSTANCES, token=account, query={"limit": "2", "cursor": first.body["next"]}))
    # then
    assert (first.status, second.status) == (200, 200)
    assert len(first.body["instances"]) == 2 and first.body["next"]
    assert len(second.body["instances"]) == 1 and second.body["next"] is None
    listed = first.body["instances"] + second.body["instances"]
    assert all(set(instance) == INSTANCE_FIELDS for instance in listed)
    assert {instance["id"] for instance in listed} == mine


def test_the_sample_lists_without_a_cursor(account: str) -> None:
    instance_id = registered_id(account)

    reply = invoke(api_event(LIST_INSTANCES, token=account))

    assert reply.status == 200
    assert [i["id"] for i in reply.body["instances"]] == [instance_id]
    assert reply.body["next"] is None


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "101"}, {"limit": "ten"}, {"cursor": "not-a-cursor"}])
def test_a_query_out_of_range_is_400(account: str, query: dict[str, str]) -> None:
    reply = invoke(api_event(LIST_INSTANCES, token=account, query=query))

    assert reply.status == 400
    assert next(iter(query)) in reply.error


# -- $default -----------------------------------------------------------------------------------


def test_the_default_routes_sample_is_404_in_the_error_shape(env: Deployed) -> None:
    reply = invoke(load_event(UNKNOWN_PATH))

    assert reply.status == 404
    assert reply.error
    assert "Allow" not in reply.headers


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PATCH", "/wakeup/instances", "GET, POST"),
        ("PUT", f"/wakeup/instances/{UNKNOWN_ID}", "GET, DELETE"),
        ("POST", f"/wakeup/instances/{UNKNOWN_ID}", "GET, DELETE"),
        ("POST", "/wakeup/wake", "GET, PUT"),
        ("DELETE", "/wakeup/wake", "GET, PUT"),
    ],
)
def test_a_known_path_with_another_method_is_405_with_allow(
    env: Deployed, method: str, path: str, allowed: str
) -> None:
    reply = invoke(api_event(UNKNOWN_PATH, method=method, path=path))

    assert reply.status == 405
    assert reply.headers["Allow"] == allowed
    assert reply.error


@pytest.mark.parametrize("path", ["/", "/wakeup", "/wakeup/instances/a/b", "/wakeup/wakes"])
def test_an_unknown_path_is_404_whatever_the_method(env: Deployed, path: str) -> None:
    for method in ("GET", "POST", "DELETE"):
        reply = invoke(api_event(UNKNOWN_PATH, method=method, path=path))
        assert reply.status == 404, (method, path)
        assert reply.error


# -- failures underneath ------------------------------------------------------------------------


def test_an_unexpected_failure_is_500_with_a_fixed_sentence_and_no_trace(
    account: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    instance_id = registered_id(account)

    def broken(*args: object) -> None:
        raise RuntimeError("internal detail: /var/task/wakeup/instances.py line 42")

    monkeypatch.setattr(instances_handler.instances, "get", broken)

    reply = invoke(api_event(GET_INSTANCE, token=account, instance_id=instance_id))

    assert reply.status == 500
    assert reply.error == WakeupError.message
    assert "internal detail" not in json.dumps(reply.body) and "Traceback" not in json.dumps(reply.body)


@pytest.mark.parametrize(
    "code", ["ProvisionedThroughputExceededException", "ThrottlingException", "InternalServerError"]
)
def test_dynamodb_failing_underneath_is_503(account: str, code: str) -> None:
    # given DynamoDB answering the token's read with an error that botocore's retries did not mend
    store = factories.get_store()
    with Stubber(store.client) as dynamodb:
        dynamodb.add_client_error(
            "get_item", service_error_code=code, service_message="table details", http_status_code=500
        )
        # when
        reply = invoke(api_event(LIST_INSTANCES, token=account))
    # then
    assert reply.status == 503
    assert "retry" in reply.error
    assert code not in reply.error and "table" not in reply.error


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data",  # the instance metadata service
        "http://10.0.0.1",
        "https://192.168.1.10:8443/app",
        "http://100.64.0.1",
        "http://[fd00::1]:8080",
        "http://[::ffff:169.254.169.254]",
        "http://0.0.0.0",
        "http://198.18.0.1",  # benchmarking
        "http://192.0.0.9",
        "http://[2002:a9fe:a9fe::1]",  # 6to4 of 169.254.169.254
        "http://[64:ff9b::a00:1]",  # NAT64 of 10.0.0.1
        "http://[64:ff9b:1::a00:1]",
        "http://[::10.0.0.1]",  # IPv4-compatible
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]",  # Teredo
    ],
)
def test_a_url_whose_host_is_a_denied_address_is_refused(account: str, url: str) -> None:
    reply = register(account, url=url)

    assert reply.status == 400
    assert reply.error == REFUSED_URL


@pytest.mark.parametrize(
    ("settings", "url", "error"),
    [
        ({"WAKEUP_CALL_HTTPS_ONLY": "true"}, "http://host.example.com", HTTPS_ONLY),
        (
            {"WAKEUP_CALL_ALLOWED_PORTS": "443,8000-8999"},
            "https://host.example.com:9000/app",
            "url's port is not one this service calls: it calls ports 443, 8000-8999",
        ),
        (
            {"WAKEUP_CALL_ALLOWED_PORTS": "443"},
            "http://host.example.com",  # port 80, the scheme's default
            "url's port is not one this service calls: it calls ports 443",
        ),
    ],
)
def test_a_url_the_operator_s_call_settings_refuse_is_400(
    account: str, monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], url: str, error: str
) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    factories.reset()

    reply = register(account, url=url)

    assert (reply.status, reply.error) == (400, error)
    assert register(account, url="https://host.example.com:443/app").status == 201  # what they do allow


def test_a_url_whose_host_is_an_allowed_address_is_registered(account: str) -> None:
    # The functional tests' settings allow loopback back, as the local stack does.
    assert register(account, url="http://127.0.0.1:8080").status == 201
