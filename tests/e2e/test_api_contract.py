"""DESIGN section 2, route by route, over HTTP against the local stack."""

import hashlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import requests

from support.moments import year_ahead
from support.waiting import wait_until
from wakeup.tokens import TokenKind, mint

UNKNOWN_ID = "0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10"


class Api:
    """The stack's HTTP API as one account sees it; every reply is kept for the leak checks."""

    replies: list[requests.Response] = []

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token

    def send(self, method: str, path: str, token: str | None = None, **kwargs: Any) -> requests.Response:
        headers = kwargs.pop("headers", {})
        if token is not None or self.token:
            headers.setdefault("Authorization", f"Bearer {token or self.token}")
        reply = requests.request(method, self.url + path, headers=headers, timeout=10, **kwargs)
        Api.replies.append(reply)
        return reply

    def register(self, url: str = "http://127.0.0.1:9/host", token: str | None = None) -> tuple[str, str]:
        token = token or mint(TokenKind.INSTANCE)
        reply = self.send("POST", "/wakeup/instances", json={"url": url, "token": token})
        assert reply.status_code == 201, reply.text
        return reply.json()["id"], token

    def wake(self, instance_token: str, at: str) -> requests.Response:
        return self.send("PUT", "/wakeup/wake", token=instance_token, json={"at": at})


@pytest.fixture
def api(stack: Any) -> Api:
    return Api(stack.url, stack.mint_account("contract"))


@pytest.fixture
def other(stack: Any) -> Api:
    return Api(stack.url, stack.mint_account("another"))


def error_of(reply: requests.Response, status: int) -> str:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    body = reply.json()
    assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"]
    return str(body["error"])


# -- POST /wakeup/instances ---------------------------------------------------------------------


def test_a_new_token_makes_an_instance_201(api: Api) -> None:
    reply = api.send("POST", "/wakeup/instances", json={"url": "http://host.test", "token": mint(TokenKind.INSTANCE)})
    assert reply.status_code == 201
    assert set(reply.json()) == {"id"}


def test_the_same_token_again_is_200_with_the_same_instance_and_its_wake_kept(api: Api) -> None:
    instance_id, token = api.register("http://host.test/a")
    year = year_ahead()
    assert api.wake(token, f"{year}-01-01T00:00:00Z").status_code == 204
    again = api.send("POST", "/wakeup/instances", json={"url": "HTTP://HOST.test/a/", "token": token})
    assert again.status_code == 200 and again.json() == {"id": instance_id}
    assert api.send("GET", f"/wakeup/instances/{instance_id}").json()["at"] == f"{year}-01-01T00:00:00.000Z"


def test_the_same_token_with_a_new_url_moves_the_instance_and_forgets_its_wake(api: Api) -> None:
    instance_id, token = api.register("http://old.test")
    assert api.wake(token, f"{year_ahead()}-01-01T00:00:00Z").status_code == 204
    moved = api.send("POST", "/wakeup/instances", json={"url": "http://new.test", "token": token})
    assert moved.status_code == 200 and moved.json() == {"id": instance_id}
    shown = api.send("GET", f"/wakeup/instances/{instance_id}").json()
    assert shown == {
        "id": instance_id,
        "url": "http://new.test",
        "at": None,
        "calledAt": None,
        "attempts": 0,
        "lastError": None,
    }


def test_a_token_registered_by_another_account_is_409(api: Api, other: Api) -> None:
    _, token = other.register()
    reply = api.send("POST", "/wakeup/instances", json={"url": "http://host.test", "token": token})
    assert "another account" in error_of(reply, 409)


def test_the_url_is_stored_normalised(api: Api) -> None:
    instance_id, _ = api.register("HTTP://Example.COM:80/Path/")
    assert api.send("GET", f"/wakeup/instances/{instance_id}").json()["url"] == "http://example.com/Path"


@pytest.mark.parametrize(
    "url",
    ["ftp://host.test", "http://u:p@host.test", "http://host.test/?", "http://host.test/#x", "host.test", "http:///x"],
)
def test_a_url_breaking_the_rules_is_400(api: Api, url: str) -> None:
    reply = api.send("POST", "/wakeup/instances", json={"url": url, "token": mint(TokenKind.INSTANCE)})
    assert "url" in error_of(reply, 400)


