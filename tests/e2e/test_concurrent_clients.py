"""Issue 9 end to end: many clients at once, each with its own session, each get their own reply.

On Lambda an execution environment serves one invocation at a time; the local stack runs each in a
process of its own too. When it ran every function in threads of one process, concurrent requests
shared the Powertools resolver's current event, and 815 of 1,000 registrations from 16 threads got
another request's reply (200 instead of 201) and were never stored. 96 instances (288 requests, 6
a client in each round) are enough to show it: with one environment handed concurrent invocations,
this test fails.
"""

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest

from support.api import Api, past_busy
from support.moments import year_ahead
from support.stack_process import MakeStack, StackProcess
from wakeup.tokens import TokenKind, mint

CLIENTS = 16
INSTANCES = 96
# Far enough ahead that no wake comes due during the test, in any year it runs.
FIRST_AT = datetime(year_ahead(), 1, 1, tzinfo=UTC)

T = TypeVar("T")


@pytest.fixture
def own_stack(make_stack: MakeStack) -> Iterator[StackProcess]:
    """A stack of its own: a hundred instances and their schedules would weigh on the session's.

    With the template's own route throttle (10,000 a second, a burst of 5,000: the account's quota,
    so that hosts stopping together can register together), which these clients at once pass.
    """
    yield make_stack()


def from_clients(stack: StackProcess, token: str, work: Callable[[Api, int], T], count: int) -> list[T]:
    """`work(client, n)` for n in range(count), spread over CLIENTS threads, each its own session."""

    def client(first: int) -> list[tuple[int, T]]:
        api = Api(stack.url, token, timeout=60)
        try:
            return [(n, work(api, n)) for n in range(first, count, CLIENTS)]
        finally:
            api.close()

    with ThreadPoolExecutor(CLIENTS) as pool:
        results = [pair for part in pool.map(client, range(CLIENTS)) for pair in part]
    return [result for _, result in sorted(results, key=lambda pair: pair[0])]


def at_of(n: int) -> str:
    return (
        (FIRST_AT + timedelta(seconds=n, milliseconds=n % 1000))
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_many_clients_at_once_each_get_their_own_reply(own_stack: StackProcess) -> None:
    account = own_stack.mint_account("crowd")
    tokens = [mint(TokenKind.INSTANCE) for _ in range(INSTANCES)]
    urls = [f"http://127.0.0.1:9/host-{n}" for n in range(INSTANCES)]
    # given the instances' function warm in an environment a client: the test is about replies kept
    # apart, and sixteen cold starts at once on a loaded machine can use up an invocation's time
    # before its last AWS request, which the service then answers 503, as it should
    from_clients(own_stack, account, lambda api, _: api.get("/wakeup/instances").status_code, CLIENTS)

    # when 16 clients register 96 new instances
    def register(api: Api, n: int) -> tuple[int, str]:
        reply = past_busy(lambda: api.register(urls[n], tokens[n]))
        return reply.status_code, reply.json().get("id", reply.text)

    registered = from_clients(own_stack, account, register, INSTANCES)
    # then every one is new, with an id of its own
    assert [status for status, _ in registered] == [201] * INSTANCES
    ids = [instance_id for _, instance_id in registered]
    assert len(set(ids)) == INSTANCES

    # when each instance registers a wake of its own, all at once
    def wake(api: Api, n: int) -> int:
        return past_busy(lambda: api.wake(tokens[n], at_of(n))).status_code

    statuses = from_clients(own_stack, account, wake, INSTANCES)
    assert statuses == [204] * INSTANCES

    # then each instance shows exactly its own wake and URL
    shown = from_clients(own_stack, account, lambda api, n: api.instance(ids[n]).json(), INSTANCES)
    assert [(item["id"], item["url"], item["at"]) for item in shown] == [
        (ids[n], urls[n], at_of(n)) for n in range(INSTANCES)
    ]

    # and the list shows all of them, each once, over several pages
    listed: list[str] = []
    api = Api(own_stack.url, account)
    cursor: str | None = None
    while True:
        reply = api.get("/wakeup/instances", params={"limit": 25, **({"cursor": cursor} if cursor else {})})
        assert reply.status_code == 200, reply.text
        listed += [item["id"] for item in reply.json()["instances"]]
        cursor = reply.json()["next"]
        if not cursor:
            break
    api.close()
    assert sorted(listed) == sorted(ids)
