"""Crashes and races around a call (issue 17): a caller that dies between the host's call and its
outcome, or times out in the middle of a batch; a message that exhausts its redrive into the
dead-letter queue; a registration racing a revocation; a DELETE or a URL move during a call.

The promise each keeps: a wake that stands is called again (never lost), a host is not called
after a recorded 2xx, and a registration that no longer stands is neither recorded nor retried.

The real handlers, store and triggers over the local stack's moto, loopback hosts, and faults
injected at the AWS requests (`faulty.FaultyClient`). Where a lease must end, the caller is given a
clock that far ahead rather than waited for.
"""

import json
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.exceptions import ClientError
from faulty import Died, FaultyClient, throttled
from moto_env import Deployed, Host, LambdaContext, private_handler, serving_host
from sample_events import sqs_batch

from wakeup.arrival import EARLY_REARM_S
from wakeup.errors import UnauthorizedError, UnavailableError
from wakeup.host_call import call_wake
from wakeup.logic import instances
from wakeup.logic.accounts import revoke_account
from wakeup.logic.delivery import Caller, Result
from wakeup.logic.sweeper import sweep
from wakeup.logic.wakes import register_wake
from wakeup.model import Instance, Origin, TokenOwner, Trigger
from wakeup.table import DynamoStore, Registered
from wakeup.times import epoch_ms, now
from wakeup.tokens import TokenKind, hash_token, mint

pytestmark = pytest.mark.usefixtures("metrics_namespace")


@pytest.fixture
def env(own_env: Deployed) -> Deployed:
    return own_env


def due_wake(env: Deployed, url: str) -> Trigger:
    return env.new_wake(env.new_instance(url), now() - timedelta(seconds=1))


def after_the_lease(env: Deployed) -> timedelta:
    """Far enough ahead that a claim taken now has ended, and the sweeper's grace passed too."""
    return timedelta(seconds=env.settings.claim_lease_s + 2 + env.settings.sweep_grace_s + 1)


def ahead(shift: timedelta) -> Callable[[], datetime]:
    return lambda: now() + shift


def swept_at(env: Deployed, moment: datetime) -> list[Trigger]:
    env.triggers.sent.clear()
    sweep(env.store, env.triggers, env.settings, moment)
    return [sent for sent, _ in env.triggers.sent]


# -- a caller that dies -------------------------------------------------------------------------


def test_a_caller_dying_between_the_call_and_its_outcome_leaves_the_wake_to_a_call_after_the_lease(
    env: Deployed, host: Host
) -> None:
    # given a caller that dies once the host has answered, before it records the answer
    trigger = due_wake(env, host.url)

    def call_then_die(*args: Any) -> Any:
        call_wake(*args)
        raise Died

    with pytest.raises(Died):
        Caller(env.store, env.triggers, env.settings, call=call_then_die).deliver(trigger, Origin.QUEUE)
    # then its claim holds off a copy of the trigger until the lease ends (never two calls at once)
    assert Caller(env.store, env.triggers, env.settings).deliver(trigger, Origin.QUEUE).result is Result.BUSY
    assert len(host.calls) == 1
    # and once the lease has ended, the sweeper arms the wake and the host is called again
    shift = after_the_lease(env)
    [rearmed] = swept_at(env, now() + shift)
    assert rearmed == Trigger(trigger.instance_id, trigger.reg, 0, origin="sweeper")
    later = Caller(env.store, env.triggers, env.settings, clock=ahead(shift))
    delivery = later.deliver(rearmed, Origin.QUEUE)
    assert delivery.result is Result.CALLED and delivery.recorded
    assert len(host.calls) == 2


