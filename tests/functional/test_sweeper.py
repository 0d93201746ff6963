"""The sweeper's handler with moto: overdue pending wakes with no live claim are armed again."""

import uuid
from collections.abc import Iterator
from datetime import timedelta
from types import ModuleType, SimpleNamespace

import pytest
from moto_env import (
    Deployed,
    LambdaContext,
    counted,
    deployed,
    emitted_metrics,
    private_handler,
)
from sample_events import load_event

from wakeup.logic import sweeper as sweeper_module
from wakeup.model import Trigger
from wakeup.table import DynamoStore
from wakeup.table import instances as instances_table
from wakeup.table.items import PENDING_SHARDS, instance_key, pending_shard
from wakeup.times import epoch_ms, now

URL = "http://127.0.0.1:9/unused"  # nothing is called here


@pytest.fixture
def env(endpoint: str) -> Iterator[Deployed]:
    """Resources of the test's own (not the module's): what one test queues or leaves overdue
    must not reach another."""
    with deployed(endpoint, WAKEUP_SWEEP_GRACE_S="30") as env:
        yield env


@pytest.fixture
def sweeper(env: Deployed, metrics_namespace: None) -> ModuleType:
    return private_handler("sweeper", env)


def sweep(sweeper: ModuleType) -> dict[str, int]:
    result: dict[str, int] = sweeper.lambda_handler(load_event("sweeper_tick.json"), LambdaContext())
    return result


