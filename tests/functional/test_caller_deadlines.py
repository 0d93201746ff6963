"""The caller within its claim's lease and its invocation's time (issue 37, holes 2 to 4): no call
that could outlast its lease, no step that the invocation's time cannot hold, and an outcome
write tried again while the lease holds.

The real store and triggers over the local stack's moto, a loopback host, and a clock of the
test's own where the time spent is the subject.
"""

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from faulty import throttled
from moto_env import Deployed, Host, serving_host

from wakeup.arrival import CLOCK_ERROR_S
from wakeup.deadlines import AWS_REQUEST, lease_needed_s
from wakeup.logic.delivery import Caller, OutOfTimeError, Result
from wakeup.model import Origin, Trigger
from wakeup.signing import SigningVersions
from wakeup.table import DynamoStore
from wakeup.times import now


@pytest.fixture
def env(own_env: Deployed) -> Deployed:
    return own_env


class Clock:
    """A clock the test moves: the caller's `clock` and `sleep`, and the invocation's time left."""

    def __init__(self, time_left_s: float = 30.0) -> None:
        self.moment = now()
        self.left_s = time_left_s

    def __call__(self) -> datetime:
        return self.moment

    def pass_s(self, seconds: float) -> None:
        self.moment += timedelta(seconds=seconds)
        self.left_s -= seconds

    def time_left_s(self) -> float:
        return self.left_s


class SlowVersions(DynamoStore):
    """A store whose read of the account's signing versions (after the claim) takes `slow_s`."""

    def __init__(self, env: Deployed, clock: Clock, slow_s: float) -> None:
        super().__init__(env.settings.table, env.store.client)
        self.clock, self.slow_s = clock, slow_s

    def signing_versions(self, account_id: str) -> SigningVersions | None:
        self.clock.pass_s(self.slow_s)
        return super().signing_versions(account_id)


class FailingWrites(DynamoStore):
    """A store whose outcome writes fail (`fails` times, throttled), each `applied` first when set
    (its reply lost), as botocore reports a request whose retries are spent."""

    def __init__(self, env: Deployed, fails: int, *, applied: bool = False, each: Callable[[], None] = lambda: None):
        super().__init__(env.settings.table, env.store.client)
        self.fails, self.applied, self.each = fails, applied, each
        self.tries = 0

    def _try(self, write: Callable[[], bool]) -> bool:
        self.tries += 1
        self.each()
        if self.tries <= self.fails:
            if self.applied:
                write()
            raise throttled("UpdateItem")
        return write()

    def record_success(self, trigger: Trigger, called_at: datetime) -> bool:
        return self._try(lambda: super(FailingWrites, self).record_success(trigger, called_at))

    def record_failure(self, trigger: Trigger, error: str, next_due: datetime | None) -> bool:
        return self._try(lambda: super(FailingWrites, self).record_failure(trigger, error, next_due))


def caller_of(env: Deployed, store: DynamoStore, clock: Clock, lease_s: float | None = None) -> Caller:
    settings = env.settings if lease_s is None else env.settings.model_copy(update={"claim_lease_s": lease_s})
    return Caller(
        store,
        env.triggers,
        settings,
        clock=clock,
        sleep=clock.pass_s,
        signing=env.signing,
        time_left_s=clock.time_left_s,
    )


# -- the lease (hole 2) -------------------------------------------------------------------------


def test_a_call_is_not_made_when_the_requests_since_the_claim_left_too_little_of_the_lease(
    env: Deployed, host: Host
) -> None:
    # given a due wake, and a read of the signing versions after the claim that takes so long that
    # the lease left (9 s from the claim here) no longer covers the call, its outcome's first write
    # and the clocks' margin
    clock = Clock()
    trigger = env.new_wake(env.new_instance(host.url), clock())
    lease_s = env.settings.claim_lease_s + 2
    slow_s = lease_s - lease_needed_s(env.settings.call_timeout_s) + 0.5
    # when it is delivered
    delivery = caller_of(env, SlowVersions(env, clock, slow_s), clock).deliver(trigger, Origin.QUEUE)
    # then the host is not called: the claim's lease could end during the call, and another caller
    # could start a second one; the trigger comes back once the lease is over
    assert delivery.result is Result.DEFERRED and host.calls == []
    [(resent, delay)] = env.triggers.sent
    assert resent == trigger and delay >= lease_s - slow_s
    # and the caller that takes it then calls the host, once
    clock.pass_s(delay)
    again = caller_of(env, env.store, clock).deliver(trigger, Origin.QUEUE)
    assert again.result is Result.CALLED and len(host.calls) == 1


def test_a_call_is_made_when_the_lease_left_covers_it(env: Deployed, host: Host) -> None:
    clock = Clock()
    trigger = env.new_wake(env.new_instance(host.url), clock())
    slow_s = env.settings.claim_lease_s + 2 - lease_needed_s(env.settings.call_timeout_s) - 0.5
    delivery = caller_of(env, SlowVersions(env, clock, slow_s), clock).deliver(trigger, Origin.QUEUE)
    assert delivery.result is Result.CALLED and len(host.calls) == 1


# -- the invocation's time (holes 3 and 4) ------------------------------------------------------


def test_no_claim_is_taken_without_time_left_for_the_call_and_its_outcome(env: Deployed, host: Host) -> None:
    # given an invocation near its end: not enough left for the claim's write, the call and the
    # outcome's write, each request at its longest
    needed_s = AWS_REQUEST.worst_s + 2 + env.settings.call_timeout_s + AWS_REQUEST.worst_s
    clock = Clock(time_left_s=needed_s - 0.5)
    trigger = env.new_wake(env.new_instance(host.url), clock())
    # when
    delivery = caller_of(env, env.store, clock).deliver(trigger, Origin.QUEUE)
    # then nothing is claimed or called, and the trigger is sent again at once, for an invocation
    # with the time (the message itself is done: not left to the queue's visibility timeout)
    assert delivery.result is Result.DEFERRED and host.calls == []
    instance = env.store.get_instance(trigger.instance_id)
    assert instance is not None and instance.claim_until is None
    assert env.triggers.sent == [(trigger, 0)]