def test_a_caller_timing_out_in_the_middle_of_a_batch_leaves_no_wake_lost_or_called_twice_after_2xx(
    env: Deployed,
) -> None:
    caller = private_handler("caller", env)
    with serving_host() as done, serving_host() as interrupted:
        # given a batch of two wakes, where the caller's time runs out during the second's call
        first, second = due_wake(env, done.url), due_wake(env, interrupted.url)

        def timing_out(url: str, *args: Any, **kwargs: Any) -> Any:
            outcome = call_wake(url, *args, **kwargs)
            if url.startswith(interrupted.url):
                raise Died  # the function is stopped: nothing after this line runs
            return outcome

        caller.call_wake = timing_out  # type: ignore[attr-defined]
        batch = sqs_batch(first, second)
        with pytest.raises(Died):
            caller.lambda_handler(batch, LambdaContext())
        caller.call_wake = call_wake  # type: ignore[attr-defined]
        assert (len(done.calls), len(interrupted.calls)) == (1, 1)

        # when SQS delivers the whole batch again (the invocation failed, so none was deleted)
        env.triggers.sent.clear()
        assert caller.lambda_handler(batch, LambdaContext()) == {"batchItemFailures": []}
        # then the wake that was called and recorded is not called again; the interrupted one is
        # held by its claim and looked at again when the lease ends
        assert (len(done.calls), len(interrupted.calls)) == (1, 1)
        [(resent, delay_s)] = env.triggers.sent
        assert resent == second and 0 < delay_s <= env.settings.claim_lease_s + 2

        # and then it is called again, and recorded
        shift = timedelta(seconds=env.settings.claim_lease_s + 3)
        assert (
            Caller(env.store, env.triggers, env.settings, clock=ahead(shift)).deliver(resent, Origin.QUEUE).result
            is Result.CALLED
        )
        assert (len(done.calls), len(interrupted.calls)) == (1, 2)
    for trigger in (first, second):
        instance = env.store.get_instance(trigger.instance_id)
        assert instance is not None and instance.called_at is not None


# -- the dead-letter queue ----------------------------------------------------------------------


def dead_letter_queue_url(env: Deployed) -> str:
    policy = env.clients.sqs.get_queue_attributes(QueueUrl=env.settings.queue_url, AttributeNames=["RedrivePolicy"])
    arn = json.loads(policy["Attributes"]["RedrivePolicy"])["deadLetterTargetArn"]
    url: str = env.clients.sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[1])["QueueUrl"]
    return url


def as_event(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Messages received from SQS as Lambda's event source hands them to the function."""
    template = sqs_batch("{}")["Records"][0]
    return {
        "Records": [
            {**template, "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"]}
            for m in messages
        ]
    }


def test_a_message_that_exhausts_its_redrive_is_recovered_by_the_sweeper(
    env: Deployed, host: Host, metrics_namespace: None
) -> None:
    # given a wake whose message fails every time: the table throttles the caller's claim
    trigger = env.new_wake(env.new_instance(host.url), now() - timedelta(minutes=2))
    env.triggers.send(trigger, delay_s=0)
    caller = private_handler("caller", env)
    throttled_store = DynamoStore(
        env.settings.table, client=FaultyClient(env.clients.dynamodb, update_item=throttled("UpdateItem"))
    )
    caller.get_store = lambda: throttled_store  # type: ignore[attr-defined]
    # when SQS hands it over as often as the redrive policy allows, and each time it fails
    # (VisibilityTimeout=0: seen again at once, rather than after the queue's 180 s)
    receives = 0
    while True:
        found = env.clients.sqs.receive_message(
            QueueUrl=env.settings.queue_url, VisibilityTimeout=0, AttributeNames=["All"]
        ).get("Messages", [])
        if not found:
            break
        receives += 1
        # A batch whose every record failed raises (Powertools), so Lambda's event source mapping
        # returns it whole, the message with it.
        with pytest.raises(BatchProcessingError):
            caller.lambda_handler(as_event(found), LambdaContext())
    # then it rests in the dead-letter queue, never called
    dead = env.clients.sqs.receive_message(QueueUrl=dead_letter_queue_url(env)).get("Messages", [])
    assert receives == 5 and len(dead) == 1 and host.calls == []
    # and once the table answers again, the sweeper finds the wake and it is called
    [rearmed] = swept_at(env, now())
    caller.get_store = lambda: env.store  # type: ignore[attr-defined]
    assert caller.lambda_handler(sqs_batch(rearmed), LambdaContext()) == {"batchItemFailures": []}
    assert len(host.calls) == 1