def test_a_wake_whose_trigger_was_lost_is_armed_again(
    env: Deployed, sweeper: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a wake due two minutes ago that was written but never armed
    instance_id = env.new_instance(URL)
    lost = env.new_wake(instance_id, now() - timedelta(minutes=2))
    # when
    assert sweep(sweeper) == {"overdue": 1, "rearmed": 1, "failed": 0}
    # then its trigger is in the queue, to be delivered now
    assert env.queued() == [lost]
    instance = env.store.get_instance(instance_id)
    assert instance is not None and instance.due is not None
    assert now() - instance.due < timedelta(seconds=5)
    assert counted(capsys.readouterr().out, "OverdueWakesRearmed") == 1


def test_a_wake_re_armed_is_not_re_armed_again_within_the_grace(env: Deployed, sweeper: ModuleType) -> None:
    # given a lost wake that the first sweep re-armed
    lost = env.new_wake(env.new_instance(URL), now() - timedelta(minutes=2))
    assert sweep(sweeper) == {"overdue": 1, "rearmed": 1, "failed": 0}
    assert env.queued() == [lost]
    # when the next sweep comes within the grace, then it leaves the wake to that trigger
    assert sweep(sweeper) == {"overdue": 0, "rearmed": 0, "failed": 0}
    assert env.queued() == []


def test_a_retry_whose_trigger_was_lost_is_armed_with_its_attempt(env: Deployed, sweeper: ModuleType) -> None:
    instance_id = env.new_instance(URL)
    trigger = env.new_wake(instance_id, now() - timedelta(minutes=5))
    assert env.store.record_failure(trigger, "HTTP 503", now() - timedelta(minutes=1))

    sweep(sweeper)

    assert env.queued() == [Trigger(instance_id, trigger.reg, 1)]


def test_a_wake_within_the_grace_is_left_to_its_trigger(
    env: Deployed, sweeper: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    env.new_wake(env.new_instance(URL), now() - timedelta(seconds=10))

    assert sweep(sweeper) == {"overdue": 0, "rearmed": 0, "failed": 0}
    assert env.triggers.sent == []
    # Zero is reported too, so the sweeper's alarm has data every minute.
    assert emitted_metrics(capsys.readouterr().out)["OverdueWakesRearmed"] == [0]


def test_a_wake_with_a_call_in_flight_is_left_alone(env: Deployed, sweeper: ModuleType) -> None:
    trigger = env.new_wake(env.new_instance(URL), now() - timedelta(minutes=2))
    assert env.store.claim(trigger, epoch_ms(now()), 10_000) is not None

    assert sweep(sweeper) == {"overdue": 1, "rearmed": 0, "failed": 0}
    assert env.triggers.sent == []


def test_a_wake_whose_claim_ran_out_is_armed_again(env: Deployed, sweeper: ModuleType) -> None:
    # The caller that claimed it died: its lease ended a minute ago.
    trigger = env.new_wake(env.new_instance(URL), now() - timedelta(minutes=3))
    assert env.store.claim(trigger, epoch_ms(now()) - 120_000, 60_000) is not None

    assert sweep(sweeper)["rearmed"] == 1
    assert env.queued() == [trigger]


def test_called_and_future_wakes_are_not_touched(env: Deployed, sweeper: ModuleType) -> None:
    called = env.new_wake(env.new_instance(URL), now() - timedelta(minutes=2))
    assert env.store.record_success(called, now())
    env.new_wake(env.new_instance(URL), now() + timedelta(hours=1))

    assert sweep(sweeper) == {"overdue": 0, "rearmed": 0, "failed": 0}


def one_instance_per_shard(env: Deployed, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """An instance of one account in each shard of the pending-wakes index. Their ids are drawn
    first (registering random ones until every shard has one would take several times as many
    registrations, each a transaction that moto slows as the table grows)."""
    account = env.store.create_account("test", uuid.uuid4().hex, now())
    chosen: dict[str, uuid.UUID] = {}
    while len(chosen) < PENDING_SHARDS:
        candidate = uuid.uuid4()
        chosen.setdefault(pending_shard(str(candidate)), candidate)
    made = []
    for instance_id in chosen.values():
        with monkeypatch.context() as patched:
            patched.setattr(instances_table, "uuid", SimpleNamespace(uuid4=lambda i=instance_id: i, UUID=uuid.UUID))
            made.append(env.store.register_instance(account.id, URL, uuid.uuid4().hex, now()).instance.id)
    return made


def test_overdue_wakes_in_every_shard_are_found(
    env: Deployed, sweeper: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given an overdue wake in every shard of the index
    lost = [env.new_wake(i, now() - timedelta(minutes=2)) for i in one_instance_per_shard(env, monkeypatch)]
    assert {pending_shard(t.instance_id) for t in lost} == {str(s) for s in range(PENDING_SHARDS)}
    # when
    result = sweep(sweeper)
    # then
    assert result == {"overdue": len(lost), "rearmed": len(lost), "failed": 0}
    assert sorted((t for t, _ in env.triggers.sent), key=str) == sorted(lost, key=str)


class _ShardUnreadable:
    """The store's client, answering every BatchGetItem of the first shard read with all its keys
    unprocessed, as a throttled table may ("BatchGetItem", DynamoDB API reference)."""

    def __init__(self, client: object, unreadable: set[str]) -> None:
        self._client, self._unreadable = client, unreadable

    def batch_get_item(self, RequestItems: dict[str, dict[str, object]]) -> object:  # noqa: N803
        [request] = RequestItems.values()
        if {key["pk"]["S"] for key in request["Keys"]} & self._unreadable:  # type: ignore[attr-defined]
            return {"Responses": {}, "UnprocessedKeys": RequestItems}
        return self._client.batch_get_item(RequestItems=RequestItems)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._client, name)


def test_a_shard_that_cannot_be_read_leaves_the_other_shards_swept(
    env: Deployed, sweeper: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given two lost wakes in two shards, the first of which the table will not read now
    unread, kept = env.new_instance(URL), env.new_instance(URL)
    while int(pending_shard(kept)) <= int(pending_shard(unread)):
        unread, kept = kept, env.new_instance(URL)
    for instance_id in (unread, kept):
        env.new_wake(instance_id, now() - timedelta(minutes=2))
    client = _ShardUnreadable(env.store.client, {instance_key(unread)})
    monkeypatch.setattr(sweeper, "get_store", lambda: DynamoStore(env.settings.table, client, sleep=lambda _: None))
    # when
    with pytest.raises(sweeper_module.UnreadShardsError) as unswept:
        sweep(sweeper)
    # then the other shard's wake is re-armed all the same and counted, and the sweep still fails
    # (its alarm watches function errors)
    assert [t.instance_id for t, _ in env.triggers.sent] == [kept]
    assert (unswept.value.result.rearmed, unswept.value.result.failed) == (1, 1)
    assert counted(capsys.readouterr().out, "OverdueWakesRearmed") == 1
