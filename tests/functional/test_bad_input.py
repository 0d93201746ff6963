"""Issue 11's table of bad input at the handlers, given API Gateway events, over moto: one decoding
path for bodies, one URL parser, one reader of `at`, a strict `limit`, and ids that cannot be ids.
The same rows travel through the local stack's gateway in tests/e2e/test_api_bad_input.py."""

import base64
import gzip
import io
import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from api_reply import Reply
from moto_env import Deployed, LambdaContext, imported_handler
from sample_events import DELETE_INSTANCE, GET_INSTANCE, LIST_INSTANCES, PUT_WAKE, REGISTER_INSTANCE, api_event

from support.input_cases import URLS_REFUSED
from wakeup.logic.accounts import mint_account
from wakeup.model import Instance
from wakeup.observability import logger
from wakeup.times import format_time, now
from wakeup.tokens import TokenKind, hash_token, mint

instances_handler = imported_handler("instances")
wake_handler = imported_handler("wake")

URL = "https://host.example.com/app"
NOT_UTF8 = "the body must be JSON encoded in UTF-8"
TOO_DEEP = "the body is nested deeper than 8 levels, deeper than any valid request"
NOT_OBJECT = "the body must be a JSON object"


@pytest.fixture
def account(env: Deployed) -> str:
    return mint_account(env.store, "bad-input")[1]


@pytest.fixture
def instance_token(env: Deployed, account: str) -> str:
    token = mint(TokenKind.INSTANCE)
    owner = env.store.owner_of(hash_token(account))
    assert owner is not None
    env.store.register_instance(owner.account_id, URL, hash_token(token), now())
    return token


def stored_instance(env: Deployed, instance_token: str) -> Instance:
    owner = env.store.owner_of(hash_token(instance_token))
    assert owner is not None and owner.instance_id is not None
    stored = env.store.get_instance(owner.instance_id)
    assert stored is not None
    return stored


def instances(event: dict[str, Any]) -> Reply:
    return Reply.of(instances_handler.lambda_handler(event, LambdaContext(function_name="instances")))


def wake(event: dict[str, Any]) -> Reply:
    return Reply.of(wake_handler.lambda_handler(event, LambdaContext(function_name="wake")))


def register(account: str, body: Any) -> Reply:
    return instances(api_event(REGISTER_INSTANCE, token=account, body=body))


def registration(url: str = URL) -> dict[str, str]:
    return {"url": url, "token": mint(TokenKind.INSTANCE)}


# --- one decoding path for bodies ------------------------------------------------------------------

_NOT_UTF8 = {
    "ff-fe": b"\xff\xfe{}",
    "utf-16": json.dumps(registration()).encode("utf-16"),
    "gzip": gzip.compress(json.dumps(registration()).encode()),
}
_TOO_DEEP = {
    "arrays": "[" * 5000,
    "objects": '{"a": ' * 2000,
    "nine-levels": json.dumps({"url": [[[[[[[["x"]]]]]]]]}),
}
_NOT_JSON = {"nan": '{"at": NaN}', "infinity": '{"at": Infinity}', "minus-infinity": '{"at": -Infinity}'}


@pytest.mark.parametrize("body", _NOT_UTF8.values(), ids=_NOT_UTF8.keys())
def test_a_body_that_is_not_utf8_is_400_on_both_routes(account: str, instance_token: str, body: bytes) -> None:
    reply = register(account, body)
    assert (reply.status, reply.error) == (400, NOT_UTF8)
    reply = wake(api_event(PUT_WAKE, token=instance_token, body=body))
    assert (reply.status, reply.error) == (400, NOT_UTF8)


@pytest.mark.parametrize("body", _TOO_DEEP.values(), ids=_TOO_DEEP.keys())
def test_json_nested_deeper_than_any_valid_body_is_400_on_both_routes(
    account: str, instance_token: str, body: str
) -> None:
    reply = register(account, body)
    assert (reply.status, reply.error) == (400, TOO_DEEP)
    reply = wake(api_event(PUT_WAKE, token=instance_token, body=body))
    assert (reply.status, reply.error) == (400, TOO_DEEP)


