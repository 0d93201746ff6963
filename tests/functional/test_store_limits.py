"""Per-account limits, in the table's own writes (issue 11, "Per-account limits"):

- an account holds at most its limit of instances: the count lives in the account item and moves
  in the registration's transaction, so concurrent registrations cannot pass it (concurrent HTTP
  clients: tests/e2e/test_api_limits.py); the operator sets an account's own limit;
- an instance registers at most so many wakes per window, refused inside the registration's
  write, the first wake of a window costing that one write and no other request.

The table answers facts (`AccountRefused`, `WindowFull`); the logic words them (`account_refusal`,
`rate_refusal`), and the sentences are checked here on the facts the table gave.
"""

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import boto3
import pytest
from lost_reply import LostReplyProxy
from moto_env import Deployed, deployed, moto_endpoint

from wakeup import aws
from wakeup.logic.instances import account_refusal
from wakeup.logic.wakes import WakeLimit, rate_refusal, window_of
from wakeup.model import Instance
from wakeup.table import AccountRefused, DynamoStore, WindowFull
from wakeup.times import now
from wakeup.tokens import TokenKind, hash_token, mint

URL = "https://host.example.com"


@pytest.fixture
def env(module_env: Deployed) -> Deployed:
    """The module's resources: each test works with accounts and instances of its own."""
    return module_env


def new_account(store: DynamoStore) -> str:
    return store.create_account("limits", hash_token(mint(TokenKind.ACCOUNT)), now()).id


def register(store: DynamoStore, account_id: str, max_instances: int | None) -> Instance:
    return store.register_instance(account_id, URL, hash_token(mint(TokenKind.INSTANCE)), now(), max_instances).instance


def test_a_limit_of_one_instance_is_said_in_the_singular(env: Deployed) -> None:
    account_id = new_account(env.store)
    register(env.store, account_id, 1)

    with pytest.raises(AccountRefused) as refused:
        register(env.store, account_id, 1)

    assert account_refusal(refused.value).message.startswith("this account has reached its limit of 1 instance:")


def test_registering_past_the_accounts_limit_is_refused_with_the_reason(env: Deployed) -> None:
    account_id = new_account(env.store)
    kept = [register(env.store, account_id, 3) for _ in range(3)]

    with pytest.raises(AccountRefused) as refused:
        register(env.store, account_id, 3)

    assert account_refusal(refused.value).message == (
        "this account has reached its limit of 3 instances:"
        " delete some, or ask the service's operator to raise the limit"
    )
    assert len(env.store.all_instances(account_id)) == 3
    account = env.store.get_account(account_id)
    assert account is not None and account.instance_count == 3
    # a deleted instance frees its place
    assert env.store.delete_instance(kept[0], now()) is not None
    register(env.store, account_id, 3)


def test_registering_a_token_again_does_not_count_twice(env: Deployed) -> None:
    account_id = new_account(env.store)
    token_hash = hash_token(mint(TokenKind.INSTANCE))
    for url in (URL, URL, URL + "/moved"):
        env.store.register_instance(account_id, url, token_hash, now(), 1)
    account = env.store.get_account(account_id)
    assert account is not None and account.instance_count == 1


def test_the_operators_limit_for_an_account_wins_over_the_default(env: Deployed) -> None:
    account_id = new_account(env.store)
    changed = env.store.set_account_limit(account_id, 4)
    assert changed is not None and changed.max_instances == 4
    for _ in range(4):
        register(env.store, account_id, 2)
    with pytest.raises(AccountRefused) as refused:
        register(env.store, account_id, 2)
    assert refused.value.limit == 4 and not refused.value.revoked
    # back to the service's default, which this account is over now
    env.store.set_account_limit(account_id, None)
    with pytest.raises(AccountRefused) as refused:
        register(env.store, account_id, 2)
    assert refused.value.limit == 2


def test_a_limit_for_an_unknown_account_is_refused(env: Deployed) -> None:
    assert env.store.set_account_limit("0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10", 5) is None


LIMIT = WakeLimit(count=3, window_s=60)


