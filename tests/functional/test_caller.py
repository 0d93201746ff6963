"""The caller's handler with moto: SQS batches and Scheduler invocations, against a loopback host."""

import logging
import threading
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any

import pytest
from faulty import BatchWrites, FaultyClient, throttled
from moto_env import (
    Deployed,
    Host,
    LambdaContext,
    counted,
    deployed,
    emitted_metrics,
    private_handler,
    serving_host,
)
from sample_events import load_event, scheduler_invocation, sqs_batch
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from wakeup import __version__
from wakeup.addresses import REFUSED_CALL
from wakeup.arrival import CLOCK_ERROR_S
from wakeup.host_call import CallOutcome
from wakeup.logic.accounts import revoke_account, signing_secret
from wakeup.logic.delivery import Caller, Result
from wakeup.model import Instance, Origin, Trigger
from wakeup.observability import logger
from wakeup.table import Claim, DynamoStore
from wakeup.times import epoch_ms, now

pytestmark = pytest.mark.usefixtures("metrics_namespace")


@pytest.fixture
def env(own_queue_env: Deployed) -> Deployed:
    """The module's table, schedule group and secret, and a caller queue of the test's own: what one
    test queues must not reach another (each test's instances are its own)."""
    return own_queue_env


@pytest.fixture
def wake_host() -> Iterator[Host]:
    with serving_host() as host:
        yield host


def handler(module: ModuleType, event: Any) -> Any:
    return module.lambda_handler(event, LambdaContext())


@pytest.fixture
def caller(env: Deployed) -> ModuleType:
    return private_handler("caller", env)


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def log_records() -> Iterator[list[logging.LogRecord]]:
    records = Records()
    logging.getLogger(logger.name).addHandler(records)
    yield records.records
    logging.getLogger(logger.name).removeHandler(records)


# -- calling ------------------------------------------------------------------------------------


def test_a_due_trigger_calls_the_host_once_and_records_the_call(
    env: Deployed, caller: ModuleType, wake_host: Host, capsys: pytest.CaptureFixture[str]
) -> None:
    # given
    instance_id = env.new_instance(wake_host.url + "/base")
    trigger = env.new_wake(instance_id, now() - timedelta(seconds=1))
    # when
    reply = handler(caller, sqs_batch(trigger))
    # then
    assert reply == {"batchItemFailures": []}
    [call] = wake_host.calls
    assert call.path == "/base/wake"
    assert call.headers["User-Agent"] == f"wakeup/{__version__}"
    assert call.headers["Wakeup-Instance"] == instance_id
    instance = env.store.get_instance(instance_id)
    assert instance is not None
    assert instance.called_at is not None
    assert instance.called_at >= call.at - timedelta(milliseconds=1)  # stored to the millisecond
    assert (instance.attempts, instance.last_error, instance.pending) == (0, None, False)
    printed = capsys.readouterr().out
    assert counted(printed, "WakesCalled") == 1
    [lateness] = emitted_metrics(printed)["WakeLateness"]
    # a second at least (the wake was due a second ago), and no more than the host saw: the caller
    # measures it as the call starts
    assert instance.at is not None
    assert 1000 <= lateness <= (call.at - instance.at) / timedelta(milliseconds=1) + 1


def _signed_by(secret: str, headers: dict[str, str]) -> bool:
    try:
        Webhook(secret).verify("", headers, json_parse=False)
    except WebhookVerificationError:
        return False
    return True


def test_a_call_is_signed_with_the_accounts_secret_naming_instance_and_registration(
    env: Deployed, caller: ModuleType, wake_host: Host
) -> None:
    # given
    instance_id = env.new_instance(wake_host.url)
    trigger = env.new_wake(instance_id, now() - timedelta(seconds=1))
    instance = env.store.get_instance(instance_id)
    assert instance is not None
    account = env.store.get_account(instance.account_id)
    assert account is not None
    other = env.store.get_instance(env.new_instance(wake_host.url))
    assert other is not None
    # when
    handler(caller, sqs_batch(trigger))
    # then
    [call] = wake_host.calls
    assert call.headers["webhook-id"] == f"wake_{instance_id}_{trigger.reg}"
    # the whole second the call started in: the host saw it then or a moment later
    assert 0 <= call.at.timestamp() - int(call.headers["webhook-timestamp"]) < 2
    assert _signed_by(signing_secret(env.signing, account), call.headers)
    # another account's secret does not verify it
    other_account = env.store.get_account(other.account_id)
    assert other_account is not None
    assert not _signed_by(signing_secret(env.signing, other_account), call.headers)


