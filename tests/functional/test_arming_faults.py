"""Arming under faults (issue 17): the sweeper unable to re-arm one wake, Scheduler's schedule
changing under a registration (`ScheduleContentionError`), and removing a schedule failing. The
table stays the truth: every pending wake is armed again (at worst by a later sweep), and a
schedule left behind finds nothing to call when it fires.

The real store and triggers over the local stack's moto, with faults injected at the AWS requests
(`faulty.FaultyClient`).
"""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from faulty import FaultyClient, throttled
from lost_reply import LostReplyProxy
from moto_env import Deployed, RecordingTriggers, serving_host

from wakeup.errors import UnavailableError
from wakeup.logic import instances
from wakeup.logic.delivery import Caller, Result
from wakeup.logic.sweeper import Sweep, sweep
from wakeup.logic.wakes import forget_trigger, register_wake
from wakeup.model import Instance, Origin, TokenOwner, Trigger
from wakeup.table import DynamoStore
from wakeup.times import format_time, now
from wakeup.tokens import TokenKind

URL = "http://127.0.0.1:9/unused"  # nothing is called here


@pytest.fixture
def env(own_env: Deployed) -> Deployed:
    return own_env


class RefusingOne(RecordingTriggers):
    """Triggers whose SQS refuses the messages of one instance (throttled), and sends the others."""

    def __init__(self, env: Deployed, refused: str) -> None:
        super().__init__(env.settings, env.clients)
        self.refused = refused

    def send(self, trigger: Trigger, delay_s: float) -> None:
        if trigger.instance_id == self.refused:
            raise throttled("SendMessage")
        super().send(trigger, delay_s)


def scheduler_error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, operation)


def faulty_scheduler(env: Deployed, **faults: BaseException) -> RecordingTriggers:
    triggers = RecordingTriggers(env.settings, env.clients)
    triggers.scheduler = FaultyClient(env.clients.scheduler, **faults)
    return triggers


def sent_by_sweep(env: Deployed, moment: datetime) -> list[Trigger]:
    env.triggers.sent.clear()
    sweep(env.store, env.triggers, env.settings, moment)
    return [sent for sent, _ in env.triggers.sent]


# -- the sweeper --------------------------------------------------------------------------------


def test_a_wake_the_sweeper_cannot_re_arm_leaves_the_others_armed_and_is_armed_by_a_later_sweep(
    env: Deployed,
) -> None:
    # given two wakes whose triggers were lost, and an SQS that refuses the first one's message
    stuck = env.new_wake(env.new_instance(URL), now() - timedelta(minutes=2))
    other = env.new_wake(env.new_instance(URL), now() - timedelta(minutes=2))
    refusing = RefusingOne(env, stuck.instance_id)
    # when the sweeper runs
    moment = now()
    result = sweep(env.store, refusing, env.settings, moment)
    # then it went on past the one it could not arm
    assert result == Sweep(overdue=2, rearmed=1, failed=1)
    assert [sent for sent, _ in refusing.sent] == [Trigger(other.instance_id, other.reg, 0, origin="sweeper")]
    # and a later sweep, once SQS takes messages again, finds the stuck one and arms it
    later = moment + timedelta(seconds=env.settings.sweep_grace_s + 60)
    assert Trigger(stuck.instance_id, stuck.reg, 0, origin="sweeper") in sent_by_sweep(env, later)


# -- registrations ------------------------------------------------------------------------------


def test_a_schedule_changing_under_a_registration_is_503_and_the_sweeper_arms_the_wake(env: Deployed) -> None:
    # given a Scheduler where the schedule exists for every create and is gone for every update
    contended = faulty_scheduler(
        env,
        create_schedule=scheduler_error("ConflictException", "CreateSchedule"),
        update_schedule=scheduler_error("ResourceNotFoundException", "UpdateSchedule"),
    )
    instance_id = env.new_instance(URL)
    at = now() + timedelta(hours=1)
    # when a wake an hour ahead is registered
    with pytest.raises(UnavailableError):
        register_wake(env.store, contended, instance_id, at, now())
    # then the table holds it, pending, though no trigger does
    instance = env.store.get_instance(instance_id)
    assert instance is not None and instance.pending and instance.reg is not None
    assert env.schedule_input(instance_id) is None and env.triggers.sent == []
    # and the sweeper arms it once it is overdue
    swept = sent_by_sweep(env, at + timedelta(seconds=env.settings.sweep_grace_s + 1))
    assert swept == [Trigger(instance_id, instance.reg, 0, origin="sweeper")]


class RacedBefore:
    """A Scheduler client that, the first time `operation` is about to be sent, lets `race` (a
    racing request) run whole first; `calls` lists the operations asked of it."""

    def __init__(self, client: Any, operation: str, race: Callable[[], None]) -> None:
        self.client = client
        self.operation = operation
        self.race: Callable[[], None] | None = race
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        def called(**params: Any) -> Any:
            self.calls.append(name)
            race, self.race = (self.race, None) if name == self.operation else (None, self.race)
            if race is not None:
                race()
            return method(**params)

        return called


