"""Each account's rate on the account routes (issue 38, "A limit per account"), over moto:

- the table counts an account's requests per window in one conditional write on the account's own
  `RATE#` item, and refuses past its limit (the service's default, or the operator's for it);
- an execution environment that saw a window full refuses the account's further requests in it
  without writing, so a refusal costs the token's read alone;
- `PUT /wakeup/wake` counts nothing: no request of it touches a `RATE#` item.

Over HTTP, many clients at once: tests/e2e/test_account_flood.py.
"""

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from api_reply import Reply
from moto_env import Deployed, LambdaContext, imported_handler
from sample_events import LIST_INSTANCES, PUT_WAKE, REGISTER_INSTANCE, api_event

from wakeup import factories
from wakeup.errors import TooManyRequestsError
from wakeup.logic.accounts import mint_account
from wakeup.logic.rates import ACCOUNT_WINDOW_S, AccountThrottle
from wakeup.table import DynamoStore, RateFull, RequestWindow
from wakeup.table.items import rate_key
from wakeup.times import now
from wakeup.tokens import TokenKind, hash_token, mint

instances_handler = imported_handler("instances")
wake_handler = imported_handler("wake")

# A window well inside the present's: the counts of one test never meet another's.
START = int(datetime.now(UTC).timestamp()) // ACCOUNT_WINDOW_S * ACCOUNT_WINDOW_S


