"""The history's items: one per call, in a ring of slots per instance (`wakeup.logic.history`
says why and how it is read)."""

from collections.abc import Callable, Sequence

from wakeup.model import CallRecord
from wakeup.table.items import call_item, call_key, call_of
from wakeup.table.mechanics import Table


class History:
    """The calls' items: written together, a `BatchWriteItem` for up to 25, read by key."""

    def __init__(self, db: Table) -> None:
        self.db = db

    def record_calls(self, calls: Sequence[CallRecord], may_wait: Callable[[float], bool]) -> list[CallRecord]:
        """Keeps the calls (each overwriting the one a ring's length older in its slot, if still
        there); returns those not written (`Table.put_items` says when), for the caller to log.
        `may_wait(seconds)`: whether a wait before sending the unprocessed ones again fits."""
        unwritten = set(self.db.put_items([call_item(call) for call in calls], may_wait))
        return [call for call in calls if call_key(call.instance_id, call.seq) in unwritten]

    def read_calls(self, instance_id: str, seqs: list[int]) -> list[CallRecord]:
        """The calls kept in the slots of `seqs` (at most 100: one BatchGetItem, and its leftovers),
        whichever instance's and number's they hold: the reader tells them apart."""
        items = self.db.read_items([call_key(instance_id, seq) for seq in seqs], consistent=True)
        return [call_of(item) for item in items]
