"""The clients against the service's contract (DESIGN section 2), run twice with the same
assertions: against ``FakeWakeupService`` and against the local stack, so the fake cannot drift
from the service. Every host URL is on loopback and every wake far ahead: nothing is called."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import requests

from support.input_cases import TIMES_REFUSED, URLS_REFUSED, URLS_STORED
from wakeup_client import ErrorCode, Registration, WakeupError, mint_instance_token

# Far enough ahead that no test's wake is ever due while the suite runs.
LATER = datetime.now(UTC).replace(microsecond=0) + timedelta(days=30)


def raw(service: Any, method: str, path: str, token: str, **kwargs: Any) -> requests.Response:
    """One request as a client of another language would send it (for rules the clients never break)."""
    session: requests.Session = service.session
    headers = {"Authorization": f"Bearer {token}"}
    return session.request(method, service.url + path, headers=headers, timeout=10, allow_redirects=False, **kwargs)


def test_registering_a_new_token_creates_an_instance(service: Any, host_url: Callable[[], str]) -> None:
    registration = service.account().register(host_url(), mint_instance_token())

    assert registration.created is True
    assert registration.id


def test_registering_the_same_token_again_returns_the_same_instance(service: Any, host_url: Callable[[], str]) -> None:
    account, token, url = service.account(), mint_instance_token(), host_url()
    first = account.register(url, token)

    again = account.register(url, token)

    assert again.id == first.id
    assert again.created is False


def test_a_new_instance_has_no_wake(service: Any, host_url: Callable[[], str]) -> None:
    account, url = service.account(), host_url()
    registration = account.register(url, mint_instance_token())

    instance = account.get(registration.id)

    assert instance is not None
    assert (instance.id, instance.url) == (registration.id, url)
    assert (instance.at, instance.called_at, instance.attempts, instance.last_error) == (None, None, 0, None)


def test_the_url_is_stored_normalised(service: Any) -> None:
    account = service.account()
    registration = account.register("HTTP://127.0.0.1:80/Path/", mint_instance_token())

    instance = account.get(registration.id)

    assert instance is not None and instance.url == "http://127.0.0.1/Path"


@pytest.mark.parametrize(
    "url",
    [
        "ftp://127.0.0.1/host",
        "http://user:secret@127.0.0.1/host",
        "http://127.0.0.1/host?x=1",
        "http://127.0.0.1/host#part",
        "http:///no-host",
        "not a url",
    ],
)
def test_a_url_the_service_cannot_call_is_refused(service: Any, url: str) -> None:
    with pytest.raises(WakeupError) as refused:
        service.account().register(url, mint_instance_token())

    assert (refused.value.status, refused.value.code, refused.value.retryable) == (400, ErrorCode.BAD_REQUEST, False)


@pytest.mark.parametrize("token", ["swi_short", "swa_" + "a" * 43, "swi_" + "a" * 129, "swi_" + "+" * 43])
def test_a_malformed_instance_token_is_refused(service: Any, host_url: Callable[[], str], token: str) -> None:
    with pytest.raises(WakeupError) as refused:
        service.account().register(host_url(), token)

    assert (refused.value.status, refused.value.code) == (400, ErrorCode.BAD_REQUEST)


def test_a_token_registered_by_another_account_is_a_conflict(service: Any, host_url: Callable[[], str]) -> None:
    token = mint_instance_token()
    service.account().register(host_url(), token)

    with pytest.raises(WakeupError) as conflict:
        service.account().register(host_url(), token)

    assert (conflict.value.status, conflict.value.code, conflict.value.retryable) == (409, ErrorCode.CONFLICT, False)
    assert "another account" in conflict.value.message


def test_another_accounts_instance_is_forbidden(service: Any, host_url: Callable[[], str]) -> None:
    registration = service.account().register(host_url(), mint_instance_token())
    stranger = service.account()

    with pytest.raises(WakeupError) as reading:
        stranger.get(registration.id)
    with pytest.raises(WakeupError) as deleting:
        stranger.delete(registration.id)

    assert (reading.value.status, reading.value.code) == (403, ErrorCode.FORBIDDEN)
    assert (deleting.value.status, deleting.value.code) == (403, ErrorCode.FORBIDDEN)


@pytest.mark.parametrize("instance_id", ["0b8e5f6c-2d7a-4f1e-9c3b-5a6d7e8f9a0b", "not-a-uuid", "a b"])
def test_an_unknown_or_malformed_id_is_none(service: Any, instance_id: str) -> None:
    assert service.account().get(instance_id) is None


def test_deleting_removes_the_instance_and_a_second_delete_is_fine(service: Any, host_url: Callable[[], str]) -> None:
    account = service.account()
    registration = account.register(host_url(), mint_instance_token())

    assert account.delete(registration.id) is True
    assert account.get(registration.id) is None
    assert account.delete(registration.id) is False


def test_a_deleted_instances_token_is_free_again(service: Any, host_url: Callable[[], str]) -> None:
    account, token = service.account(), mint_instance_token()
    old = account.register(host_url(), token)
    account.delete(old.id)

    new = account.register(host_url(), token)

    assert new.created is True
    assert new.id != old.id


def test_a_deleted_instances_token_cannot_ask_for_a_wake(service: Any, host_url: Callable[[], str]) -> None:
    account, token = service.account(), mint_instance_token()
    account.delete(account.register(host_url(), token).id)

    with pytest.raises(WakeupError) as refused:
        service.host(token).wake_at(LATER)

    assert (refused.value.status, refused.value.code, refused.value.retryable) == (401, ErrorCode.UNAUTHORIZED, False)
    assert "WAKEUP_TOKEN" in refused.value.message


def test_a_host_reads_back_its_own_wake(service: Any, host_url: Callable[[], str]) -> None:
    account, token = service.account(), mint_instance_token()
    account.register(host_url(), token)
    host = service.host(token)
    before = host.current_wake()

    host.wake_at(LATER)

    assert (before.at, before.called_at, before.attempts, before.last_error) == (None, None, 0, None)
    after = host.current_wake()
    assert (after.at, after.called_at, after.attempts, after.last_error) == (LATER, None, 0, None)


def test_a_hosts_wake_shows_nothing_of_the_account(service: Any, host_url: Callable[[], str]) -> None:
    account, token = service.account(), mint_instance_token()
    account.register(host_url(), token)
    service.host(token).wake_at(LATER)

    reply = raw(service, "GET", "/wakeup/wake", token)

    assert reply.status_code == 200
    assert reply.json() == {
        "at": LATER.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "calledAt": None,
        "attempts": 0,
        "lastError": None,
    }


def test_a_deleted_instances_token_cannot_read_a_wake(service: Any, host_url: Callable[[], str]) -> None:
    account, token = service.account(), mint_instance_token()
    account.delete(account.register(host_url(), token).id)

    with pytest.raises(WakeupError) as refused:
        service.host(token).current_wake()

    assert (refused.value.status, refused.value.code) == (401, ErrorCode.UNAUTHORIZED)


def test_an_account_token_cannot_read_a_wake(service: Any) -> None:
    reply = raw(service, "GET", "/wakeup/wake", service.mint_account())

    assert reply.status_code == 401
    assert set(reply.json()) == {"error"}


def test_an_unknown_account_token_is_unauthorized(service: Any, host_url: Callable[[], str]) -> None:
    stranger = service.account("swa_" + "x" * 43)

    with pytest.raises(WakeupError) as refused:
        stranger.register(host_url(), mint_instance_token())

    assert (refused.value.status, refused.value.code, refused.value.retryable) == (401, ErrorCode.UNAUTHORIZED, False)
    assert "WAKEUP_ACCOUNT_TOKEN" in refused.value.message


def test_a_wake_is_kept_in_utc_rounded_up_to_the_millisecond(service: Any, host_url: Callable[[], str]) -> None:
    account, token = service.account(), mint_instance_token()
    registration = account.register(host_url(), token)
    at = (LATER + timedelta(microseconds=250_001)).astimezone(timezone(timedelta(hours=2)))

    registered = service.host(token).wake_at(at)

    instance = account.get(registration.id)
    assert instance is not None
    assert instance.at == registered == LATER + timedelta(milliseconds=251)
    assert instance.at.utcoffset() == timedelta(0)
    assert (instance.called_at, instance.attempts, instance.last_error) == (None, 0, None)


def test_the_service_truncates_a_finer_time_to_the_millisecond(service: Any, host_url: Callable[[], str]) -> None:
    account_token, token = service.mint_account(), mint_instance_token()
    account = service.account(account_token)
    registration = account.register(host_url(), token)

    reply = raw(service, "PUT", "/wakeup/wake", token, json={"at": "2099-12-01T10:30:00.2509999999+01:00"})

    shown = raw(service, "GET", f"/wakeup/instances/{registration.id}", account_token).json()
    assert reply.status_code == 204
    assert shown["at"] == "2099-12-01T09:30:00.250Z"


@pytest.mark.parametrize("at", TIMES_REFUSED)
def test_wake_times_the_service_refuses_are_refused_by_both(service: Any, host_url: Callable[[], str], at: str) -> None:
    token = mint_instance_token()
    service.account().register(host_url(), token)

    reply = raw(service, "PUT", "/wakeup/wake", token, json={"at": at})

    assert reply.status_code == 400
    assert reply.json()["error"].startswith(("at ", f"{at!r} "))


@pytest.mark.parametrize("url", URLS_REFUSED, ids=URLS_REFUSED.values())
def test_urls_the_service_refuses_are_refused_by_both(service: Any, url: str) -> None:
    body = {"url": url, "token": mint_instance_token()}

    reply = raw(service, "POST", "/wakeup/instances", service.mint_account(), json=body)

    assert reply.status_code == 400
    assert reply.json()["error"].startswith(("url ", "the body holds a lone UTF-16 surrogate"))


@pytest.mark.parametrize(("url", "stored"), URLS_STORED.items())
def test_urls_are_stored_alike_by_both(service: Any, url: str, stored: str) -> None:
    account = service.account()

    registration = account.register(url, mint_instance_token())

    instance = account.get(registration.id)
    assert instance is not None and instance.url == stored


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"\xff\xfe{}", "the body must be JSON encoded in UTF-8"),
        (b"[" * 5000, "the body is nested deeper than 8 levels, deeper than any valid request"),
        (b'{"at": NaN}', "the body is not valid JSON: NaN is no JSON value"),
        (b'{"url": "\\ud800"}', "the body holds a lone UTF-16 surrogate (such as \\ud800), which is no character"),
        (b'{"a": [[[[[[[[1]]]]]]]]}', "the body is nested deeper than 8 levels, deeper than any valid request"),
        (b'{"url": ', "the body is not valid JSON: its first error is at line 1, column 9"),
        (b'{"n": ' + b"1" * 5000 + b"}", "the body holds a number of more than 4300 digits"),
        (b"", "the body must be a JSON object"),
    ],
    ids=["not-utf8", "deep", "nan", "surrogate", "nine-levels", "cut-short", "long-number", "empty"],
)
def test_bodies_the_service_refuses_are_refused_alike_by_both(service: Any, body: bytes, says: str) -> None:
    reply = raw(service, "POST", "/wakeup/instances", service.mint_account(), data=body)

    assert (reply.status_code, reply.json()) == (400, {"error": says})


@pytest.mark.parametrize("query", ["limit=%C2%B2", "limit=" + "9" * 5000, "limit=", "limit=1&limit=2"])
def test_a_limit_the_service_refuses_is_refused_by_both(service: Any, query: str) -> None:
    reply = raw(service, "GET", f"/wakeup/instances?{query}", service.mint_account())

    assert (reply.status_code, reply.json()) == (400, {"error": "limit must be a whole number from 1 to 100"})


def test_a_new_wake_replaces_the_old(service: Any, host_url: Callable[[], str]) -> None:
    account, token = service.account(), mint_instance_token()
    registration = account.register(host_url(), token)
    host = service.host(token)
    host.wake_at(LATER)

    host.wake_in(timedelta(days=40))

    instance = account.get(registration.id)
    assert instance is not None and instance.at is not None
    assert instance.at > LATER + timedelta(days=9)


def test_registering_again_at_the_same_url_keeps_the_wake(service: Any, host_url: Callable[[], str]) -> None:
    account, token, url = service.account(), mint_instance_token(), host_url()
    registration = account.register(url, token)
    service.host(token).wake_at(LATER)

    account.register(url + "/", token)  # the same URL once normalised

    instance = account.get(registration.id)
    assert instance is not None and instance.at == LATER


def test_registering_at_a_new_url_moves_the_instance_and_forgets_its_wake(
    service: Any, host_url: Callable[[], str]
) -> None:
    account, token = service.account(), mint_instance_token()
    registration = account.register(host_url(), token)
    service.host(token).wake_at(LATER)
    new_url = host_url()

    moved = account.register(new_url, token)

    instance = account.get(registration.id)
    assert moved == Registration(id=registration.id, created=False)
    assert instance is not None
    assert (instance.url, instance.at, instance.called_at, instance.attempts, instance.last_error) == (
        new_url,
        None,
        None,
        0,
        None,
    )


def test_listing_goes_through_every_page_oldest_first(service: Any, host_url: Callable[[], str]) -> None:
    account = service.account()
    ids = [account.register(host_url(), mint_instance_token()).id for _ in range(5)]

    listed = [instance.id for instance in account.list(page_size=2)]

    assert listed == ids


def test_a_new_accounts_list_is_empty(service: Any) -> None:
    assert list(service.account().list()) == []


def test_listing_shows_only_the_accounts_own_instances(service: Any, host_url: Callable[[], str]) -> None:
    mine, theirs = service.account(), service.account()
    my_id = mine.register(host_url(), mint_instance_token()).id
    theirs.register(host_url(), mint_instance_token())

    assert [instance.id for instance in mine.list()] == [my_id]


# --- rules the clients never break, checked over plain HTTP --------------------------------------


@pytest.mark.parametrize(
    "at", ["2099-12-01T09:30:00Z", "2099-12-01T10:30:00.250+01:00", "2099-12-01T09:30Z", "2099-12-01T09:30:00.1-05:30"]
)
def test_wake_times_with_a_zone_are_accepted(service: Any, host_url: Callable[[], str], at: str) -> None:
    token = mint_instance_token()
    service.account().register(host_url(), token)

    reply = raw(service, "PUT", "/wakeup/wake", token, json={"at": at})

    assert reply.status_code == 204
    assert reply.content == b""


@pytest.mark.parametrize(
    "at", ["2099-12-01", "2099-12-01T09:30:00", "2099-02-30T09:30:00Z", "tomorrow", 1767225600, None]
)
def test_wake_times_without_a_zone_or_impossible_are_refused(
    service: Any, host_url: Callable[[], str], at: object
) -> None:
    token = mint_instance_token()
    service.account().register(host_url(), token)

    reply = raw(service, "PUT", "/wakeup/wake", token, json={"at": at})

    assert reply.status_code == 400
    assert isinstance(reply.json()["error"], str)


@pytest.mark.parametrize("body", [b"[]", b"not json", b'"at"'])
def test_a_body_that_is_not_a_json_object_is_refused(service: Any, body: bytes) -> None:
    reply = raw(service, "POST", "/wakeup/instances", service.mint_account(), data=body)

    assert reply.status_code == 400
    assert isinstance(reply.json()["error"], str)


def test_a_body_over_16_kib_is_refused(service: Any, host_url: Callable[[], str]) -> None:
    # given a registration valid in every way but its size: a short URL, and padding
    body = {"url": host_url(), "token": mint_instance_token(), "padding": ""}
    body["padding"] = "x" * (16 * 1024 + 1 - len(json.dumps(body)))

    reply = raw(service, "POST", "/wakeup/instances", service.mint_account(), data=json.dumps(body))

    assert (reply.status_code, reply.json()) == (413, {"error": "the body is larger than 16 KiB"})


def test_a_body_of_exactly_16_kib_is_accepted(service: Any, host_url: Callable[[], str]) -> None:
    body = {"url": host_url(), "token": mint_instance_token(), "padding": ""}
    body["padding"] = "x" * (16 * 1024 - len(json.dumps(body)))

    reply = raw(service, "POST", "/wakeup/instances", service.mint_account(), data=json.dumps(body))

    assert reply.status_code == 201


def test_an_account_token_cannot_ask_for_a_wake(service: Any) -> None:
    reply = raw(service, "PUT", "/wakeup/wake", service.mint_account(), json={"at": "2099-12-01T09:30:00Z"})

    assert reply.status_code == 401
    assert isinstance(reply.json()["error"], str)


def test_an_instance_token_cannot_list_instances(service: Any, host_url: Callable[[], str]) -> None:
    token = mint_instance_token()
    service.account().register(host_url(), token)

    reply = raw(service, "GET", "/wakeup/instances", token)

    assert reply.status_code == 401


def test_an_unknown_path_is_404_with_the_error_body(service: Any) -> None:
    reply = raw(service, "GET", "/wakeup/nothing-here", service.mint_account())

    assert reply.status_code == 404
    assert isinstance(reply.json()["error"], str)


def test_a_known_path_with_another_method_is_405(service: Any) -> None:
    reply = raw(service, "PATCH", "/wakeup/instances", service.mint_account(), json={})

    assert reply.status_code == 405
    assert isinstance(reply.json()["error"], str)