class CountingClient:
    """The store's DynamoDB client, counting the requests made through it by operation."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: Counter[str] = Counter()
        self.keys: list[str] = []  # the key of each request that names one

    def __getattr__(self, name: str) -> Any:
        made = getattr(self.client, name)
        if not callable(made) or name.startswith("_") or name in {"meta", "exceptions"}:
            return made

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if "Key" in kwargs:
                self.keys.append(kwargs["Key"]["pk"]["S"])
            return made(*args, **kwargs)

        return counted


@pytest.fixture
def store(env: Deployed) -> DynamoStore:
    return env.store


def new_account(store: DynamoStore) -> str:
    return mint_account(store, "rates")[0].id


def test_the_window_admits_its_limit_then_refuses_saying_which_window_and_limit(store: DynamoStore) -> None:
    account_id = new_account(store)
    window = RequestWindow(START, 5)
    for _ in range(5):
        store.count_request(account_id, window, started=False)

    with pytest.raises(RateFull) as full:
        store.count_request(account_id, window)

    assert (full.value.start, full.value.limit) == (START, 5)
    assert store.db.get(rate_key(account_id)) == {"pk": rate_key(account_id), "window": START, "count": 5}


def test_the_next_window_starts_the_count_again(store: DynamoStore) -> None:
    account_id = new_account(store)
    for _ in range(2):
        store.count_request(account_id, RequestWindow(START, 2), started=True)  # a wrong guess, told by the refusal

    store.count_request(account_id, RequestWindow(START + ACCOUNT_WINDOW_S, 2))

    assert store.db.get(rate_key(account_id))["count"] == 1  # type: ignore[index]


def test_concurrent_requests_never_pass_the_limit(store: DynamoStore) -> None:
    account_id = new_account(store)

    def one(_: int) -> bool:
        try:
            store.count_request(account_id, RequestWindow(START, 20), started=False)
        except RateFull:
            return False
        return True

    with ThreadPoolExecutor(16) as pool:
        admitted = sum(pool.map(one, range(48)))

    assert admitted == 20


def test_the_operators_rate_for_an_account_wins_until_it_is_the_default_again(store: DynamoStore) -> None:
    account_id, other_id = new_account(store), new_account(store)
    changed = store.set_account_rate(account_id, 1, ACCOUNT_WINDOW_S)
    window = RequestWindow(START, 100)
    for _ in range(ACCOUNT_WINDOW_S):
        store.count_request(account_id, window)
        store.count_request(other_id, window)

    with pytest.raises(RateFull) as full:
        store.count_request(account_id, window)
    store.count_request(other_id, window)  # the service's default for the other
    store.set_account_rate(account_id, None, ACCOUNT_WINDOW_S)
    store.count_request(account_id, window)

    assert changed is not None and changed.max_requests_per_s == 1
    assert full.value.limit == ACCOUNT_WINDOW_S
    assert store.get_account(account_id).max_requests_per_s is None  # type: ignore[union-attr]


def test_setting_the_rate_of_no_account_changes_nothing(store: DynamoStore) -> None:
    missing = "0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10"

    assert store.set_account_rate(missing, 5, ACCOUNT_WINDOW_S) is None
    assert store.db.get(rate_key(missing)) is None


def test_an_environment_refuses_a_full_window_without_writing_again(store: DynamoStore) -> None:
    account_id = new_account(store)
    counting = CountingClient(store.client)
    throttle = AccountThrottle(DynamoStore(store.table, counting), per_s=1)
    moment = datetime.fromtimestamp(START + 1, UTC)
    for _ in range(ACCOUNT_WINDOW_S):
        throttle.admit(account_id, moment)
    written = counting.calls["update_item"]

    refusals = []
    for _ in range(5):
        with pytest.raises(TooManyRequestsError) as refused:
            throttle.admit(account_id, moment)
        refusals.append(refused.value)

    assert written == ACCOUNT_WINDOW_S  # each admitted request one write, the window's first too
    assert counting.calls["update_item"] == written + 1  # the first refusal's write, then none
    assert {r.retry_after_s for r in refusals} == {ACCOUNT_WINDOW_S - 1}
    assert refusals[0].message.startswith(f"this account made {ACCOUNT_WINDOW_S} requests in {ACCOUNT_WINDOW_S} s")
    throttle.admit(account_id, moment + timedelta(seconds=ACCOUNT_WINDOW_S))  # the next window


@pytest.fixture
def rate_of_one(env: Deployed, monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingClient]:
    """The functions' settings with an account rate of one request a second, and the store's
    requests counted."""
    monkeypatch.setenv("WAKEUP_ACCOUNT_REQUESTS_PER_S", "1")
    factories.reset()
    counting = CountingClient(factories.get_store().client)
    factories.get_store().client = counting
    yield counting


def invoke(handler: Any, event: dict[str, Any]) -> Reply:
    return Reply.of(handler.lambda_handler(event, LambdaContext(function_name="rates")))


def test_past_its_rate_an_account_is_429_with_retry_after_for_a_token_read_alone(
    env: Deployed, rate_of_one: CountingClient
) -> None:
    token = mint_account(env.store, "flood")[1]
    other = mint_account(env.store, "calm")[1]
    # Every request within one window, its start a second ago: a window's end falling among them
    # would admit the next window's ten (the clock stands still: time_machine, the service's too).
    window_start = int(now().timestamp()) // ACCOUNT_WINDOW_S * ACCOUNT_WINDOW_S + ACCOUNT_WINDOW_S
    with time_machine.travel(datetime.fromtimestamp(window_start + 1, UTC), tick=False):
        replies = [
            invoke(instances_handler, api_event(LIST_INSTANCES, token=token)) for _ in range(2 * ACCOUNT_WINDOW_S + 1)
        ]
        first_refused = next(n for n, reply in enumerate(replies) if reply.status == 429)
        rate_of_one.calls.clear()

        refused = invoke(instances_handler, api_event(LIST_INSTANCES, token=token))
        refusal_cost = dict(rate_of_one.calls)
        calm = invoke(instances_handler, api_event(LIST_INSTANCES, token=other))

    # Ten a window (one a second for 10 s), all of them in one: exactly ten before the first refusal.
    assert first_refused == ACCOUNT_WINDOW_S
    assert refused.status == 429 and set(refused.body) == {"error"}
    assert 1 <= int(refused.headers["Retry-After"]) <= ACCOUNT_WINDOW_S
    assert f"retry in {refused.headers['Retry-After']} s" in refused.body["error"]
    assert refusal_cost == {"get_item": 1}  # the token's read, and no write: less than any admitted request
    assert calm.status == 200


def test_a_refused_registration_writes_no_instance(env: Deployed, rate_of_one: CountingClient) -> None:
    token = mint_account(env.store, "flood")[1]
    account_id = env.store.owner_of(hash_token(token))
    statuses = []
    for _ in range(2 * ACCOUNT_WINDOW_S + 1):
        body = {"url": "https://host.example.com", "token": mint(TokenKind.INSTANCE)}
        statuses.append(invoke(instances_handler, api_event(REGISTER_INSTANCE, token=token, body=body)).status)

    assert 429 in statuses and set(statuses) == {201, 429}
    assert account_id is not None
    assert env.store.get_account(account_id.account_id).instance_count == statuses.count(201)  # type: ignore[union-attr]


def test_registering_wakes_counts_nothing_of_the_account(env: Deployed, rate_of_one: CountingClient) -> None:
    account = mint_account(env.store, "hosts")[0]
    instance_token = mint(TokenKind.INSTANCE)
    env.store.register_instance(account.id, "https://host.example.com", hash_token(instance_token), now())
    rate_of_one.calls.clear()

    for _ in range(3 * ACCOUNT_WINDOW_S):
        at = (now() + timedelta(days=30)).isoformat()
        reply = invoke(wake_handler, api_event(PUT_WAKE, token=instance_token, body={"at": at}))
        assert reply.status == 204

    assert env.store.db.get(rate_key(account.id)) is None
    assert rate_of_one.calls["update_item"] >= 3 * ACCOUNT_WINDOW_S  # the wakes were written ...
    assert [key for key in rate_of_one.keys if not key.startswith(("TOKEN#", "INSTANCE#"))] == []  # ... and no other
