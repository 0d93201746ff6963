"""The simulated table's capacity units stay DynamoDB's while it sizes each item once.

`MemoryTable` (the `MemoryStore`'s items) keeps each stored item's size with the item (`_size`),
and `capacity` sizes numbers read back from the table once a value; these tests fail if either gave
a size that is not the item's as it is now.
"""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from wakeup.model import Trigger
from wakeup.table.items import instance_key
from wakeup_awsfacts.dynamodb import Index, item_size, value_size
from wakeup_sim.deployment import from_template
from wakeup_sim.dynamodb import MemoryStore

AT = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)


def _store() -> tuple[MemoryStore, str]:
    store = MemoryStore(from_template().indexes)
    account = store.create_account("sizes", "a" * 64, AT - timedelta(days=1))
    instance = store.register_instance(account.id, "https://host.example", "b" * 64, AT - timedelta(days=1))
    return store, instance.instance.id


def test_a_write_over_an_item_that_grew_is_billed_for_its_size_now() -> None:
    store, instance_id = _store()
    store.register_wake(instance_id, AT, "r1")
    trigger = Trigger(instance_id, "r1", 0)
    # A failure's error of 3 KB: the item grows past 3 KB, and a write over it costs 4 units.
    assert store.record_failure(trigger, "x" * 3000, AT + timedelta(minutes=1))
    assert item_size(store.items[instance_key(instance_id)]) > 3 * 1024
    # The next registration drops the error; it is billed for the larger item, the one before it.
    before = store.metered.write_units
    store.register_wake(instance_id, AT + timedelta(hours=1), "r2")
    assert store.metered.write_units - before == 4
    # And after it, for the small item it left: one unit.
    before = store.metered.write_units
    store.register_wake(instance_id, AT + timedelta(hours=2), "r3")
    assert store.metered.write_units - before == 1


def test_an_item_replaced_outside_a_write_is_sized_again() -> None:
    store, instance_id = _store()
    pk = instance_key(instance_id)
    assert store.get_instance(instance_id) is not None  # sized, as it was
    assert store.metered.read_units == 1
    store.items[pk] = {**store.items[pk], "note": "y" * 5000}  # over 4 KB: two read units
    assert store.get_instance(instance_id) is not None
    assert store.metered.read_units == 1 + 2


def test_a_number_read_back_is_sized_by_its_value_whatever_its_exponent() -> None:
    # DynamoDB sizes a number by its significant digits: 1000 and 1E+3 alike, 1.5 apart.
    assert item_size({"n": Decimal("1000")}) == item_size({"n": Decimal("1E+3")}) == 1 + value_size(1000)
    assert item_size({"n": Decimal("1.5")}) == 1 + value_size(Decimal("1.5")) == 1 + 2
    assert item_size({"n": Decimal("123456789")}) == 1 + value_size(123456789) == 1 + 6
    assert item_size({"n": 0, "m": Decimal(0)}) == 2 * (1 + 2)


@pytest.mark.parametrize("projection", ["KEYS_ONLY", "INCLUDE", "ALL"])
def test_an_index_entry_is_written_when_what_it_projects_changes(projection: str) -> None:
    index = Index("ByShard", ("shard", "due"), projection, included=("note",))
    old = {"pk": "I#1", "shard": "3", "due": "2027", "note": "a", "other": "x"}
    # A key changes: the old entry deleted and the new put, whatever the projection.
    assert index.write_units(old, {**old, "due": "2028"}) == 2
    # An attribute only the item holds: no index write.
    assert index.write_units(old, {**old, "other": "y"}) == (1 if projection == "ALL" else 0)
    # An included attribute: written by INCLUDE and ALL, not by KEYS_ONLY.
    assert index.write_units(old, {**old, "note": "b"}) == (0 if projection == "KEYS_ONLY" else 1)
