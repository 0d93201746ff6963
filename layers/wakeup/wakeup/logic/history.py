"""The history of an instance's calls: one small item per call, kept 7 days, at most 100.

The table's key is `pk` alone, so an item collection (a sort key) would mean a new table. Instead
each call is numbered by the claim that makes it (`history_seq` on the instance item, set in the
same conditional write: no request of its own), and kept in one of 100 slots, a ring per instance:

    pk = ATTEMPT#<instance id>#<seq mod 100>

The items are `wakeup.table.history`'s; this module holds the rules of the ring and its reading.
A call costs one put of an item under 1 KB (one write unit) and no index write: the item has none
of the indexes' keys. An invocation's calls are kept together once they are made, up to 25 in one
`BatchWriteItem`, which bills each put as the `PutItem` it stands for (see `record`). The 101st
call overwrites the first, so no instance ever holds more than 100, and DynamoDB's TTL
(`expires_at`, 7 days after the call) deletes the rest; since TTL deletes lazily (within days), a
read leaves out what is older than 7 days too. Listing reads the
slots from the newest number down with `BatchGetItem` (the instance's `history_seq` says where to
start), skipping a slot that holds another number (a call whose item was never written).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from wakeup.errors import BadRequestError
from wakeup.model import CallRecord, Instance
from wakeup.table import Store
from wakeup.table.items import HISTORY_KEEP  # admin pages a whole ring
from wakeup.table.items import HISTORY_SIZE as HISTORY_SIZE

_CURSOR_RULE = "cursor is not one this service gave for this instance's attempts; start without it"


@dataclass(frozen=True)
class CallPage:
    calls: list[CallRecord]
    next_cursor: str | None


def record(store: Store, calls: Sequence[CallRecord], may_wait: Callable[[float], bool]) -> list[CallRecord]:
    """Keeps the calls (each overwriting the call 100 numbers older, if it is still there);
    returns those that could not be.

    One `BatchWriteItem` request for up to 25 calls, where each call was a `PutItem`: a batch
    costs the per-item write units its puts did ("Amazon DynamoDB pricing for on-demand capacity":
    https://aws.amazon.com/dynamodb/pricing/on-demand/, a write request unit per item up to 1 KB,
    and "DynamoDB read and write operations", developer guide: BatchWriteItem's puts are each
    billed as a PutItem of their own), and one request, not ten, of the caller's CPU and the
    table's. `may_wait(seconds)`: whether a wait before sending unprocessed calls again fits the
    invocation's time."""
    return store.record_calls(calls, may_wait)


def _start(instance: Instance, cursor: str | None) -> int:
    if cursor is None:
        return instance.history_seq
    if not cursor.isascii() or not cursor.isdigit() or len(cursor) > 12 or not 1 <= int(cursor) <= instance.history_seq:
        raise BadRequestError(_CURSOR_RULE)
    return int(cursor)


def page(store: Store, instance: Instance, limit: int, cursor: str | None, now: datetime) -> CallPage:
    """One page of the instance's calls of the last 7 days, newest first; `cursor` is a previous
    page's next."""
    start = _start(instance, cursor)
    oldest_kept = max(instance.history_seq - HISTORY_SIZE, 0)  # numbers above it are in the ring
    seqs = list(range(start, max(start - limit, oldest_kept), -1))
    wanted = set(seqs)
    found = {call.seq: call for call in store.read_calls(instance.id, seqs) if call.seq in wanted}
    since = now - HISTORY_KEEP
    calls: list[CallRecord] = []
    for seq in seqs:
        call = found.get(seq)
        if call is None or call.instance_id != instance.id:
            continue  # never written, or overwritten: not this call
        if call.started_at < since:  # older ones are older still: the history ends here
            return CallPage(calls, None)
        calls.append(call)
    lowest = seqs[-1] if seqs else 0
    return CallPage(calls, str(lowest - 1) if lowest - 1 > oldest_kept else None)
