"""Conditional writes whose reply is lost: botocore retries them, and the retry finds its own write
already applied. The caller must count such a write as done (issue 11, "Conditional writes under
SDK retries"): a claim taken is the caller's own (not "busy", which would wait out the 31 s
lease), a failure recorded arms its retry (not left to the sweeper). The store's own answers to
each lost reply are the contract suite's (test_store_contract.py), on both tables.

A proxy in front of moto applies the write and drops the reply; botocore's own retry, configured
as the functions configure it, sends the request again.
"""

from datetime import timedelta

import pytest
from lost_reply import LostReplyProxy
from moto_env import Deployed, serving_host

from wakeup.logic.delivery import Caller, Result
from wakeup.model import Origin, Trigger
from wakeup.table import DynamoStore
from wakeup.times import now


@pytest.fixture
def env(module_env: Deployed) -> Deployed:
    """The module's resources: each test works with accounts and instances of its own."""
    return module_env


def due_wake(env: Deployed, url: str = "http://127.0.0.1:9") -> Trigger:
    instance_id = env.new_instance(url)
    return env.new_wake(instance_id, now() - timedelta(seconds=1))


def test_a_delivery_whose_claim_reply_was_lost_calls_at_once(env: Deployed, proxy: LostReplyProxy) -> None:
    with serving_host() as host:
        trigger = due_wake(env, host.url)
        proxy.lose("UpdateItem")
        caller = Caller(DynamoStore(env.settings.table, client=proxy.dynamodb()), env.triggers, env.settings)
        delivery = caller.deliver(trigger, Origin.QUEUE)
    assert delivery.result is Result.CALLED and delivery.recorded
    assert len(host.calls) == 1
    assert env.triggers.sent == []  # not sent back to wait for its own lease


def test_a_failed_call_whose_record_reply_was_lost_arms_its_retry(env: Deployed, proxy: LostReplyProxy) -> None:
    with serving_host(statuses=[503]) as host:
        trigger = due_wake(env, host.url)
        caller = Caller(DynamoStore(env.settings.table, client=proxy.dynamodb()), env.triggers, env.settings)
        # The claim's reply is lost too here (the first UpdateItem); botocore's retry of it passes,
        # and the record's (the third) is lost.
        proxy.lose("UpdateItem")
        proxy.lose("UpdateItem", after=1)
        delivery = caller.deliver(trigger, Origin.QUEUE)
    assert proxy.lost == ["UpdateItem", "UpdateItem"] and proxy.seen.count("UpdateItem") == 4
    assert delivery.result is Result.FAILED
    assert delivery.recorded and delivery.retry_armed
    assert [sent for sent, _ in env.triggers.sent] == [Trigger(trigger.instance_id, trigger.reg, 1)]
