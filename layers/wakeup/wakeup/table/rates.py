"""The accounts' request rates in the table: each account's requests on the account routes counted
per window on an item of its own (`RATE#<account id>`), and the operator's rate for an account.

The count lives apart from the account's item: a registration's transaction updates that one
(its instance count) and the caller reads it for every call it signs, so a flooding account's
counting never throttles its wakes' reads. No request of `PUT /wakeup/wake` reads or writes it.
"""

from dataclasses import dataclass

from botocore.exceptions import ClientError

from wakeup.errors import UnavailableError
from wakeup.model import Account
from wakeup.table.items import account_key, account_of, dump, rate_key
from wakeup.table.mechanics import Table, cancellation_reasons, refused_item

# "Does the window hold room for one more?": the account's own limit (`per_window`, which the
# operator sets) where it has one, else the service's default.
_ROOM = "((attribute_not_exists(per_window) AND #n < :default) OR #n < per_window)"


@dataclass(frozen=True)
class RequestWindow:
    """The window a request counts in: it starts at `start` (epoch seconds); an account without
    its own limit may make `default_limit` requests in it."""

    start: int
    default_limit: int


class RateFull(Exception):
    """Raised when the account's window holds its limit already: `start` is the window's (a later
    one than asked for when another writer's clock ran a little ahead), `limit` the account's."""

    def __init__(self, start: int, limit: int) -> None:
        super().__init__(f"the window from {start} holds {limit} requests")
        self.start = start
        self.limit = limit


class Rates:
    """Each account's count of requests in its current window, and its own rate."""

    def __init__(self, db: Table) -> None:
        self.db = db

    def count_request(self, account_id: str, window: RequestWindow, started: bool = True) -> None:
        """Counts one request of the account in `window`, in one conditional write; `RateFull`
        when the window holds the account's limit already (that refused write changes nothing).

        `started` is the caller's guess that the window has begun on the item (another request
        of this window counted already): then the write adds one to the count, else it starts the
        window at one. A wrong guess is told by the refusal, which returns the item
        (`ReturnValuesOnConditionCheckFailure`), and the other write follows. botocore's retry of
        a write whose reply was lost counts that request twice: the account loses one request of
        its window, never gains one.
        """
        start = window.start
        for _ in range(3):
            names = {"#w": "window", "#n": "count"}
            values: dict[str, object] = {":w": start, ":one": 1}
            if started:
                update, condition = "SET #n = #n + :one", f"#w = :w AND {_ROOM}"
                values[":default"] = window.default_limit
            else:
                update, condition = "SET #w = :w, #n = :one", "attribute_not_exists(#w) OR #w < :w"
            try:
                self.db.client.update_item(
                    TableName=self.db.table,
                    Key=dump({"pk": rate_key(account_id)}),
                    UpdateExpression=update,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=dump(values),
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return
            except ClientError as exc:
                current = refused_item(exc) or {}
            seen = int(current.get("window", -1))
            if seen < start:
                started = False  # a window before this one, or none yet
                continue
            start, started = seen, True  # this window (or a later one) is under way
            limit = int(current.get("per_window", window.default_limit))
            if int(current.get("count", 0)) >= limit:
                raise RateFull(start, limit)
        raise UnavailableError("the request could not be counted for requests racing it; retry it")

    def set_account_rate(self, account_id: str, per_s: int | None, window_s: int) -> Account | None:
        """Sets the account's own rate, `per_s` requests a second counted over windows of
        `window_s` (None: the service's default again), on its item and on its count's item in one
        transaction; None when there is no such account. The next request counts by it."""
        account_update: dict[str, object] = {
            "TableName": self.db.table,
            "Key": dump({"pk": account_key(account_id)}),
            "ConditionExpression": "attribute_exists(pk)",
        }
        rate_update: dict[str, object] = {"TableName": self.db.table, "Key": dump({"pk": rate_key(account_id)})}
        if per_s is None:
            account_update["UpdateExpression"] = "REMOVE max_requests_per_s"
            rate_update["UpdateExpression"] = "REMOVE per_window"
        else:
            account_update["UpdateExpression"] = "SET max_requests_per_s = :rate"
            account_update["ExpressionAttributeValues"] = dump({":rate": per_s})
            rate_update["UpdateExpression"] = "SET per_window = :limit"
            rate_update["ExpressionAttributeValues"] = dump({":limit": per_s * window_s})
        try:
            self.db.client.transact_write_items(TransactItems=[{"Update": account_update}, {"Update": rate_update}])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            if cancellation_reasons(exc, 2)[0].get("Code") == "ConditionalCheckFailed":
                return None
            raise
        item = self.db.get(account_key(account_id))
        return account_of(item) if item else None
