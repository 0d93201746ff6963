"""Registrations in the table: a wake written over the last one, claimed for a call, its outcome
recorded, its next check moved, and the overdue ones found through the pending-wakes index."""

from dataclasses import dataclass
from datetime import datetime

from botocore.exceptions import ClientError

from wakeup.errors import UnavailableError
from wakeup.model import Instance, Trigger
from wakeup.table.items import PENDING_WAKES, Item, dump, instance_key, instance_of, load, pending_shard
from wakeup.table.mechanics import Table, refused_item
from wakeup.times import format_time

# "Does this trigger still stand?" as the table checks it, in the same write as the change it
# guards; `wakeup.logic.wakes.stands` is the rule, and `registration_stands` this expression's
# twin for a table kept in memory (the simulator's).
STANDS = "reg = :reg AND attempts = :attempt AND attribute_not_exists(called_at)"
NO_LIVE_CLAIM = "(attribute_not_exists(claim_until) OR claim_until < :now)"


def registration_stands(item: Item | None, trigger: Trigger) -> bool:
    """`STANDS` on an item in memory."""
    return (
        item is not None
        and item.get("reg") == trigger.reg
        and item.get("attempts") == trigger.attempt
        and item.get("called_at") is None
    )


@dataclass(frozen=True)
class Claim:
    """What `claim_if_due` came to: whether the claim was taken, and the instance it saw."""

    claimed: bool
    instance: Instance | None


@dataclass(frozen=True)
class WakeWindow:
    """The rate window a registration counts itself in: it starts at `start` (epoch seconds) and
    holds at most `limit` registrations (the rule is `wakeup.logic.wakes`')."""

    start: int
    limit: int


class WindowFull(Exception):
    """Raised when the registration's window holds its limit already; `start` is the window's
    (a later one than asked for when a writer's clock ran a little ahead)."""

    def __init__(self, start: int) -> None:
        super().__init__(f"the window from {start} is full")
        self.start = start


