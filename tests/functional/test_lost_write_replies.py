"""Writes whose reply is lost (issue 17): botocore retries a request that AWS applied before its
reply was lost, and the retry then meets its own write. Each comes out as if the reply had come
back: a registration counted once and not refused by the window it wrote, a delete answered 204,
the sweeper's postpone and a call's outcome counted as written.

A proxy in front of moto applies the request and drops the reply (`lost_reply.LostReplyProxy`);
botocore's own retry, configured as the functions configure it, sends the request again.
"""

from datetime import timedelta
from typing import Any

import pytest
from lost_reply import LostReplyProxy
from moto_env import Deployed, serving_host

from wakeup.host_call import call_wake
from wakeup.logic import instances
from wakeup.logic.delivery import Caller, Result, Source
from wakeup.logic.wakes import WakeLimit, register_wake, window_of
from wakeup.model import TokenOwner, Trigger
from wakeup.table import DynamoStore
from wakeup.table.items import instance_key
from wakeup.times import epoch_ms, now
from wakeup.tokens import TokenKind


@pytest.fixture
def env(own_env: Deployed) -> Deployed:
    return own_env


def raw_item(env: Deployed, instance_id: str) -> dict[str, Any]:
    return dict(
        env.clients.dynamodb.get_item(
            TableName=env.settings.table, Key={"pk": {"S": instance_key(instance_id)}}, ConsistentRead=True
        )["Item"]
    )


# -- registering a wake -------------------------------------------------------------------------


def lose_reply_of_write(store: DynamoStore, proxy: LostReplyProxy, operation: str, nth: int) -> None:
    """Loses the reply of the store's `nth` `operation` request (its first attempt; botocore's
    retries are the same request, not counted)."""
    made = 0

    def before(**_: Any) -> None:
        nonlocal made
        made += 1
        if made == nth:
            proxy.lose(operation)

    store.client.meta.events.register(f"before-call.dynamodb.{operation}", before)


@pytest.mark.parametrize(
    ("earlier", "nth"),
    [(0, 1), (1, 2)],
    # The first of a window starts its count in one write; a further one is refused by the
    # window's start, sees the count, and counts itself in a second write (the one lost here).
    ids=["first of its window", "second of its window"],
)
def test_a_counted_registration_whose_reply_was_lost_is_counted_once_and_not_refused(
    env: Deployed, proxy: LostReplyProxy, lossy_store: DynamoStore, earlier: int, nth: int
) -> None:
    # given an instance that registered `earlier` wakes in this window, of two allowed
    instance_id = env.new_instance("http://127.0.0.1:9")
    limit, moment = WakeLimit(count=2, window_s=3600), now()
    for _ in range(earlier):
        register_wake(env.store, env.triggers, instance_id, moment + timedelta(minutes=5), moment, limit)
    # when the reply of the write that counts the registration is lost
    lose_reply_of_write(lossy_store, proxy, "UpdateItem", nth)
    previous = lossy_store.register_wake(
        instance_id, moment + timedelta(minutes=5), "new-reg", window_of(limit, moment)
    )
    # then botocore retried it, and the retry found it applied: counted once, not refused
    assert proxy.lost == ["UpdateItem"] and proxy.seen.count("UpdateItem") >= 2
    assert previous is not None
    item = raw_item(env, instance_id)
    assert item["reg"] == {"S": "new-reg"}
    assert item["wake_count"] == {"N": str(earlier + 1)}


@pytest.mark.parametrize("ahead", [timedelta(minutes=1), timedelta(0)], ids=["a minute ahead", "now"])
def test_a_registration_whose_reply_was_lost_still_removes_the_schedule_it_replaced(
    env: Deployed, proxy: LostReplyProxy, lossy_store: DynamoStore, ahead: timedelta
) -> None:
    # given a wake a day ahead, armed as a schedule
    instance_id = env.new_instance("http://127.0.0.1:9")
    register_wake(env.store, env.triggers, instance_id, now() + timedelta(days=1), now())
    assert env.schedule_input(instance_id) is not None
    # when a wake due soon replaces it, and the registration's reply is lost
    proxy.lose("UpdateItem")
    moment = now()
    register_wake(lossy_store, env.triggers, instance_id, moment + ahead, moment)
    # then the new wake went through SQS and the old schedule is gone, as without the loss
    assert proxy.lost == ["UpdateItem"]
    [(sent, _)] = env.triggers.sent
    current = env.store.get_instance(instance_id)
    assert current is not None and sent == Trigger(instance_id, current.reg or "", 0)
    assert env.schedule_input(instance_id) is None


# -- deleting an instance -----------------------------------------------------------------------


def test_a_delete_whose_reply_was_lost_is_204_and_counted_once(
    env: Deployed, proxy: LostReplyProxy, lossy_store: DynamoStore
) -> None:
    account = env.store.create_account("test", "lost-delete", now())
    kept = env.store.register_instance(account.id, "http://127.0.0.1:9", "kept-token", now()).instance
    gone = env.store.register_instance(account.id, "http://127.0.0.1:9", "gone-token", now()).instance
    proxy.lose("TransactWriteItems")
    # No exception: the route answers 204 (NotFoundError would be its 404).
    instances.delete(lossy_store, env.triggers, TokenOwner(TokenKind.ACCOUNT, account.id), gone.id, now())
    assert proxy.lost == ["TransactWriteItems"] and proxy.seen.count("TransactWriteItems") == 2
    assert env.store.get_instance(gone.id) is None and env.store.get_instance(kept.id) is not None
    after = env.store.get_account(account.id)
    assert after is not None and after.instance_count == 1


# -- the sweeper's postpone ---------------------------------------------------------------------


def test_a_postpone_whose_reply_was_lost_counts_as_written(
    env: Deployed, proxy: LostReplyProxy, lossy_store: DynamoStore
) -> None:
    instance_id = env.new_instance("http://127.0.0.1:9")
    trigger = env.new_wake(instance_id, now() - timedelta(minutes=2))
    moment = now()
    proxy.lose("UpdateItem")
    assert lossy_store.postpone(trigger, moment, epoch_ms(moment))
    assert proxy.lost == ["UpdateItem"] and proxy.seen.count("UpdateItem") == 2
    instance = env.store.get_instance(instance_id)
    assert instance is not None and instance.due is not None
    assert abs(instance.due - moment) < timedelta(milliseconds=1)


# -- a call's outcome ---------------------------------------------------------------------------


def test_a_delivery_whose_outcome_reply_was_lost_counts_it_recorded(env: Deployed, proxy: LostReplyProxy) -> None:
    with serving_host() as host:
        instance_id = env.new_instance(host.url)
        trigger = env.new_wake(instance_id, now() - timedelta(seconds=1))

        def call_then_lose_the_next_write(*args: Any) -> Any:
            # The claim is written by now: the next UpdateItem is the outcome's.
            proxy.lose("UpdateItem")
            return call_wake(*args)

        caller = Caller(
            DynamoStore(env.settings.table, client=proxy.dynamodb()),
            env.triggers,
            env.settings,
            call=call_then_lose_the_next_write,
        )
        delivery = caller.deliver(trigger, Source.QUEUE)
    # claim, outcome, outcome's retry
    assert proxy.lost == ["UpdateItem"] and proxy.seen.count("UpdateItem") == 3
    assert delivery.result is Result.CALLED and delivery.recorded
    assert len(host.calls) == 1
    instance = env.store.get_instance(instance_id)
    assert instance is not None and instance.called_at is not None and instance.claim_until is None
