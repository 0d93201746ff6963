"""Writes whose reply is lost (issue 17), as the service's logic meets them: botocore retries a
request that AWS applied before its reply was lost, and the retry then meets its own write. A
registration still removes the schedule it replaced, a delete is answered 204, a call's outcome
counts as written. Each write of the table alone, with a lost reply, is in the contract suite
(test_store_contract.py), on DynamoDB and on the simulator's table.

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
from wakeup.logic.delivery import Caller, Result
from wakeup.logic.wakes import register_wake
from wakeup.model import Origin, TokenOwner, Trigger
from wakeup.table import DynamoStore
from wakeup.table.items import instance_key
from wakeup.times import now
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
        delivery = caller.deliver(trigger, Origin.QUEUE)
    # claim, outcome, outcome's retry
    assert proxy.lost == ["UpdateItem"] and proxy.seen.count("UpdateItem") == 3
    assert delivery.result is Result.CALLED and delivery.recorded
    assert len(host.calls) == 1
    instance = env.store.get_instance(instance_id)
    assert instance is not None and instance.called_at is not None and instance.claim_until is None