def test_wakes_past_the_rate_are_refused_and_the_next_window_allows_them_again(env: Deployed) -> None:
    instance_id = env.new_instance(URL)
    start = now().replace(second=0, microsecond=0)  # the beginning of a window of 60 s
    at = start + timedelta(hours=1)
    for n in range(3):
        assert (
            env.store.register_wake(instance_id, at, f"r{n}", window_of(LIMIT, start + timedelta(seconds=n)))
            is not None
        )

    late = start + timedelta(seconds=50)
    with pytest.raises(WindowFull) as refused:
        env.store.register_wake(instance_id, at, "refused", window_of(LIMIT, late))

    assert rate_refusal(LIMIT, refused.value, late).message == (
        "this instance registered 3 wakes in 60 s, as many as the service allows; retry in 10 s"
    )
    instance = env.store.get_instance(instance_id)
    assert instance is not None and instance.reg == "r2"  # the refused one wrote nothing
    assert env.store.register_wake(instance_id, at, "next", window_of(LIMIT, start + timedelta(seconds=60)))


def test_the_first_wake_of_a_window_is_one_read_and_one_write_and_nothing_else(endpoint: str) -> None:
    # The read is the registration's version (`reg_seq`), the write counts the wake in its window
    # in the same request that registers it: no request of its own for the count.
    with deployed(endpoint) as env, LostReplyProxy(endpoint) as proxy:
        instance_id = env.new_instance(URL)
        store = DynamoStore(env.settings.table, client=proxy.dynamodb())
        store.register_wake(instance_id, now() + timedelta(hours=1), "first", window_of(LIMIT, now()))
        assert proxy.seen == ["GetItem", "UpdateItem"]


def test_the_rate_is_per_instance(env: Deployed) -> None:
    busy, other = env.new_instance(URL), env.new_instance(URL)
    at = now() + timedelta(hours=1)
    moment = now().replace(second=0, microsecond=0)
    for n in range(3):
        env.store.register_wake(busy, at, f"r{n}", window_of(LIMIT, moment))
    with pytest.raises(WindowFull):
        env.store.register_wake(busy, at, "refused", window_of(LIMIT, moment))
    assert env.store.register_wake(other, at, "fine", window_of(LIMIT, moment)) is not None


# -- concurrent clients ---------------------------------------------------------------------------------
# The local stack's moto, whose DynamoDB operations are atomic as DynamoDB's are (moto_fixes), so
# that what is tested is the store's conditions, not moto's races. Each client has its own boto3
# client, as concurrent Lambda environments would.

CLIENTS = 20


@pytest.fixture(scope="module")
def atomic_endpoint() -> Iterator[str]:
    with moto_endpoint() as endpoint:
        yield endpoint


@pytest.fixture
def atomic(atomic_endpoint: str) -> Iterator[Deployed]:
    with deployed(atomic_endpoint) as made:
        yield made


def own_store(env: Deployed, endpoint: str) -> DynamoStore:
    return DynamoStore(
        env.settings.table, client=boto3.client("dynamodb", endpoint_url=endpoint, config=aws.CLIENT_CONFIG)
    )


def test_concurrent_registrations_never_pass_the_accounts_limit(atomic: Deployed, atomic_endpoint: str) -> None:
    account_id = new_account(atomic.store)
    stores = [own_store(atomic, atomic_endpoint) for _ in range(CLIENTS)]

    def attempt(store: DynamoStore) -> str:
        try:
            return register(store, account_id, 5).id
        except AccountRefused:
            return "refused"

    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        outcomes = list(pool.map(attempt, stores))

    created = [outcome for outcome in outcomes if outcome != "refused"]
    assert len(created) == 5 and outcomes.count("refused") == CLIENTS - 5
    assert sorted(i.id for i in atomic.store.all_instances(account_id)) == sorted(created)
    account = atomic.store.get_account(account_id)
    assert account is not None and account.instance_count == 5


def test_concurrent_wakes_of_one_instance_never_pass_the_rate(atomic: Deployed, atomic_endpoint: str) -> None:
    instance_id = atomic.new_instance(URL)
    stores = [own_store(atomic, atomic_endpoint) for _ in range(CLIENTS)]
    moment = now()
    at = moment + timedelta(hours=1)

    def attempt(numbered: tuple[int, DynamoStore]) -> str:
        n, store = numbered
        try:
            store.register_wake(instance_id, at, f"r{n}", window_of(LIMIT, moment))
            return f"r{n}"
        except WindowFull:
            return "refused"

    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        outcomes = list(pool.map(attempt, enumerate(stores)))

    registered = [outcome for outcome in outcomes if outcome != "refused"]
    assert len(registered) == LIMIT.count
    instance = atomic.store.get_instance(instance_id)
    assert instance is not None and instance.reg in registered  # the table holds one that was let through
