"""Issue 11's table of bad input, row by row, over HTTP against the local stack: each gets its 4xx
and the sentence that says what was wrong (a fuzz run had found each one answered 500, 503 or
405, or quietly accepted), or, for the times that are valid after all, 204."""

from __future__ import annotations

import base64
import gzip
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import requests

from wakeup.times import format_time, now, parse_stored
from wakeup.tokens import TokenKind, mint

NOT_UTF8 = "the body must be JSON encoded in UTF-8"
TOO_DEEP = "the body is nested deeper than 8 levels, deeper than any valid request"
SURROGATE = "the body holds a lone UTF-16 surrogate (such as \\ud800), which is no character"
BAD_LIMIT = "limit must be a whole number from 1 to 100"
BAD_CURSOR = "cursor is not one this service gave for this listing; start without it"
BAD_OFFSET = "at has a time zone offset out of range: ±hh:mm with hh up to 23 and mm up to 59"
IPV6 = "url has an IPv6 host that is not [address] or [address]:port, such as [2001:db8::1]"
HOST_NAME = (
    "url has a host name that is not valid: labels of 1 to 63 letters, digits or hyphens,"
    " none starting or ending with a hyphen, at most 253 characters in all"
)
IDN = "url has a host name that is not a valid internationalised domain name"
INVISIBLE = "url must not contain spaces, control characters or invisible characters"
PORT = "url has a port that is not a number from 1 to 65535"


@dataclass
class Caller:
    """An account with one registered instance, over one HTTP session."""

    url: str
    session: requests.Session
    account_token: str
    instance_id: str
    instance_token: str

    def send(self, method: str, path: str, body: bytes | None = None, *, instance: bool = False) -> requests.Response:
        token = self.instance_token if instance else self.account_token
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        return self.session.request(method, self.url + path, data=body, headers=headers, timeout=10)

    def register(self, url: str, token: str | None = None) -> requests.Response:
        body = json.dumps({"url": url, "token": token or mint(TokenKind.INSTANCE)}).encode()
        return self.send("POST", "/wakeup/instances", body)

    def wake(self, at: str) -> requests.Response:
        return self.send("PUT", "/wakeup/wake", json.dumps({"at": at}).encode(), instance=True)


@pytest.fixture(scope="module")
def caller(stack: Any) -> Iterator[Caller]:
    """One account and instance for the module's tests (each test's requests change nothing the
    others read, but the wake that the time tests register and read back, one test at a time)."""
    session = requests.Session()
    account_token = stack.mint_account(f"bad-input-{uuid.uuid4().hex[:8]}")
    instance_token = mint(TokenKind.INSTANCE)
    made = Caller(stack.url, session, account_token, "", instance_token)
    reply = made.register("http://127.0.0.1:9/bad-input", instance_token)
    assert reply.status_code == 201, reply.text
    made.instance_id = reply.json()["id"]
    yield made
    session.close()


def refused(reply: requests.Response, status: int, error: str) -> None:
    assert (reply.status_code, reply.json()) == (status, {"error": error}), reply.text


def registration(**fields: Any) -> bytes:
    return json.dumps({"url": "http://127.0.0.1:9/x", "token": mint(TokenKind.INSTANCE), **fields}).encode()


# --- bodies ---------------------------------------------------------------------------------------

_BODIES_NOT_UTF8 = {
    "bytes-ff-fe": b"\xff\xfe{}",
    "utf-16": '{"url": "http://127.0.0.1:9/x"}'.encode("utf-16"),
    "gzip": gzip.compress(b'{"url": "http://127.0.0.1:9/x"}'),
}


@pytest.mark.parametrize("body", _BODIES_NOT_UTF8.values(), ids=_BODIES_NOT_UTF8.keys())
@pytest.mark.parametrize("route", ["POST /wakeup/instances", "PUT /wakeup/wake"])
def test_a_body_that_is_not_utf8_is_400(caller: Caller, route: str, body: bytes) -> None:
    method, path = route.split()

    refused(caller.send(method, path, body, instance=method == "PUT"), 400, NOT_UTF8)


@pytest.mark.parametrize("body", [b"[" * 5000, b'{"a": ' * 2000, json.dumps({"url": [[[[[[[[["x"]]]]]]]]]}).encode()])
@pytest.mark.parametrize("route", ["POST /wakeup/instances", "PUT /wakeup/wake"])
def test_json_nested_deeper_than_any_valid_body_is_400(caller: Caller, route: str, body: bytes) -> None:
    method, path = route.split()

    refused(caller.send(method, path, body, instance=method == "PUT"), 400, TOO_DEEP)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(caller: Caller, constant: str) -> None:
    body = f'{{"url": "http://127.0.0.1:9/x", "token": "{mint(TokenKind.INSTANCE)}", "n": {constant}}}'.encode()

    not_json = f"the body is not valid JSON: {constant} is no JSON value"
    refused(caller.send("POST", "/wakeup/instances", body), 400, not_json)
    refused(caller.send("PUT", "/wakeup/wake", f'{{"at": {constant}}}'.encode(), instance=True), 400, not_json)


def test_a_lone_surrogate_in_the_url_is_400_not_a_retry(caller: Caller) -> None:
    body = registration(url="http://\ud800.example.com")  # json.dumps writes the escape \ud800

    refused(caller.send("POST", "/wakeup/instances", body), 400, SURROGATE)


