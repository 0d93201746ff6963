"""The caller under faults (issue 17): AWS requests that fail and callers that die between two of
their requests. Whatever fails, a wake that stands is called again later (never lost), a host that
answered 2xx is not called again, and no claim outlives the call it was taken for.

The real store, triggers and keys over the local stack's moto, with faults injected at the AWS
requests (`faulty.FaultyClient`), and a loopback host.
"""

from datetime import timedelta

import pytest
from botocore.exceptions import ClientError
from faulty import Died, FaultyClient, throttled
from moto_env import Deployed, Host, serving_host

from wakeup.factories import signing_keys
from wakeup.logic.delivery import Caller, Result
from wakeup.logic.sweeper import sweep
from wakeup.model import Origin, Trigger
from wakeup.signing import SigningKeys
from wakeup.table import DynamoStore
from wakeup.times import epoch_ms, now
from wakeup.triggers import Triggers


@pytest.fixture
def env(own_env: Deployed) -> Deployed:
    return own_env


def faulty_store(env: Deployed, **faults: BaseException) -> DynamoStore:
    return DynamoStore(env.settings.table, client=FaultyClient(env.clients.dynamodb, **faults))


def due_wake(env: Deployed, host: Host, late_s: float = 1) -> Trigger:
    return env.new_wake(env.new_instance(host.url), now() - timedelta(seconds=late_s))


def swept_later(env: Deployed, seconds: float) -> list[Trigger]:
    """What a sweep `seconds` from now arms (the triggers it sends, as the caller would get them)."""
    env.triggers.sent.clear()
    sweep(env.store, env.triggers, env.settings, now() + timedelta(seconds=seconds))
    return [sent for sent, _ in env.triggers.sent]


# -- the outcome before the history -------------------------------------------------------------


def test_a_caller_dying_between_the_outcome_and_the_history_leaves_the_wake_called(env: Deployed, host: Host) -> None:
    # given a caller whose process ends when it goes to write the history item
    trigger = due_wake(env, host)
    caller = Caller(faulty_store(env, batch_write_item=Died()), env.triggers, env.settings)
    # when
    delivery = caller.deliver(trigger, Origin.QUEUE)
    with pytest.raises(Died):
        caller.keep_history([delivery])
    # then the 2xx is recorded, so nothing (no sweep, no copy of the trigger) calls the host again
    assert len(host.calls) == 1
    instance = env.store.get_instance(trigger.instance_id)
    assert instance is not None and instance.called_at is not None and not instance.pending
    assert swept_later(env, env.settings.claim_lease_s + env.settings.sweep_grace_s + 60) == []


def test_a_history_item_that_cannot_be_written_leaves_a_failed_wake_retried(env: Deployed) -> None:
    with serving_host(statuses=[503]) as host:
        trigger = due_wake(env, host)
        store = faulty_store(env, batch_write_item=throttled("BatchWriteItem"))
        caller = Caller(store, env.triggers, env.settings)
        delivery = caller.deliver(trigger, Origin.QUEUE)
        caller.keep_history([delivery])  # logged, not raised
    assert store.client.calls == ["batch_write_item"]
    assert delivery.result is Result.FAILED and delivery.recorded and delivery.retry_armed
    assert [sent for sent, _ in env.triggers.sent] == [Trigger(trigger.instance_id, trigger.reg, 1)]
    assert env.store.read_calls(trigger.instance_id, [1]) == []  # the item was indeed not written


def test_a_history_item_that_cannot_be_written_leaves_a_2xx_recorded(env: Deployed, host: Host) -> None:
    trigger = due_wake(env, host)
    store = faulty_store(env, batch_write_item=throttled("BatchWriteItem"))
    caller = Caller(store, env.triggers, env.settings)
    delivery = caller.deliver(trigger, Origin.QUEUE)
    caller.keep_history([delivery])  # logged, not raised
    assert store.client.calls == ["batch_write_item"]
    assert delivery.result is Result.CALLED and delivery.recorded
    instance = env.store.get_instance(trigger.instance_id)
    assert instance is not None and instance.called_at is not None


