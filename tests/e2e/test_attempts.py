"""Issue 12 end to end: `GET /wakeup/instances/{id}/attempts` on the local stack, with real hosts."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from wakes_support import Instances, iso

from support.api import Api, past_busy
from support.host import WakeHost
from support.stack_process import StackProcess
from support.waiting import wait_until
from wakeup.tokens import TokenKind, mint
from wakeup_local.aws.request_counter import COUNTS_PATH

CLIENTS = 8


@pytest.fixture
def instances(api: Api) -> Iterator[Instances]:
    made = Instances(api)
    yield made
    made.remove_all()


def attempts_of(api: Api, instance_id: str, **params: Any) -> dict[str, Any]:
    reply = past_busy(lambda: api.get(f"/wakeup/instances/{instance_id}/attempts", params=params))
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def recorded_attempts(api: Api, instance_id: str, calls: int) -> dict[str, Any]:
    """The history once it holds `calls` calls: the caller records the outcome (`calledAt`) first
    and the history item after it."""

    def held() -> dict[str, Any] | None:
        body = attempts_of(api, instance_id)
        return body if len(body["attempts"]) >= calls else None

    found: dict[str, Any] = wait_until(held, timeout=20, message=f"{calls} calls in the history")
    return found


def test_a_host_failing_three_times_then_answering_shows_four_calls_newest_first(
    instances: Instances, host: WakeHost, api: Api
) -> None:
    # given a host that answers 503, 503, 500, then 200
    host.script(503, 503, 500)
    instance_id, token = instances.new(host.url)
    at = iso(time.time())
    # when its wake is called until it answers
    instances.wake(token, at)
    registered = instances.wait_for(instance_id, lambda body: body["calledAt"] is not None, "the success recorded")
    # then its history holds the four calls, newest first, with their outcomes
    body = recorded_attempts(api, instance_id, 4)
    calls = body["attempts"]
    assert body["next"] is None
    assert [(c["attempt"], c["status"], c["error"]) for c in calls] == [
        (4, 200, None),
        (3, 500, "HTTP 500"),
        (2, 503, "HTTP 503"),
        (1, 503, "HTTP 503"),
    ]
    assert all(c["at"] == registered["at"] and c["trigger"] == "queue" for c in calls)
    started = [c["startedAt"] for c in calls]
    assert started == sorted(started, reverse=True)
    # lateness for the first call only; each call took some time; each names its own webhook-id
    assert calls[-1]["latenessMs"] is not None and calls[-1]["latenessMs"] >= 0
    assert [c["latenessMs"] for c in calls[:-1]] == [None, None, None]
    assert all(c["durationMs"] >= 0 for c in calls)
    received = [call.headers["webhook-id"] for call in host.calls]
    assert [c["webhookId"] for c in reversed(calls)] == received
    # and a page at a time, the same calls
    first = attempts_of(api, instance_id, limit=3)
    rest = attempts_of(api, instance_id, limit=3, cursor=first["next"])
    assert first["attempts"] + rest["attempts"] == calls and rest["next"] is None


def history_writes(stack: StackProcess) -> int:
    """The BatchWriteItem requests the stack's functions have made to its moto so far."""
    with urllib.request.urlopen(stack.endpoint_url + COUNTS_PATH, timeout=10) as reply:
        return int(json.load(reply).get("dynamodb:BatchWriteItem", 0))


def test_a_burst_is_kept_in_the_history_a_batch_to_a_request_every_call_listed(
    stack: StackProcess, instances: Instances, host: WakeHost, api: Api
) -> None:
    # given twenty instances whose wakes are all due at one second, a few seconds ahead
    made = [instances.new(host.url_for(f"burst{index}")) for index in range(20)]
    before = history_writes(stack)
    at = iso(time.time() + 3)
    for _, token in made:
        instances.wake(token, at)
    # when they are called (SQS hands the caller batches of several)
    listed = [recorded_attempts(api, instance_id, 1)["attempts"] for instance_id, _ in made]
    # then every call is listed in its instance's history, once
    assert [len(calls) for calls in listed] == [1] * 20
    assert all(calls[0]["status"] == 200 for calls in listed)
    # and the twenty calls took fewer requests than calls: a batch's items are one request
    assert 1 <= history_writes(stack) - before < 20


def test_an_unknown_instance_is_404_another_accounts_403_a_bad_limit_400(
    stack: StackProcess, instances: Instances, api: Api
) -> None:
    instance_id, _ = instances.new("http://127.0.0.1:9")
    assert attempts_of(api, instance_id) == {"attempts": [], "next": None}
    assert api.get("/wakeup/instances/0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10/attempts").status_code == 404
    other = api.with_token(stack.mint_account("attempts-other"))
    forbidden = other.get(f"/wakeup/instances/{instance_id}/attempts")
    assert forbidden.status_code == 403 and "error" in forbidden.json()
    for limit in ("0", "101", "x"):
        refused = api.get(f"/wakeup/instances/{instance_id}/attempts", params={"limit": limit})
        assert refused.status_code == 400 and "limit" in refused.json()["error"]
    assert api.post(f"/wakeup/instances/{instance_id}/attempts").status_code == 405
    assert api.get(f"/wakeup/instances/{instance_id}/attempts", token=mint(TokenKind.ACCOUNT)).status_code == 401


def test_concurrent_clients_each_read_their_own_instances_calls(stack: StackProcess, host: WakeHost) -> None:
    # given accounts, each with an instance whose wake was called once
    clients = [Api(stack.url, stack.mint_account(f"attempts-{index}")) for index in range(CLIENTS)]
    made = [Instances(client) for client in clients]
    try:
        ids = []
        for index, each in enumerate(made):
            instance_id, token = each.new(host.url_for(f"c{index}"))
            each.wake(token, iso(time.time()))
            ids.append(instance_id)
        for client, instance_id in zip(clients, ids, strict=True):
            recorded_attempts(client, instance_id, 1)

        # when every client reads its instance's history at once, several times over
        def read(index: int) -> list[str]:
            return [attempts_of(clients[index], ids[index])["attempts"][0]["webhookId"] for _ in range(5)]

        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            seen = list(pool.map(read, range(CLIENTS)))
        # then each reply is that client's own
        for instance_id, webhook_ids in zip(ids, seen, strict=True):
            assert all(webhook_id.startswith(f"wake_{instance_id}_") for webhook_id in webhook_ids)
    finally:
        for each, client in zip(made, clients, strict=True):
            each.remove_all()
            client.close()
