"""One suite of the table's rules, run against `DynamoStore` on moto and the simulator's `MemoryStore`.

The simulator (sim/wakeup_sim) drives the caller and the sweeper on an in-memory table; its figures
mean something only while that table keeps DynamoDB's conditions as `DynamoStore` writes them. Every test
here runs twice, once per implementation, and asserts the same outcome.

Both indexes project keys only (template.yaml), so `DynamoStore` reads the items a query finds by key.
`MemoryStore` answers a query with what the index projects, as DynamoDB does (and as moto does:
moto 5 honours `KEYS_ONLY` too), so a reader that took the index's entries for the items would fail
here on both: the listings below check the attributes only the items hold.
"""

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from botocore.exceptions import ReadTimeoutError
from faulty import BatchWrites
from lost_reply import LostReplyProxy
from moto_env import Deployed

from wakeup.errors import UnavailableError
from wakeup.model import CallRecord, Origin, Trigger
from wakeup.table import DynamoStore, WakeWindow, WindowFull, mechanics
from wakeup.table.items import BY_ACCOUNT, PENDING_WAKES, dump, instance_key, load, pending_shard
from wakeup.table.registrations import Superseded
from wakeup.times import epoch_ms, now
from wakeup.tokens import hash_token
from wakeup_awsfacts.dynamodb import indexes_of
from wakeup_awsfacts.template import Resolver, load_template
from wakeup_sim.dynamodb import Io, MemoryStore

LEASE_MS = 30_000


def whole_ms(value: datetime) -> datetime:
    """A time as the table stores it (to the millisecond), so stored and given times compare equal."""
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


@dataclass
class Table:
    store: DynamoStore

    def instance(self) -> str:
        account = self.store.create_account("contract", uuid.uuid4().hex, now())
        return self.store.register_instance(account.id, "http://host.example", uuid.uuid4().hex, now()).instance.id

    def account_with(self, count: int) -> tuple[str, list[str]]:
        """A new account and `count` instances of it, in the order listings give (oldest first)."""
        account = self.store.create_account("contract", uuid.uuid4().hex, now())
        made = [
            self.store.register_instance(account.id, f"http://h{n}.example", uuid.uuid4().hex, now()).instance
            for n in range(count)
        ]
        return account.id, [i.id for i in sorted(made, key=lambda i: (whole_ms(i.created_at), i.id))]

    def delete_item(self, instance_id: str) -> None:
        """The instance's item deleted, as by a request racing a reader."""
        self.store.client.delete_item(TableName=self.store.table, Key=dump({"pk": instance_key(instance_id)}))

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


def test_an_accounts_signing_versions_are_read_and_an_unknown_account_has_none(table: Table) -> None:
    # The caller reads them before every signed call (the simulator's caller signs as well).
    account = table.store.create_account("contract", uuid.uuid4().hex, now())
    versions = table.store.signing_versions(account.id)
    assert versions is not None and versions.current == 1 and versions.previous is None
    assert table.store.signing_versions(str(uuid.uuid4())) is None


def test_a_rotated_account_token_names_the_account_and_the_replaced_one_until_its_overlap_ends(
    resources: Deployed,
) -> None:
    # DynamoStore's only: the simulator rotates no token, as it revokes none.
    table = Table(resources.store)
    old, new, newest = (uuid.uuid4().hex for _ in range(3))
    account = table.store.create_account("contract", old, now())
    until = whole_ms(now() + timedelta(hours=1))

    assert table.store.rotate_token(account.id, new, until) is not None

    replaced, current = table.store.owner_of(old), table.store.owner_of(new)
    assert replaced is not None and replaced.account_id == account.id and replaced.valid_until == until
    assert current is not None and current.account_id == account.id and current.valid_until is None
    # A second rotation ends the first one's overlap: its replaced token is gone.
    assert table.store.rotate_token(account.id, newest, until) is not None
    assert table.store.owner_of(old) is None and table.store.owner_of(new) is not None


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