# -- a registration racing a revocation ---------------------------------------------------------


def revocable(env: Deployed, url: str) -> tuple[str, str]:
    account = env.store.create_account("test", uuid.uuid4().hex, now())
    instance = env.store.register_instance(account.id, url, f"token-{url}", now()).instance
    return account.id, instance.id


def test_a_wake_registered_just_before_its_account_is_revoked_is_never_called(env: Deployed, host: Host) -> None:
    account_id, instance_id = revocable(env, host.url)
    register_wake(env.store, env.triggers, instance_id, now(), now())
    revoke_account(env.store, account_id)
    [(armed, _)] = env.triggers.sent
    delivery = Caller(env.store, env.triggers, env.settings).deliver(armed, Origin.QUEUE)
    assert delivery.result is Result.STALE and host.calls == []
    assert swept_at(env, now() + after_the_lease(env)) == []


def test_a_wake_registered_just_after_its_account_is_revoked_is_refused(env: Deployed, host: Host) -> None:
    account_id, instance_id = revocable(env, host.url)
    revoke_account(env.store, account_id)
    with pytest.raises(UnauthorizedError):
        register_wake(env.store, env.triggers, instance_id, now(), now())
    assert env.triggers.sent == [] and env.triggers.scheduled == []


def test_a_revocation_during_a_call_records_nothing_and_arms_nothing(env: Deployed) -> None:
    with serving_host(delay_s=0.5, statuses=[503]) as slow:
        account_id, instance_id = revocable(env, slow.url)
        register_wake(env.store, env.triggers, instance_id, now(), now())
        [(armed, _)] = env.triggers.sent
        env.triggers.sent.clear()
        during = threading.Thread(target=lambda: (slow.wait_for_calls(1, 5), revoke_account(env.store, account_id)))
        during.start()
        delivery = Caller(env.store, env.triggers, env.settings).deliver(armed, Origin.QUEUE)
        during.join()
    assert delivery.result is Result.FAILED and not delivery.recorded and not delivery.retry_armed
    assert env.triggers.sent == [] and swept_at(env, now() + after_the_lease(env)) == []


class LaggingIndex(DynamoStore):
    """The table, whose account index has not caught up with the newest instance when it is first
    read: a global secondary index is eventually consistent ("Using Global Secondary Indexes in
    DynamoDB", developer guide: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html),
    and moto's never lags."""

    def __init__(self, env: Deployed, missing: str) -> None:
        super().__init__(env.settings.table, env.clients.dynamodb)
        self.missing = missing
        self.reads = 0

    def all_instances(self, account_id: str) -> list[Instance]:
        self.reads += 1
        found = super().all_instances(account_id)
        return [instance for instance in found if instance.id != self.missing] if self.reads == 1 else found


def test_an_instance_registered_just_before_its_accounts_revocation_is_revoked_though_the_index_lags(
    env: Deployed, host: Host
) -> None:
    # given an account with an instance, and a second one registered the moment before revocation
    account = env.store.create_account("test", uuid.uuid4().hex, now())
    env.store.register_instance(account.id, host.url, uuid.uuid4().hex, now())
    newest = env.store.register_instance(account.id, host.url + "/newest", "newest-token-hash", now()).instance
    register_wake(env.store, env.triggers, newest.id, now(), now())
    [(armed, _)] = env.triggers.sent
    # when the account is revoked while the index does not list the newest instance yet
    lagging = LaggingIndex(env, newest.id)
    revoke_account(lagging, account.id, sleep=lambda _: None)
    # then the newest instance is revoked all the same: its token is refused, its wake not called
    assert env.store.owner_of("newest-token-hash") is None
    assert Caller(env.store, env.triggers, env.settings).deliver(armed, Origin.QUEUE).result is Result.STALE
    assert host.calls == []


# -- a DELETE or a URL move during a call -------------------------------------------------------
#
# While a call holds the instance's claim, both are refused (503, retry): the caller claims before
# it calls, and calls the URL its claim read, so a change landing between the two would be
# followed by a call of the deleted wake, or to the old URL (the fault matrix's *race* rows found
# it). Once the claim has ended (its outcome recorded, or its lease over while a slow host still
# answers), the change lands, and the call under way records nothing.