def raced_triggers(env: Deployed, operation: str, race: Callable[[], None]) -> RecordingTriggers:
    triggers = RecordingTriggers(env.settings, env.clients)
    triggers.scheduler = RacedBefore(env.clients.scheduler, operation, race)
    return triggers


def assert_armed_as_held(env: Deployed, instance_id: str, at: datetime) -> Instance:
    """The table holds the registration at `at`, and the instance's schedule carries it."""
    held = env.store.get_instance(instance_id)
    assert held is not None and held.at is not None and held.reg is not None
    assert format_time(held.at) == format_time(at)
    assert env.schedule_input(instance_id) == Trigger(instance_id, held.reg, 0)
    return held


def test_a_create_that_meets_a_newer_registrations_schedule_leaves_that_schedule(env: Deployed) -> None:
    # given a registration an hour ahead, and a newer one two hours ahead that writes the table
    # after it and creates the schedule before it
    instance_id = env.new_instance(URL)
    newer_at = now() + timedelta(hours=2)

    def newer() -> None:
        register_wake(env.store, env.triggers, instance_id, newer_at, now())

    triggers = raced_triggers(env, "create_schedule", newer)
    # when the first one arms its schedule: refused as there, so replaced, then re-read
    register_wake(env.store, triggers, instance_id, now() + timedelta(hours=1), now())
    # then the schedule left is the newer registration's, the one the table holds
    held = assert_armed_as_held(env, instance_id, newer_at)
    assert [trigger.reg for trigger, _ in triggers.scheduled] == [triggers.scheduled[0][0].reg, held.reg]


def test_a_removal_that_takes_a_newer_far_registrations_schedule_arms_it_again(env: Deployed) -> None:
    # given a far wake, replaced by a near one whose removal of the old schedule comes late: after
    # a newer far registration wrote the table and created its schedule
    instance_id = env.new_instance(URL)
    register_wake(env.store, env.triggers, instance_id, now() + timedelta(hours=2), now())
    newer_at = now() + timedelta(hours=1)

    def newer() -> None:
        register_wake(env.store, env.triggers, instance_id, newer_at, now())

    # when the near one removes the schedule there, the newer one's
    triggers = raced_triggers(env, "delete_schedule", newer)
    register_wake(env.store, triggers, instance_id, now() + timedelta(minutes=1), now())
    # then it read the table again and armed the newer registration (created: it had just removed it)
    assert_armed_as_held(env, instance_id, newer_at)
    assert triggers.scheduler.calls == ["delete_schedule", "create_schedule"]