def _rotated_call(env: Deployed, caller: ModuleType, host: Host, overlap: timedelta) -> tuple[str, str, Any]:
    """A call to a new instance of an account whose secret was rotated with `overlap` left (negative:
    over): the old secret, the new one, and the call."""
    instance_id = env.new_instance(host.url)
    instance = env.store.get_instance(instance_id)
    assert instance is not None
    account = env.store.get_account(instance.account_id)
    assert account is not None
    rotated = env.store.rotate_signing(account, now() + overlap)
    assert rotated is not None
    handler(caller, sqs_batch(env.new_wake(instance_id, now() - timedelta(seconds=1))))
    [call] = [call for call in host.calls if call.headers["Wakeup-Instance"] == instance_id]
    return signing_secret(env.signing, account), signing_secret(env.signing, rotated), call


def test_during_a_rotations_overlap_both_secrets_sign(env: Deployed, caller: ModuleType, wake_host: Host) -> None:
    old, new, call = _rotated_call(env, caller, wake_host, overlap=timedelta(hours=1))
    assert old != new
    assert len(call.headers["webhook-signature"].split(" ")) == 2
    assert _signed_by(old, call.headers) and _signed_by(new, call.headers)


def test_after_a_rotations_overlap_only_the_new_secret_signs(
    env: Deployed, caller: ModuleType, wake_host: Host
) -> None:
    old, new, call = _rotated_call(env, caller, wake_host, overlap=timedelta(seconds=-1))
    assert len(call.headers["webhook-signature"].split(" ")) == 1
    assert _signed_by(new, call.headers) and not _signed_by(old, call.headers)


def test_the_records_of_a_batch_are_called_concurrently(env: Deployed, caller: ModuleType) -> None:
    # given a host that holds each call until all ten are in flight, or for 1.5 s (within the call's
    # timeout): called a few at a time, they never all are
    with serving_host(gather=10, delay_s=1.5) as slow_host:
        triggers = [env.new_wake(env.new_instance(slow_host.url), now()) for _ in range(10)]

        reply = handler(caller, sqs_batch(*triggers))

        assert reply == {"batchItemFailures": []}
        assert sorted(c.headers["Wakeup-Instance"] for c in slow_host.calls) == sorted(t.instance_id for t in triggers)
    assert slow_host.most_in_flight == 10


