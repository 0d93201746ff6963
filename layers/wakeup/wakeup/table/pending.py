"""The planner's read of the pending-wakes index: how many wakes fall due in each coming second.

One keys-only query per shard and run, for the whole window, not one per second. The index
projects keys only (template.yaml), so a query returns each entry's `pk`, shard and due time and no
item is read: the time is all the planner counts. DynamoDB bills a query by the size of what it
reads, rounded up to 4 KB, half a unit eventually consistent ("Read consumption for Query",
DynamoDB developer guide:
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html):
an empty shard costs half a read unit, a burst of 10,000 entries of about 100 bytes some 125.
"""

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from wakeup import aws
from wakeup.table.items import PENDING_SHARDS, PENDING_WAKES, dump
from wakeup.table.mechanics import Table
from wakeup.times import format_time, parse_stored


class DueCounts(Protocol):
    """Wakes due per epoch second, in [start, end), in one shard of the pending-wakes index."""

    def due_per_second(self, shard: int, start: int, end: int) -> Counter[int]: ...


class PendingIndex:
    """`DueCounts` on DynamoDB."""

    def __init__(self, table: str, client: Any = None) -> None:
        # Queries only: the mechanics' backoff sleep is never used.
        self.db = Table(table, client or aws.client("dynamodb"), lambda _s: None)

    def due_per_second(self, shard: int, start: int, end: int) -> Counter[int]:
        counts: Counter[int] = Counter()
        entries = self.db.query_keys(
            IndexName=PENDING_WAKES,
            KeyConditionExpression="pending_shard = :s AND pending_due BETWEEN :from AND :to",
            # The due time only: the rest of the keys are not counted.
            ProjectionExpression="pending_due",
            ExpressionAttributeValues=dump(
                {":s": str(shard), ":from": _stored(start), ":to": _stored(end - 1, last_ms=True)}
            ),
        )
        for entry in entries:
            counts[int(parse_stored(str(entry["pending_due"])).timestamp())] += 1
        return counts


def due_per_second(index: DueCounts, start: int, end: int, shards: int = PENDING_SHARDS) -> Counter[int]:
    """Every shard's counts, added up."""
    total: Counter[int] = Counter()
    for shard in range(shards):
        total.update(index.due_per_second(shard, start, end))
    return total


def _stored(second: int, last_ms: bool = False) -> str:
    """An epoch second as the table writes times (`format_time`), at its first or last millisecond."""
    return format_time(datetime.fromtimestamp(second, UTC) + timedelta(milliseconds=999 if last_ms else 0))