def test_json_nested_as_deep_as_allowed_is_read(account: str) -> None:
    assert register(account, {**registration(), "extra": [[[[[[["x"]]]]]]]}).status == 201


@pytest.mark.parametrize("body", _NOT_JSON.values(), ids=_NOT_JSON.keys())
def test_nan_and_infinity_are_not_json(instance_token: str, body: str) -> None:
    reply = wake(api_event(PUT_WAKE, token=instance_token, body=body))

    constant = body.removeprefix('{"at": ').removesuffix("}")
    assert (reply.status, reply.error) == (400, f"the body is not valid JSON: {constant} is no JSON value")


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ('{"at": ', "line 1, column 8"),
        ('{"at" "2030-01-01T00:00:00Z"}', "line 1, column 7"),
        ('{"at": 1}\n{}', "line 2, column 1"),
    ],
    ids=["cut-short", "no-colon", "two-objects"],
)
def test_a_body_that_is_not_json_says_where_it_stops_being_json(instance_token: str, body: str, where: str) -> None:
    reply = wake(api_event(PUT_WAKE, token=instance_token, body=body))

    assert (reply.status, reply.error) == (400, f"the body is not valid JSON: its first error is at {where}")


def test_a_number_longer_than_python_reads_is_400(instance_token: str) -> None:
    reply = wake(api_event(PUT_WAKE, token=instance_token, body='{"at": ' + "1" * 5000 + "}"))

    assert (reply.status, reply.error) == (400, "the body holds a number of more than 4300 digits")


def test_a_lone_surrogate_is_400_not_a_retry(env: Deployed, account: str) -> None:
    body = json.dumps(registration("https://\ud800.example.com"))  # the escape \ud800, valid JSON text

    reply = register(account, body)

    assert (reply.status, reply.error) == (
        400,
        "the body holds a lone UTF-16 surrogate (such as \\ud800), which is no character",
    )


@pytest.mark.parametrize("text", ["not base64 !", "é"])
def test_a_base64_body_that_is_not_base64_is_400(account: str, text: str) -> None:
    event = api_event(REGISTER_INSTANCE, token=account, body=json.dumps(registration()))
    event["body"], event["isBase64Encoded"] = text, True

    reply = instances(event)

    assert (reply.status, reply.error) == (400, NOT_OBJECT)


# --- one URL parser ---------------------------------------------------------------------------------


# A lone surrogate never reaches the URL parser: the body's decoding refuses it (tested above).
_URLS_IN_JSON = {url: why for url, why in URLS_REFUSED.items() if "\ud800" not in url}


@pytest.mark.parametrize("url", _URLS_IN_JSON, ids=_URLS_IN_JSON.values())
def test_a_url_the_service_cannot_call_is_400(account: str, url: str) -> None:
    reply = register(account, json.dumps(registration(url)))

    assert reply.status == 400
    assert reply.error.startswith("url ")


def test_two_spellings_of_one_idn_host_are_one_instance_and_its_wake_stays(env: Deployed, account: str) -> None:
    # given an instance at the Unicode spelling of a host, with a wake
    token = mint(TokenKind.INSTANCE)
    first = register(account, {"url": "https://ÉXAMPLE.com/app", "token": token})
    assert first.status == 201
    at = format_time(now() + timedelta(days=1))
    assert wake(api_event(PUT_WAKE, token=token, body={"at": at})).status == 204
    # when it registers again at the ASCII spelling
    again = register(account, {"url": "https://xn--xample-9ua.com/app/", "token": token})
    # then it did not move: same instance, same wake
    assert (again.status, again.body) == (200, first.body)
    stored = env.store.get_instance(first.body["id"])
    assert stored is not None and stored.url == "https://xn--xample-9ua.com/app"
    assert stored.at is not None and format_time(stored.at) == at


@pytest.fixture
def logged() -> Iterator[io.StringIO]:
    """Every line the functions' Powertools Logger writes, at every level. It writes to the stream
    its handler bound at import, so capsys never sees it."""
    lines, handler, level = io.StringIO(), logger.registered_handler, logger.log_level
    assert isinstance(handler, logging.StreamHandler)
    before = handler.setStream(lines)
    logger.setLevel(logging.DEBUG)
    yield lines
    logger.setLevel(level)
    handler.setStream(before)