def past_the_lease(env: Deployed) -> datetime:
    """A moment at which a claim taken now has ended, though its call may still be under way."""
    return now() + timedelta(seconds=env.settings.claim_lease_s + 3)


# A wake due this soon is waited for by the caller that claims it (under EARLY_REARM_S, it is not
# armed again), and not so soon that a loaded machine makes the claim after it is due (at 0.5 s one
# did, and the caller called at once, with no wait for the change to run in).
WAITED_FOR = timedelta(seconds=EARLY_REARM_S - 0.5)


def during_the_claims_wait(change: Callable[[], object], answers: list[object]) -> Callable[[float], None]:
    """The caller's sleep: the first time it waits (after its claim, before its call), `change`
    is tried; its result or refusal is kept in `answers`."""

    def sleep(seconds: float) -> None:
        if not answers:
            try:
                answers.append(change())
            except UnavailableError as refused:
                answers.append(refused)
        time.sleep(seconds)

    return sleep


def test_a_delete_while_a_call_holds_its_claim_is_refused_and_lands_once_the_call_is_recorded(
    env: Deployed, host: Host
) -> None:
    # given: a wake due in a moment, and its account deleting the instance while the caller, its
    # claim taken, waits out the moment before the call
    account = env.store.create_account("test", uuid.uuid4().hex, now())
    instance = env.store.register_instance(account.id, host.url, uuid.uuid4().hex, now()).instance
    trigger = env.new_wake(instance.id, now() + WAITED_FOR)
    owner = TokenOwner(TokenKind.ACCOUNT, account.id)
    answers: list[object] = []
    deleting = during_the_claims_wait(
        lambda: instances.delete(env.store, env.triggers, owner, instance.id, now()), answers
    )
    # when
    delivery = Caller(env.store, env.triggers, env.settings, sleep=deleting).deliver(trigger, Origin.QUEUE)
    # then: the delete was refused with a 503 its client can retry; the call went ahead and was recorded
    [refused] = answers
    assert isinstance(refused, UnavailableError) and refused.status == 503 and "under way" in refused.message
    assert delivery.result is Result.CALLED and delivery.recorded and len(host.calls) == 1
    # and the retry, the claim ended, deletes it: nothing is called after its 2xx
    instances.delete(env.store, env.triggers, owner, instance.id, now())
    assert env.store.get_instance(instance.id) is None
    assert swept_at(env, now() + after_the_lease(env)) == [] and len(host.calls) == 1


def test_a_url_move_while_a_call_holds_its_claim_is_refused_and_lands_once_the_call_is_recorded(env: Deployed) -> None:
    with serving_host() as old, serving_host() as new:
        account = env.store.create_account("test", uuid.uuid4().hex, now())
        token = mint(TokenKind.INSTANCE)
        instance = env.store.register_instance(account.id, old.url, hash_token(token), now()).instance
        trigger = env.new_wake(instance.id, now() + WAITED_FOR)
        owner = TokenOwner(TokenKind.ACCOUNT, account.id)

        def move() -> object:
            return instances.register(
                env.store, env.triggers, owner, new.url, token, now(), env.settings.address_policy
            )

        answers: list[object] = []
        # when: the account moves the instance while the caller, its claim taken, waits to call
        delivery = Caller(env.store, env.triggers, env.settings, sleep=during_the_claims_wait(move, answers)).deliver(
            trigger, Origin.QUEUE
        )
        # then: refused (503, retry); the call went to the URL its wake was registered for
        [refused] = answers
        assert isinstance(refused, UnavailableError) and "under way" in refused.message
        assert delivery.recorded and (len(old.calls), len(new.calls)) == (1, 0)
        # and the retry moves it, its wake forgotten: neither URL is called again
        moved = move()
        assert isinstance(moved, Registered) and moved.moved_from is not None
        assert swept_at(env, now() + after_the_lease(env)) == []
        assert (len(old.calls), len(new.calls)) == (1, 0)