# -- a retry that cannot be armed ---------------------------------------------------------------


def test_a_failed_call_whose_retry_cannot_be_armed_is_retried_by_the_sweeper(env: Deployed) -> None:
    # given a caller whose SQS refuses every message
    unarmed = Triggers(env.settings, FaultyClient(env.clients.sqs, send_message=throttled("SendMessage")))
    with serving_host(statuses=[503]) as host:
        trigger = due_wake(env, host)
        delivery = Caller(env.store, unarmed, env.settings).deliver(trigger, Origin.QUEUE)
    # then the failure is recorded with its retry's time, though no trigger carries it
    assert delivery.result is Result.FAILED and delivery.recorded and not delivery.retry_armed
    instance = env.store.get_instance(trigger.instance_id)
    assert instance is not None and instance.pending and instance.attempts == 1 and instance.claim_until is None
    # and the sweeper arms it once it is overdue
    retry = Trigger(trigger.instance_id, trigger.reg, 1, origin="sweeper")
    assert swept_later(env, env.settings.sweep_grace_s + 2) == [retry]


# -- lateness -----------------------------------------------------------------------------------


def test_lateness_counts_from_the_wakes_time_when_the_sweeper_moved_its_next_call(env: Deployed, host: Host) -> None:
    # given a wake 87 s late whose trigger was lost, re-armed by the sweeper a second ago
    trigger = due_wake(env, host, late_s=87)
    assert env.store.postpone(trigger, now() - timedelta(seconds=1), epoch_ms(now()))
    # when it is called
    caller = Caller(env.store, env.triggers, env.settings)
    delivery = caller.deliver(Trigger(trigger.instance_id, trigger.reg, 0, origin=Origin.SWEEPER), Origin.QUEUE)
    caller.keep_history([delivery])
    # then the lateness (logs and metrics read the delivery's) and the history both say 87 s
    assert delivery.result is Result.CALLED
    assert delivery.lateness_ms is not None and 87_000 <= delivery.lateness_ms < 90_000
    [kept] = env.store.read_calls(trigger.instance_id, [1])
    assert kept.lateness_ms is not None and 87_000 <= kept.lateness_ms < 90_000
    assert kept.trigger is Origin.SWEEPER


def test_lateness_is_left_out_for_a_retry(env: Deployed, host: Host) -> None:
    trigger = due_wake(env, host, late_s=30)
    assert env.store.record_failure(trigger, "HTTP 503", now() - timedelta(seconds=1))
    delivery = Caller(env.store, env.triggers, env.settings).deliver(
        Trigger(trigger.instance_id, trigger.reg, 1), Origin.QUEUE
    )
    assert delivery.result is Result.CALLED and delivery.lateness_ms is None


# -- signing ------------------------------------------------------------------------------------


def signing_fault_caller(env: Deployed, fault: str) -> Caller:
    """A caller whose signing fails as `fault` says, after the claim's write."""
    store, secrets = env.store, env.clients.secretsmanager
    if fault == "master throttled":
        secrets = FaultyClient(secrets, get_secret_value=throttled("GetSecretValue"))
    elif fault == "master gone":
        secrets = FaultyClient(
            secrets,
            get_secret_value=env.clients.secretsmanager.exceptions.ResourceNotFoundException(
                {"Error": {"Code": "ResourceNotFoundException", "Message": "not found"}}, "GetSecretValue"
            ),
        )
    elif fault == "versions unreadable":  # the account's item, read after the claim
        store = faulty_store(env, get_item=throttled("GetItem"))
    return Caller(store, env.triggers, env.settings, signing=signing_keys(env.settings.master_key_secret, secrets))


