"""The history of an instance's calls: one small item per call, kept 7 days, at most 100.

The table's key is `pk` alone, so an item collection (a sort key) would mean a new table. Instead
each call is numbered by the claim that makes it (`history_seq` on the instance item, set in the
same conditional write: no request of its own), and kept in one of 100 slots, a ring per instance:

    pk = ATTEMPT#<instance id>#<seq mod 100>

The items are `wakeup.table.history`'s; this module holds the rules of the ring and its reading.
A call costs one `PutItem` of an item under 1 KB (one write unit) and no index write: the item
has none of the indexes' keys. The 101st call overwrites the first, so no instance ever holds more
than 100, and DynamoDB's TTL (`expires_at`, 7 days after the call) deletes the rest; since TTL
deletes lazily (within days), a read leaves out what is older than 7 days too. Listing reads the
slots from the newest number down with `BatchGetItem` (the instance's `history_seq` says where to
start), skipping a slot that holds another number (a call whose item was never written).
"""

from __future__ import annotations

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


def record(store: Store, call: CallRecord) -> None:
    """Keeps one call (overwriting the call 100 numbers older, if it is still there)."""
    store.record_call(call)


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