def test_a_batch_reads_its_accounts_signing_versions_once(
    env: Deployed, caller: ModuleType, wake_host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given eleven wakes of one account due now, and the store's reads of signing versions counted
    account = env.store.create_account("test", uuid.uuid4().hex, now())
    instances = [
        env.store.register_instance(account.id, wake_host.url, uuid.uuid4().hex, now()).instance.id for _ in range(11)
    ]
    triggers = [env.new_wake(instance, now()) for instance in instances]
    read = env.store.signing_versions
    reads: list[str] = []

    def counted_read(account_id: str) -> Any:
        reads.append(account_id)
        return read(account_id)

    monkeypatch.setattr(env.store, "signing_versions", counted_read)

    # when one batch delivers ten of them, and a second batch the last
    assert handler(caller, sqs_batch(*triggers[:10])) == {"batchItemFailures": []}
    assert handler(caller, sqs_batch(triggers[10])) == {"batchItemFailures": []}

    # then every call is signed, with one read of the account's versions per batch, not per call
    assert len(wake_host.calls) == 11 and all("webhook-signature" in c.headers for c in wake_host.calls)
    assert reads == [account.id, account.id]


# -- the history ----------------------------------------------------------------------------------


def history_store(env: Deployed, caller: ModuleType, unprocessed: int = 0) -> tuple[BatchWrites, list[float]]:
    """The handler's store over moto's client, its BatchWriteItem requests counted (the first
    `unprocessed` making half their puts only), its waits recorded rather than slept."""
    writes = BatchWrites(env.clients.dynamodb, unprocessed)
    waits: list[float] = []
    store = DynamoStore(env.settings.table, client=writes, sleep=waits.append)
    caller.get_store = lambda: store
    return writes, waits


def kept_calls(env: Deployed, instance_ids: list[str]) -> list[str]:
    return [i for i in instance_ids if len(env.store.read_calls(i, [1])) == 1]


def test_a_batchs_calls_are_kept_in_one_request_after_they_are_made(
    env: Deployed, caller: ModuleType, wake_host: Host
) -> None:
    # given ten wakes due now, and a Scheduler's one
    writes, _ = history_store(env, caller)
    instances = [env.new_instance(wake_host.url) for _ in range(11)]
    triggers = [env.new_wake(instance, now()) for instance in instances]
    # when one batch delivers ten, and the schedule the last
    assert handler(caller, sqs_batch(*triggers[:10])) == {"batchItemFailures": []}
    assert handler(caller, scheduler_invocation(triggers[10])) == {"result": "called"}
    # then each invocation kept its calls in one BatchWriteItem: ten puts, then one
    assert writes.requests == [10, 1]
    assert kept_calls(env, instances) == instances


def test_unprocessed_history_items_are_sent_again_and_those_left_logged_not_raised(
    env: Deployed, caller: ModuleType, wake_host: Host, log_records: list[logging.LogRecord]
) -> None:
    # given a table that leaves half of every batch's puts unprocessed
    writes, waits = history_store(env, caller, unprocessed=100)
    instances = [env.new_instance(wake_host.url) for _ in range(4)]
    # when a batch of four calls its hosts
    reply = handler(caller, sqs_batch(*(env.new_wake(instance, now()) for instance in instances)))
    # then every record succeeded; the unprocessed puts were sent again after waits, eight sends
    assert reply == {"batchItemFailures": []} and len(wake_host.calls) == 4
    assert writes.requests == [4, 2, 1, 1, 1, 1, 1, 1] and len(waits) == 7
    # and the call never written is logged (the others kept), its wake's outcome recorded
    [left] = [r.instance_id for r in log_records if r.getMessage() == "call not kept in the history"]  # type: ignore[attr-defined]
    assert kept_calls(env, instances) == [i for i in instances if i != left]
    instance = env.store.get_instance(left)
    assert instance is not None and instance.called_at is not None and not instance.pending


def test_a_history_write_that_fails_fails_no_record(
    env: Deployed, caller: ModuleType, wake_host: Host, log_records: list[logging.LogRecord]
) -> None:
    # given a table whose BatchWriteItem is throttled through botocore's retries
    store = DynamoStore(
        env.settings.table, client=FaultyClient(env.clients.dynamodb, batch_write_item=throttled("BatchWriteItem"))
    )
    caller.get_store = lambda: store
    triggers = [env.new_wake(env.new_instance(wake_host.url), now()) for _ in range(3)]
    # when / then the batch succeeds whole, and each call left out of the history is logged
    assert handler(caller, sqs_batch(*triggers)) == {"batchItemFailures": []}
    assert len(wake_host.calls) == 3
    not_kept = [r for r in log_records if r.getMessage() == "call not kept in the history"]
    assert sorted(r.instance_id for r in not_kept) == sorted(t.instance_id for t in triggers)  # type: ignore[attr-defined]


def test_a_record_that_is_not_a_trigger_fails_alone(env: Deployed, caller: ModuleType, wake_host: Host) -> None:
    trigger = env.new_wake(env.new_instance(wake_host.url), now())
    event = sqs_batch(trigger, "not json", '{"instance_id": 7, "reg": "r", "attempt": 0}')

    reply = handler(caller, event)

    bad = [record["messageId"] for record in event["Records"][1:]]
    assert sorted(item["itemIdentifier"] for item in reply["batchItemFailures"]) == sorted(bad)
    assert len(wake_host.calls) == 1


def test_the_sample_events_are_handled(caller: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    # The samples name instances this table never had: their triggers are stale and dropped.
    assert handler(caller, load_event("sqs_caller_batch.json")) == {"batchItemFailures": []}
    assert handler(caller, load_event("scheduler_caller.json")) == {"result": "stale"}
    assert counted(capsys.readouterr().out, "StaleTriggersDropped") == 3


# -- stale triggers -------------------------------------------------------------------------------


def test_a_trigger_for_a_replaced_registration_is_dropped(
    env: Deployed, caller: ModuleType, wake_host: Host, capsys: pytest.CaptureFixture[str]
) -> None:
    instance_id = env.new_instance(wake_host.url)
    replaced = env.new_wake(instance_id, now())
    env.new_wake(instance_id, now() + timedelta(minutes=10))

    handler(caller, sqs_batch(replaced))

    assert wake_host.calls == []
    assert env.triggers.sent == []
    assert counted(capsys.readouterr().out, "StaleTriggersDropped") == 1


def test_a_trigger_for_a_deleted_instance_is_dropped(env: Deployed, caller: ModuleType, wake_host: Host) -> None:
    instance_id = env.new_instance(wake_host.url)
    trigger = env.new_wake(instance_id, now())
    instance = env.store.get_instance(instance_id)
    assert instance is not None
    env.store.delete_instance(instance, now())

    assert handler(caller, sqs_batch(trigger)) == {"batchItemFailures": []}
    assert wake_host.calls == []


def test_a_trigger_for_an_instance_of_a_revoked_account_is_dropped(
    env: Deployed, caller: ModuleType, wake_host: Host
) -> None:
    instance_id = env.new_instance(wake_host.url)
    trigger = env.new_wake(instance_id, now())
    instance = env.store.get_instance(instance_id)
    assert instance is not None
    revoke_account(env.store, instance.account_id)

    handler(caller, sqs_batch(trigger))

    assert wake_host.calls == []


def test_a_message_delivered_twice_calls_once(env: Deployed, caller: ModuleType, wake_host: Host) -> None:
    trigger = env.new_wake(env.new_instance(wake_host.url), now())

    handler(caller, sqs_batch(trigger))
    handler(caller, sqs_batch(trigger))

    assert len(wake_host.calls) == 1


def test_two_copies_in_one_batch_call_once_and_look_again_after_the_lease(env: Deployed, caller: ModuleType) -> None:
    # A slow host, so that one copy finds the other's call in flight.
    with serving_host(delay_s=0.5) as slow_host:
        trigger = env.new_wake(env.new_instance(slow_host.url), now())

        handler(caller, sqs_batch(trigger, trigger))

        assert len(slow_host.calls) == 1
    # The copy that found the claim held comes back once the lease is over (counted from the call's
    # start, which may be a second after the claim); by then the call is recorded.
    [(resent, delay)] = env.triggers.sent
    assert resent == trigger
    assert env.settings.claim_lease_s <= delay <= env.settings.claim_lease_s + 2


# -- timing -------------------------------------------------------------------------------------


def test_a_copy_refused_after_a_slow_claim_write_looks_again_when_the_lease_ends(
    env: Deployed, wake_host: Host
) -> None:
    clock = [now()]
    trigger = env.new_wake(env.new_instance(wake_host.url), clock[0])

    class SlowClaims(DynamoStore):
        """The claim write takes 3 s, and another call claims the wake meanwhile."""

        def claim_if_due(self, trigger: Trigger, now_ms: int, due_by: datetime, lease_ms: int) -> Claim:
            clock[0] += timedelta(seconds=3)
            assert super().claim_if_due(trigger, epoch_ms(clock[0]), due_by, lease_ms).claimed
            return super().claim_if_due(trigger, now_ms, due_by, lease_ms)

    store = SlowClaims(env.settings.table, env.store.client)
    caller = Caller(store, env.triggers, env.settings, clock=lambda: clock[0])
    assert caller.deliver(trigger, Origin.QUEUE).result is Result.BUSY
    # then it looks again when the other call's lease ends, not 3 s after that
    [(resent, delay)] = env.triggers.sent
    assert resent == trigger
    assert delay == env.settings.claim_lease_s + 2  # the lease runs from the call, up to 2 s after the claim
    assert not wake_host.calls


def test_a_schedules_call_waits_for_its_time_from_after_the_read_and_the_claim(env: Deployed) -> None:
    # A schedule's trigger is read, then claimed, then its last moment waited out: a wait measured
    # from before the two requests would sleep their time again and call the host that much late.
    start = now()
    clock = [start.replace(microsecond=start.microsecond // 1000 * 1000)]  # whole ms, as the table keeps
    start, due = clock[0], clock[0] + timedelta(seconds=1)
    trigger = env.new_wake(env.new_instance("http://host.example"), due)
    claimed_from: list[int] = []

    class SlowRequests(DynamoStore):
        """The read and the claim take 0.3 s each."""

        def get_instance(self, instance_id: str) -> Instance | None:
            clock[0] += timedelta(seconds=0.3)
            return super().get_instance(instance_id)

        def claim_if_due(self, trigger: Trigger, now_ms: int, due_by: datetime, lease_ms: int) -> Claim:
            claimed_from.append(now_ms)
            clock[0] += timedelta(seconds=0.3)
            return super().claim_if_due(trigger, now_ms, due_by, lease_ms)

    def sleep(seconds: float) -> None:
        clock[0] += timedelta(seconds=seconds)

    called_at: list[datetime] = []

    def call(url: str, instance_id: str, timeout_s: float, headers: Mapping[str, str]) -> CallOutcome:
        called_at.append(clock[0])
        return CallOutcome(status=204, error=None)

    store = SlowRequests(env.settings.table, env.store.client)
    caller = Caller(store, env.triggers, env.settings, call=call, clock=lambda: clock[0], sleep=sleep)
    assert caller.deliver(trigger, Origin.SCHEDULE).result is Result.CALLED
    assert called_at == [due + timedelta(seconds=CLOCK_ERROR_S)]  # the clocks' error waited out past it
    # and the claim's lease runs from the claim, not from before the read
    assert claimed_from == [epoch_ms(start + timedelta(seconds=0.3))]


def test_an_early_trigger_is_armed_again_for_its_time(env: Deployed, caller: ModuleType, wake_host: Host) -> None:
    at = now() + timedelta(seconds=10)
    trigger = env.new_wake(env.new_instance(wake_host.url), at)

    before = now()
    handler(caller, sqs_batch(trigger))
    after = now()

    assert wake_host.calls == []
    [(sent, delay)] = env.triggers.sent
    assert sent == trigger
    # the time left until the wake when the trigger was sent again
    assert (at - after).total_seconds() <= delay <= (at - before).total_seconds()
    assert env.delayed_count() == 1


def test_the_last_moment_before_the_wake_is_waited_out(env: Deployed, caller: ModuleType, wake_host: Host) -> None:
    at = now() + timedelta(seconds=1.5)
    trigger = env.new_wake(env.new_instance(wake_host.url), at)

    assert now() < at, "the wake came due before the caller had a moment to wait out"
    handler(caller, sqs_batch(trigger))

    # then the call comes at the wake's time, within the promise's second and a second more for a
    # loaded machine
    [call] = wake_host.calls
    assert at <= call.at < at + timedelta(seconds=2)
    assert env.triggers.sent == []


# -- failures -----------------------------------------------------------------------------------


def test_a_failed_call_is_recorded_and_retried_a_second_later(
    env: Deployed,
    caller: ModuleType,
    wake_host: Host,
    capsys: pytest.CaptureFixture[str],
    log_records: list[logging.LogRecord],
) -> None:
    # given a host that fails once
    wake_host.statuses = [503]
    instance_id = env.new_instance(wake_host.url)
    trigger = env.new_wake(instance_id, now())
    # when
    handler(caller, sqs_batch(trigger))
    # then the failure is visible and a retry is armed for a second later
    failed = env.store.get_instance(instance_id)
    assert failed is not None
    assert (failed.attempts, failed.last_error, failed.called_at) == (1, "HTTP 503", None)
    retry = Trigger(instance_id, trigger.reg, 1)
    [(sent, delay)] = env.triggers.sent
    assert (sent, round(delay)) == (retry, 1)
    assert failed.due is not None and failed.due > wake_host.calls[0].at + timedelta(seconds=0.99)
    printed = capsys.readouterr().out
    assert counted(printed, "CallsFailed") == 1
    assert counted(printed, "RetriesScheduled") == 1
    [warning] = [r for r in log_records if r.getMessage() == "wake call failed"]
    assert warning.__dict__["instance_id"] == instance_id
    assert warning.__dict__["host"] == wake_host.url.removeprefix("http://")
    assert (warning.__dict__["error"], warning.__dict__["attempts"]) == ("HTTP 503", 1)

    # when the retry arrives, the host is called again no sooner than a second later, and succeeds
    handler(caller, sqs_batch(retry))
    first, second = wake_host.calls
    assert second.monotonic - first.monotonic >= 1
    called = env.store.get_instance(instance_id)
    assert called is not None
    assert (called.attempts, called.last_error) == (0, None)
    assert called.called_at is not None


def test_the_wait_doubles_with_each_failure(env: Deployed, caller: ModuleType, wake_host: Host) -> None:
    instance_id = env.new_instance(wake_host.url)
    trigger = env.new_wake(instance_id, now() - timedelta(seconds=30))
    # Two failures already recorded: the next one is the third, followed by 4 s.
    for attempt in range(2):
        assert env.store.record_failure(Trigger(instance_id, trigger.reg, attempt), "HTTP 500", now())
    wake_host.statuses = [500]

    handler(caller, sqs_batch(Trigger(instance_id, trigger.reg, 2)))

    [(sent, delay)] = env.triggers.sent
    assert (sent.attempt, round(delay)) == (3, 4)


def test_an_unreachable_host_is_recorded_as_such(env: Deployed, caller: ModuleType) -> None:
    import socket

    with socket.socket() as sock:  # bound, not listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        instance_id = env.new_instance(f"http://127.0.0.1:{sock.getsockname()[1]}")
        trigger = env.new_wake(instance_id, now())

        handler(caller, sqs_batch(trigger))

    instance = env.store.get_instance(instance_id)
    assert instance is not None
    assert (instance.attempts, instance.last_error) == (1, "connection refused")


def test_a_wake_past_its_maximum_age_is_given_up(endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    with deployed(endpoint, WAKEUP_MAX_WAKE_AGE_S="2") as env, serving_host(statuses=[503]) as host:
        caller = private_handler("caller", env)
        instance_id = env.new_instance(host.url)
        trigger = env.new_wake(instance_id, now() - timedelta(seconds=5))

        handler(caller, sqs_batch(trigger))

        instance = env.store.get_instance(instance_id)
        assert instance is not None
        assert (instance.attempts, instance.last_error, instance.pending) == (1, "HTTP 503", False)
        assert env.triggers.sent == []
    printed = capsys.readouterr().out
    assert counted(printed, "WakesGivenUp") == 1
    assert counted(printed, "RetriesScheduled") == 0


# -- claims -------------------------------------------------------------------------------------


def test_a_claim_held_by_another_call_sends_the_trigger_again_after_its_lease(
    env: Deployed, caller: ModuleType, wake_host: Host
) -> None:
    trigger = env.new_wake(env.new_instance(wake_host.url), now())
    assert env.store.claim(trigger, epoch_ms(now()), 3000) is not None

    handler(caller, sqs_batch(trigger))

    assert wake_host.calls == []
    [(sent, delay)] = env.triggers.sent
    assert (sent, delay) == (trigger, 3)


def test_a_claim_past_its_lease_is_taken_over(env: Deployed, caller: ModuleType, wake_host: Host) -> None:
    # A caller that claimed five seconds ago with a four-second lease, and died.
    trigger = env.new_wake(env.new_instance(wake_host.url), now())
    assert env.store.claim(trigger, epoch_ms(now()) - 5000, 4000) is not None

    handler(caller, sqs_batch(trigger))

    assert len(wake_host.calls) == 1


def test_a_call_for_a_registration_replaced_meanwhile_records_nothing(env: Deployed, caller: ModuleType) -> None:
    # The host answers once the replacement is written (or after 1.5 s, within the call's timeout).
    with serving_host(release=threading.Event(), delay_s=1.5) as slow_host:
        instance_id = env.new_instance(slow_host.url)
        trigger = env.new_wake(instance_id, now())
        later = now() + timedelta(minutes=5)

        def replace_during_the_call() -> None:
            slow_host.wait_for_calls(1, timeout_s=5)
            env.new_wake(instance_id, later)
            assert slow_host.release is not None
            slow_host.release.set()

        replacer = threading.Thread(target=replace_during_the_call)
        replacer.start()
        handler(caller, sqs_batch(trigger))
        replacer.join()

    instance = env.store.get_instance(instance_id)
    assert instance is not None
    assert instance.reg != trigger.reg
    assert (instance.called_at, instance.attempts) == (None, 0)
    assert instance.due is not None and abs(instance.due - later) < timedelta(milliseconds=1)


# -- Scheduler ----------------------------------------------------------------------------------


def test_a_schedule_firing_early_arms_the_last_approach_through_sqs(
    env: Deployed, caller: ModuleType, wake_host: Host
) -> None:
    trigger = env.new_wake(env.new_instance(wake_host.url), now() + timedelta(seconds=40))

    assert handler(caller, scheduler_invocation(trigger)) == {"result": "early"}

    [(sent, delay)] = env.triggers.sent
    assert sent == trigger
    assert 38 < delay <= 40
    assert wake_host.calls == []


def test_a_schedule_firing_early_is_looked_at_by_a_read_not_a_refused_write(
    env: Deployed, caller: ModuleType, wake_host: Host
) -> None:
    # A refused conditional write costs a write unit; a consistent read a fifth of that.
    trigger = env.new_wake(env.new_instance(wake_host.url), now() + timedelta(seconds=40))
    operations: list[str] = []
    env.store.client.meta.events.register(
        "before-call.dynamodb", lambda model, **_: operations.append(model.name), unique_id="count-ops"
    )
    try:
        assert handler(caller, scheduler_invocation(trigger)) == {"result": "early"}
    finally:
        env.store.client.meta.events.unregister("before-call.dynamodb", unique_id="count-ops")

    assert operations == ["GetItem"]
    [(sent, _)] = env.triggers.sent
    assert sent == trigger


def test_a_due_schedule_calls_the_host(env: Deployed, caller: ModuleType, wake_host: Host) -> None:
    trigger = env.new_wake(env.new_instance(wake_host.url), now())

    assert handler(caller, scheduler_invocation(trigger)) == {"result": "called"}
    assert len(wake_host.calls) == 1


def test_a_stale_schedule_re_arms_the_registration_the_instance_holds(
    env: Deployed, caller: ModuleType, wake_host: Host
) -> None:
    # given a schedule that fired for a registration replaced by one hours away (whose own update
    # of the one schedule the firing may have swallowed)
    instance_id = env.new_instance(wake_host.url)
    replaced = env.new_wake(instance_id, now() + timedelta(hours=1))
    at = now() + timedelta(hours=3)
    current = env.new_wake(instance_id, at)
    # when
    assert handler(caller, scheduler_invocation(replaced)) == {"result": "stale"}
    # then
    assert env.schedule_input(instance_id) == current
    [(scheduled, fire_at)] = env.triggers.scheduled
    assert scheduled == current
    lead = timedelta(seconds=env.settings.schedule_lead_s)
    assert lead - timedelta(seconds=1) <= at - fire_at <= lead + timedelta(seconds=1)
    assert wake_host.calls == []


def test_a_stale_schedule_for_a_called_wake_arms_nothing(env: Deployed, caller: ModuleType, wake_host: Host) -> None:
    trigger = env.new_wake(env.new_instance(wake_host.url), now())
    assert handler(caller, scheduler_invocation(trigger)) == {"result": "called"}

    assert handler(caller, scheduler_invocation(trigger)) == {"result": "stale"}

    assert (env.triggers.sent, env.triggers.scheduled) == ([], [])
    assert len(wake_host.calls) == 1


def test_a_schedule_input_that_is_not_a_trigger_raises_for_scheduler_to_retry(caller: ModuleType) -> None:
    with pytest.raises(ValueError, match="instance_id"):
        handler(caller, {"hello": "world"})


# -- addresses ------------------------------------------------------------------------------------------


def test_a_call_to_a_denied_address_is_a_failed_call_retried_at_the_normal_backoff(
    endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Loopback is not allowed back here: the default ranges, as on AWS.
    with deployed(endpoint, WAKEUP_CALL_ALLOWED_CIDRS="") as env, serving_host() as host:
        caller = private_handler("caller", env)
        instance_id = env.new_instance(host.url)
        trigger = env.new_wake(instance_id, now() - timedelta(seconds=1))

        started = now()
        handler(caller, sqs_batch(trigger))
        spent_s = (now() - started).total_seconds()

        assert host.calls == []
        instance = env.store.get_instance(instance_id)
        assert instance is not None
        assert (instance.attempts, instance.last_error, instance.pending) == (1, REFUSED_CALL, True)
        # The first retry, one second after the failure, like any failed call's (less the moment
        # spent since then, when it is armed).
        [(retry, delay_s)] = env.triggers.sent
        assert retry == Trigger(instance_id, trigger.reg, 1) and 1 - spent_s <= delay_s <= 1
    printed = capsys.readouterr().out
    assert counted(printed, "CallsRefused") == 1
    assert counted(printed, "CallsFailed") == 1
