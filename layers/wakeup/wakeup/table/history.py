"""The history's items: one per call, in a ring of slots per instance (`wakeup.logic.history`
says why and how it is read)."""

from wakeup.model import CallRecord
from wakeup.table.items import call_item, call_key, call_of, dump
from wakeup.table.mechanics import Table


class History:
    """The calls' items: written one `PutItem` each, read by key."""

    def __init__(self, db: Table) -> None:
        self.db = db

    def record_call(self, call: CallRecord) -> None:
        """Keeps one call (overwriting the one a ring's length older in its slot, if still there)."""
        self.db.client.put_item(TableName=self.db.table, Item=dump(call_item(call)))

    def read_calls(self, instance_id: str, seqs: list[int]) -> list[CallRecord]:
        """The calls kept in the slots of `seqs` (at most 100: one BatchGetItem, and its leftovers),
        whichever instance's and number's they hold: the reader tells them apart."""
        items = self.db.read_items([call_key(instance_id, seq) for seq in seqs], consistent=True)
        return [call_of(item) for item in items]