class _Racing:
    """The store's client, with `then` done once right after the first query's answer: a write that
    lands between a reader's query of an index and its read of the items by key."""

    def __init__(self, client: object, then: Callable[[], None]) -> None:
        self._client, self._then = client, then
        self.done = False

    def query(self, **request: object) -> object:
        answer = self._client.query(**request)  # type: ignore[attr-defined]
        if not self.done:
            self.done = True
            self._then()
        return answer

    def __getattr__(self, name: str) -> object:
        return getattr(self._client, name)


@pytest.fixture
def client_swap(table: Table) -> Iterator[Callable[..., None]]:
    """Gives the table's store another client (and sleep) for the test; the old ones back after."""
    original = table.store.client, table.store.sleep

    def swap(client: object, sleep: Callable[[float], None] | None = None) -> None:
        table.store.client = client
        table.store.sleep = sleep or original[1]

    yield swap
    table.store.client, table.store.sleep = original


def test_the_indexes_hold_keys_only(table: Table) -> None:
    account_id, [instance_id] = table.account_with(1)
    table.wake(instance_id, now() - timedelta(minutes=5))
    listing = table.store.client.query(
        TableName=table.store.table,
        IndexName=BY_ACCOUNT,
        KeyConditionExpression="list_pk = :p",
        ExpressionAttributeValues=dump({":p": f"ACCOUNT#{account_id}"}),
    )["Items"]
    pending = table.store.client.query(
        TableName=table.store.table,
        IndexName=PENDING_WAKES,
        KeyConditionExpression="pending_shard = :s",
        ExpressionAttributeValues=dump({":s": pending_shard(instance_id)}),
    )["Items"]
    assert [set(entry) for entry in listing] == [{"pk", "list_pk", "list_sk"}]
    assert {"pk", "pending_shard", "pending_due"} in [set(entry) for entry in pending]
    assert all(set(entry) == {"pk", "pending_shard", "pending_due"} for entry in pending)


def test_a_listing_pages_the_accounts_instances_oldest_first_each_read_whole(table: Table) -> None:
    account_id, made = table.account_with(5)
    at = whole_ms(now() + timedelta(hours=1))
    table.wake(made[0], at)
    pages, cursor = [], None
    while True:
        page = table.store.list_instances(account_id, 2, cursor)
        pages.append(page.instances)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert [len(p) for p in pages] == [2, 2, 1]
    listed = [i for p in pages for i in p]
    assert [i.id for i in listed] == made == [i.id for i in table.store.all_instances(account_id)]
    # The URL and the wake are the item's, not the index's (keys only): read by key.
    assert [i.url for i in listed] == [table.store.get_instance(i).url for i in made]  # type: ignore[union-attr]
    assert listed[0].due == at and listed[0].reg is not None


def test_a_page_of_exactly_the_last_instances_says_there_is_no_next(table: Table) -> None:
    account_id, made = table.account_with(2)
    page = table.store.list_instances(account_id, 2, None)
    assert [i.id for i in page.instances] == made and page.next_cursor is None


def test_an_instance_deleted_between_a_listings_query_and_its_read_is_left_out(
    table: Table, client_swap: Callable[..., None]
) -> None:
    account_id, made = table.account_with(3)
    # when the page's last instance goes while the page is read
    race = _Racing(table.store.client, lambda: table.delete_item(made[1]))
    client_swap(race)
    page = table.store.list_instances(account_id, 2, None)
    # then the page holds the rest, and its cursor still leads past the one that went
    assert race.done and [i.id for i in page.instances] == [made[0]] and page.next_cursor is not None
    rest = table.store.list_instances(account_id, 2, page.next_cursor)
    assert [i.id for i in rest.instances] == [made[2]] and rest.next_cursor is None


def test_a_wake_called_between_the_sweepers_query_and_its_read_is_not_overdue(
    table: Table, client_swap: Callable[..., None]
) -> None:
    instance_id = table.instance()
    trigger = table.wake(instance_id, now() - timedelta(minutes=5))
    shard = int(pending_shard(instance_id))
    race = _Racing(table.store.client, lambda: table.store.record_success(trigger, now()))
    client_swap(race)
    listed = table.store.overdue(shard, now() - timedelta(seconds=1))
    assert race.done and instance_id not in {i.id for i in listed}