# --- the query and the path -------------------------------------------------------------------------


@pytest.mark.parametrize("limit", ["%C2%B2", "9" * 5000, "0", "101", "-1", "1.0", "", "%EF%BC%91"])
def test_a_limit_that_is_not_1_to_100_in_ascii_digits_is_400(caller: Caller, limit: str) -> None:
    refused(caller.send("GET", f"/wakeup/instances?limit={limit}"), 400, BAD_LIMIT)


def test_a_cursor_of_deeply_nested_json_is_400(caller: Caller) -> None:
    cursor = base64.urlsafe_b64encode(b"[" * 5000).decode().rstrip("=")

    refused(caller.send("GET", f"/wakeup/instances?cursor={cursor}"), 400, BAD_CURSOR)


@pytest.mark.parametrize("instance_id", ["%22", "%5C", "%00", "%E2%82%AC", "a%22b", "%60"])
@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_a_path_id_that_cannot_be_an_id_is_404(caller: Caller, method: str, instance_id: str) -> None:
    refused(caller.send(method, f"/wakeup/instances/{instance_id}"), 404, "no such instance")


# --- at -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", ["+01:60", "+01:99", "-00:75"])
def test_an_offset_of_60_minutes_or_more_is_400(caller: Caller, offset: str) -> None:
    refused(caller.wake(f"2099-12-01T09:30:00{offset}"), 400, BAD_OFFSET)


def shown_at(caller: Caller) -> str:
    reply = caller.send("GET", f"/wakeup/instances/{caller.instance_id}")
    assert reply.status_code == 200, reply.text
    return str(reply.json()["at"])


@pytest.mark.parametrize(
    ("at", "stored"),
    [
        ("2099-12-01T09:30:00.1234567890Z", "2099-12-01T09:30:00.123Z"),
        ("2099-12-31T23:59:60Z", "2100-01-01T00:00:00.000Z"),
        ("2099-12-01T10:30:59.99999+01:00", "2099-12-01T09:30:59.999Z"),
    ],
)
def test_fractions_of_any_length_and_a_leap_second_are_accepted(caller: Caller, at: str, stored: str) -> None:
    assert caller.wake(at).status_code == 204

    assert shown_at(caller) == stored


def test_a_past_instant_in_the_year_1_with_an_offset_is_taken_as_now(caller: Caller) -> None:
    before = now()

    assert caller.wake("0001-01-01T00:00:00+01:00").status_code == 204

    assert before - timedelta(milliseconds=1) <= parse_stored(shown_at(caller)) <= now()


# --- urls -------------------------------------------------------------------------------------------

_URLS_REFUSED = {
    "http://[::1": IPV6,
    "http://[]": IPV6,
    "http://[zz]": IPV6,
    "http://[::1]x": IPV6,
    "http://[v1.fe]/x": IPV6,
    "http://ex＃ample.com": IDN,
    "http://ex：ample.com": IDN,
    "http://a／b.com": IDN,
    "http://a＠b.com": IDN,
    "http://example.com:0": PORT,
    "http://a\x7f.com": INVISIBLE,
    "http://ex\u00adample.com": INVISIBLE,
    "http://ex\u200bample.com": INVISIBLE,
    "http://" + "a" * 64 + ".com": HOST_NAME,
    "http://-a.com": HOST_NAME,
}


@pytest.mark.parametrize(("url", "error"), _URLS_REFUSED.items(), ids=[repr(url)[:40] for url in _URLS_REFUSED])
def test_a_url_the_service_cannot_call_is_400_with_the_reason(caller: Caller, url: str, error: str) -> None:
    refused(caller.register(url), 400, error)


def test_two_spellings_of_one_idn_host_are_one_url_and_no_move(caller: Caller) -> None:
    # given an instance registered at the Unicode spelling of a host, with a wake
    token = mint(TokenKind.INSTANCE)
    first = caller.register("http://ÉXAMPLE.com:9/app", token)
    assert first.status_code == 201, first.text
    instance_id = first.json()["id"]
    at = format_time(now() + timedelta(days=30))
    body = json.dumps({"at": at}).encode()
    assert caller.session.put(
        f"{caller.url}/wakeup/wake", data=body, headers={"Authorization": f"Bearer {token}"}, timeout=10
    ).ok
    # when it registers again at the ASCII spelling
    again = caller.register("http://xn--xample-9ua.com:9/app", token)
    # then it is the same URL: no move, and the wake stands
    assert (again.status_code, again.json()) == (200, {"id": instance_id})
    shown = caller.send("GET", f"/wakeup/instances/{instance_id}").json()
    assert (shown["url"], shown["at"]) == ("http://xn--xample-9ua.com:9/app", at)


def test_a_password_in_a_url_that_fails_to_parse_is_never_logged(stack: Any, caller: Caller) -> None:
    for url in ("http://user:s3cret-pa55@ex＃ample.com", "http://user:s3cret-pa55@[::1"):
        assert caller.register(url).status_code == 400
    # a request after them, so that the log is written past them
    assert caller.send("GET", f"/wakeup/instances/{caller.instance_id}").status_code == 200

    assert "s3cret-pa55" not in stack.log_text()
