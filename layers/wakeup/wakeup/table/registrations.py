"""Registrations in the table: a wake written over the last one, claimed for a call, its outcome
recorded, its next check moved, and the overdue ones found through the pending-wakes index."""

from dataclasses import dataclass
from datetime import datetime

from botocore.exceptions import ClientError

from wakeup.errors import ConflictError, UnavailableError
from wakeup.model import Instance, Trigger
from wakeup.table.items import PENDING_WAKES, Item, dump, instance_key, instance_of, load, pending_shard
from wakeup.table.mechanics import Table, refused_item
from wakeup.times import format_time

# "Does this trigger still stand?" as the table checks it, in the same write as the change it
# guards (`wakeup.logic.wakes.stands` asks the same of an instance read).
STANDS = "reg = :reg AND attempts = :attempt AND attribute_not_exists(called_at)"
NO_LIVE_CLAIM = "(attribute_not_exists(claim_until) OR claim_until < :now)"


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


# The writes of one instance's registrations that may race: its default rate window's 60 and a few
# (settings.max_wakes_per_window); a client past that is told to retry (503).
RACING_REGISTRATIONS = 64


class Superseded(ConflictError):
    """Raised when a registration may have been written before its reply was lost, and a newer
    one stands now: writing it again could replace the newer one (`Registrations.register_wake`)."""

    message = "a newer wake registered for this instance while this one was written replaced it; the newer one stands"


@dataclass(frozen=True)
class _Attempt:
    """A registration's write: applied or refused, the item (as it was before, or as it refused),
    and whether botocore sent it more than once."""

    applied: bool
    item: Item | None
    retried: bool = False


class Registrations:
    """The registration on each instance's item."""

    def __init__(self, db: Table) -> None:
        self.db = db

    def register_wake(
        self, instance_id: str, at: datetime, reg: str, window: WakeWindow | None = None
    ) -> Instance | None:
        """Replaces the instance's registration by a new one at `at`; returns the one it replaced.

        None when the instance is gone or revoked. With `window`, counted in the registration's
        own write, refused past its limit with `WindowFull`.

        Written at most once, whatever replies are lost (issue 37, hole 1). botocore sends a write
        again when its reply is lost; a condition that only refuses a second write of this `reg`
        lets that retry apply again over a newer registration landed in between, and the older
        wake replaced the newer. So the write is optimistic locking with a version number
        ("Optimistic locking with version number", DynamoDB developer guide:
        https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/BestPractices_OptimisticLocking.html):
        a consistent read gives the item's `reg_seq`, which every registration increments, and the
        write applies only while it is still the one read. Any retry of a write that applied meets
        a `reg_seq` moved on and is refused, however many registrations came since.

        The refusal carries the item (`ReturnValuesOnConditionCheckFailure`):
        - its `reg` is this one: an earlier attempt applied, and the item read is what it replaced;
        - the answer came to the first attempt (botocore's `ResponseMetadata.RetryAttempts` is 0,
          "Retries", boto3's guide): nothing of this request applied, a registration landed since
          the read, and this one is written over it as the later one, conditioned anew;
        - after a retry, an attempt whose reply was lost may have applied and been replaced since:
          writing again could replace the newer registration, so `Superseded` (409) says the newer
          one stands. Linearisable: this request began before that registration was written.

        Rejected: `TransactWriteItems` with the `ClientRequestToken` botocore sends (the same on its
        retries, idempotent for 10 minutes: "TransactWriteItems", DynamoDB API reference). It costs
        two write units instead of one ("Capacity management for transactions") and returns no
        item, so what was replaced would need this read as well; and moto ignores the token. The
        read costs one read unit a registration, and with a rate `window` it saves the refused
        write (a write unit) the count's discovery took before: the window is read, not guessed.
        """
        key = instance_key(instance_id)
        seen = self.db.get(key)
        # Each refusal is another registration of this instance landing, whose item the refusal
        # returns: the next write goes over it. So the loop ends within as many rounds as writers
        # race it; RACING_REGISTRATIONS covers an instance's whole rate window at its default.
        for _ in range(RACING_REGISTRATIONS):
            if seen is None or "revoked_at" in seen:
                return None
            written = self._write_registration(key, seen, at, reg, window)
            if written.applied:
                return instance_of(seen if written.item is None else written.item)
            current = written.item
            if current is None or "revoked_at" in current:
                return None
            if current.get("reg") == reg:
                return instance_of(seen)  # written by an attempt whose reply was lost
            if written.retried:
                raise Superseded()
            seen = current  # a registration landed since the read: this one goes over it
        raise UnavailableError("the wake could not be registered for writes racing it; retry the request")

    def _write_registration(
        self, key: str, seen: Item, at: datetime, reg: str, window: WakeWindow | None
    ) -> "_Attempt":
        """One conditional write of the registration over the item `seen`, while it stands as read."""
        seq = int(seen.get("reg_seq", 0))
        # Every registration enters the pending-wakes index, written before its trigger is armed:
        # a wake whose trigger is lost is found again by the sweeper, through this entry.
        update = (
            "SET #at = :at, reg = :reg, reg_seq = :next, attempts = :zero, pending_shard = :shard, pending_due = :at"
        )
        values: Item = {
            ":at": format_time(at),
            ":reg": reg,
            ":next": seq + 1,
            ":zero": 0,
            ":shard": pending_shard(str(seen["id"])),
        }
        condition = "attribute_exists(pk) AND attribute_not_exists(revoked_at) AND "
        if seq:
            condition += "reg_seq = :seq"
            values[":seq"] = seq
        else:  # never registered (or not since registrations were numbered)
            condition += "attribute_not_exists(reg_seq)"
        if window is not None:
            # The window's count as read: only a registration changes it, and one since the read
            # fails the condition. A writer's clock a little ahead may have opened a later window.
            start, count = window.start, 0
            if int(seen.get("wake_window", -1)) >= window.start:
                start, count = int(seen["wake_window"]), int(seen.get("wake_count", 0))
            if count >= window.limit:
                raise WindowFull(start)
            update += ", wake_window = :window, wake_count = :count"
            values.update({":window": start, ":count": count + 1})
        try:
            found = self.db.client.update_item(
                TableName=self.db.table,
                Key=dump({"pk": key}),
                UpdateExpression=update + " REMOVE called_at, last_error, claim_until",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#at": "at"},
                ExpressionAttributeValues=dump(values),
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            retried = int(exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)) > 0
            return _Attempt(applied=False, item=refused_item(exc), retried=retried)
        return _Attempt(applied=True, item=load(found["Attributes"]) if "Attributes" in found else None)

    def _update_registration(self, trigger: Trigger, update: str, values: Item, extra: str = "") -> bool:
        """Applies `update` only while the trigger's registration and attempt still stand."""
        values = {":reg": trigger.reg, ":attempt": trigger.attempt, **values}
        # Whether it applied is all its writers read: no item in the reply (an outcome's, a claim's).
        written = self.db.conditional_update(
            instance_key(trigger.instance_id), update, STANDS + extra, values, new_item=False
        )
        return written.applied

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