def test_a_wake_gone_between_the_sweepers_query_and_its_read_is_skipped(
    table: Table, client_swap: Callable[..., None]
) -> None:
    gone, kept = table.instance(), table.instance()
    while pending_shard(kept) != pending_shard(gone):
        kept = table.instance()
    for instance_id in (gone, kept):
        table.wake(instance_id, now() - timedelta(minutes=5))
    client_swap(_Racing(table.store.client, lambda: table.delete_item(gone)))
    listed = {i.id for i in table.store.overdue(int(pending_shard(gone)), now() - timedelta(seconds=1))}
    assert kept in listed and gone not in listed


def test_items_are_read_by_key_in_the_order_asked_past_100_keys_leaving_out_missing_ones(table: Table) -> None:
    prefix = f"TEST#{uuid.uuid4().hex}#"
    present = [f"{prefix}{n:03d}" for n in range(0, 150, 2)]
    for pk in present:
        table.store.client.put_item(TableName=table.store.table, Item=dump({"pk": pk, "n": int(pk[-3:])}))
    asked = [f"{prefix}{n:03d}" for n in range(149, -1, -1)]  # 150 keys, half of them missing
    # The mechanics every kind of item reads through, over the store's own client.
    reader = mechanics.Table(table.store.table, table.store.client, table.store.sleep)
    assert [item["pk"] for item in reader.read_items(asked)] == [pk for pk in asked if pk in present]


class _Unprocessed:
    """The store's client, answering BatchGetItem's first `times` requests with every key unprocessed,
    as DynamoDB may when throttled ("BatchGetItem", DynamoDB API reference)."""

    def __init__(self, client: object, times: int) -> None:
        self._client, self.left = client, times

    def batch_get_item(self, RequestItems: dict[str, dict[str, object]]) -> object:  # noqa: N803
        if self.left:
            self.left -= 1
            return {"Responses": {}, "UnprocessedKeys": RequestItems}
        return self._client.batch_get_item(RequestItems=RequestItems)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._client, name)


def test_unprocessed_keys_are_asked_for_again_after_a_wait(table: Table, client_swap: Callable[..., None]) -> None:
    account_id, made = table.account_with(2)
    waits: list[float] = []
    client_swap(_Unprocessed(table.store.client, 3), waits.append)
    assert [i.id for i in table.store.all_instances(account_id)] == made
    assert len(waits) == 3 and all(0 <= w <= 2.0 for w in waits)


def test_keys_left_unprocessed_for_good_answer_unavailable(table: Table, client_swap: Callable[..., None]) -> None:
    account_id, _ = table.account_with(1)
    waits: list[float] = []
    client_swap(_Unprocessed(table.store.client, 100), waits.append)
    with pytest.raises(UnavailableError):
        table.store.all_instances(account_id)
    assert len(waits) == 7


def test_a_recorded_call_is_read_back_as_it_was_made(table: Table) -> None:
    # The simulator stores the history's item without its typed JSON (wakeup_sim.dynamodb): the
    # call read back, a missing status and lateness included, is the same on both.
    instance_id = table.instance()
    at = whole_ms(now())
    made = [
        CallRecord(instance_id, 1, at, at, 0, 12, 85, 200, None, Origin.QUEUE, "w1"),
        CallRecord(instance_id, 2, at, at, 1, None, 5000, None, "timed out after 5 s", Origin.SWEEPER, "w2"),
    ]
    assert table.store.record_calls(made, lambda _: True) == []
    assert table.store.read_calls(instance_id, [1, 2]) == made


def _calls(instance_id: str, count: int) -> list[CallRecord]:
    at = whole_ms(now())
    return [
        CallRecord(instance_id, seq, at, at, 0, 12, 85, 200, None, Origin.QUEUE, f"w{seq}")
        for seq in range(1, count + 1)
    ]


