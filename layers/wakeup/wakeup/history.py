"""The history of an instance's calls: one small item per call, kept 7 days, at most 100.

The table's key is `pk` alone, so an item collection (a sort key) would mean a new table. Instead
each call is numbered by the claim that makes it (`history_seq` on the instance item, set in the
same conditional write: no request of its own), and kept in one of 100 slots, a ring per instance:

    pk = ATTEMPT#<instance id>#<seq mod 100>

A call costs one `PutItem` of an item under 1 KB (one write unit) and no index write: the item
has none of the indexes' keys. The 101st call overwrites the first, so no instance ever holds more
than 100, and DynamoDB's TTL (`expires_at`, 7 days after the call) deletes the rest; since TTL
deletes lazily (within days), a read leaves out what is older than 7 days too. Listing reads the
slots from the newest number down with `BatchGetItem` (the instance's `history_seq` says where to
start), skipping a slot that holds another number (a call whose item was never written).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from wakeup.errors import BadRequestError
from wakeup.model import Instance
from wakeup.store import Store, _dump
from wakeup.times import format_time, parse_stored

HISTORY_SIZE = 100
KEEP = timedelta(days=7)
_CURSOR_RULE = "cursor is not one this service gave for this instance's attempts; start without it"


def _key(instance_id: str, seq: int) -> str:
    return f"ATTEMPT#{instance_id}#{seq % HISTORY_SIZE}"


@dataclass(frozen=True)
class Attempt:
    """One call to a host: when it started, for which registration, and what came of it."""

    instance_id: str
    seq: int
    started_at: datetime
    at: datetime
    # The registration's attempt (0 first), as the call's webhook-id names it.
    attempt: int
    lateness_ms: int | None
    duration_ms: int
    status: int | None
    error: str | None
    # What delivered the trigger: "queue", "schedule" or "sweeper".
    trigger: str
    webhook_id: str


@dataclass(frozen=True)
class AttemptPage:
    attempts: list[Attempt]
    next_cursor: str | None


def record(store: Store, attempt: Attempt) -> None:
    """Keeps one call (overwriting the call 100 numbers older, if it is still there)."""
    item: dict[str, Any] = {
        "pk": _key(attempt.instance_id, attempt.seq),
        "type": "attempt",
        "instance_id": attempt.instance_id,
        "seq": attempt.seq,
        "started_at": format_time(attempt.started_at),
        "at": format_time(attempt.at),
        "attempt": attempt.attempt,
        "lateness_ms": attempt.lateness_ms,
        "duration_ms": attempt.duration_ms,
        "status": attempt.status,
        "error": attempt.error,
        "trigger": attempt.trigger,
        "webhook_id": attempt.webhook_id,
        # DynamoDB's TTL attribute: epoch seconds.
        "expires_at": int((attempt.started_at + KEEP).timestamp()),
    }
    store.client.put_item(TableName=store.table, Item=_dump(item))


def _attempt(item: dict[str, Any]) -> Attempt:
    def number(name: str) -> int | None:
        return int(item[name]) if item.get(name) is not None else None

    return Attempt(
        instance_id=item["instance_id"],
        seq=int(item["seq"]),
        started_at=parse_stored(item["started_at"]),
        at=parse_stored(item["at"]),
        attempt=int(item["attempt"]),
        lateness_ms=number("lateness_ms"),
        duration_ms=int(item["duration_ms"]),
        status=number("status"),
        error=item.get("error"),
        trigger=item["trigger"],
        webhook_id=item["webhook_id"],
    )


def _start(instance: Instance, cursor: str | None) -> int:
    if cursor is None:
        return instance.history_seq
    if not cursor.isascii() or not cursor.isdigit() or len(cursor) > 12 or not 1 <= int(cursor) <= instance.history_seq:
        raise BadRequestError(_CURSOR_RULE)
    return int(cursor)


def page(store: Store, instance: Instance, limit: int, cursor: str | None, now: datetime) -> AttemptPage:
    """One page of the instance's calls of the last 7 days, newest first; `cursor` is a previous
    page's next."""
    start = _start(instance, cursor)
    oldest_kept = max(instance.history_seq - HISTORY_SIZE, 0)  # numbers above it are in the ring
    seqs = list(range(start, max(start - limit, oldest_kept), -1))
    found = {attempt.seq: attempt for attempt in _read(store, instance.id, seqs)}
    since = now - KEEP
    attempts: list[Attempt] = []
    for seq in seqs:
        attempt = found.get(seq)
        if attempt is None or attempt.instance_id != instance.id:
            continue  # never written, or overwritten: not this call
        if attempt.started_at < since:  # older ones are older still: the history ends here
            return AttemptPage(attempts, None)
        attempts.append(attempt)
    lowest = seqs[-1] if seqs else 0
    return AttemptPage(attempts, str(lowest - 1) if lowest - 1 > oldest_kept else None)


def _read(store: Store, instance_id: str, seqs: list[int]) -> list[Attempt]:
    """The attempt items in the slots of `seqs` (at most 100: one BatchGetItem, and its leftovers)."""
    items = store.read_items([_key(instance_id, seq) for seq in seqs], consistent=True)
    wanted = set(seqs)
    return [attempt for attempt in map(_attempt, items) if attempt.seq in wanted]