@pytest.mark.parametrize("token", ["swa_" + "a" * 43, "swi_short", "swi_" + "a" * 129, "swi_" + "!" * 40, "a" * 47])
def test_a_token_that_is_not_an_instance_token_is_400(api: Api, token: str) -> None:
    reply = api.send("POST", "/wakeup/instances", json={"url": "http://host.test", "token": token})
    assert "token" in error_of(reply, 400)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"token": "swi_" + "a" * 43}, "url is required"),
        ({"url": "http://host.test"}, "token is required"),
        ({"url": 5, "token": "swi_" + "a" * 43}, "url must be a string"),
        ({"url": "http://host.test", "token": None}, "token must be a string"),
    ],
)
def test_a_missing_or_wrongly_typed_field_is_400(api: Api, body: dict[str, Any], says: str) -> None:
    assert error_of(api.send("POST", "/wakeup/instances", json=body), 400) == says


@pytest.mark.parametrize("raw", ["[1, 2]", '"url"', "null", ""])
def test_a_body_that_is_not_a_json_object_is_400(api: Api, raw: str) -> None:
    reply = api.send("POST", "/wakeup/instances", data=raw, headers={"Content-Type": "application/json"})
    assert error_of(reply, 400) == "the body must be a JSON object"


def test_a_body_that_is_not_json_is_400_saying_where(api: Api) -> None:
    reply = api.send("POST", "/wakeup/instances", data="{not json", headers={"Content-Type": "application/json"})
    assert error_of(reply, 400) == "the body is not valid JSON: its first error is at line 1, column 2"


def test_a_body_over_16_kib_is_refused(api: Api) -> None:
    body = json.dumps({"url": "http://host.test", "token": mint(TokenKind.INSTANCE), "pad": "x" * 16 * 1024})
    reply = api.send("POST", "/wakeup/instances", data=body, headers={"Content-Type": "application/json"})
    assert "16 KiB" in error_of(reply, 413)


# -- GET and DELETE /wakeup/instances/{id} ------------------------------------------------------


def test_an_instance_reads_back_with_every_field(api: Api) -> None:
    instance_id, _ = api.register("http://host.test")
    reply = api.send("GET", f"/wakeup/instances/{instance_id}")
    assert reply.status_code == 200
    assert reply.json() == {
        "id": instance_id,
        "url": "http://host.test",
        "at": None,
        "calledAt": None,
        "attempts": 0,
        "lastError": None,
    }


@pytest.mark.parametrize("instance_id", [UNKNOWN_ID, "not-an-id", "0B7E1F0E-6F43-4C5E-9D55-3B1F6D3C2A10"])
@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_an_unknown_or_malformed_id_is_404(api: Api, method: str, instance_id: str) -> None:
    error_of(api.send(method, f"/wakeup/instances/{instance_id}"), 404)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_another_accounts_instance_is_403(api: Api, other: Api, method: str) -> None:
    instance_id, _ = other.register()
    error_of(api.send(method, f"/wakeup/instances/{instance_id}"), 403)
    assert other.send("GET", f"/wakeup/instances/{instance_id}").status_code == 200


def test_delete_is_204_without_a_body_and_frees_the_token(api: Api, other: Api) -> None:
    instance_id, token = api.register()
    reply = api.send("DELETE", f"/wakeup/instances/{instance_id}")
    assert reply.status_code == 204 and reply.content == b""
    error_of(api.send("GET", f"/wakeup/instances/{instance_id}"), 404)
    error_of(api.wake(token, f"{year_ahead()}-01-01T00:00:00Z"), 401)
    again = other.send("POST", "/wakeup/instances", json={"url": "http://host.test", "token": token})
    assert again.status_code == 201 and again.json()["id"] != instance_id


# -- PUT /wakeup/wake ---------------------------------------------------------------------------


def test_a_wake_registered_right_after_its_instance_is_accepted(api: Api) -> None:
    for _ in range(5):
        instance_id, token = api.register()
        year = year_ahead()
        assert api.wake(token, f"{year}-01-01T10:30:00.250+01:00").status_code == 204
        shown = api.send("GET", f"/wakeup/instances/{instance_id}").json()
        assert shown["at"] == f"{year}-01-01T09:30:00.250Z"


def test_a_wake_is_204_without_a_body_and_replaces_the_one_before(api: Api) -> None:
    instance_id, token = api.register()
    year = year_ahead()
    assert api.wake(token, f"{year}-01-01T00:00:00Z").status_code == 204
    reply = api.wake(token, f"{year + 1}-06-01T12:00:00+02:00")
    assert reply.status_code == 204 and reply.content == b""
    shown = api.send("GET", f"/wakeup/instances/{instance_id}").json()
    assert (shown["at"], shown["calledAt"], shown["attempts"], shown["lastError"]) == (
        f"{year + 1}-06-01T10:00:00.000Z",
        None,
        0,
        None,
    )