def test_calls_are_kept_25_to_a_batch_write(table: Table, client_swap: Callable[..., None]) -> None:
    # given 30 calls of one instance (seqs 1..30: 30 slots of its ring)
    instance_id = table.instance()
    calls = _calls(instance_id, 30)
    counted = BatchWrites(table.store.client)
    client_swap(counted)
    # when they are kept
    assert table.store.record_calls(calls, lambda _: True) == []
    # then in ceil(30 / 25) requests, and every one is read back
    assert counted.requests == [25, 5]
    assert table.store.read_calls(instance_id, list(range(1, 31))) == calls


def test_unprocessed_puts_are_sent_again_after_a_wait(table: Table, client_swap: Callable[..., None]) -> None:
    instance_id = table.instance()
    calls = _calls(instance_id, 8)
    waits: list[float] = []
    counted = BatchWrites(table.store.client, unprocessed=2)
    client_swap(counted, waits.append)
    assert table.store.record_calls(calls, lambda _: True) == []
    # 8 sent, 4 left; those 4 sent, 2 left; those 2 sent and made: each resend after a wait
    assert counted.requests == [8, 4, 2]
    assert len(waits) == 2 and all(0 <= w <= 2.0 for w in waits)
    assert table.store.read_calls(instance_id, list(range(1, 9))) == calls


def test_puts_left_unprocessed_for_good_are_returned_not_raised(table: Table, client_swap: Callable[..., None]) -> None:
    instance_id = table.instance()
    calls = _calls(instance_id, 1)
    waits: list[float] = []
    client_swap(BatchWrites(table.store.client, unprocessed=100), waits.append)
    assert table.store.record_calls(calls, lambda _: True) == calls
    assert len(waits) == 7  # eight sends in all
    assert table.store.read_calls(instance_id, [1]) == []


def test_no_wait_starts_that_the_time_left_cannot_hold(table: Table, client_swap: Callable[..., None]) -> None:
    # given a batch write that leaves half its puts unprocessed, and no time for a wait
    instance_id = table.instance()
    calls = _calls(instance_id, 4)
    waits: list[float] = []
    counted = BatchWrites(table.store.client, unprocessed=100)
    client_swap(counted, waits.append)
    # when / then the half not made is returned at once, the half made is kept
    assert table.store.record_calls(calls, lambda _: False) == calls[2:]
    assert counted.requests == [4] and waits == []
    assert table.store.read_calls(instance_id, [1, 2, 3, 4]) == calls[:2]


# -- a lost reply on every write ----------------------------------------------------------------
#
# The request reaches the table and applies; its reply is lost (a read timeout); botocore sends it
# again, as the functions' clients are configured to (`wakeup.aws.CLIENT_CONFIG`). On DynamoDB
# (moto), a proxy drops the reply (`lost_reply.LostReplyProxy`) and botocore's own retry resends
# it; in the simulator's table, its `Io` loses the reply and `MemoryTable` resends it. Each write
# must come out as if the reply had come back.


class _LosesReplies(Io):
    """The simulator's table, losing the reply of the next request of each operation asked for
    (after it applied), and counting every attempt."""

    def __init__(self) -> None:
        self.planned: list[tuple[str, Callable[[], None] | None]] = []
        self.lost: list[str] = []
        self.seen: list[str] = []

    def lose(self, operation: str, then: Callable[[], None] | None = None) -> None:
        self.planned.append((operation, then))

    def request(self, operation: str) -> None:
        self.seen.append(operation)

    def reply_lost(self, operation: str) -> Exception | None:
        for n, (planned, then) in enumerate(self.planned):
            if planned == operation:
                del self.planned[n]
                self.lost.append(operation)
                if then is not None:
                    then()
                return ReadTimeoutError(endpoint_url="https://dynamodb.simulated")
        return None


@dataclass
class Lossy:
    """The table's store through a network that loses the replies asked for: `lose(operation,
    then)` loses the next reply of `operation`, `then` running between the write and its retry."""

    store: DynamoStore
    lose: Callable[..., None]
    lost: list[str]
    seen: list[str]

    def retried(self, operation: str) -> bool:
        return self.lost == [operation] and self.seen.count(operation) >= 2


