"""One suite of the table's rules, run against `Store` on moto and the simulator's `MemoryStore`.

The simulator (sim/wakeup_sim) drives the caller and the sweeper on an in-memory table; its figures
mean something only while that table keeps DynamoDB's conditions as `Store` writes them. Every test
here runs twice, once per implementation, and asserts the same outcome.
"""

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from moto_env import Deployed

from wakeup.model import Trigger
from wakeup.store import Store, pending_shard
from wakeup.times import epoch_ms, now
from wakeup.tokens import hash_token
from wakeup_local.template import Resolver, load_template
from wakeup_sim.capacity import indexes_of
from wakeup_sim.dynamodb import MemoryStore

LEASE_MS = 30_000


def whole_ms(value: datetime) -> datetime:
    """A time as the table stores it (to the millisecond), so stored and given times compare equal."""
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


@dataclass
class Table:
    store: Store

    def instance(self) -> str:
        account = self.store.create_account("contract", uuid.uuid4().hex, now())
        return self.store.register_instance(account.id, "http://host.example", uuid.uuid4().hex, now()).instance.id

    def wake(self, instance_id: str, at: datetime) -> Trigger:
        reg = uuid.uuid4().hex
        assert self.store.register_wake(instance_id, at, reg) is not None
        return Trigger(instance_id, reg, 0)


def _memory_store() -> MemoryStore:
    from moto_env import ROOT

    template = load_template(ROOT / "template.yaml")
    return MemoryStore(indexes_of(template, Resolver(template, stack_name="contract", region="us-east-1")))


@pytest.fixture(params=["dynamodb", "memory"])
def table(request: pytest.FixtureRequest) -> Iterator[Table]:
    if request.param == "dynamodb":
        resources: Deployed = request.getfixturevalue("resources")
        yield Table(resources.store)
    else:
        yield Table(_memory_store())


def test_a_new_registration_returns_the_one_it_replaced(table: Table) -> None:
    instance_id = table.instance()
    first = table.wake(instance_id, now())
    replaced = table.store.register_wake(instance_id, now() + timedelta(hours=1), uuid.uuid4().hex)
    assert replaced is not None and replaced.reg == first.reg


def test_a_registration_for_an_unknown_instance_is_refused(table: Table) -> None:
    assert table.store.register_wake(str(uuid.uuid4()), now(), uuid.uuid4().hex) is None


def test_a_due_registration_is_claimed_until_the_lease_ends(table: Table) -> None:
    at = now()
    trigger = table.wake(table.instance(), at)
    attempt = table.store.claim_if_due(trigger, epoch_ms(at), at + timedelta(seconds=1), LEASE_MS)
    assert attempt.claimed and attempt.instance is not None
    assert attempt.instance.claim_until == epoch_ms(at) + LEASE_MS


def test_each_claim_numbers_the_next_call_in_the_history(table: Table) -> None:
    at = now()
    trigger = table.wake(table.instance(), at)
    due_by = at + timedelta(seconds=1)
    first = table.store.claim_if_due(trigger, epoch_ms(at), due_by, LEASE_MS).instance
    second = table.store.claim_if_due(trigger, epoch_ms(at) + LEASE_MS + 1, due_by, LEASE_MS).instance
    assert first is not None and second is not None
    assert second.history_seq == first.history_seq + 1


def test_a_registration_not_due_yet_is_not_claimed_and_says_when_it_is(table: Table) -> None:
    at = whole_ms(now() + timedelta(seconds=30))
    trigger = table.wake(table.instance(), at)
    attempt = table.store.claim_if_due(trigger, epoch_ms(now()), now() + timedelta(seconds=1), LEASE_MS)
    assert not attempt.claimed and attempt.instance is not None
    assert attempt.instance.due is not None and epoch_ms(attempt.instance.due) == epoch_ms(at)


def test_a_live_claim_keeps_a_second_one_out_until_it_ends(table: Table) -> None:
    at = now()
    trigger = table.wake(table.instance(), at)
    due_by = at + timedelta(seconds=1)
    assert table.store.claim_if_due(trigger, epoch_ms(at), due_by, LEASE_MS).claimed
    assert not table.store.claim_if_due(trigger, epoch_ms(at) + LEASE_MS - 1, due_by, LEASE_MS).claimed
    assert table.store.claim_if_due(trigger, epoch_ms(at) + LEASE_MS + 1, due_by, LEASE_MS).claimed