class Registrations:
    """The registration on each instance's item."""

    def __init__(self, db: Table) -> None:
        self.db = db

    def register_wake(
        self, instance_id: str, at: datetime, reg: str, window: WakeWindow | None = None
    ) -> Instance | None:
        """Replaces the instance's registration by a new one at `at`; returns the one it replaced.

        None when the instance is gone or revoked. With `window`, counted in the registration's
        own write, refused past its limit with `WindowFull`. The first wake of a window starts
        its count in that one write; a further one sees the count in the refusal
        (`ReturnValuesOnConditionCheckFailure`) and counts itself in a second conditional write.

        botocore retries a write whose reply was lost. Each write is refused where the item
        already holds this `reg` (a fresh one per registration), so the retry of a write that was
        applied neither counts it again nor meets the window it filled: the refusal shows the
        registration written, and the instance is returned as that write left it (its `reg` is
        `reg`: what it replaced is unknown then, and `wakeup.logic.wakes` acts on either).
        """
        # Every registration enters the pending-wakes index, written before its trigger is armed:
        # a wake whose trigger is lost is found again by the sweeper, through this entry.
        update = "SET #at = :at, reg = :reg, attempts = :zero, pending_shard = :shard, pending_due = :at"
        condition = "attribute_exists(pk) AND attribute_not_exists(revoked_at)"
        condition += " AND (attribute_not_exists(reg) OR reg <> :reg)"  # see the docstring's last part
        values: Item = {":at": format_time(at), ":reg": reg, ":zero": 0, ":shard": pending_shard(instance_id)}
        start: int | None = None
        if window is not None:
            start = window.start
            values.update({":window": start, ":one": 1})
        starts_window = True
        for _ in range(3):
            counted, extra = "", {}
            if window is not None and starts_window:
                update_expression = f"{update}, wake_window = :window, wake_count = :one"
                counted = " AND (attribute_not_exists(wake_window) OR wake_window < :window)"
            elif window is not None:
                update_expression = f"{update}, wake_count = wake_count + :one"
                counted = " AND wake_window = :window AND wake_count < :limit"
                extra = {":limit": window.limit}
            else:
                update_expression = update
            try:
                found = self.db.client.update_item(
                    TableName=self.db.table,
                    Key=dump({"pk": instance_key(instance_id)}),
                    UpdateExpression=update_expression + " REMOVE called_at, last_error, claim_until",
                    ConditionExpression=condition + counted,
                    ExpressionAttributeNames={"#at": "at"},
                    ExpressionAttributeValues=dump({**values, **extra}),
                    ReturnValues="ALL_OLD",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as exc:
                current = refused_item(exc)
                if current is not None and current.get("reg") == reg:
                    return instance_of(current)  # this registration, written before a reply was lost
                if current is None or "revoked_at" in current or window is None or start is None:
                    return None
                if int(current.get("wake_window", -1)) >= start:
                    # This window (or a later one, by a clock a little ahead) is under way.
                    start = int(current["wake_window"])
                    values[":window"] = start
                    if int(current.get("wake_count", 0)) >= window.limit:
                        raise WindowFull(start) from exc
                    starts_window = False
                else:
                    starts_window = True
                continue
            return instance_of(load(found["Attributes"]))
        raise UnavailableError("the wake could not be registered for writes racing it; retry the request")

    def _update_registration(self, trigger: Trigger, update: str, values: Item, extra: str = "") -> bool:
        """Applies `update` only while the trigger's registration and attempt still stand."""
        values = {":reg": trigger.reg, ":attempt": trigger.attempt, **values}
        return self.db.conditional_update(instance_key(trigger.instance_id), update, STANDS + extra, values).applied

    def claim(self, trigger: Trigger, now_ms: int, lease_ms: int) -> int | None:
        """Claims the call for the trigger's registration; the claim's end, or None when it is held."""
        until = now_ms + lease_ms
        claimed = self._update_registration(
            trigger, "SET claim_until = :until", {":until": until, ":now": now_ms}, extra=f" AND {NO_LIVE_CLAIM}"
        )
        return until if claimed else None

    def claim_if_due(self, trigger: Trigger, now_ms: int, due_by: datetime, lease_ms: int) -> Claim:
        """Claims the call for the trigger's registration if its next call is due by `due_by`.

        One conditional write that also reads: the caller's hot path at a busy second is this and
        the call. Refused (nothing written) when the registration or attempt no longer stands, the
        call is not due yet, or another call holds a live claim; the instance is then returned as
        it was, so the caller can tell which (None: it is gone).
        """
        values = {
            ":reg": trigger.reg,
            ":attempt": trigger.attempt,
            ":due_by": format_time(due_by),
            ":now": now_ms,
            ":until": now_ms + lease_ms,
            # The claim also numbers the call in the instance's history: no write of its own.
            ":zero": 0,
            ":one": 1,
        }
        written = self.db.conditional_update(
            instance_key(trigger.instance_id),
            "SET claim_until = :until, history_seq = if_not_exists(history_seq, :zero) + :one",
            f"{STANDS} AND pending_due <= :due_by AND {NO_LIVE_CLAIM}",
            values,
        )
        return Claim(claimed=written.applied, instance=instance_of(written.item) if written.item else None)

    def record_success(self, trigger: Trigger, called_at: datetime) -> bool:
        return self._update_registration(
            trigger,
            "SET called_at = :called, attempts = :zero REMOVE last_error, claim_until, pending_shard, pending_due",
            {":called": format_time(called_at), ":zero": 0},
        )

    def record_failure(self, trigger: Trigger, error: str, next_due: datetime | None) -> bool:
        """Counts a failed call; `next_due` (`wakeup.logic.retry`) None gives the wake up."""
        values: Item = {":next": trigger.attempt + 1, ":error": error}
        if next_due is None:
            update = "SET attempts = :next, last_error = :error REMOVE claim_until, pending_shard, pending_due"
        else:
            update = "SET attempts = :next, last_error = :error, pending_due = :due REMOVE claim_until"
            values[":due"] = format_time(next_due)
        return self._update_registration(trigger, update, values)

    def postpone(self, trigger: Trigger, due: datetime, now_ms: int) -> bool:
        """Moves a pending wake's next check to `due`, while no claim is live (the sweeper's re-arm)."""
        return self._update_registration(
            trigger, "SET pending_due = :due", {":due": format_time(due), ":now": now_ms}, extra=f" AND {NO_LIVE_CLAIM}"
        )

    def overdue(self, shard: int, before: datetime) -> list[Instance]:
        """Instances in one shard of the pending-wakes index whose next call was due before `before`.

        The items are read by key after the query, eventually consistent (half a read unit): the
        sweeper's re-arm is a conditional write that loses to any change it did not see. One no
        longer overdue by then (called, moved on, gone) is left out.
        """
        limit = format_time(before)
        entries = self.db.query_keys(
            IndexName=PENDING_WAKES,
            KeyConditionExpression="pending_shard = :s AND pending_due < :t",
            ExpressionAttributeValues=dump({":s": str(shard), ":t": limit}),
        )
        items = self.db.read_items([entry["pk"] for entry in entries])
        return [
            instance_of(item)
            for item in items
            if item.get("pending_shard") == str(shard) and str(item.get("pending_due", limit)) < limit
        ]
