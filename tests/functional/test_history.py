"""An instance's history with moto: the calls the real caller keeps, read back as the route reads
them, with the clock moved rather than waited for."""

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from moto_env import Deployed, Host, serving_host

from wakeup.errors import BadRequestError
from wakeup.logic import instances
from wakeup.logic.delivery import Caller
from wakeup.model import CallRecord, Origin, TokenOwner
from wakeup.times import now
from wakeup.tokens import TokenKind


@pytest.fixture
def env(module_env: Deployed) -> Deployed:
    """The module's resources: each test works with accounts and instances of its own."""
    return module_env


@pytest.fixture
def wake_host() -> Iterator[Host]:
    with serving_host() as host:
        yield host


def owner_of(env: Deployed, instance_id: str) -> TokenOwner:
    instance = env.store.get_instance(instance_id)
    assert instance is not None
    return TokenOwner(TokenKind.ACCOUNT, instance.account_id)


def call_at(env: Deployed, instance_id: str, moment: datetime) -> None:
    """A wake due at `moment`, delivered by the real caller whose clock reads `moment`."""
    caller = Caller(env.store, env.triggers, env.settings, clock=lambda: moment, sleep=lambda _: None)
    caller.keep_history([caller.deliver(env.new_wake(instance_id, moment - timedelta(seconds=1)), Origin.QUEUE)])


def listed(env: Deployed, instance_id: str, when: datetime, limit: str | None = None) -> list[CallRecord]:
    found: list[CallRecord] = []
    cursor: str | None = None
    while True:
        page = instances.calls_page(env.store, owner_of(env, instance_id), instance_id, limit, cursor, when)
        found.extend(page.calls)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def test_calls_older_than_seven_days_are_not_listed(env: Deployed, wake_host: Host) -> None:
    # given a call 7 days and a minute ago, and one now (TTL may not have deleted the old one yet)
    instance_id = env.new_instance(wake_host.url)
    call_at(env, instance_id, now() - timedelta(days=7, minutes=1))
    call_at(env, instance_id, now())
    # then only the recent one is listed
    [recent] = listed(env, instance_id, now())
    assert now() - recent.started_at < timedelta(minutes=1)
    # and a week later, neither
    assert listed(env, instance_id, now() + timedelta(days=7, minutes=1)) == []


def test_each_call_expires_with_ttl_seven_days_after_it_started(env: Deployed, wake_host: Host) -> None:
    instance_id = env.new_instance(wake_host.url)
    started = now()
    call_at(env, instance_id, started)
    [item] = [
        item
        for item in env.clients.dynamodb.scan(TableName=env.settings.table)["Items"]
        if item["pk"]["S"].startswith(f"ATTEMPT#{instance_id}#")
    ]
    assert abs(int(item["expires_at"]["N"]) - (started + timedelta(days=7)).timestamp()) <= 1


def test_at_most_the_newest_hundred_calls_are_kept_newest_first(env: Deployed, wake_host: Host) -> None:
    instance_id = env.new_instance(wake_host.url)
    start = now() - timedelta(hours=1)
    for minute in range(105):
        call_at(env, instance_id, start + timedelta(seconds=minute))
    # read in pages of 40
    calls = listed(env, instance_id, now(), limit="40")
    assert len(calls) == 100
    assert [call.seq for call in calls] == list(range(105, 5, -1))
    assert [call.started_at for call in calls] == sorted((call.started_at for call in calls), reverse=True)


def test_a_cursor_this_service_did_not_give_is_400(env: Deployed, wake_host: Host) -> None:
    instance_id = env.new_instance(wake_host.url)
    call_at(env, instance_id, now())
    for cursor in ("abc", "0", "2", "²", "-1"):
        with pytest.raises(BadRequestError):
            instances.calls_page(env.store, owner_of(env, instance_id), instance_id, None, cursor, now())