class _ThrottledAfterFirstRead:
    """The table's client, its reads throttled after the first (the registration's own, of the
    item before its write: `wakeup.table.registrations`)."""

    def __init__(self, client: Any) -> None:
        self.client, self.reads = client, 0

    def get_item(self, **request: Any) -> Any:
        self.reads += 1
        if self.reads > 1:
            raise throttled("GetItem")
        return self.client.get_item(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_a_near_wake_whose_check_after_a_removal_fails_is_armed_and_answered(env: Deployed) -> None:
    # given a far wake, and a table whose reads fail (throttled) when a near wake replaces it
    instance_id = env.new_instance(URL)
    register_wake(env.store, env.triggers, instance_id, now() + timedelta(hours=2), now())
    env.triggers.sent.clear()
    unreadable = DynamoStore(env.settings.table, client=_ThrottledAfterFirstRead(env.clients.dynamodb))
    # when the near wake is registered: the schedule removed, the read after it refused
    register_wake(unreadable, env.triggers, instance_id, now() + timedelta(minutes=1), now())
    # then the request stands (the read was for a newer registration's sake, and there is none)
    held = env.store.get_instance(instance_id)
    assert held is not None and held.reg is not None
    assert [sent for sent, _ in env.triggers.sent] == [Trigger(instance_id, held.reg, 0)]
    assert env.schedule_input(instance_id) is None


def test_a_deleted_instances_schedule_is_removed_without_reading_the_table_again(env: Deployed) -> None:
    account = env.store.create_account("test", "deleted-far-wake", now())
    instance = env.store.register_instance(account.id, URL, "deleted-far-wake-token", now()).instance
    register_wake(env.store, env.triggers, instance.id, now() + timedelta(days=1), now())
    operations: list[str] = []
    env.store.client.meta.events.register(
        "before-call.dynamodb", lambda model, **_: operations.append(model.name), unique_id="count-delete-ops"
    )
    try:
        instances.delete(env.store, env.triggers, TokenOwner(TokenKind.ACCOUNT, account.id), instance.id, now())
    finally:
        env.store.client.meta.events.unregister("before-call.dynamodb", unique_id="count-delete-ops")
    # A deleted instance takes no newer registration: nothing to re-arm, so no read after the removal.
    assert env.schedule_input(instance.id) is None
    assert operations[-1] != "GetItem", operations


def test_a_new_schedule_after_a_late_removal_leaves_the_newer_registrations(env: Deployed) -> None:
    # given three registrations of one instance: a far one (A) that creates its schedule last; a
    # near one written after it, whose removal comes after a third, far (X), wrote the table and
    # created the schedule
    instance_id = env.new_instance(URL)
    x_at = now() + timedelta(hours=1)

    def x() -> None:
        register_wake(env.store, env.triggers, instance_id, x_at, now())

    def near() -> None:
        near_at = now() + timedelta(minutes=1)
        register_wake(env.store, raced_triggers(env, "delete_schedule", x), instance_id, near_at, now())

    # when A arms its schedule after all that
    register_wake(
        env.store, raced_triggers(env, "create_schedule", near), instance_id, now() + timedelta(hours=2), now()
    )
    # then X's schedule is the one left: the removal armed it again, and A's create met it
    assert_armed_as_held(env, instance_id, x_at)


def test_a_forgotten_wakes_removal_that_takes_a_newer_wakes_schedule_arms_it_again(env: Deployed) -> None:
    # given a far wake that an instance's move forgets, and a newer far registration that comes
    # between the move's write and its removal of the old schedule
    instance_id = env.new_instance(URL)
    register_wake(env.store, env.triggers, instance_id, now() + timedelta(hours=2), now())
    forgotten = env.store.get_instance(instance_id)
    newer_at = now() + timedelta(hours=1)

    def newer() -> None:
        register_wake(env.store, env.triggers, instance_id, newer_at, now())

    # when the move removes the schedule, by then the newer one's
    forget_trigger(env.store, raced_triggers(env, "delete_schedule", newer), forgotten, now())
    # then the newer registration is armed again
    assert_armed_as_held(env, instance_id, newer_at)


def test_a_schedule_that_cannot_be_removed_is_503_and_finds_nothing_to_call_when_it_fires(env: Deployed) -> None:
    with serving_host() as host:
        # given a wake a day ahead, armed as a schedule
        instance_id = env.new_instance(host.url)
        register_wake(env.store, env.triggers, instance_id, now() + timedelta(days=1), now())
        old = env.schedule_input(instance_id)
        assert old is not None
        # when a wake due now replaces it, and the old schedule cannot be removed
        failing = faulty_scheduler(env, delete_schedule=throttled("DeleteSchedule"))
        with pytest.raises(UnavailableError):
            register_wake(env.store, failing, instance_id, now(), now())
        # then the new wake is armed and called
        current = env.store.get_instance(instance_id)
        assert current is not None and current.reg != old.reg
        [(sent, _)] = failing.sent
        caller = Caller(env.store, env.triggers, env.settings)
        assert caller.deliver(sent, Origin.QUEUE).result is Result.CALLED
        # and the old schedule, left behind, calls nothing and arms nothing when it fires
        assert env.schedule_input(instance_id) == old
        assert caller.deliver(old, Origin.SCHEDULE).result is Result.STALE
    assert len(host.calls) == 1
    assert env.triggers.sent == []


def test_a_deleted_instances_schedule_that_cannot_be_removed_finds_nothing_when_it_fires(env: Deployed) -> None:
    account = env.store.create_account("test", "unschedule-fails", now())
    instance = env.store.register_instance(account.id, URL, "unschedule-fails-token", now()).instance
    register_wake(env.store, env.triggers, instance.id, now() + timedelta(days=1), now())
    left = env.schedule_input(instance.id)
    assert left is not None
    env.triggers.scheduled.clear()
    failing = faulty_scheduler(env, delete_schedule=throttled("DeleteSchedule"))
    # The delete answers 204: removing the schedule is tidiness, the table holds no wake now.
    instances.delete(env.store, failing, TokenOwner(TokenKind.ACCOUNT, account.id), instance.id, now())
    assert env.store.get_instance(instance.id) is None
    assert Caller(env.store, env.triggers, env.settings).deliver(left, Origin.SCHEDULE).result is Result.STALE
    assert env.triggers.sent == [] and env.triggers.scheduled == []


def test_a_removal_whose_reply_was_lost_still_reads_the_table_and_arms_a_newer_registration(
    env: Deployed, proxy: LostReplyProxy
) -> None:
    # given a far wake, replaced by a near one whose removal of the old schedule comes after a
    # newer far registration wrote the table and created its schedule, and the removal's reply is
    # lost: botocore's retry finds the schedule gone (ResourceNotFound), removed by its first try
    instance_id = env.new_instance(URL)
    register_wake(env.store, env.triggers, instance_id, now() + timedelta(hours=2), now())
    newer_at = now() + timedelta(hours=1)

    def newer() -> None:
        register_wake(env.store, env.triggers, instance_id, newer_at, now())

    triggers = RecordingTriggers(env.settings, env.clients)
    triggers.scheduler = RacedBefore(proxy.client("scheduler"), "delete_schedule", newer)
    proxy.lose("DeleteSchedule")
    # when the near one removes the schedule there, the newer one's
    register_wake(env.store, triggers, instance_id, now() + timedelta(minutes=1), now())
    # then the lost reply was met, and the removal still led to the table's re-read: the newer
    # registration is armed again, not left to the sweeper
    assert proxy.lost == ["DeleteSchedule"]
    assert_armed_as_held(env, instance_id, newer_at)