@pytest.mark.parametrize(
    "at", ["2099-01-01", "2099-01-01T09:30:00", "2099-02-30T09:30:00Z", "soon", "2099-01-01T09:30:00+0100"]
)
def test_an_at_without_a_zone_or_impossible_is_400(api: Api, at: str) -> None:
    _, token = api.register()
    assert "at " in error_of(api.wake(token, at), 400)


@pytest.mark.parametrize("body", [{}, {"at": 1767225600}, {"at": None}])
def test_a_missing_or_wrongly_typed_at_is_400(api: Api, body: dict[str, Any]) -> None:
    _, token = api.register()
    assert error_of(api.send("PUT", "/wakeup/wake", token=token, json=body), 400).startswith("at ")


# -- GET /wakeup/wake --------------------------------------------------------------------------

WAKE_FIELDS = {"at", "calledAt", "attempts", "lastError"}


def test_a_host_reads_its_wake_and_nothing_of_the_account(api: Api) -> None:
    instance_id, token = api.register()
    unset = api.send("GET", "/wakeup/wake", token=token)
    year = year_ahead()
    assert api.wake(token, f"{year}-01-01T10:30:00.250+01:00").status_code == 204

    reply = api.send("GET", "/wakeup/wake", token=token)

    assert (unset.status_code, unset.json()) == (200, {"at": None, "calledAt": None, "attempts": 0, "lastError": None})
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("application/json")
    assert reply.json() == {"at": f"{year}-01-01T09:30:00.250Z", "calledAt": None, "attempts": 0, "lastError": None}
    shown = api.send("GET", f"/wakeup/instances/{instance_id}").json()
    assert {key: shown[key] for key in WAKE_FIELDS} == reply.json()


def test_a_host_reads_why_its_last_call_failed(api: Api) -> None:
    # Port 9 on loopback: nothing listens, so the call is refused and the wake retried with backoff.
    instance_id, token = api.register("http://127.0.0.1:9/refuses")
    try:
        assert api.wake(token, "2020-01-01T00:00:00Z").status_code == 204

        failed = wait_until(
            lambda: (shown := api.send("GET", "/wakeup/wake", token=token).json())["attempts"] >= 1 and shown,
            timeout=30,
            message="a failed call",
        )

        assert set(failed) == WAKE_FIELDS
        assert failed["calledAt"] is None and failed["lastError"]
    finally:
        api.send("DELETE", f"/wakeup/instances/{instance_id}")


def test_an_account_token_cannot_read_a_wake(api: Api) -> None:
    assert "instance token" in error_of(api.send("GET", "/wakeup/wake"), 401)


def test_a_deleted_instances_token_cannot_read_a_wake(api: Api) -> None:
    instance_id, token = api.register()
    api.send("DELETE", f"/wakeup/instances/{instance_id}")

    error_of(api.send("GET", "/wakeup/wake", token=token), 401)


# -- GET /wakeup/instances ----------------------------------------------------------------------