def test_a_call_is_not_made_when_slow_reads_left_no_time_for_it_and_its_outcome(env: Deployed, host: Host) -> None:
    # given time enough to claim, then a read of the signing versions that leaves too little of it
    # (a lease long enough for the slow read: the invocation's time is what runs short)
    needed_s = AWS_REQUEST.worst_s + 2 + env.settings.call_timeout_s + AWS_REQUEST.worst_s
    clock = Clock(time_left_s=needed_s + 0.5)
    trigger = env.new_wake(env.new_instance(host.url), clock())
    slow_s = needed_s + 0.5 - (env.settings.call_timeout_s + AWS_REQUEST.worst_s) + 0.5
    # when
    caller = caller_of(env, SlowVersions(env, clock, slow_s), clock, lease_s=60)
    delivery = caller.deliver(trigger, Origin.QUEUE)
    # then the host is not called, and the trigger comes back once the claim's lease is over
    assert delivery.result is Result.DEFERRED and host.calls == []
    [(resent, delay)] = env.triggers.sent
    assert resent == trigger and delay > 0


def test_without_time_even_to_send_the_trigger_again_the_record_fails(env: Deployed, host: Host) -> None:
    clock = Clock(time_left_s=AWS_REQUEST.worst_s - 0.5)
    trigger = env.new_wake(env.new_instance(host.url), clock())
    with pytest.raises(OutOfTimeError):
        caller_of(env, env.store, clock).deliver(trigger, Origin.QUEUE)
    assert host.calls == [] and env.triggers.sent == []


# -- the outcome's write (hole 4) ---------------------------------------------------------------


def test_an_outcome_write_that_fails_is_tried_again_and_the_host_is_called_once(env: Deployed, host: Host) -> None:
    # given outcome writes that fail twice, each after botocore's retries
    clock = Clock()
    trigger = env.new_wake(env.new_instance(host.url), clock())
    store = FailingWrites(env, fails=2)
    # when
    delivery = caller_of(env, store, clock).deliver(trigger, Origin.QUEUE)
    # then the third try records the 2xx: the host is not called again
    assert delivery.result is Result.CALLED and delivery.recorded and store.tries == 3
    instance = env.store.get_instance(trigger.instance_id)
    assert instance is not None and instance.called_at is not None and instance.claim_until is None
    assert len(host.calls) == 1


def test_a_failure_written_before_its_reply_was_lost_counts_recorded_and_arms_its_retry(env: Deployed) -> None:
    # given a failing host, and an outcome write applied whose reply was lost: the next try is
    # refused by that very write
    with serving_host(statuses=[503]) as host:
        clock = Clock()
        trigger = env.new_wake(env.new_instance(host.url), clock())
        store = FailingWrites(env, fails=1, applied=True)
        delivery = caller_of(env, store, clock).deliver(trigger, Origin.QUEUE)
    # then the instance read says it stands: recorded, and the retry armed
    assert delivery.result is Result.FAILED and delivery.recorded and delivery.retry_armed
    assert [sent for sent, _ in env.triggers.sent] == [Trigger(trigger.instance_id, trigger.reg, 1)]


def test_an_outcome_write_is_tried_only_while_the_lease_holds(env: Deployed, host: Host) -> None:
    # given outcome writes that always fail, each taking a request's longest
    clock = Clock(time_left_s=600)
    trigger = env.new_wake(env.new_instance(host.url), clock())
    store = FailingWrites(env, fails=1_000, each=lambda: clock.pass_s(AWS_REQUEST.worst_s))
    # when, then: the caller gives up once the lease is over, and the record fails (its message
    # comes back, for a caller that may write it)
    with pytest.raises(Exception, match="Throttling"):
        caller_of(env, store, clock).deliver(trigger, Origin.QUEUE)
    lease_s = env.settings.claim_lease_s + 2
    assert 1 < store.tries <= lease_s / AWS_REQUEST.worst_s + 1


# -- the clocks (the fault matrix's skewed clocks) ------------------------------------------------


def test_a_caller_whose_clock_runs_ahead_still_calls_no_earlier_than_the_wake(env: Deployed, host: Host) -> None:
    # given a wake due in a second on the true clock, and a caller whose own clock reads the clocks'
    # error bound ahead of it (only the caller's sleeps move either clock: the call is made at the
    # moment the last sleep ends)
    truth = Clock()
    due = (truth() + timedelta(seconds=1)).replace(microsecond=0)  # as the table keeps it: whole ms
    trigger = env.new_wake(env.new_instance(host.url), due)
    ahead = Clock()
    ahead.moment = truth() + timedelta(seconds=CLOCK_ERROR_S)

    def sleep(seconds: float) -> None:
        truth.pass_s(seconds)
        ahead.pass_s(seconds)

    caller = Caller(
        env.store,
        env.triggers,
        env.settings,
        clock=ahead,
        sleep=sleep,
        signing=env.signing,
        time_left_s=ahead.time_left_s,
    )
    # when it is delivered
    delivery = caller.deliver(trigger, Origin.QUEUE)
    # then the host is called, no earlier than the wake's time on the true clock
    assert delivery.result is Result.CALLED and len(host.calls) == 1
    assert truth() >= due