@pytest.fixture
def lossy(table: Table, request: pytest.FixtureRequest) -> Lossy:
    if isinstance(table.store, MemoryStore):
        io = _LosesReplies()
        table.store.memory.io = io
        return Lossy(table.store, io.lose, io.lost, io.seen)
    proxy: LostReplyProxy = request.getfixturevalue("proxy")

    def lose(operation: str, then: Callable[[], None] | None = None) -> None:
        proxy.lose(operation, then=then)

    return Lossy(DynamoStore(table.store.table, client=proxy.dynamodb()), lose, proxy.lost, proxy.seen)


def _item(table: Table, instance_id: str) -> dict[str, object]:
    found = table.store.client.get_item(
        TableName=table.store.table, Key=dump({"pk": instance_key(instance_id)}), ConsistentRead=True
    )
    return load(found["Item"])


def test_a_registration_whose_reply_was_lost_returns_the_one_it_replaced(table: Table, lossy: Lossy) -> None:
    instance_id = table.instance()
    first = table.wake(instance_id, now())
    lossy.lose("UpdateItem")
    replaced = lossy.store.register_wake(instance_id, now() + timedelta(hours=1), "second")
    assert lossy.retried("UpdateItem")
    # the retry met its own write: written once, and what it replaced is known exactly
    assert replaced is not None and replaced.reg == first.reg
    assert _item(table, instance_id)["reg"] == "second"


def test_a_retried_registration_never_replaces_a_newer_one(table: Table, lossy: Lossy) -> None:
    # given a registration whose write applies, and whose reply is lost; before botocore's retry,
    # a newer registration of the instance lands (issue 37, hole 1)
    instance_id = table.instance()
    table.wake(instance_id, now())
    newer = uuid.uuid4().hex
    lossy.lose("UpdateItem", then=lambda: table.store.register_wake(instance_id, now() + timedelta(hours=2), newer))
    # when the older one's request ends
    with pytest.raises(Superseded):
        lossy.store.register_wake(instance_id, now() + timedelta(hours=1), "older")
    # then its retry did not write it again: the newer registration stands
    assert lossy.retried("UpdateItem")
    assert _item(table, instance_id)["reg"] == newer