def test_a_delete_refused_for_a_claim_that_ends_before_it_reads_again_is_still_refused(
    env: Deployed, host: Host
) -> None:
    # given: a call that holds its instance's claim, and whose outcome is recorded (the claim
    # ended) just after the delete's transaction was refused for it, before the delete reads again
    account = env.store.create_account("test", uuid.uuid4().hex, now())
    instance = env.store.register_instance(account.id, host.url, uuid.uuid4().hex, now()).instance
    trigger = env.new_wake(instance.id, now() - timedelta(seconds=1))
    claim = env.store.claim_if_due(trigger, now_ms=epoch_ms(now()), due_by=now(), lease_ms=30_000)
    assert claim.claimed
    real = env.store.client

    class EndsTheClaim:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def transact_write_items(self, **request: Any) -> Any:
            try:
                return real.transact_write_items(**request)
            except ClientError:
                assert env.store.record_success(trigger, now())
                raise

    env.store.client = EndsTheClaim()
    owner = TokenOwner(TokenKind.ACCOUNT, account.id)
    # when / then: refused for its client to retry, not answered 204 with the instance still there
    with pytest.raises(UnavailableError):
        instances.delete(env.store, env.triggers, owner, instance.id, now())
    env.store.client = real
    assert env.store.get_instance(instance.id) is not None
    # and the retry deletes it
    instances.delete(env.store, env.triggers, owner, instance.id, now())
    assert env.store.get_instance(instance.id) is None


def during_the_call(host: Host, change: Callable[[], object]) -> threading.Thread:
    def when_called() -> None:
        host.wait_for_calls(1, timeout_s=5)
        change()

    thread = threading.Thread(target=when_called)
    thread.start()
    return thread


@pytest.mark.parametrize("status", [200, 503])
def test_a_delete_during_a_call_past_its_lease_records_nothing_and_arms_nothing(env: Deployed, status: int) -> None:
    with serving_host(delay_s=0.5, statuses=[status]) as slow:
        account = env.store.create_account("test", uuid.uuid4().hex, now())
        instance = env.store.register_instance(account.id, slow.url, f"delete-during-{status}", now()).instance
        trigger = env.new_wake(instance.id, now() - timedelta(seconds=1))
        owner = TokenOwner(TokenKind.ACCOUNT, account.id)
        deleting = during_the_call(
            slow, lambda: instances.delete(env.store, env.triggers, owner, instance.id, past_the_lease(env))
        )
        delivery = Caller(env.store, env.triggers, env.settings).deliver(trigger, Origin.QUEUE)
        deleting.join()
    assert not delivery.recorded and not delivery.retry_armed
    assert env.store.get_instance(instance.id) is None
    assert env.triggers.sent == [] and swept_at(env, now() + after_the_lease(env)) == []
    assert len(slow.calls) == 1


@pytest.mark.parametrize("status", [200, 503])
def test_a_url_move_during_a_call_past_its_lease_records_nothing_and_calls_neither_url_again(
    env: Deployed, status: int
) -> None:
    with serving_host(delay_s=0.5, statuses=[status]) as old, serving_host() as new:
        account = env.store.create_account("test", uuid.uuid4().hex, now())
        instance = env.store.register_instance(account.id, old.url, f"move-during-{status}", now()).instance
        trigger = env.new_wake(instance.id, now() - timedelta(seconds=1))

        moving = during_the_call(
            old, lambda: env.store.register_instance(account.id, new.url, f"move-during-{status}", past_the_lease(env))
        )
        delivery = Caller(env.store, env.triggers, env.settings).deliver(trigger, Origin.QUEUE)
        moving.join()
        moved = env.store.get_instance(instance.id)
        assert moved is not None and moved.url == new.url
        assert (moved.at, moved.called_at, moved.attempts, moved.pending) == (None, None, 0, False)
        assert not delivery.recorded and not delivery.retry_armed
        assert env.triggers.sent == [] and swept_at(env, now() + after_the_lease(env)) == []
        assert (len(old.calls), len(new.calls)) == (1, 0)
