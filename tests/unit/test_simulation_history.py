"""The simulator's table stores a call of the history as DynamoDB gives it back after the service's
`BatchWriteItem` (its typed JSON's round trip), without making the round trip (wakeup_sim.dynamodb)."""

from datetime import UTC, datetime

from wakeup.model import CallRecord, Origin
from wakeup.table.items import call_item, call_key, dump, load
from wakeup_sim.dynamodb import MemoryStore

AT = datetime(2027, 1, 15, 8, 0, 0, 250000, tzinfo=UTC)


def test_a_recorded_call_is_stored_as_a_put_of_its_typed_json_would_store_it() -> None:
    store = MemoryStore([])
    calls = [
        CallRecord("i-1", 7, AT, AT, 0, 12, 85, 200, None, Origin.QUEUE, "w1"),
        CallRecord("i-1", 8, AT, AT, 2, None, 5000, None, "timed out after 5 s", Origin.SWEEPER, "w2"),
    ]
    assert store.record_calls(calls, lambda _: True) == []

    for call in calls:
        stored = store.items[call_key(call.instance_id, call.seq)]
        round_trip = load(dump(call_item(call)))
        assert stored == round_trip
        # the same types too: numbers as Decimals (their sizes, hence their units, are a Decimal's)
        assert {k: type(v) for k, v in stored.items()} == {k: type(v) for k, v in round_trip.items()}
    # one request for both, each put a write unit (the PutItem it stands for)
    assert store.metered.requests["dynamodb:BatchWriteItem"] == 1
    assert store.metered.batch_puts == 2 and store.metered.write_units == 2