def test_the_list_pages_through_the_accounts_own_instances(api: Api, other: Api) -> None:
    mine = {api.register()[0] for _ in range(5)}
    other.register()
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        reply = api.send("GET", "/wakeup/instances", params=params)
        assert reply.status_code == 200
        body = reply.json()
        assert len(body["instances"]) <= 2
        assert all(set(i) == {"id", "url", "at", "calledAt", "attempts", "lastError"} for i in body["instances"])
        seen += [i["id"] for i in body["instances"]]
        pages += 1
        cursor = body["next"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(mine) and pages >= 3


@pytest.mark.parametrize("limit", ["0", "101", "ten", "-1"])
def test_a_limit_out_of_range_is_400(api: Api, limit: str) -> None:
    assert "limit" in error_of(api.send("GET", "/wakeup/instances", params={"limit": limit}), 400)


def test_a_cursor_from_another_listing_is_400(api: Api, other: Api) -> None:
    for _ in range(2):
        other.register()
    cursor = other.send("GET", "/wakeup/instances", params={"limit": "1"}).json()["next"]
    assert cursor
    assert "cursor" in error_of(api.send("GET", "/wakeup/instances", params={"cursor": cursor}), 400)
    assert "cursor" in error_of(api.send("GET", "/wakeup/instances", params={"cursor": "garbage!"}), 400)


# -- tokens -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Basic abc", "Bearer swa_short", "Bearer " + mint(TokenKind.ACCOUNT), "swa_" + "a" * 43],
    ids=["none", "empty", "no-token", "basic", "malformed", "unknown", "no-scheme"],
)
def test_a_missing_malformed_or_unknown_account_token_is_401(stack: Any, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    for method, path in [("GET", "/wakeup/instances"), ("GET", f"/wakeup/instances/{UNKNOWN_ID}")]:
        reply = requests.request(method, stack.url + path, headers=headers, timeout=10)
        error_of(reply, 401)


def test_a_token_of_the_wrong_kind_is_401(api: Api) -> None:
    _, instance_token = api.register()
    error_of(api.send("GET", "/wakeup/instances", token=instance_token), 401)
    error_of(api.send("PUT", "/wakeup/wake", token=api.token, json={"at": f"{year_ahead()}-01-01T00:00:00Z"}), 401)
    error_of(api.wake(mint(TokenKind.INSTANCE), f"{year_ahead()}-01-01T00:00:00Z"), 401)


# -- routing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/wakeup", "/wakeup/instances/x/y", "/wakeup/wakes", "/other"])
def test_an_unknown_path_is_404(api: Api, path: str) -> None:
    error_of(api.send("GET", path), 404)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/wakeup/instances"),
        ("DELETE", "/wakeup/instances"),
        ("POST", f"/wakeup/instances/{UNKNOWN_ID}"),
        ("DELETE", "/wakeup/wake"),
        ("POST", "/wakeup/wake"),
    ],
)
def test_a_known_path_with_another_method_is_405(api: Api, method: str, path: str) -> None:
    error_of(api.send(method, path), 405)


# -- what is stored and what is shown -----------------------------------------------------------


@pytest.fixture
def table_items(stack: Any) -> Iterator[Any]:
    def scan() -> list[dict[str, Any]]:
        client = boto3.client("dynamodb", endpoint_url=stack.endpoint_url, region_name=stack.region)
        items: list[dict[str, Any]] = []
        for page in client.get_paginator("scan").paginate(TableName=stack.table_name):
            items += page["Items"]
        return items

    yield scan


def test_only_hashes_of_tokens_are_stored(api: Api, table_items: Any) -> None:
    instance_id, instance_token = api.register()
    api.wake(instance_token, f"{year_ahead()}-01-01T00:00:00Z")
    dump = json.dumps(table_items())
    for token in (api.token, instance_token):
        assert token not in dump and token[4:] not in dump
        assert hashlib.sha256(token.encode()).hexdigest() in dump
    assert instance_id in dump


def test_no_reply_carries_a_token_a_hash_or_a_trace(api: Api, other: Api) -> None:
    # given replies of every kind, good and bad, from the whole run so far and a few more
    instance_id, token = api.register()
    api.wake(token, f"{year_ahead()}-01-01T00:00:00Z")
    api.send("GET", f"/wakeup/instances/{instance_id}")
    other.send("POST", "/wakeup/instances", json={"url": "http://h.test", "token": token})
    api.send("POST", "/wakeup/instances", data="{", headers={"Content-Type": "application/json"})
    secrets = [api.token, other.token, token]
    hashes = [hashlib.sha256(s.encode()).hexdigest() for s in secrets]
    # then none of them shows a secret, a hash, a trace or an internal name
    for reply in Api.replies:
        text = reply.text
        for secret in secrets + hashes:
            assert secret not in text
        for internal in ("Traceback", 'File "', "TOKEN#", "INSTANCE#", "ACCOUNT#", "botocore", "dynamodb"):
            assert internal not in text, (reply.request.method, reply.url, text)


# -- concurrency --------------------------------------------------------------------------------


def count_instances(*accounts: Api) -> int:
    return sum(len(who.send("GET", "/wakeup/instances").json()["instances"]) for who in accounts)


def test_two_accounts_registering_one_token_at_once_make_one_instance(api: Api, other: Api) -> None:
    for round_ in range(1, 31):
        token = mint(TokenKind.INSTANCE)
        barrier = threading.Barrier(2)
        statuses: dict[str, int] = {}

        def register(
            who: Api,
            name: str,
            token: str = token,
            barrier: threading.Barrier = barrier,
            into: dict[str, int] = statuses,
        ) -> None:
            barrier.wait()
            into[name] = who.send(
                "POST", "/wakeup/instances", json={"url": "http://h.test", "token": token}
            ).status_code

        threads = [threading.Thread(target=register, args=(who, name)) for who, name in ((api, "a"), (other, "b"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(statuses.values()) == [201, 409]
        assert count_instances(api, other) == round_