def test_a_password_in_a_url_that_fails_to_parse_is_never_logged(account: str, logged: io.StringIO) -> None:
    for url in ("http://user:s3cret-pa55@ex＃ample.com", "http://user:s3cret-pa55@[::1", "http://u:s3cret-pa55@h"):
        reply = register(account, registration(url))
        assert reply.status == 400 and "s3cret" not in reply.error

    assert "s3cret-pa55" not in logged.getvalue()
    # and the capture does read what the function logs
    assert register(account, registration()).status == 201
    assert '"message":"instance registered"' in logged.getvalue()


# --- the query and the path --------------------------------------------------------------------------


@pytest.mark.parametrize("limit", ["²", "9" * 5000, "١", "0", "101", " 1", "1 "])
def test_a_limit_that_is_not_1_to_100_in_ascii_digits_is_400(account: str, limit: str) -> None:
    reply = instances(api_event(LIST_INSTANCES, token=account, query={"limit": limit}))

    assert (reply.status, reply.error) == (400, "limit must be a whole number from 1 to 100")


def test_a_cursor_of_deeply_nested_json_is_400(account: str) -> None:
    cursor = base64.urlsafe_b64encode(b"[" * 5000).decode()

    reply = instances(api_event(LIST_INSTANCES, token=account, query={"cursor": cursor}))

    assert (reply.status, reply.error) == (
        400,
        "cursor is not one this service gave for this listing; start without it",
    )


@pytest.mark.parametrize("instance_id", ['"', "\\", "\x00", "€", 'a"b', "`"])
@pytest.mark.parametrize("sample", [GET_INSTANCE, DELETE_INSTANCE])
def test_a_path_id_that_cannot_be_an_id_is_404(account: str, sample: str, instance_id: str) -> None:
    reply = instances(api_event(sample, token=account, instance_id=instance_id))

    assert (reply.status, reply.error) == (404, "no such instance")


def test_a_known_path_with_another_method_is_still_405(account: str) -> None:
    reply = instances(api_event(GET_INSTANCE, token=account, instance_id="€", method="PUT"))

    assert (reply.status, reply.error) == (405, "this path accepts GET, DELETE only")


# --- one reader of at ----------------------------------------------------------------------------


@pytest.mark.parametrize("offset", ["+01:60", "+01:99"])
def test_an_offset_with_60_minutes_or_more_is_400_and_nothing_is_stored(
    env: Deployed, instance_token: str, offset: str
) -> None:
    reply = wake(api_event(PUT_WAKE, token=instance_token, body={"at": f"2099-12-01T09:30:00{offset}"}))

    assert (reply.status, reply.error) == (
        400,
        "at has a time zone offset out of range: ±hh:mm with hh up to 23 and mm up to 59",
    )
    assert stored_instance(env, instance_token).at is None


@pytest.mark.parametrize(
    ("at", "stored"),
    [
        ("2099-12-01T09:30:00.1234567890Z", "2099-12-01T09:30:00.123Z"),
        ("2099-12-31T23:59:60Z", "2100-01-01T00:00:00.000Z"),
    ],
)
def test_long_fractions_and_a_leap_second_are_204(env: Deployed, instance_token: str, at: str, stored: str) -> None:
    assert wake(api_event(PUT_WAKE, token=instance_token, body={"at": at})).status == 204

    instance = stored_instance(env, instance_token)
    assert instance.at is not None and format_time(instance.at) == stored


def test_year_1_with_an_offset_is_taken_as_now(env: Deployed, instance_token: str) -> None:
    before = now()

    reply = wake(api_event(PUT_WAKE, token=instance_token, body={"at": "0001-01-01T00:00:00+01:00"}))

    assert reply.status == 204
    stored = stored_instance(env, instance_token)
    assert stored.at is not None and before - timedelta(milliseconds=1) <= stored.at <= now()