@pytest.mark.parametrize("earlier", [0, 1], ids=["first of its window", "second of its window"])
def test_a_counted_registration_whose_reply_was_lost_is_counted_once_and_not_refused(
    table: Table, lossy: Lossy, earlier: int
) -> None:
    instance_id = table.instance()
    window = WakeWindow(start=int(now().timestamp()) // 3600 * 3600, limit=earlier + 1)
    for _ in range(earlier):
        assert table.store.register_wake(instance_id, now(), uuid.uuid4().hex, window) is not None
    lossy.lose("UpdateItem")
    # the window's last place: a second counting of this registration would be refused
    assert lossy.store.register_wake(instance_id, now(), "counted", window) is not None
    assert lossy.retried("UpdateItem")
    item = _item(table, instance_id)
    assert (item["reg"], item["wake_count"]) == ("counted", earlier + 1)
    with pytest.raises(WindowFull):
        table.store.register_wake(instance_id, now(), uuid.uuid4().hex, window)


def test_a_claim_whose_reply_was_lost_is_the_callers_own_and_numbers_one_call(table: Table, lossy: Lossy) -> None:
    at = now()
    trigger = table.wake(table.instance(), at)
    lossy.lose("UpdateItem")
    claim = lossy.store.claim_if_due(trigger, epoch_ms(at), at + timedelta(seconds=1), LEASE_MS)
    assert lossy.retried("UpdateItem")
    assert claim.claimed and claim.instance is not None and claim.instance.claim_until == epoch_ms(at) + LEASE_MS
    assert claim.instance.history_seq == 1 == _item(table, trigger.instance_id)["history_seq"]


def test_a_success_whose_reply_was_lost_counts_as_recorded(table: Table, lossy: Lossy) -> None:
    trigger = table.wake(table.instance(), now())
    lossy.lose("UpdateItem")
    assert lossy.store.record_success(trigger, now())
    assert lossy.retried("UpdateItem")
    assert "called_at" in _item(table, trigger.instance_id)


@pytest.mark.parametrize("retry", [True, False], ids=["with a retry", "given up"])
def test_a_failure_whose_reply_was_lost_counts_once(table: Table, lossy: Lossy, retry: bool) -> None:
    trigger = table.wake(table.instance(), now())
    lossy.lose("UpdateItem")
    assert lossy.store.record_failure(trigger, "HTTP 503", now() + timedelta(seconds=1) if retry else None)
    assert lossy.retried("UpdateItem")
    item = _item(table, trigger.instance_id)
    assert (item["attempts"], item["last_error"], "pending_due" in item) == (1, "HTTP 503", retry)


def test_a_postpone_whose_reply_was_lost_counts_as_written(table: Table, lossy: Lossy) -> None:
    trigger = table.wake(table.instance(), now() - timedelta(minutes=2))
    later = whole_ms(now() + timedelta(minutes=1))
    lossy.lose("UpdateItem")
    assert lossy.store.postpone(trigger, later, epoch_ms(now()))
    assert lossy.retried("UpdateItem")
    instance = table.store.get_instance(trigger.instance_id)
    assert instance is not None and instance.due == later


def test_a_recorded_call_whose_reply_was_lost_is_kept_once(table: Table, lossy: Lossy) -> None:
    instance_id = table.instance()
    at = whole_ms(now())
    call = CallRecord(instance_id, 1, at, at, 0, 12, 85, 200, None, Origin.QUEUE, "w1")
    lossy.lose("BatchWriteItem")
    assert lossy.store.record_calls([call], lambda _: True) == []
    assert lossy.retried("BatchWriteItem")
    assert table.store.read_calls(instance_id, [1]) == [call]


def test_a_rotation_whose_reply_was_lost_is_this_rotation(table: Table, lossy: Lossy) -> None:
    account = table.store.create_account("contract", uuid.uuid4().hex, now())
    lossy.lose("UpdateItem")
    rotated = lossy.store.rotate_signing(account, now() + timedelta(hours=1))
    assert lossy.retried("UpdateItem")
    assert rotated is not None and (rotated.signing.current, rotated.signing.previous) == (2, 1)


def test_an_account_limit_whose_reply_was_lost_is_set(table: Table, lossy: Lossy) -> None:
    account = table.store.create_account("contract", uuid.uuid4().hex, now())
    lossy.lose("UpdateItem")
    limited = lossy.store.set_account_limit(account.id, 7)
    assert lossy.retried("UpdateItem")
    assert limited is not None and limited.max_instances == 7


def test_a_delete_whose_reply_was_lost_deletes_once(table: Table, lossy: Lossy) -> None:
    account_id, [kept, gone] = table.account_with(2)
    instance = table.store.get_instance(gone)
    assert instance is not None
    lossy.lose("TransactWriteItems")
    # DynamoDB answers the retry as applied (its ClientRequestToken); moto cancels it, and the
    # store reads that as "gone already": either way the delete stands, counted once
    assert lossy.store.delete_instance(instance, now()) is not None
    assert lossy.retried("TransactWriteItems")
    assert table.store.get_instance(gone) is None and table.store.get_instance(kept) is not None
    after = table.store.get_account(account_id)
    assert after is not None and after.instance_count == 1


def test_a_revocation_whose_reply_was_lost_revokes_once(table: Table, lossy: Lossy) -> None:
    instance_id = table.instance()
    table.wake(instance_id, now())
    lossy.lose("TransactWriteItems")
    lossy.store.revoke_instance(instance_id, now())
    assert lossy.retried("TransactWriteItems")
    item = _item(table, instance_id)
    assert "revoked_at" in item and "reg" not in item and "pending_due" not in item
    assert table.store.register_wake(instance_id, now(), uuid.uuid4().hex) is None