@pytest.mark.parametrize("fault", ["master throttled", "master gone", "versions unreadable"])
def test_a_call_that_cannot_be_signed_frees_its_claim_and_arms_its_retry(env: Deployed, host: Host, fault: str) -> None:
    # given
    trigger = due_wake(env, host)
    caller = signing_fault_caller(env, fault)
    # when
    delivery = caller.deliver(trigger, Origin.QUEUE)
    # then no call was made, no claim is held, and the retry is armed like a failed call's
    assert host.calls == []
    assert delivery.result is Result.FAILED and delivery.recorded and delivery.retry_armed
    assert delivery.lateness_ms is None
    instance = env.store.get_instance(trigger.instance_id)
    assert instance is not None and instance.claim_until is None and instance.pending
    assert instance.attempts == 1 and instance.last_error is not None
    assert [sent for sent, _ in env.triggers.sent] == [Trigger(trigger.instance_id, trigger.reg, 1)]

    # and once the keys can be read again, the retry calls the host, signed
    retry = Caller(env.store, env.triggers, env.settings, signing=env.signing)
    assert retry.deliver(Trigger(trigger.instance_id, trigger.reg, 1), Origin.QUEUE).result is Result.CALLED
    [call] = host.calls
    assert "webhook-signature" in {name.lower() for name in call.headers}


def test_a_call_that_cannot_be_signed_before_its_time_is_retried_no_sooner_than_its_time(
    env: Deployed, host: Host
) -> None:
    # given a wake due in a moment, which the claim takes before its time (the keys are read before
    # the wait), and keys that cannot be read (found by make faults: retries came early)
    trigger = env.new_wake(env.new_instance(host.url), now() + timedelta(seconds=1.5))
    caller = signing_fault_caller(env, "master throttled")
    # when
    delivery = caller.deliver(trigger, Origin.QUEUE)
    # then the retry is due its backoff after the wake's time, not after the failed read
    assert delivery.result is Result.FAILED and host.calls == []
    instance = env.store.get_instance(trigger.instance_id)
    assert instance is not None and instance.at is not None and instance.due is not None
    assert instance.due >= instance.at + timedelta(seconds=1)


def test_an_empty_master_key_frees_the_claim_and_arms_the_retry(env: Deployed, host: Host) -> None:
    class Empty:
        def get(self, name: str, max_age: int) -> str:
            return ""

    trigger = due_wake(env, host)
    caller = Caller(env.store, env.triggers, env.settings, signing=SigningKeys(Empty(), "empty"))
    delivery = caller.deliver(trigger, Origin.QUEUE)
    assert host.calls == [] and delivery.result is Result.FAILED and delivery.retry_armed
    instance = env.store.get_instance(trigger.instance_id)
    assert instance is not None and instance.claim_until is None and instance.attempts == 1


def test_a_retry_whose_schedule_keeps_changing_is_left_to_the_sweeper(env: Deployed) -> None:
    # given a wake that failed ten times, so its next retry is 900 s away: beyond the SQS horizon,
    # through Scheduler, whose schedule exists for every create and is gone for every update
    contended = Triggers(
        env.settings,
        env.clients.sqs,
        FaultyClient(
            env.clients.scheduler,
            create_schedule=ClientError({"Error": {"Code": "ConflictException"}}, "CreateSchedule"),
            update_schedule=ClientError({"Error": {"Code": "ResourceNotFoundException"}}, "UpdateSchedule"),
        ),
    )
    with serving_host(statuses=[503]) as host:
        trigger = due_wake(env, host)
        for attempt in range(10):
            assert env.store.record_failure(Trigger(trigger.instance_id, trigger.reg, attempt), "HTTP 503", now())
        # when its eleventh call fails too
        delivery = Caller(env.store, contended, env.settings).deliver(
            Trigger(trigger.instance_id, trigger.reg, 10), Origin.QUEUE
        )
    # then the failure is recorded with the retry's time, for the sweeper to arm (no exception)
    assert delivery.result is Result.FAILED and delivery.recorded and not delivery.retry_armed
    instance = env.store.get_instance(trigger.instance_id)
    assert instance is not None and instance.attempts == 11 and instance.pending and instance.claim_until is None