def test_a_trigger_of_a_replaced_registration_or_attempt_claims_nothing(table: Table) -> None:
    instance_id = table.instance()
    old = table.wake(instance_id, now())
    table.wake(instance_id, now())
    due_by = now() + timedelta(seconds=1)
    stale = table.store.claim_if_due(old, epoch_ms(now()), due_by, LEASE_MS)
    assert not stale.claimed and stale.instance is not None and stale.instance.reg != old.reg
    retry = Trigger(instance_id, table.store.get_instance(instance_id).reg or "", 1)  # type: ignore[union-attr]
    assert not table.store.claim_if_due(retry, epoch_ms(now()), due_by, LEASE_MS).claimed


def test_a_claim_for_an_instance_that_is_gone_returns_no_instance(table: Table) -> None:
    attempt = table.store.claim_if_due(Trigger(str(uuid.uuid4()), "r", 0), epoch_ms(now()), now(), LEASE_MS)
    assert not attempt.claimed and attempt.instance is None


def test_a_success_is_recorded_once_and_only_for_the_registration_it_was_for(table: Table) -> None:
    instance_id = table.instance()
    old = table.wake(instance_id, now())
    current = table.wake(instance_id, now())
    assert not table.store.record_success(old, now())
    assert table.store.record_success(current, now())
    assert not table.store.record_success(current, now())
    called = table.store.get_instance(instance_id)
    assert called is not None and called.called_at is not None and not called.pending and called.attempts == 0


def test_a_failure_counts_the_attempt_and_owes_a_retry_at_its_time(table: Table) -> None:
    instance_id = table.instance()
    trigger = table.wake(instance_id, now())
    retry_at = whole_ms(now() + timedelta(seconds=1))
    assert table.store.record_failure(trigger, "HTTP 503", retry_at)
    assert not table.store.record_failure(trigger, "HTTP 503", retry_at)  # attempt 0 is spent
    failing = table.store.get_instance(instance_id)
    assert failing is not None and failing.pending and failing.attempts == 1 and failing.last_error == "HTTP 503"
    assert failing.due is not None and epoch_ms(failing.due) == epoch_ms(retry_at)


def test_a_failure_without_a_retry_gives_the_wake_up(table: Table) -> None:
    instance_id = table.instance()
    assert table.store.record_failure(table.wake(instance_id, now()), "HTTP 503", None)
    given_up = table.store.get_instance(instance_id)
    assert given_up is not None and not given_up.pending and given_up.attempts == 1


def test_a_wake_is_postponed_only_while_no_claim_is_live(table: Table) -> None:
    at = now()
    trigger = table.wake(table.instance(), at)
    later = at + timedelta(minutes=1)
    assert table.store.claim_if_due(trigger, epoch_ms(at), at + timedelta(seconds=1), LEASE_MS).claimed
    assert not table.store.postpone(trigger, later, epoch_ms(at) + 1)
    assert table.store.postpone(trigger, later, epoch_ms(at) + LEASE_MS + 1)


def test_overdue_lists_the_shards_pending_wakes_due_before_the_time(table: Table) -> None:
    past = now() - timedelta(minutes=5)
    overdue_id, called_id, future_id = table.instance(), table.instance(), table.instance()
    table.wake(overdue_id, past)
    table.store.record_success(table.wake(called_id, past), now())
    table.wake(future_id, now() + timedelta(hours=1))
    listed = {
        instance.id
        for shard in {int(pending_shard(i)) for i in (overdue_id, called_id, future_id)}
        for instance in table.store.overdue(shard, now() - timedelta(seconds=1))
    }
    assert overdue_id in listed and called_id not in listed and future_id not in listed


def test_an_instance_token_names_its_instance(table: Table) -> None:
    account = table.store.create_account("contract", uuid.uuid4().hex, now())
    token_hash = hash_token(f"swi_{uuid.uuid4().hex}{uuid.uuid4().hex}")
    instance_id = table.store.register_instance(account.id, "http://h.example", token_hash, now()).instance.id
    owner = table.store.owner_of(token_hash)
    assert owner is not None and owner.instance_id == instance_id and owner.account_id == account.id
    assert table.store.owner_of(hash_token(f"swi_{uuid.uuid4().hex}{uuid.uuid4().hex}")) is None
